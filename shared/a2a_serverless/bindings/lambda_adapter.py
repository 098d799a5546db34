"""Lambda entry points of the HTTP functions: Mangum handlers (buffered) and Web Adapter apps
(uvicorn under the Lambda Web Adapter, response streaming: functions/<name>/run.sh)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from a2a_serverless.observability import (
    enable_web_adapter_tracing,
    function_logger,
    instrumented_handler,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette

TEXT_MIME_TYPES = ["application/json", "application/a2a+json", "text/", "application/javascript"]


def mangum_handler(
    app: Starlette, *, trace_aws: bool = True
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """API Gateway REST (v1) proxy events -> the function's app, with request-id correlation.
    `trace_aws=False` for a function that never calls AWS (no botocore import for X-Ray)."""
    # Imported here: the Web Adapter functions (served by uvicorn) never need Mangum.
    from mangum import Mangum

    # application/a2a+json is text: without this Mangum base64-encodes it and a REST API
    # without binary media types would hand the base64 string to the client.
    adapter = Mangum(app, lifespan="off", text_mime_types=TEXT_MIME_TYPES)

    # Responses are not put in traces: they are task contents.
    @instrumented_handler(
        correlation_id=lambda event: (event.get("requestContext") or {}).get("requestId"),
        capture_response=False,
        trace_aws=trace_aws,
    )
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return adapter(event, context)

    return handler


def web_adapter_app(app: Starlette) -> Starlette:
    """A Web Adapter function's app: JSON logs and, inside Lambda, X-Ray subsegments for its
    AWS calls (per-request correlation and metrics come from the app's RequestScope)."""
    function_logger()
    enable_web_adapter_tracing()
    return app
