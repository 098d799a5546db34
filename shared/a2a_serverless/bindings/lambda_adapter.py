"""Lambda entry points for buffered (Mangum) HTTP functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from mangum import Mangum

from a2a_serverless.observability import function_logger

TEXT_MIME_TYPES = ["application/json", "application/a2a+json", "text/", "application/javascript"]


def mangum_handler(app: FastAPI) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """API Gateway REST (v1) proxy events -> the FastAPI app, with request-id correlation."""
    logger = function_logger()
    # application/a2a+json is text: without this Mangum base64-encodes it and a REST API
    # without binary media types would hand the base64 string to the client.
    adapter = Mangum(app, lifespan="off", text_mime_types=TEXT_MIME_TYPES)

    @logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return adapter(event, context)

    return handler
