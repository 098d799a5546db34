"""The executor on Step Functions: one execution per flow step; and the delegations' timer."""

from __future__ import annotations

import json
import re
from typing import Any

from a2a_serverless.core.executor import TurnContext, execution_name
from a2a_serverless.observability import annotate

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class StepFunctionsExecutor:
    """Starts one execution per flow step; a step that asks for another starts the next one itself
    (flows/runtime.py). Cancel never stops an execution (EXPRESS has no StopExecution): the step
    sees it at its next write (FlowCanceled) and starts no next step."""

    def __init__(self, client: Any, state_machine_arn: str) -> None:
        self._sfn = client
        self._arn = state_machine_arn

    def start(
        self, task_id: str, turn: int, context: TurnContext | None = None, step: int = 0
    ) -> str:
        """Start the execution of one step of the turn; its input carries the turn's context
        (the flow's steps see it: the caller's principal, claims and scopes, the activated
        extensions), the same for every step so that a repeated start has the same input."""
        name = execution_name(task_id, turn, step)
        payload: dict[str, Any] = {"taskId": task_id, "turn": turn, "step": step}
        if context is not None:
            payload.update(context.wire())
        annotate(task_id=task_id, turn=turn)  # the request's later log lines name the task
        try:
            self._sfn.start_execution(
                stateMachineArn=self._arn,
                name=name,
                input=json.dumps(payload),
            )
        except self._sfn.exceptions.ExecutionAlreadyExists:
            # STANDARD: started before (a retried start). EXPRESS does not refuse a name: the
            # step runs again, which steps tolerate (at-least-once).
            pass
        return name

    def start_action(self, task_id: str, turn: int, action: str) -> str:
        """Start the worker's `action` for the task in an execution of the flow state machine,
        named `{taskId}-{turn}-{action}` (a repeated start of it is refused under STANDARD)."""
        name = f"{task_id}-{turn}-{action}"
        annotate(task_id=task_id, turn=turn)
        try:
            self._sfn.start_execution(
                stateMachineArn=self._arn,
                name=name,
                input=json.dumps({"action": action, "taskId": task_id, "turn": turn}),
            )
        except self._sfn.exceptions.ExecutionAlreadyExists:
            pass
        return name


class StepFunctionsTimer:
    """One execution of the delegations' timer state machine per delegation round: it waits
    `waitSeconds` (nothing runs meanwhile), then invokes the worker's check of the round, and
    waits again while the check names a wait."""

    def __init__(self, client: Any, state_machine_arn: str) -> None:
        self._sfn = client
        self._arn = state_machine_arn

    def start_wait(self, task_id: str, round: str, wait_seconds: int) -> str:
        """Start the round's wait of `wait_seconds`; its execution is named after the task and
        round, `{taskId}-d{round}` (the round's dot as `_`): a repeated start is harmless."""
        name = wait_name(task_id, round)
        payload = {
            "taskId": task_id,
            "round": round,
            "next": {"waitSeconds": max(0, int(wait_seconds))},
        }
        annotate(task_id=task_id)
        try:
            self._sfn.start_execution(
                stateMachineArn=self._arn, name=name, input=json.dumps(payload)
            )
        except self._sfn.exceptions.ExecutionAlreadyExists:
            pass  # the round's wait was started before (a retried step)
        return name

    def stop_wait(self, task_id: str, round: str) -> None:
        """Stop the round's wait if it is still running (a stopped wait bills nothing more)."""
        machine = self._arn.replace(":stateMachine:", ":execution:", 1)
        try:
            self._sfn.stop_execution(executionArn=f"{machine}:{wait_name(task_id, round)}")
        except self._sfn.exceptions.ExecutionDoesNotExist:
            pass


def wait_name(task_id: str, round: str) -> str:
    """The execution name of a round's wait: letters, digits, - and _ only, as Step Functions
    asks of executions whose state machine logs to CloudWatch Logs."""
    return f"{task_id}-d{_NAME_UNSAFE.sub('_', round)}"
