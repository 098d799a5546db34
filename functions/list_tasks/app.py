"""Lambda entry point: the code is a2a_serverless.functions.list_tasks."""

from a2a_serverless.functions.list_tasks import create

app, handler = create()
