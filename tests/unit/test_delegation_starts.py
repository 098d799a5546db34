"""The delegations' Step Functions starts: the timer's wait (aws/step_functions.py
StepFunctionsTimer) and a worker action's execution (StepFunctionsExecutor.start_action)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from a2a_serverless.aws.step_functions import StepFunctionsExecutor, StepFunctionsTimer

TASK = "0b0e5e4e-7f6c-4b47-9d0a-2b1f6f3c9a11"
TIMER = "arn:aws:states:us-east-1:123456789012:stateMachine:s-delegations"
FLOW = "arn:aws:states:us-east-1:123456789012:stateMachine:s-flow-STANDARD"
# Step Functions' execution names: 1-80 characters; letters, digits, - and _ keep them usable
# in CloudWatch Logs.
NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")


class AlreadyExists(Exception):
    pass


class DoesNotExist(Exception):
    pass


class StubStepFunctions:
    """Records start_execution calls, refusing a name it has seen (as STANDARD does), and
    stop_execution calls of the executions it started."""

    class exceptions:
        ExecutionAlreadyExists = AlreadyExists
        ExecutionDoesNotExist = DoesNotExist

    def __init__(self) -> None:
        self.starts: list[dict[str, Any]] = []
        self.stopped: list[str] = []

    def stop_execution(self, executionArn: str) -> dict[str, Any]:
        machine, _, name = executionArn.replace(":execution:", ":stateMachine:").rpartition(":")
        if not any(s["stateMachineArn"] == machine and s["name"] == name for s in self.starts):
            raise DoesNotExist(executionArn)
        self.stopped.append(executionArn)
        return {}

    def start_execution(self, **kwargs: Any) -> dict[str, Any]:
        if any(s["name"] == kwargs["name"] for s in self.starts):
            raise AlreadyExists(kwargs["name"])
        self.starts.append(kwargs)
        return {"executionArn": f"{kwargs['stateMachineArn']}:{kwargs['name']}"}


def test_a_wait_starts_the_timer_with_the_round_and_its_seconds() -> None:
    sfn = StubStepFunctions()
    name = StepFunctionsTimer(sfn, TIMER).start_wait(TASK, "2.1", 45)
    (start,) = sfn.starts
    assert start["stateMachineArn"] == TIMER
    assert start["name"] == name == f"{TASK}-d2_1"
    assert NAME.fullmatch(name)
    assert json.loads(start["input"]) == {
        "taskId": TASK,
        "round": "2.1",
        "next": {"waitSeconds": 45},
    }


def test_a_rounds_wait_is_started_once() -> None:
    sfn = StubStepFunctions()
    timer = StepFunctionsTimer(sfn, TIMER)
    names = {timer.start_wait(TASK, "12.3", 30) for _ in range(3)}  # a retried step
    assert names == {f"{TASK}-d12_3"} and len(sfn.starts) == 1
    assert timer.start_wait(TASK, "12.4", 30) != timer.start_wait(TASK, "13.3", 30)


def test_a_negative_wait_is_no_wait() -> None:
    sfn = StubStepFunctions()
    StepFunctionsTimer(sfn, TIMER).start_wait(TASK, "1.0", -5)
    assert json.loads(sfn.starts[0]["input"])["next"]["waitSeconds"] == 0


def test_stopping_a_wait_stops_the_rounds_execution_if_there_is_one() -> None:
    sfn = StubStepFunctions()
    timer = StepFunctionsTimer(sfn, TIMER)
    timer.start_wait(TASK, "2.1", 45)
    timer.stop_wait(TASK, "2.1")
    execution = f"arn:aws:states:us-east-1:123456789012:execution:s-delegations:{TASK}-d2_1"
    assert sfn.stopped == [execution]
    timer.stop_wait(TASK, "9.9")  # never started: nothing to stop, no error
    assert sfn.stopped == [execution]


def test_an_action_runs_in_an_execution_named_after_the_task_turn_and_action() -> None:
    sfn = StubStepFunctions()
    executor = StepFunctionsExecutor(sfn, FLOW)
    name = executor.start_action(TASK, 3, "cancel_delegations")
    assert name == f"{TASK}-3-cancel_delegations"
    (start,) = sfn.starts
    assert start["stateMachineArn"] == FLOW and start["name"] == name
    assert json.loads(start["input"]) == {
        "action": "cancel_delegations",
        "taskId": TASK,
        "turn": 3,
    }
    # A repeated start is harmless: the execution exists.
    assert executor.start_action(TASK, 3, "cancel_delegations") == name
    assert len(sfn.starts) == 1


@pytest.mark.parametrize("turn", [1, 99])
def test_an_action_never_takes_a_steps_name(turn: int) -> None:
    sfn = StubStepFunctions()
    executor = StepFunctionsExecutor(sfn, FLOW)
    steps = {executor.start(TASK, turn, None, step) for step in range(3)}
    assert executor.start_action(TASK, turn, "cancel_delegations") not in steps
