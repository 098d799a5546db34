"""PushConfigFunction: /tasks/{id}/pushNotificationConfigs[/{configId}] (Mangum)."""

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import create_app, push_router

app = create_app(push_router(wiring.get_push()))
handler = mangum_handler(app)
