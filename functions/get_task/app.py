"""Lambda entry point: the code is a2a_serverless.functions.get_task."""

from a2a_serverless.functions.get_task import create

app = create()
