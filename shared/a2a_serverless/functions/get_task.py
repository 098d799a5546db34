"""GetTaskFunction: GET /tasks/{id} (Mangum)."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import create_app, get_task_router
from a2a_serverless.functions import flow_at_init, register_snapstart_hooks


def create() -> tuple[Any, Any]:
    """(app, handler)."""
    flow_at_init()  # a flow that cannot load fails the init, saying why
    register_snapstart_hooks()
    app = create_app(get_task_router(wiring.get_service()))
    return app, mangum_handler(app)
