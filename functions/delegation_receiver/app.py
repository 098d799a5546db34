"""Lambda entry point: the code is a2a_serverless.handlers.delegation_receiver."""

from a2a_serverless.handlers.delegation_receiver import create

app, handler = create()
