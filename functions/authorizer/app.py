"""Lambda entry point: the code is a2a_serverless.handlers.authorizer."""

from a2a_serverless.handlers.authorizer import create

handler = create()
