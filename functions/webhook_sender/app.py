"""Lambda entry point: the code is a2a_serverless.functions.webhook_sender."""

from a2a_serverless.functions.webhook_sender import create

handler = create()
