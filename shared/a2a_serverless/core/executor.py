"""Starting the executions of a turn's flow steps (Step Functions), one per step."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from a2a_serverless.models import Caller
from a2a_serverless.observability import annotate


@dataclass(frozen=True)
class TurnContext:
    """What a turn's flow steps are told about the send that started it: who sent it, and
    the extensions it activated. Travels in the execution's input (never a credential)."""

    caller: Caller
    extensions: tuple[str, ...] = ()
    # The SendMessageRequest's metadata of this turn (a follow-up's too; bounded in size by
    # the sender so the execution input stays far below Step Functions' 256 KB).
    metadata: dict[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"caller": self.caller.wire()}
        if self.extensions:
            out["extensions"] = list(self.extensions)
        if self.metadata:
            out["requestMetadata"] = self.metadata
        return out

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TurnContext | None:
        """The context an execution's input carries; None when it carries none (or an
        unreadable caller: an execution started before callers were passed on)."""
        try:
            caller = Caller.from_wire(data["caller"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        extensions = data.get("extensions")
        metadata = data.get("requestMetadata")
        return cls(
            caller,
            tuple(str(e) for e in extensions) if isinstance(extensions, list) else (),
            metadata if isinstance(metadata, dict) else None,
        )


def execution_name(task_id: str, turn: int, step: int = 0) -> str:
    """One execution per step: the name makes a repeated start of the same step idempotent
    under STANDARD (Step Functions refuses a second execution of a name). A turn's first
    execution keeps the turn's name, `{taskId}-{turn}` (the header records it)."""
    return f"{task_id}-{turn}" if step == 0 else f"{task_id}-{turn}-{step}"


class Executor(Protocol):
    def start(
        self, task_id: str, turn: int, context: TurnContext | None = None, step: int = 0
    ) -> str: ...


class StepFunctionsExecutor:
    """Starts one execution per flow step: the state machine runs that step and ends, and the
    worker whose step asks for another starts its execution (flows/runtime.py). No loop in
    the state machine, so a single-step turn is one state transition (two when it fails).

    Cancel never stops an execution: StopExecution does not exist for EXPRESS, and an
    execution is one step, whose run sees the cancel on its next write (FlowCanceled) and
    starts no next step."""

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
            # STANDARD: this step's execution was started before (a retried start, or a
            # re-run of the step before it). EXPRESS does not refuse a name: a repeated
            # start runs the step again, which steps tolerate (at-least-once, see runtime).
            pass
        return name
