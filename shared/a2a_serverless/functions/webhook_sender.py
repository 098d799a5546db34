"""WebhookSenderFunction: table stream batches and retry-queue batches -> webhooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a_serverless.observability import instrumented_handler
from a2a_serverless.push.handler import handle
from a2a_serverless.wiring import get_webhook_sender


@instrumented_handler()
def handler(event: dict[str, Any], context: Any) -> Mapping[str, Any]:
    return handle(get_webhook_sender(), event, context)


def create() -> Any:
    """The handler."""
    return handler
