"""ListTasksFunction: GET /tasks (Mangum). It only reads tasks: it never loads the flow."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import create_app, list_tasks_router
from a2a_serverless.handlers import init_done, register_snapstart_hooks


def create() -> tuple[Any, Any]:
    """(app, handler)."""
    app = create_app(list_tasks_router(wiring.get_read_service()))
    handler = mangum_handler(app)
    register_snapstart_hooks()
    return init_done((app, handler))
