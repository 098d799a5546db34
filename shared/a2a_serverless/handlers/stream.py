"""StreamFunction: POST /message:stream, POST /tasks/{id} (:cancel, :subscribe) and the
JSON-RPC bindings on POST / (1.0 and 0.3), under the Lambda Web Adapter (response
streaming). `run.sh` starts it."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.jsonrpc import jsonrpc_router
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app, stream_router, task_action_router
from a2a_serverless.handlers import flow_at_init, init_done


def create() -> Any:
    """The ASGI app."""
    flow_at_init()
    service = wiring.get_service()
    app = create_app(
        stream_router(service),
        task_action_router(service),
        jsonrpc_router(service, wiring.get_push(), wiring.get_card_factory()),
    )
    return init_done(web_adapter_app(app))
