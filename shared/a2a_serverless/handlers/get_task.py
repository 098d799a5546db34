"""GetTaskFunction: GET /tasks/{id} (GetTask) and GET /tasks/{id}:subscribe (SubscribeToTask,
the proto's HTTP rule), served by uvicorn under the Lambda Web Adapter
(response streaming).

API Gateway REST cannot route on a suffix inside a path segment: `GET /tasks/x:subscribe`
reaches the `GET /tasks/{id}` route, so this one function answers both, buffered JSON for
GetTask and an SSE stream for the subscription. `run.sh` starts it. It only reads tasks: it never
loads the flow."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app, get_task_router
from a2a_serverless.handlers import init_done


def create() -> Any:
    """The ASGI app."""
    return init_done(web_adapter_app(create_app(get_task_router(wiring.get_read_service()))))
