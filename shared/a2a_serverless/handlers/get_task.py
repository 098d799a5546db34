"""GetTaskFunction: GET /tasks/{id} (GetTask) and GET /tasks/{id}:subscribe (SubscribeToTask,
the proto's HTTP rule), served by the loopback server (loopback_server.py) under the Lambda
Web Adapter (response streaming).

API Gateway REST cannot route on a suffix inside a path segment: `GET /tasks/x:subscribe`
reaches the `GET /tasks/{id}` route, so this one function answers both, buffered JSON for
GetTask and an SSE stream for the subscription. `run.sh` starts it. It only reads tasks: it never
loads the flow."""

from __future__ import annotations

from typing import Any

import a2a_serverless.handlers.init_pause  # noqa: F401  (first: the init pause)
from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app, get_task_router
from a2a_serverless.handlers import init_done


def create() -> Any:
    """The ASGI app."""
    app = web_adapter_app(create_app(get_task_router(wiring.get_read_service())))
    init_done()
    return app
