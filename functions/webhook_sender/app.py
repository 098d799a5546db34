"""WebhookSenderFunction: table stream batches and retry-queue batches -> webhooks."""

from typing import Any

from a2a_serverless.observability import function_logger
from a2a_serverless.push.handler import handle
from a2a_serverless.wiring import get_webhook_sender

logger = function_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(get_webhook_sender(), event, context)
