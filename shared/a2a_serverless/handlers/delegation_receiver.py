"""DelegationReceiverFunction: POST /delegations/{taskId}/{key} (Mangum). A remote agent's
push notification about the task a delegation gave it; the request's token is its only
credential (bindings/delegations.py)."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.delegations import delegation_router
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import create_app
from a2a_serverless.handlers import init_done, register_snapstart_hooks


def create() -> tuple[Any, Any]:
    """(app, handler)."""
    app = create_app(delegation_router(wiring.get_inbox()))
    handler = mangum_handler(app)
    register_snapstart_hooks()
    return init_done((app, handler))
