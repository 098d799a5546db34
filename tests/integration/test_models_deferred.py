"""The A2A models build their validators at first use (defer_build: a cold start builds only
what its requests use), one build at a time (A2AModel.model_rebuild), so first uses from many
threads at once get the same answers as one thread."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from a2a_serverless.models.a2a import (
    A2AModel,
    Artifact,
    Message,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
    _models_named_by,
)

ROOT = Path(__file__).resolve().parents[2]
TASK = {
    "id": "t1",
    "contextId": "c1",
    "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00Z"},
    "artifacts": [{"artifactId": "a", "parts": [{"text": "hi"}]}],
    "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "q"}]}],
}
MESSAGE = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "q"}]}
CASES: list[tuple[type[A2AModel], dict[str, Any]]] = [
    (Task, TASK),
    (SendMessageRequest, {"message": MESSAGE, "configuration": {"returnImmediately": True}}),
    (StreamResponse, {"task": TASK}),
    (Message, MESSAGE),
]


def _fresh_interpreter(code: str) -> str:
    """What `code` prints in a fresh interpreter (no model built yet)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT / "shared")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_model_is_built_at_its_first_use_not_at_import() -> None:
    probe = (
        "from a2a_serverless.models.a2a import Task, AgentCard\n"
        "before = (Task.__pydantic_complete__, AgentCard.__pydantic_complete__)\n"
        f"Task.model_validate({TASK!r})\n"
        "print(before, (Task.__pydantic_complete__, AgentCard.__pydantic_complete__))\n"
    )
    out = _fresh_interpreter(probe)
    assert out == "(False, False) (True, False)"


def test_a_model_s_first_use_builds_the_models_its_fields_name_first() -> None:
    """Bottom-up: each model its fields name (through lists, unions, Optional) is built on its
    own before it, so later first uses (a Message, a TaskStatus) find theirs built, and no
    model unrelated to it is."""
    assert _models_named_by(Task) == [TaskStatus, Artifact, Message]
    assert _models_named_by(StreamResponse) == [
        Task,
        Message,
        TaskStatusUpdateEvent,
        TaskArtifactUpdateEvent,
    ]
    probe = (
        "from a2a_serverless.models import a2a\n"
        f"a2a.StreamResponse.model_validate({{'task': {TASK!r}}})\n"
        "names = ('Task', 'TaskStatus', 'Message', 'Part', 'Artifact', 'TaskStatusUpdateEvent',"
        " 'SendMessageRequest', 'AgentCard')\n"
        "print([getattr(a2a, n).__pydantic_complete__ for n in names])\n"
    )
    out = _fresh_interpreter(probe)
    assert out == "[True, True, True, True, True, True, False, False]"


def test_first_uses_from_many_threads_at_once_answer_as_one_thread() -> None:
    """Each round makes fresh (never built) subclasses and has 8 threads use them at once, in
    different orders, with the interpreter switching threads as often as it can. Without the
    lock in A2AModel.model_rebuild, pydantic before 2.14 failed most runs of this
    (AttributeError: no attribute __pydantic_core_schema__)."""
    expected = [model.model_validate(data).wire() for model, data in CASES]
    errors: list[str] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for round_ in range(100):
            fresh = [type(f"{model.__name__}{round_}", (model,), {}) for model, _ in CASES]
            barrier = threading.Barrier(8)

            def use(seed: int, fresh: list[type[A2AModel]] = fresh, b: Any = barrier) -> None:
                order = list(range(len(CASES)))
                random.Random(seed).shuffle(order)
                b.wait()
                for i in order:
                    try:
                        if fresh[i].model_validate(CASES[i][1]).wire() != expected[i]:
                            errors.append(f"{fresh[i].__name__}: a different answer")
                    except Exception as exc:  # what the race raised
                        errors.append(f"{fresh[i].__name__}: {exc!r}")

            threads = [threading.Thread(target=use, args=(n,)) for n in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
