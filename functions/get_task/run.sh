#!/bin/sh
# Started by the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap). This is a plain
# process, not the Python bootstrap, so the layer (/opt/python) must be put on the path here.
# Unbuffered: stdout is a pipe, and a log line or EMF blob left in Python's buffer when the
# invocation ends would reach CloudWatch late (or, at shutdown, never).
# uvicorn for one local peer, the adapter: it pools connections across invocations, so no idle
# timeout that races its reuse after a thaw; request heads up to 256 KiB (it passes API
# Gateway's and Lambda's context as JSON headers); its X-Forwarded-* headers left to the app;
# no access log (the app logs each request), no lifespan, no added Server or Date header.
PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python:${LAMBDA_RUNTIME_DIR:-}" \
  exec python -m uvicorn \
  --host 127.0.0.1 --port "${PORT:-8080}" \
  --http h11 --loop asyncio --lifespan off --no-proxy-headers \
  --timeout-keep-alive 86400 --h11-max-incomplete-event-size 262144 \
  --no-access-log --no-server-header --no-date-header --log-level warning \
  app:app
