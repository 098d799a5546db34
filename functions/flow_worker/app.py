"""Lambda entry point: the code is a2a_serverless.handlers.flow_worker."""

from a2a_serverless.handlers.flow_worker import create

handler = create()
