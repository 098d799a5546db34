"""Fold an ordered event log into a task's status and artifacts (A2A append semantics)."""

from __future__ import annotations

from collections.abc import Iterable

from a2a_serverless.models import Artifact, StreamResponse, Task, TaskStatus


def fold_events(
    events: Iterable[StreamResponse], status: TaskStatus | None = None
) -> tuple[TaskStatus | None, list[Artifact]]:
    """Latest status and the artifacts as a client that saw every event would hold them.

    `append=false` replaces an artifact with the same id (keeping its position);
    `append=true` extends its parts.
    """
    artifacts: dict[str, Artifact] = {}
    for event in events:
        if event.status_update is not None:
            status = event.status_update.status
        elif event.artifact_update is not None:
            update = event.artifact_update
            chunk = update.artifact
            current = artifacts.get(chunk.artifact_id)
            if update.append and current is not None:
                current.parts.extend(chunk.parts)
                if chunk.metadata:
                    current.metadata = {**(current.metadata or {}), **chunk.metadata}
            else:
                artifacts[chunk.artifact_id] = chunk.model_copy(deep=True)
        elif event.task is not None:
            status = event.task.status
    return status, list(artifacts.values())


def task_from_events(task_id: str, events: list[StreamResponse]) -> Task | None:
    """The task as a client that saw exactly these events holds it (no history); None when
    they carry no status."""
    status, artifacts = fold_events(events)
    if status is None:
        return None
    context_id = next(
        (
            body.context_id
            for e in events
            for body in (e.task, e.status_update, e.artifact_update)
            if body is not None and body.context_id
        ),
        "",
    )
    return Task(id=task_id, context_id=context_id, status=status, artifacts=artifacts or None)
