"""Lambda entry point: the code is a2a_serverless.functions.stream."""

from a2a_serverless.functions.stream import create

app = create()
