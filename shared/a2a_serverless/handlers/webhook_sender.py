"""WebhookSenderFunction: table stream batches and retry-queue batches -> webhooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Before anything imports pydantic: Powertools' batch utility imports its pydantic event models
# when it finds pydantic loaded, only to type an argument this function never passes.
import a2a_serverless.push.handler  # noqa: F401
from a2a_serverless.handlers import init_done
from a2a_serverless.observability import instrumented_handler
from a2a_serverless.push.handler import handle
from a2a_serverless.wiring import get_webhook_sender


@instrumented_handler()
def handler(event: dict[str, Any], context: Any) -> Mapping[str, Any]:
    return handle(get_webhook_sender(), event, context)


def create() -> Any:
    """The handler (its sender is built by the first batch)."""
    return init_done(handler)
