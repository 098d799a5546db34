"""Starting the executions of a turn's flow steps, one per step: what the executor is told
(aws/step_functions.py starts them on Step Functions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from a2a_serverless.models import Caller


@dataclass(frozen=True)
class TurnContext:
    """What a turn's flow steps are told about the send that started it: who sent it, and
    the extensions it activated. Travels in the execution's input (never a credential)."""

    caller: Caller
    extensions: tuple[str, ...] = ()
    # The SendMessageRequest's metadata of this turn (a follow-up's too; bounded in size by
    # the sender so the execution input stays far below Step Functions' 256 KB).
    metadata: dict[str, Any] | None = None
    # The stack's public base URL the turn's send came in at (where remote agents a step
    # delegates to send their push notifications).
    base_url: str = ""

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"caller": self.caller.wire()}
        if self.extensions:
            out["extensions"] = list(self.extensions)
        if self.metadata:
            out["requestMetadata"] = self.metadata
        if self.base_url:
            out["baseUrl"] = self.base_url
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
        base_url = data.get("baseUrl")
        return cls(
            caller,
            tuple(str(e) for e in extensions) if isinstance(extensions, list) else (),
            metadata if isinstance(metadata, dict) else None,
            base_url if isinstance(base_url, str) else "",
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

    def start_action(self, task_id: str, turn: int, action: str) -> str:
        """Run the worker's `action` ("cancel_delegations") for the task in an execution of
        its own, named after the task, turn and action (a repeated start is harmless)."""
        ...


class Timer(Protocol):
    """Wakes the worker later without anything running meanwhile (a Step Functions Wait):
    it is invoked with {"action": "check_delegations", "taskId", "round"} after
    `wait_seconds`, and again after each `waitSeconds` its answer names."""

    def start_wait(self, task_id: str, round: str, wait_seconds: int) -> str:
        """Start the round's one wait (its name comes from the task and round: a repeated
        start of it is refused, harmlessly)."""
        ...

    def stop_wait(self, task_id: str, round: str) -> None:
        """Stop the round's wait (the round woke its flow before it ended): a stopped wait
        bills no more transitions. Best effort."""
        ...
