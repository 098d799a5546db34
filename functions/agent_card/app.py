"""AgentCardFunction: GET /.well-known/agent-card.json, /extendedAgentCard and
/.well-known/jwks.json (Mangum)."""

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import card_router, create_app
from a2a_serverless.settings import get_settings

# Only the card factory: no AWS client, unless the card is signed with a KMS key.
app = create_app(card_router(wiring.get_card_factory()))
handler = mangum_handler(app, trace_aws=bool(get_settings().card_signing_key))
