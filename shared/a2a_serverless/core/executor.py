"""Starting and stopping a turn's execution (Step Functions)."""

from __future__ import annotations

import contextlib
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


def execution_name(task_id: str, turn: int) -> str:
    """One execution per turn; the name makes a retried start idempotent."""
    return f"{task_id}-{turn}"


class Executor(Protocol):
    def start(self, task_id: str, turn: int, context: TurnContext | None = None) -> str: ...

    def stop(self, name: str, cause: str) -> None: ...


class StepFunctionsExecutor:
    def __init__(self, client: Any, state_machine_arn: str) -> None:
        self._sfn = client
        self._arn = state_machine_arn

    def _execution_arn(self, name: str) -> str:
        # arn:aws:states:r:a:stateMachine:SM  ->  arn:aws:states:r:a:execution:SM:name
        return self._arn.replace(":stateMachine:", ":execution:", 1) + ":" + name

    def start(self, task_id: str, turn: int, context: TurnContext | None = None) -> str:
        """Start the turn's execution; its input carries the turn's context (the flow's steps
        see it: the caller's principal, claims and scopes, the activated extensions)."""
        name = execution_name(task_id, turn)
        payload: dict[str, Any] = {"taskId": task_id, "turn": turn, "step": 0}
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
            pass  # a retried start of the same turn: the first one is running
        return name

    def stop(self, name: str, cause: str) -> None:
        with contextlib.suppress(self._sfn.exceptions.ExecutionDoesNotExist):
            self._sfn.stop_execution(
                executionArn=self._execution_arn(name), error="TaskCanceled", cause=cause
            )
