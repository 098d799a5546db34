"""Races: exactly one winner, whatever the interleaving."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import (
    A2A,
    TERMINAL,
    Resp,
    assert_log_consistent,
    executions,
    status_states,
    wait_idle,
)


def _together(count: int, action: Any) -> list[Any]:
    """Run action(i) in `count` threads released at the same instant."""
    barrier = threading.Barrier(count)

    def run(i: int) -> Any:
        barrier.wait()
        return action(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def test_cancel_racing_completion(local_stack: LocalStack, alice: A2A) -> None:
    """Tasks canceled at varying moments of their run: one terminal state each, and the
    cancel's answer agrees with the outcome."""
    texts = ["a b c d e f g h", "a b c d e f g h [slow=0.3]", "x y [steps=3]"]

    def run(i: int) -> tuple[str, Resp]:
        task_id = alice.send(texts[i % 3], blocking=False).task["id"]
        time.sleep((i % 6) * 0.012)
        return task_id, alice.cancel(task_id)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, range(12)))
    wait_idle(local_stack)

    outcomes = []
    for task_id, cancel in results:
        final = alice.get(task_id).json["status"]["state"]
        outcomes.append(final)
        assert final in ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"), (task_id, final)
        if cancel.status == 200:
            assert cancel.task["status"]["state"] == "TASK_STATE_CANCELED"
            assert final == "TASK_STATE_CANCELED", task_id
        else:
            assert cancel.status == 400 and cancel.reason == "TASK_NOT_CANCELABLE", cancel.body
            assert final == "TASK_STATE_COMPLETED", task_id
        log = assert_log_consistent(local_stack, task_id)
        terminal = [s for s in status_states(log) if s in TERMINAL]
        assert terminal == [final], (task_id, status_states(log))
        if final == "TASK_STATE_CANCELED":
            # Nothing is appended after the cancel event.
            assert "statusUpdate" in log[-1][1], (task_id, log[-1])
    assert "TASK_STATE_CANCELED" in outcomes


def test_concurrent_follow_ups_accept_exactly_one(local_stack: LocalStack, alice: A2A) -> None:
    for _ in range(3):
        task = alice.send("question [input]").task
        task_id = task["id"]
        answers = _together(
            2,
            lambda i, task_id=task_id: alice.send(f"answer-{i}", task_id=task_id, blocking=False),
        )
        accepted = [r for r in answers if r.status == 200]
        refused = [r for r in answers if r.status != 200]
        assert len(accepted) == 1, [r.body for r in answers]
        assert refused[0].status == 400 and refused[0].reason == "UNSUPPORTED_OPERATION"
        wait_idle(local_stack)
        names = sorted(e["name"] for e in executions(local_stack) if e["name"].startswith(task_id))
        assert names == [f"{task_id}-1", f"{task_id}-2"]
        final = alice.get(task_id).json
        assert final["status"]["state"] == "TASK_STATE_COMPLETED"
        user_texts = [m["parts"][0]["text"] for m in final["history"] if m["role"] == "ROLE_USER"]
        assert len(user_texts) == 2 and user_texts[1] in ("answer-0", "answer-1")
        assert (
            status_states(assert_log_consistent(local_stack, task_id)).count("TASK_STATE_SUBMITTED")
            == 2
        )


def test_parallel_sends_to_one_context_all_land(local_stack: LocalStack, alice: A2A) -> None:
    context_id = f"ctx-{uuid.uuid4()}"
    responses = _together(
        20, lambda i: alice.send(f"hello {i}", context_id=context_id, blocking=False)
    )
    assert all(r.status == 200 for r in responses), [r.body for r in responses if r.status != 200]
    ids = {r.task["id"] for r in responses}
    assert len(ids) == 20
    assert all(r.task["contextId"] == context_id for r in responses)
    wait_idle(local_stack)
    listed, total = alice.list_all(page_size=7, contextId=context_id)
    assert {t["id"] for t in listed} == ids and len(listed) == 20 and total == 20
    assert alice.list().json["totalSize"] == 20
    assert alice.list(status="TASK_STATE_COMPLETED", contextId=context_id).json["totalSize"] == 20
    for state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"):
        assert alice.list(status=state).json.get("totalSize", 0) == 0
    for task_id in ids:
        assert_log_consistent(local_stack, task_id)


def test_retried_send_creates_one_task(
    local_stack: LocalStack, alice: A2A, dedupe_window: None
) -> None:
    message_id = str(uuid.uuid4())
    responses = _together(5, lambda i: alice.send("exactly once", message_id=message_id))
    assert all(r.status == 200 for r in responses), [r.body for r in responses]
    ids = {r.task["id"] for r in responses}
    assert len(ids) == 1, ids
    (task_id,) = ids
    assert all(r.task["status"]["state"] == "TASK_STATE_COMPLETED" for r in responses)
    wait_idle(local_stack)
    assert [e["name"] for e in executions(local_stack)] == [f"{task_id}-1"]
    assert alice.list().json["totalSize"] == 1
    # The same messageId with other content is a new message, not a retry.
    other = alice.send("something else", message_id=message_id)
    assert other.status == 200 and other.task["id"] != task_id
    assert alice.list().json["totalSize"] == 2
