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
