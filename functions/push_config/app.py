"""Lambda entry point: the code is a2a_serverless.functions.push_config."""

from a2a_serverless.functions.push_config import create

app, handler = create()
