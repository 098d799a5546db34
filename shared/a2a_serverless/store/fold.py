"""Fold an ordered event log into a task's status and artifacts (A2A append semantics)."""

from __future__ import annotations

from collections.abc import Iterable

from a2a_serverless.models import Artifact, StreamResponse, TaskStatus


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
