"""Lambda entry point: the code is a2a_serverless.functions.authorizer."""

from a2a_serverless.functions.authorizer import create

handler = create()
