"""GetTaskFunction: GET /tasks/{id} (GetTask) and GET /tasks/{id}:subscribe (SubscribeToTask,
the proto's HTTP rule), served by uvicorn under the Lambda Web Adapter (`run.sh`).

API Gateway REST routes `GET /tasks/x:subscribe` to `GET /tasks/{id}`, so this function answers
both: buffered JSON for GetTask, an SSE stream for the subscription. It never loads the flow.
"""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app, get_task_router
from a2a_serverless.handlers import init_done


def create() -> Any:
    """The ASGI app."""
    return init_done(web_adapter_app(create_app(get_task_router(wiring.get_read_service()))))
