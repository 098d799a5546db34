"""StreamFunction: POST /message:stream, POST /tasks/{id} (:cancel, :subscribe), under the
Lambda Web Adapter (response streaming). `run.sh` starts it."""

from a2a_serverless.bindings.rest import create_app, stream_router, task_action_router

app = create_app(stream_router, task_action_router)
