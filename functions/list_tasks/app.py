"""Lambda entry point: the code is a2a_serverless.handlers.list_tasks."""

from a2a_serverless.handlers.list_tasks import create

app, handler = create()
