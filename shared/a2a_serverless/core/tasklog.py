"""Appending to a task's event log: ordered, conditional, one winner per race."""

from __future__ import annotations

from typing import Any

from a2a_serverless.models import (
    Message,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    utcnow,
)
from a2a_serverless.store import (
    ConflictError,
    Dedupe,
    StatusChange,
    TaskRecord,
    TaskStore,
    status_update,
)

MAX_ATTEMPTS = 8


class StateMoved(Exception):
    """The task left the state a transition expected; `record` is the fresh header."""

    def __init__(self, record: TaskRecord | None) -> None:
        super().__init__("task state moved")
        self.record = record


def status_event(record: TaskRecord, status: TaskStatus) -> StreamResponse:
    return status_update(record.task_id, record.context_id, status)


def transition(
    store: TaskStore,
    record: TaskRecord,
    state: TaskState,
    *,
    message: Message | None = None,
    seq: int | None = None,
    turn: int | None = None,
    execution: str | None = None,
    flow_state: dict[str, Any] | None = None,
    user_message: Message | None = None,
    dedupe: Dedupe | None = None,
    push_config: TaskPushNotificationConfig | None = None,
) -> tuple[TaskStatus, int]:
    """Move `record` from its current state to `state`, appending the status event.

    Succeeds only if the task is still in `record.state` at `record.turn`; otherwise
    raises StateMoved with the fresh header. A lost race on the event seq (a concurrent
    chunk) is retried at the next seq. Returns the new status and its seq.
    """
    status = TaskStatus(state=state, message=message, timestamp=utcnow())
    history_message = user_message or message
    next_seq = seq if seq is not None else record.status_seq + 1
    for _ in range(MAX_ATTEMPTS):
        change = StatusChange(
            task_id=record.task_id,
            owner=record.owner,
            context_id=record.context_id,
            from_state=record.state,
            to_status=status,
            seq=next_seq,
            turn=turn if turn is not None else record.turn,
            event=status_event(record, status),
            history_message=history_message,
            history_index=record.history_count + 1,
            dedupe=dedupe,
            execution=execution,
            flow_state=flow_state,
            expected_turn=record.turn,
            # The turn's inline webhook: its events on, from this status.
            push_config=push_config.for_events_after(next_seq - 1) if push_config else None,
        )
        try:
            store.apply_status(change)
            return status, next_seq
        except ConflictError as conflict:
            if "header" in conflict.failed or "dedupe" in conflict.failed:
                fresh = store.get_record(record.task_id)
                if (
                    fresh is None
                    or "dedupe" in conflict.failed
                    or fresh.state != record.state
                    or fresh.turn != record.turn
                ):
                    raise StateMoved(fresh) from conflict
                record = fresh  # only the history count moved: retry on the fresh header
            next_seq = store.last_seq(record.task_id) + 1
    raise StateMoved(store.get_record(record.task_id))
