"""AgentCardFunction: GET /.well-known/agent-card.json, GET /extendedAgentCard (Mangum)."""

from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import card_router, create_app

app = create_app(card_router)
handler = mangum_handler(app, trace_aws=False)  # the card never calls AWS
