"""WebhookSenderFunction: table stream batches and retry-queue batches -> webhooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import a2a_serverless.functions.init_pause  # noqa: F401  (first: the init pause)
from a2a_serverless.functions import init_done, prewarm
from a2a_serverless.observability import instrumented_handler
from a2a_serverless.push.handler import handle
from a2a_serverless.wiring import get_webhook_sender


@instrumented_handler()
def handler(event: dict[str, Any], context: Any) -> Mapping[str, Any]:
    return handle(get_webhook_sender(), event, context)


def create() -> Any:
    """The handler, its sender built (the table's and the retry queue's clients)."""
    prewarm(get_webhook_sender)
    init_done()
    return handler
