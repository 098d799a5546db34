"""Lambda entry point: the code is a2a_serverless.handlers.push_config."""

from a2a_serverless.handlers.push_config import create

app, handler = create()
