"""Helpers shared by the integration and e2e suites (no fixtures, no stack: plain builders)."""

from __future__ import annotations

import uuid
from typing import Any

from a2a_serverless.flows import StepContext


def user_message(
    text: str,
    *,
    message_id: str | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
) -> dict[str, Any]:
    """A 1.0 user Message (proto JSON) with one text part."""
    message: dict[str, Any] = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


def artifact_chunk(
    ctx: StepContext, name: str, text: str, index: int, count: int, **extra: Any
) -> None:
    """Emit chunk `index` of `count` of one artifact whose id and name are `name`."""
    ctx.artifact(
        text,
        artifact_id=name,
        name=name,
        append=index > 0,
        last_chunk=index == count - 1,
        **extra,
    )
