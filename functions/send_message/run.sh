#!/bin/sh
# Started by the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap). This is a plain
# process, not the Python bootstrap, so the layer (/opt/python) must be put on the path here.
# Unbuffered: stdout is a pipe, and a log line or EMF blob left in Python's buffer when the
# invocation ends would reach CloudWatch late (or, at shutdown, never).
# exec: the adapter's SIGTERM reaches the server (a2a_serverless/serve.py: uvicorn on $PORT).
PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python:${LAMBDA_RUNTIME_DIR:-}" \
  exec python -m a2a_serverless.serve app:app
