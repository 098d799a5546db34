#!/bin/sh
# Started by the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap).
exec python -m uvicorn --host 127.0.0.1 --port "${PORT:-8080}" --no-access-log app:app
