"""AgentCardFunction: GET /.well-known/agent-card.json, /extendedAgentCard and
/.well-known/jwks.json (Mangum)."""

from __future__ import annotations

from typing import Any

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import card_router, create_app
from a2a_serverless.handlers import flow_at_init, init_done, register_snapstart_hooks
from a2a_serverless.settings import get_settings


def create() -> tuple[Any, Any]:
    """(app, handler). Only the card factory: no AWS client, unless the card is signed with a
    KMS key."""
    flow_at_init()  # a flow that cannot load fails the init, saying why
    app = create_app(card_router(wiring.get_card_factory()))
    handler = mangum_handler(app, trace_aws=bool(get_settings().card_signing_key))
    register_snapstart_hooks()
    return init_done((app, handler))
