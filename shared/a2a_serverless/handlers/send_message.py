"""SendMessageFunction: POST /message:send, served by loopback_server.py under the Lambda Web
Adapter (response streaming) because a blocking send may outlive API Gateway's 29 s buffered
limit. `run.sh` starts it; the app is also what the local stack serves."""

from __future__ import annotations

from typing import Any

import a2a_serverless.handlers.init_pause  # noqa: F401  (first: the init pause)
from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app, send_router
from a2a_serverless.handlers import flow_at_init, init_done, prewarm


def create() -> Any:
    """The ASGI app."""
    flow_at_init()
    # Its sends start executions: the Step Functions client now, not in the first one.
    prewarm(wiring.get_executor)
    app = web_adapter_app(create_app(send_router(wiring.get_service())))
    init_done()
    return app
