"""SendMessageFunction: POST /message:send, served by uvicorn under the Lambda Web
Adapter (response streaming) because a blocking send may outlive API Gateway's 29 s buffered
limit. `run.sh` starts it; the app is also what the local stack serves."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app, send_router
from a2a_serverless.handlers import flow_at_init, init_done


def create() -> Any:
    """The ASGI app."""
    flow_at_init()
    return init_done(web_adapter_app(create_app(send_router(wiring.get_service()))))
