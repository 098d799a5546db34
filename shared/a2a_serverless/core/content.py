"""Stored content as callers see it: every part the store keeps in the content bucket is
answered as a short-lived HTTPS `url` with its `mediaType` and `filename`, on every read path
(GetTask, ListTasks, send answers, streams, webhooks, both A2A versions). A reference is
resolved only inside the task that holds it (store/content.py), so a read of one's own task
never yields a URL to another task's content."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol, TypeVar

from a2a_serverless.models import (
    Artifact,
    ListTasksResponse,
    Message,
    Part,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskStatus,
)
from a2a_serverless.store.content import (
    DEFAULT_MEDIA_TYPES,
    REF_SCHEME,
    event_with,
    kind_of,
    stored_name,
)

_REF_BYTES = f'"{REF_SCHEME}'.encode()


class ContentLinks(Protocol):
    def link(self, task_id: str, name: str) -> str: ...


Presented = TypeVar(
    "Presented", Task, Message, StreamResponse, SendMessageResponse, ListTasksResponse
)


def _parts(parts: list[Part], task_id: str, links: ContentLinks) -> list[Part] | None:
    """The parts with stored ones as links; None when none is stored (nothing to copy)."""
    if not any(stored_name(part) for part in parts):
        return None
    out = []
    for part in parts:
        name = stored_name(part)
        if name is None:
            out.append(part)
            continue
        media_type = part.media_type or DEFAULT_MEDIA_TYPES[kind_of(name).value]
        out.append(
            part.model_copy(update={"url": links.link(task_id, name), "media_type": media_type})
        )
    return out


def present_message(message: Message, task_id: str, links: ContentLinks) -> Message:
    """A message of task `task_id` with its stored parts as links."""
    parts = _parts(message.parts, task_id, links)
    return message if parts is None else message.model_copy(update={"parts": parts})


def _artifact(artifact: Artifact, task_id: str, links: ContentLinks) -> Artifact:
    parts = _parts(artifact.parts, task_id, links)
    return artifact if parts is None else artifact.model_copy(update={"parts": parts})


def _status(status: TaskStatus, task_id: str, links: ContentLinks) -> TaskStatus:
    if status.message is None:
        return status
    message = present_message(status.message, task_id, links)
    return status if message is status.message else status.model_copy(update={"message": message})


def _task(task: Task, links: ContentLinks) -> Task:
    update: dict[str, object] = {"status": _status(task.status, task.id, links)}
    if task.history:
        update["history"] = [present_message(m, task.id, links) for m in task.history]
    if task.artifacts:
        update["artifacts"] = [_artifact(a, task.id, links) for a in task.artifacts]
    return task.model_copy(update=update)


def _event(event: StreamResponse, links: ContentLinks) -> StreamResponse:
    if event.task is not None:
        return event.model_copy(update={"task": _task(event.task, links)})
    # A direct reply's message is never stored, so it holds no reference.
    return event_with(
        event,
        lambda task_id, status: _status(status, task_id, links),
        lambda task_id, artifact: _artifact(artifact, task_id, links),
    )


def present(value: Presented, links: ContentLinks | None) -> Presented:
    """`value` with its stored parts as links (unchanged without a content store)."""
    if links is None:
        return value
    if isinstance(value, Task):
        return _task(value, links)
    if isinstance(value, StreamResponse):
        return _event(value, links)
    if isinstance(value, SendMessageResponse):
        if value.task is None:
            return value
        return value.model_copy(update={"task": _task(value.task, links)})
    if isinstance(value, ListTasksResponse):
        return value.model_copy(update={"tasks": [_task(t, links) for t in value.tasks]})
    return value  # a direct reply's Message: never stored, so it holds no reference


def presenter(links: ContentLinks | None) -> Callable[[StreamResponse], StreamResponse]:
    """`present` for a stream's events."""
    return lambda event: present(event, links)


def present_event_json(body: bytes, links: ContentLinks | None) -> bytes:
    """A stored event's wire JSON with its stored parts as links (the same bytes when it holds
    none)."""
    if links is None or _REF_BYTES not in body:
        return body
    event = present(StreamResponse.model_validate_json(body), links)
    return json.dumps(event.wire(), separators=(",", ":"), ensure_ascii=False).encode()
