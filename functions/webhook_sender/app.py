"""Lambda entry point: the code is a2a_serverless.handlers.webhook_sender."""

from a2a_serverless.handlers.webhook_sender import create

handler = create()
