"""Lambda entry points for buffered (Mangum) HTTP functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from mangum import Mangum

from a2a_serverless.observability import function_logger


def mangum_handler(app: FastAPI) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """API Gateway REST (v1) proxy events -> the FastAPI app, with request-id correlation."""
    logger = function_logger()
    adapter = Mangum(app, lifespan="off")

    @logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return adapter(event, context)

    return handler
