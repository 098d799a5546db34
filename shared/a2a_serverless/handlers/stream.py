"""StreamFunction: POST /message:stream, POST /tasks/{id} (:cancel, :subscribe) and the
JSON-RPC bindings on POST / (1.0 and 0.3), under the Lambda Web Adapter (response
streaming). `run.sh` starts it."""

from __future__ import annotations

from typing import Any

import a2a_serverless.handlers.init_pause  # noqa: F401  (first: the init pause)
from a2a_serverless import wiring
from a2a_serverless.bindings.jsonrpc import jsonrpc_router
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app, stream_router, task_action_router
from a2a_serverless.handlers import flow_at_init, init_done, prewarm


def create() -> Any:
    """The ASGI app."""
    flow_at_init()
    # Its sends start executions: the Step Functions client now, not in the first one.
    prewarm(wiring.get_executor)
    service = wiring.get_service()
    app = web_adapter_app(
        create_app(
            stream_router(service),
            task_action_router(service),
            jsonrpc_router(service, wiring.get_push(), wiring.get_card_factory()),
        )
    )
    init_done()
    return app
