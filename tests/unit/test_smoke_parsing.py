"""The smoke test's body parsing: strict A2A 1.0 (unknown fields and enum spellings refused)
when a2a-sdk is installed; without it (an optional extra of the command) the smoke still runs,
checking only that each body is a JSON object."""

from __future__ import annotations

import sys

import pytest

from a2a_serverless.cli import smoke

TASK = {
    "id": "t-1",
    "contextId": "c-1",
    "status": {"state": "TASK_STATE_COMPLETED"},
}


def test_bodies_are_parsed_strictly_with_a2a_sdk() -> None:
    assert smoke.a2a_types() is not None
    smoke.strict(TASK, "Task", "Task")
    with pytest.raises(smoke.CheckFailed, match=r"not a strict A2A 1\.0 Task"):
        smoke.strict({**TASK, "colour": "blue"}, "Task", "Task")
    with pytest.raises(smoke.CheckFailed, match=r"not a strict A2A 1\.0 Task"):
        smoke.strict({**TASK, "status": {"state": "completed"}}, "Task", "Task")  # 0.3 spelling


def test_without_a2a_sdk_only_the_shape_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "a2a", None)  # `import a2a` raises ImportError
    assert smoke.a2a_types() is None
    assert smoke.strict({**TASK, "colour": "blue"}, "Task", "Task") == {**TASK, "colour": "blue"}
    with pytest.raises(smoke.CheckFailed, match="not a JSON object"):
        smoke.strict(["a", "list"], "Task", "Task")
