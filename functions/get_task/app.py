"""Lambda entry point: the code is a2a_serverless.handlers.get_task."""

from a2a_serverless.handlers.get_task import create

app = create()
