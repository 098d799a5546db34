"""AgentCardFunction: GET /.well-known/agent-card.json, GET /extendedAgentCard (Mangum)."""

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import card_router, create_app

# Only the card factory: this function never builds an AWS client.
app = create_app(card_router(wiring.get_card_factory()))
handler = mangum_handler(app, trace_aws=False)  # the card never calls AWS
