"""The pure parts of the inspector's reads (local/inspector/data.py): filters, pages and their
tokens, event views, and the turns and steps a task went through."""

from __future__ import annotations

import json

import pytest

from a2a_serverless.local.inspector.data import (
    EventView,
    ExecutionView,
    TaskRow,
    decode_token,
    event_view,
    execution_place,
    page_of,
    parse_status,
    turns_of,
    writer_place,
)
from a2a_serverless.models import StreamResponse, TaskState
from a2a_serverless.store.base import InvalidPageToken


def _row(task: str, updated: str, owner: str = "alice", state: str = "COMPLETED") -> TaskRow:
    return TaskRow(task, owner, f"ctx-{owner}", f"TASK_STATE_{state}", updated)


ROWS = [
    _row("t1", "2026-01-01T00:00:01.000Z"),
    _row("t2", "2026-01-01T00:00:03.000Z", state="WORKING"),
    _row("t3", "2026-01-01T00:00:02.000Z", owner="bob"),
    _row("t4", "2026-01-01T00:00:03.000Z"),
]


def test_pages_newest_first_and_resume_after_the_token() -> None:
    first = page_of(ROWS, page_size=2)
    assert [r.task_id for r in first.rows] == ["t4", "t2"]
    assert first.next_page_token is not None
    second = page_of(ROWS, page_token=first.next_page_token, page_size=2)
    assert [r.task_id for r in second.rows] == ["t3", "t1"]
    assert second.next_page_token is None
    # A task updated meanwhile neither repeats nor shifts the next page.
    moved = [*ROWS[:3], _row("t4", "2026-01-01T00:00:09.000Z")]
    assert [r.task_id for r in page_of(moved, page_token=first.next_page_token).rows] == [
        "t3",
        "t1",
    ]


def test_filters() -> None:
    assert [r.task_id for r in page_of(ROWS, owner="bob").rows] == ["t3"]
    assert [r.task_id for r in page_of(ROWS, context_id="ctx-alice").rows] == ["t4", "t2", "t1"]
    working = page_of(ROWS, status=TaskState.WORKING).rows
    assert [r.task_id for r in working] == ["t2"]


def test_status_filter_spellings() -> None:
    assert parse_status("TASK_STATE_INPUT_REQUIRED") is TaskState.INPUT_REQUIRED
    assert parse_status("input-required") is TaskState.INPUT_REQUIRED
    assert parse_status("") is None
    with pytest.raises(ValueError):
        parse_status("<script>")


@pytest.mark.parametrize("token", ["%%%", "bm90IGpzb24", "WzFd"])
def test_foreign_tokens_are_refused(token: str) -> None:
    with pytest.raises(InvalidPageToken):
        decode_token(token)


def test_event_views() -> None:
    status = {
        "statusUpdate": {
            "taskId": "t",
            "contextId": "c",
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": {
                    "messageId": "m",
                    "role": "ROLE_AGENT",
                    "parts": [{"text": "<b>a"}, {"data": {"x": 1}}, {"text": "b"}],
                },
            },
        }
    }
    raw = json.dumps(status)
    view = event_view(3, StreamResponse.model_validate(status), raw, "1.0.0")
    assert (view.kind, view.state, view.text, view.raw) == (
        "status",
        "TASK_STATE_WORKING",
        "<b>ab",
        raw,
    )
    chunk = {
        "artifactUpdate": {
            "taskId": "t",
            "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": "1;"}]},
            "append": True,
        }
    }
    view = event_view(4, StreamResponse.model_validate(chunk), "{}")
    assert (view.kind, view.state, view.text) == ("artifact", None, "1;")


def test_places_of_executions_and_writers() -> None:
    assert execution_place("t-1", "t-1-2") == (2, 0)
    assert execution_place("t-1", "t-1-2-3") == (2, 3)
    assert execution_place("t-1", "t-1-2-cancel_delegations") == (2, None)
    assert execution_place("t-1", "t-1-d2_0") == (None, None)
    assert writer_place("2.1.0") == (2, 1)
    assert writer_place("") is None
    assert writer_place("a.b.c") is None


def _execution(name: str, turn: int | None, step: int | None) -> ExecutionView:
    return ExecutionView(name, "flow", "SUCCEEDED", "", None, "", turn, step)


def test_turns_from_the_header_events_and_executions() -> None:
    events = [
        EventView(1, "status", "TASK_STATE_SUBMITTED", "", "{}"),
        EventView(3, "artifact", None, "", "{}", "1.0.0"),
        EventView(4, "artifact", None, "", "{}", "1.1.0"),
        EventView(6, "artifact", None, "", "{}", "2.0.0"),
    ]
    executions = [_execution("t-1", 1, 0), _execution("t-1-1", 1, 1), _execution("t-2", 2, 0)]
    turns = turns_of((2, 1), events, executions)
    found = [(t.turn, [(s.step, s.events, s.executions) for s in t.steps]) for t in turns]
    assert found == [
        (1, [(0, [3], ["t-1"]), (1, [4], ["t-1-1"])]),
        (2, [(0, [6], ["t-2"]), (1, [], [])]),  # step 1 saved: from the header only
    ]
