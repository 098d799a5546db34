"""One execution per flow step, on the local stack's real state machine.

moto runs the template's definition (execute_state_machine); its execution history lists each
state entered, which is what AWS bills STANDARD for (state transitions, retries included).
- A single-step turn is one execution entering one state; a failing step two (MarkFailed).
- A 3-step turn is three executions, one state each, started by the worker of each step.
- A cancel during a multi-step turn stops it: the running step saves nothing, no next step's
  execution starts (no StopExecution: EXPRESS has none).
- A re-run of a step that asked for another starts no second execution of the next step.

moto names executions uniquely whatever the type; real EXPRESS does not, so what the last test
shows for EXPRESS is that the worker does not call again once the next step has finished.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from a2a_serverless.flows import Outcome, StepContext
from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import (
    A2A,
    event_log,
    executions,
    invoke_worker,
    sfn,
    status_states,
    wait_idle,
    wait_state,
)

HERE = "tests.integration.test_step_executions"
TYPES = ["STANDARD", "EXPRESS"]


# -- flows ----------------------------------------------------------------------------------------


def one_step(ctx: StepContext) -> Outcome:
    ctx.artifact(f"one step: {ctx.text}", artifact_id="out", last_chunk=True)
    return Outcome.completed("done")


def three_steps(ctx: StepContext) -> Outcome:
    """Steps 0, 1, 2: one artifact chunk each, the state counting the steps seen."""
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1
    ctx.artifact(f"step {ctx.step};", artifact_id="out", append=ctx.step > 0)
    if ctx.step < 2:
        return Outcome.next_step()
    return Outcome.completed(f"seen {ctx.state['seen']}")


def crashing(ctx: StepContext) -> Outcome:
    raise RuntimeError("the flow crashed")


class Gate:
    """Holds the gated flow's step 0 until the test lets it go on."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.go = threading.Event()


GATE = Gate()


def gated_steps(ctx: StepContext) -> Outcome:
    """Step 0 waits for the gate then asks for step 1 (writing nothing first: the cancel is
    seen by the save of its state); step 1 completes."""
    if ctx.step == 0:
        GATE.entered.set()
        GATE.go.wait(20)
        return Outcome.next_step()
    return Outcome.completed("step 1 ran")


# -- helpers --------------------------------------------------------------------------------------


@pytest.fixture
def gate() -> Iterator[Gate]:
    GATE.__init__()  # type: ignore[misc]  # fresh controls per test
    yield GATE
    GATE.go.set()  # never leave an execution waiting on a failed test


def _task_executions(stack: LocalStack, task_id: str) -> list[dict[str, Any]]:
    return sorted(
        (e for e in executions(stack) if e["name"].startswith(task_id)),
        key=lambda e: e["name"],
    )


def _entered(execution: dict[str, Any]) -> list[str]:
    """The states an execution entered, in order (its billed transitions on STANDARD)."""
    events = sfn().get_execution_history(executionArn=execution["executionArn"])["events"]
    return [
        e["stateEnteredEventDetails"]["name"] for e in events if e["type"].endswith("StateEntered")
    ]


def _finished(stack: LocalStack, task_id: str, states: set[str]) -> tuple[A2A, dict[str, Any]]:
    alice = A2A(stack, "alice")
    task = wait_state(alice, task_id, states)
    wait_idle(stack)
    return alice, task


# -- transitions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("workflow", TYPES)
def test_a_single_step_turn_is_one_state_transition(make_stack: Any, workflow: str) -> None:
    stack = make_stack(Flow=f"{HERE}:one_step", WorkflowType=workflow)
    task_id = A2A(stack).send("hi", blocking=False).task["id"]
    _finished(stack, task_id, {"TASK_STATE_COMPLETED"})
    (execution,) = _task_executions(stack, task_id)
    assert execution["name"] == f"{task_id}-1"
    assert execution["status"] == "SUCCEEDED"
    assert _entered(execution) == ["RunStep"]


@pytest.mark.parametrize("workflow", TYPES)
def test_a_failing_step_is_two(make_stack: Any, workflow: str) -> None:
    stack = make_stack(Flow=f"{HERE}:crashing", WorkflowType=workflow)
    task_id = A2A(stack).send("hi", blocking=False).task["id"]
    _, task = _finished(stack, task_id, {"TASK_STATE_FAILED"})
    assert "RuntimeError" in task["status"]["message"]["parts"][0]["text"]
    (execution,) = _task_executions(stack, task_id)
    assert _entered(execution) == ["RunStep", "MarkFailed"]


@pytest.mark.parametrize("workflow", TYPES)
def test_a_three_step_turn_is_three_executions_of_one_state(make_stack: Any, workflow: str) -> None:
    stack = make_stack(Flow=f"{HERE}:three_steps", WorkflowType=workflow)
    alice = A2A(stack)
    task_id = alice.send("go", blocking=False).task["id"]
    _, task = _finished(stack, task_id, {"TASK_STATE_COMPLETED"})
    assert task["status"]["message"]["parts"][0]["text"] == "seen 3"
    assert [p["text"] for p in task["artifacts"][0]["parts"]] == [
        "step 0;",
        "step 1;",
        "step 2;",
    ]
    found = _task_executions(stack, task_id)
    assert [e["name"] for e in found] == [f"{task_id}-1", f"{task_id}-1-1", f"{task_id}-1-2"]
    assert all(e["status"] == "SUCCEEDED" for e in found)
    assert [_entered(e) for e in found] == [["RunStep"]] * 3


# -- cancel ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("workflow", TYPES)
def test_cancel_during_a_multi_step_turn_starts_no_next_step(
    make_stack: Any, gate: Gate, workflow: str
) -> None:
    stack = make_stack(Flow=f"{HERE}:gated_steps", WorkflowType=workflow)
    alice = A2A(stack)
    task_id = alice.send("go", blocking=False).task["id"]
    assert gate.entered.wait(20), "step 0 never ran"
    assert alice.cancel(task_id).json["status"]["state"] == "TASK_STATE_CANCELED"
    gate.go.set()  # step 0 asks for step 1 now: its save loses to the cancel
    wait_idle(stack)
    (execution,) = _task_executions(stack, task_id)  # step 1's never started
    assert execution["status"] == "SUCCEEDED"  # the step ended quietly, no MarkFailed
    assert _entered(execution) == ["RunStep"]
    assert status_states(event_log(stack, task_id))[-1] == "TASK_STATE_CANCELED"
    assert alice.get(task_id).json["status"]["state"] == "TASK_STATE_CANCELED"


# -- re-runs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("workflow", TYPES)
def test_a_rerun_after_the_turn_ended_starts_nothing(make_stack: Any, workflow: str) -> None:
    """Every step of a finished 3-step turn runs again (late STANDARD retries, EXPRESS
    redeliveries): none writes or starts anything."""
    stack = make_stack(Flow=f"{HERE}:three_steps", WorkflowType=workflow)
    task_id = A2A(stack).send("go", blocking=False).task["id"]
    _finished(stack, task_id, {"TASK_STATE_COMPLETED"})
    before = _task_executions(stack, task_id)
    log = event_log(stack, task_id)
    for execution in before:
        answer = invoke_worker(stack, _input(execution))
        assert answer["continue"] is False  # the turn is over: nothing runs, nothing starts
    assert _task_executions(stack, task_id) == before
    assert event_log(stack, task_id) == log


@pytest.mark.parametrize("workflow", TYPES)
def test_a_rerun_while_the_next_step_runs_starts_it_once(
    make_stack: Any, gate: Gate, workflow: str
) -> None:
    """Step 0 ran and started step 1, which is held; step 0 runs again (its outcome saved, step
    1 not finished): it starts step 1 again, with the same name and input, and the running
    execution answers for it."""
    stack = make_stack(Flow=f"{HERE}:held_second_step", WorkflowType=workflow)
    alice = A2A(stack)
    task_id = alice.send("go", blocking=False).task["id"]
    assert gate.entered.wait(20), "step 1 never ran"
    step0, step1 = _task_executions(stack, task_id)
    assert step1["name"] == f"{task_id}-1-1" and step1["status"] == "RUNNING"
    log = event_log(stack, task_id)
    assert invoke_worker(stack, _input(step0))["continue"] is True
    assert [e["name"] for e in _task_executions(stack, task_id)] == [step0["name"], step1["name"]]
    assert event_log(stack, task_id) == log  # the re-run of step 0 wrote nothing
    gate.go.set()
    wait_state(alice, task_id, {"TASK_STATE_COMPLETED"})
    wait_idle(stack)
    found = _task_executions(stack, task_id)
    assert [e["name"] for e in found] == [step0["name"], step1["name"]]
    assert all(e["status"] == "SUCCEEDED" for e in found)


def held_second_step(ctx: StepContext) -> Outcome:
    """Step 0 asks for step 1 at once; step 1 waits for the gate, then completes."""
    if ctx.step == 0:
        return Outcome.next_step()
    GATE.entered.set()
    GATE.go.wait(20)
    return Outcome.completed("step 1 ran")


def _input(execution: dict[str, Any]) -> dict[str, Any]:
    """The worker's event for an execution's step: its input, as the state machine passes it."""
    described = sfn().describe_execution(executionArn=execution["executionArn"])
    return dict(json.loads(described["input"]))
