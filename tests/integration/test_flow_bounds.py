"""A task never breaks on DynamoDB's item limits: a flow state past its inline bound goes to the
content bucket (without one, past MAX_FLOW_STATE_BYTES, the turn ends FAILED naming the bound,
the earlier turns intact), as does a part; what cannot be stored there (an artifact's metadata)
fails the turn naming its bound; the echo flow keeps a bounded tail of a long conversation."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from a2a_serverless.flows import Outcome, StepContext
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import limits
from tests.integration.harness import (
    A2A,
    assert_log_consistent,
    item_size,
    partition,
    stored_object,
    wait_idle,
)

_GROW = re.compile(r"\[grow=(\d+)\]")


def grow(ctx: StepContext) -> Outcome:
    """Adds `[grow=N]` characters to its state every turn (a conversation kept whole), and a
    chunk naming the turn; `[next]` saves the state for a second step first."""
    found = _GROW.search(ctx.text)
    ctx.state["log"] = ctx.state.get("log", "") + "x" * int(found.group(1) if found else 0)
    ctx.artifact(f"turn {ctx.turn}", artifact_id=f"turn-{ctx.turn}", last_chunk=True)
    if "[next]" in ctx.text and ctx.step == 0:
        return Outcome.next_step()
    return Outcome.input_required(f"{len(ctx.state['log'])} characters kept; more?")


def big_chunk(ctx: StepContext) -> Outcome:
    """A small chunk, then one whose metadata (never split) is past MAX_EVENT_BYTES, and past
    DynamoDB's item limit too."""
    ctx.artifact("first", artifact_id="ok", last_chunk=True)
    ctx.artifact("second", artifact_id="big", metadata={"blob": "m" * 420_000}, last_chunk=True)
    return Outcome.completed("done")


def _status_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"])


def _assert_items_fit(stack: LocalStack, task_id: str) -> None:
    assert max(item_size(i) for i in partition(stack, task_id)) <= limits.MAX_ITEM_BYTES


def test_a_flow_state_past_its_inline_bound_goes_to_the_bucket_and_comes_back(
    make_stack: Callable[..., LocalStack],
) -> None:
    """A state of 480,000 characters (past DynamoDB's item limit) is one object of the
    bucket, the header naming it; the next turn's step reads it back and grows it."""
    stack = make_stack(Flow="tests.integration.test_flow_bounds:grow")
    alice = A2A(stack, "alice")
    task_id = alice.send("[grow=60000]").task["id"]
    task = alice.send("[grow=420000]", task_id=task_id).task
    assert _status_text(task) == "480000 characters kept; more?", task["status"]
    head = next(i for i in partition(stack, task_id) if i["sk"]["S"] == "H")
    assert head["flowState"]["S"] == "{}" and head["flowStateRef"]["S"].startswith("state.")
    task = alice.send("[grow=10]", task_id=task_id).task
    assert _status_text(task) == "480010 characters kept; more?", task["status"]
    task = alice.send("[grow=0]", task_id=task_id).task
    assert _status_text(task) == "480010 characters kept; more?", task["status"]
    _assert_items_fit(stack, task_id)


def test_flow_state_past_its_bound_fails_that_step_only(
    make_stack: Callable[..., LocalStack], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a content bucket: turns 1-2 keep 30,000 characters each; turn 3 would keep
    480,000 (past DynamoDB's item limit too): it ends FAILED naming MAX_FLOW_STATE_BYTES,
    nothing of it saved."""
    monkeypatch.setenv("CONTENT_BUCKET", "")
    stack = make_stack(Flow="tests.integration.test_flow_bounds:grow")
    alice = A2A(stack, "alice")
    task = alice.send("[grow=30000]").task
    task_id = task["id"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task["status"]
    task = alice.send("[grow=30000]", task_id=task_id).task
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task["status"]
    assert _status_text(task) == "60000 characters kept; more?"

    task = alice.send("[grow=420000]", task_id=task_id).task
    wait_idle(stack)
    assert task["status"]["state"] == "TASK_STATE_FAILED", task["status"]
    text = _status_text(task)
    assert "Step 0 of turn 3" in text and "the flow state (ctx.state)" in text, text
    assert "480,010 bytes; the limit is 65,536 (MAX_FLOW_STATE_BYTES)" in text, text

    got = alice.get(task_id)  # GetTask still works: the earlier turns as they were
    assert got.status == 200, got.body
    assert got.json == task
    assert [a["artifactId"] for a in got.json["artifacts"]] == ["turn-1", "turn-2", "turn-3"]
    states = [m for m in got.json["history"] if m["role"] == "ROLE_AGENT"]
    assert len(states) == 3 and "more?" in states[1]["parts"][0]["text"]
    head = next(i for i in partition(stack, task_id) if i["sk"]["S"] == "H")
    assert len(head["flowState"]["S"]) == len('{"log":""}') + 60_000  # turn 2's, kept
    assert_log_consistent(stack, task_id)
    _assert_items_fit(stack, task_id)


def test_flow_state_past_its_bound_between_steps(
    make_stack: Callable[..., LocalStack], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bound, without a content bucket, where a step saves its state for the next
    step of the turn."""
    monkeypatch.setenv("CONTENT_BUCKET", "")
    stack = make_stack(Flow="tests.integration.test_flow_bounds:grow")
    alice = A2A(stack, "alice")
    task = alice.send("[grow=420000] [next]").task
    wait_idle(stack)
    task = alice.get(task["id"]).json
    assert task["status"]["state"] == "TASK_STATE_FAILED", task["status"]
    text = _status_text(task)
    assert "Step 0 of turn 1" in text and "(MAX_FLOW_STATE_BYTES)" in text, text
    assert [a["artifactId"] for a in task["artifacts"]] == ["turn-1"]
    assert_log_consistent(stack, task["id"])
    _assert_items_fit(stack, task["id"])


def test_artifact_chunk_past_its_bound_fails_the_turn(
    make_stack: Callable[..., LocalStack],
) -> None:
    stack = make_stack(Flow="tests.integration.test_flow_bounds:big_chunk")
    alice = A2A(stack, "alice")
    task = alice.send("go").task
    wait_idle(stack)
    assert task["status"]["state"] == "TASK_STATE_FAILED", task["status"]
    text = _status_text(task)
    assert "an artifact chunk as JSON is" in text, text
    assert f"the limit is {limits.MAX_EVENT_BYTES:,} (MAX_EVENT_BYTES)" in text, text
    got = alice.get(task["id"])
    assert got.status == 200 and got.json == task
    assert [a["artifactId"] for a in task["artifacts"]] == ["ok"]  # the chunk before it
    assert_log_consistent(stack, task["id"])
    _assert_items_fit(stack, task["id"])


def test_echo_keeps_a_bounded_tail_of_a_long_conversation(
    local_stack: LocalStack, alice: A2A
) -> None:
    """Six [input] turns of 100,000 characters: kept whole, the echo's state would pass
    DynamoDB's 400 KB item limit by the fifth; it keeps the last MAX_KEPT_CHARS."""
    task = alice.send("start [input]").task
    task_id = task["id"]
    for turn in range(6):
        text = f"turn {turn} " + "y" * 100_000 + " [input]"
        task = alice.send(text, task_id=task_id).task
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", (turn, task["status"])
    task = alice.send("the end", task_id=task_id).task
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    from a2a_serverless.flows.echo import MAX_KEPT_CHARS

    reply = "".join(p["text"] for p in task["artifacts"][0]["parts"])
    assert reply.startswith("Echo: …y") and reply.endswith(" [input] + the end"), reply[-80:]
    assert len(reply) == len("Echo: ") + MAX_KEPT_CHARS + len(" + the end")
    head = next(i for i in partition(local_stack, task_id) if i["sk"]["S"] == "H")
    assert len(head["flowState"]["S"].encode()) < limits.MAX_FLOW_STATE_BYTES
    history = alice.get(task_id).json["history"]
    users = [m for m in history if m["role"] == "ROLE_USER"]
    assert len(users) == 8  # each whole, in the bucket
    assert len(stored_object(local_stack, users[3]["parts"][0]["url"])) > 100_000
    assert_log_consistent(local_stack, task_id)
