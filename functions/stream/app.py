"""Lambda entry point: the code is a2a_serverless.handlers.stream."""

from a2a_serverless.handlers.stream import create

app = create()
