"""Lambda entry point: the code is a2a_serverless.handlers.send_message."""

from a2a_serverless.handlers.send_message import create

app = create()
