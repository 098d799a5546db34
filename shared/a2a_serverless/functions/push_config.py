"""PushConfigFunction: /tasks/{id}/pushNotificationConfigs[/{configId}] (Mangum)."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import create_app, push_router
from a2a_serverless.functions import register_snapstart_hooks


def create() -> tuple[Any, Any]:
    """(app, handler)."""
    register_snapstart_hooks()
    app = create_app(push_router(wiring.get_push()))
    return app, mangum_handler(app)
