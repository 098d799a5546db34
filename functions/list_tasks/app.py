"""ListTasksFunction: GET /tasks (Mangum)."""

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler
from a2a_serverless.bindings.rest import create_app, list_tasks_router

app = create_app(list_tasks_router(wiring.get_service()))
handler = mangum_handler(app)
