"""The executor on Step Functions: one execution per flow step."""

from __future__ import annotations

import json
from typing import Any

from a2a_serverless.core.executor import TurnContext, execution_name
from a2a_serverless.observability import annotate


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
