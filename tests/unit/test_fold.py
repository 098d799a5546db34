"""Folding the event log into status and artifacts follows A2A append semantics."""

from __future__ import annotations

from a2a_serverless.models import (
    Artifact,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_serverless.store.fold import fold_events


def _chunk(artifact_id: str, text: str, append: bool) -> StreamResponse:
    return StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id="t",
            context_id="c",
            artifact=Artifact(artifact_id=artifact_id, parts=[Part(text=text)]),
            append=append,
        )
    )


def _status(state: TaskState) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id="t", context_id="c", status=TaskStatus(state=state)
        )
    )


def test_append_extends_and_replace_keeps_position() -> None:
    events = [
        _status(TaskState.WORKING),
        _chunk("a", "one ", False),
        _chunk("b", "B", False),
        _chunk("a", "two", True),
        _chunk("b", "B2", False),  # replaces b, keeps its place after a
        _status(TaskState.COMPLETED),
    ]
    status, artifacts = fold_events(events)
    assert status is not None and status.state is TaskState.COMPLETED
    assert [a.artifact_id for a in artifacts] == ["a", "b"]
    assert [p.text for p in artifacts[0].parts] == ["one ", "two"]
    assert [p.text for p in artifacts[1].parts] == ["B2"]


def test_append_to_unknown_artifact_starts_it_and_input_is_not_mutated() -> None:
    first = _chunk("a", "x", True)
    _, artifacts = fold_events([first, _chunk("a", "y", True)])
    assert [p.text for p in artifacts[0].parts] == ["x", "y"]
    assert [p.text for p in first.artifact_update.artifact.parts] == ["x"]


def test_no_events_keeps_the_given_status() -> None:
    given = TaskStatus(state=TaskState.SUBMITTED)
    assert fold_events([], given) == (given, [])
