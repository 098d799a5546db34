"""Lambda entry point: the code is a2a_serverless.functions.flow_worker."""

from a2a_serverless.functions.flow_worker import create

handler = create()
