"""One execution per flow step, read from the translated template.

- The state machine has no loop: RunStep ends the execution (a step that asks for another
  starts that step's execution itself), and its Catch goes to MarkFailed, which ends it too.
  AWS bills STANDARD per state entered, retries included: a single-step turn is 1 transition,
  2 when it fails.
- FlowWorkerFunction may start executions of the state machine, named by its fixed name (a Ref
  would close a circle: the state machine's definition references the function).
- EXPRESS: the execution's 5 minutes cannot be caught (the task would stay working), so the
  step, RunStep's retries and MarkFailed must fit in them, in the worst case.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.template.sam import load_sam, state_machine_definition, translate

EXPRESS_LIMIT_S = 300
# What the worst case leaves free for what this sum does not see (cold starts, scheduling).
EXPRESS_MARGIN_S = 30
# A failed or throttled attempt returns at once (Lambda refuses or errs before running the
# step); counted generously. MarkFailed reads and writes the task header: well under this.
ATTEMPT_OVERHEAD_S = 2
MARK_FAILED_RUN_S = 3

MACHINE_NAME = {"Fn::Sub": "${AWS::StackName}-flow-${WorkflowType}"}
MACHINE_ARN = {
    "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
    "stateMachine:${AWS::StackName}-flow-${WorkflowType}"
}
# A delegating step starts its round's timer, named the same way (test_delegation.py).
TIMER_ARN = {
    "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
    "stateMachine:${AWS::StackName}-delegations"
}


def _states(cfn: dict[str, Any]) -> dict[str, Any]:
    definition = state_machine_definition(cfn, "FlowStateMachine")
    assert definition["StartAt"] == "RunStep"
    return definition["States"]


def _entered_on_paths(
    states: dict[str, Any], start: str = "RunStep", seen: tuple[str, ...] = ()
) -> list[list[str]]:
    """Every path of states an execution can enter (retries aside), from StartAt to an end."""
    assert start not in seen, f"a loop through {start}"
    state = states[start]
    nexts = [state["Next"]] if "Next" in state else []
    nexts += [c["Next"] for c in state.get("Catch", [])]
    nexts += [c["Next"] for c in state.get("Choices", [])]
    nexts += [state["Default"]] if "Default" in state else []
    paths = [[start]] if state.get("End") or state["Type"] in ("Succeed", "Fail") else []
    for following in nexts:
        assert following in states, following  # no dangling target
        paths += [[start, *rest] for rest in _entered_on_paths(states, following, (*seen, start))]
    return paths


def _waits(retrier: dict[str, Any]) -> float:
    """The seconds a retrier waits in all, its attempts used up."""
    interval = retrier.get("IntervalSeconds", 1)
    rate = retrier.get("BackoffRate", 2.0)
    cap = retrier.get("MaxDelaySeconds", float("inf"))
    return sum(min(interval * rate**n, cap) for n in range(retrier.get("MaxAttempts", 3)))


def _express_worst_case_s(cfn: dict[str, Any], step_timeout: int) -> float:
    """RunStep: one full step, every retrier's attempts used up; then MarkFailed with its
    own retries. (Assumes at most one attempt of a step runs long: a re-run of a step that
    saved its outcome returns at once.)"""
    states = _states(cfn)
    run, mark = states["RunStep"], states["MarkFailed"]
    retries = run["Retry"]
    attempts = sum(r.get("MaxAttempts", 3) for r in retries)
    run_s = step_timeout + sum(_waits(r) for r in retries) + attempts * ATTEMPT_OVERHEAD_S
    mark_attempts = 1 + sum(r.get("MaxAttempts", 3) for r in mark.get("Retry", []))
    mark_s = sum(_waits(r) for r in mark.get("Retry", [])) + mark_attempts * MARK_FAILED_RUN_S
    return run_s + mark_s


def _worker_timeouts(cfn: dict[str, Any]) -> tuple[int, int]:
    """FlowWorkerFunction's timeout (EXPRESS, STANDARD)."""
    timeout = cfn["Resources"]["FlowWorkerFunction"]["Properties"]["Timeout"]
    condition, express, standard = timeout["Fn::If"]
    assert cfn["Conditions"][condition] == {"Fn::Equals": [{"Ref": "WorkflowType"}, "EXPRESS"]}
    return int(express), int(standard)


def _mentions(value: Any, logical_id: str) -> bool:
    """Whether an intrinsic in `value` depends on the resource `logical_id`."""
    if isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and arg == logical_id:
                return True
            if key == "Fn::GetAtt" and (arg[0] if isinstance(arg, list) else arg.split(".")[0]) == (
                logical_id
            ):
                return True
            if key == "Fn::Sub":
                text = arg[0] if isinstance(arg, list) else arg
                if "${" + logical_id + "}" in text or "${" + logical_id + "." in text:
                    return True
            if _mentions(arg, logical_id):
                return True
        return False
    if isinstance(value, list):
        return any(_mentions(v, logical_id) for v in value)
    return False


# -- the definition --------------------------------------------------------------------------


def test_a_step_is_one_state_entered_and_two_when_it_fails(cfn: dict[str, Any]) -> None:
    states = _states(cfn)
    assert set(states) == {"RunStep", "MarkFailed"}
    assert states["RunStep"]["End"] is True and "Next" not in states["RunStep"]
    assert [c["Next"] for c in states["RunStep"]["Catch"]] == ["MarkFailed"]
    assert states["MarkFailed"]["End"] is True
    paths = _entered_on_paths(states)
    assert sorted(paths, key=len) == [["RunStep"], ["RunStep", "MarkFailed"]]


def test_the_path_walk_sees_a_loop() -> None:
    looping = {
        "RunStep": {"Type": "Task", "Next": "More"},
        "More": {"Type": "Choice", "Choices": [{"Next": "RunStep"}], "Default": "Done"},
        "Done": {"Type": "Succeed"},
    }
    try:
        _entered_on_paths(looping)
    except AssertionError:
        return
    raise AssertionError("a loop through a Choice went unnoticed")


# -- naming and IAM ----------------------------------------------------------------------------


def test_the_worker_names_the_state_machine_by_its_fixed_name(cfn: dict[str, Any]) -> None:
    machine = cfn["Resources"]["FlowStateMachine"]["Properties"]
    # The type in the name: changing WorkflowType replaces the state machine, which a fixed
    # name would forbid unless the name changes too.
    assert machine["StateMachineName"] == MACHINE_NAME
    worker = cfn["Resources"]["FlowWorkerFunction"]["Properties"]
    assert worker["Environment"]["Variables"]["STATE_MACHINE_ARN"] == MACHINE_ARN
    role = cfn["Resources"][worker["Role"]["Fn::GetAtt"][0]]
    granted = [
        statement["Resource"]
        for policy in role["Properties"]["Policies"]
        for statement in policy["PolicyDocument"]["Statement"]
        if "states:StartExecution" in statement["Action"]
    ]
    assert granted == [MACHINE_ARN, TIMER_ARN]
    # The functions that start a turn's first step name the same state machine by Ref.
    for name in ("SendMessageFunction", "StreamFunction"):
        env = cfn["Resources"][name]["Properties"]["Environment"]["Variables"]
        assert env["STATE_MACHINE_ARN"] == {"Ref": "FlowStateMachine"}, name


def test_the_worker_does_not_depend_on_the_state_machine(cfn: dict[str, Any]) -> None:
    worker = cfn["Resources"]["FlowWorkerFunction"]
    role = cfn["Resources"][worker["Properties"]["Role"]["Fn::GetAtt"][0]]
    assert not _mentions(worker, "FlowStateMachine")
    assert not _mentions(role, "FlowStateMachine")
    assert "FlowStateMachine" not in json.dumps(worker.get("DependsOn", []))
    # ... while the state machine depends on the worker (its definition invokes it).
    assert _mentions(cfn["Resources"]["FlowStateMachine"], "FlowWorkerFunction")


def test_the_dependency_check_sees_a_ref() -> None:
    assert _mentions({"Environment": {"A": {"Ref": "FlowStateMachine"}}}, "FlowStateMachine")
    assert _mentions({"A": {"Fn::Sub": "x:${FlowStateMachine.Name}"}}, "FlowStateMachine")
    assert not _mentions({"A": {"Fn::Sub": "x:${AWS::StackName}-flow"}}, "FlowStateMachine")


# -- timeouts ------------------------------------------------------------------------------------


def test_an_express_turn_step_ends_inside_five_minutes_even_failing(cfn: dict[str, Any]) -> None:
    express, standard = _worker_timeouts(cfn)
    worst = _express_worst_case_s(cfn, express)
    assert worst <= EXPRESS_LIMIT_S - EXPRESS_MARGIN_S, worst
    assert express >= 120  # still room for a real step (a model's answer)
    assert standard == 900  # STANDARD steps may use all of Lambda's 15 minutes


def test_the_budget_check_catches_a_step_too_long_for_express(cfn: dict[str, Any]) -> None:
    assert _express_worst_case_s(cfn, 280) > EXPRESS_LIMIT_S - EXPRESS_MARGIN_S


def test_the_worker_times_out_before_the_task_state(cfn: dict[str, Any]) -> None:
    """The Lambda timeout ends a step first (Sandbox.Timedout, caught: the task fails with a
    message); the Task's TimeoutSeconds is only a backstop above it."""
    express, standard = _worker_timeouts(cfn)
    run = _states(cfn)["RunStep"]
    assert run["TimeoutSeconds"] > max(express, standard)
    (catch,) = run["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]  # States.Timeout and Sandbox.Timedout


def test_a_longer_express_step_in_the_template_fails_the_budget() -> None:
    sam = copy.deepcopy(load_sam())
    timeout = sam["Resources"]["FlowWorkerFunction"]["Properties"]["Timeout"]
    timeout["Fn::If"][1] = 290
    cfn = translate(sam)
    express, _ = _worker_timeouts(cfn)
    assert _express_worst_case_s(cfn, express) > EXPRESS_LIMIT_S - EXPRESS_MARGIN_S
