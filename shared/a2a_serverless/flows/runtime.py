"""Runs one flow step for the state machine (FlowWorkerFunction).

Input  {"taskId", "turn", "step"}                  -> {"taskId", "turn", "step", "continue"}
Input  {"action": "fail", "taskId", "turn", "error"} marks the turn failed (the Catch path).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from a2a_serverless.core.tasklog import StateMoved, transition
from a2a_serverless.flows.base import (
    Flow,
    FlowCanceled,
    OutcomeKind,
    StepContext,
    agent_message,
)
from a2a_serverless.models import (
    TERMINAL_STATES,
    Artifact,
    Message,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    utcnow,
)
from a2a_serverless.observability import Metric, annotate, emit, task_ended
from a2a_serverless.store import ConflictError, TaskRecord, TaskStore

logger = logging.getLogger(__name__)

# Largest text carried by one artifact event (64 Ki characters are at most 256 KiB of
# UTF-8); longer text is split across append chunks so no event item approaches
# DynamoDB's 400 KB item limit. Other parts are measured in encoded bytes.
MAX_CHUNK_CHARS = 64 * 1024
MAX_PART_BYTES = 300 * 1024


class LogEmitter:
    """Appends a step's updates to the event log; sees cancellation on its next write."""

    def __init__(self, store: TaskStore, record: TaskRecord, seq: int) -> None:
        self._store = store
        self._record = record
        self.seq = seq

    def _append(self, event: StreamResponse) -> None:
        while True:
            try:
                self._store.append_event(self._record.task_id, self.seq + 1, event)
                self.seq += 1
                return
            except ConflictError:
                # Someone else wrote at this seq: a cancel (or another writer). Look again.
                fresh = self._store.get_record(self._record.task_id)
                if (
                    fresh is None
                    or fresh.state is not TaskState.WORKING
                    or fresh.turn != self._record.turn
                ):
                    raise FlowCanceled() from None
                self.seq = self._store.last_seq(self._record.task_id)

    def status(self, message: Message) -> None:
        self._append(
            StreamResponse(
                status_update=TaskStatusUpdateEvent(
                    task_id=self._record.task_id,
                    context_id=self._record.context_id,
                    status=TaskStatus(state=TaskState.WORKING, message=message, timestamp=utcnow()),
                )
            )
        )

    def artifact(
        self,
        parts: list[Part],
        *,
        artifact_id: str,
        name: str | None,
        description: str | None,
        append: bool,
        last_chunk: bool,
        metadata: dict[str, Any] | None,
    ) -> None:
        pieces = _split_parts(parts)
        for index, piece in enumerate(pieces):
            artifact = Artifact(
                artifact_id=artifact_id,
                name=name,
                description=description,
                parts=piece,
                metadata=metadata,
            )
            self._append(
                StreamResponse(
                    artifact_update=TaskArtifactUpdateEvent(
                        task_id=self._record.task_id,
                        context_id=self._record.context_id,
                        artifact=artifact,
                        append=append or index > 0,
                        last_chunk=last_chunk and index == len(pieces) - 1,
                    )
                )
            )


def _split_parts(parts: list[Part]) -> list[list[Part]]:
    """Group parts into events that each stay well under the item size limit."""
    groups: list[list[Part]] = [[]]
    size = 0
    for part in parts:
        if part.text is not None and len(part.text) > MAX_CHUNK_CHARS:
            for start in range(0, len(part.text), MAX_CHUNK_CHARS):
                piece = part.model_copy(update={"text": part.text[start : start + MAX_CHUNK_CHARS]})
                groups.append([piece])
            groups.append([])
            size = 0
            continue
        part_size = len(part.model_dump_json().encode())
        if part_size > MAX_PART_BYTES:
            raise ValueError(
                f"an artifact part of {part_size} bytes is too large for one event; "
                "send large files as `url` parts"
            )
        if size + part_size > MAX_PART_BYTES and groups[-1]:
            groups.append([])
            size = 0
        groups[-1].append(part)
        size += part_size
    return [g for g in groups if g] or [[]]


class FlowWorker:
    """One step of one turn: load, run the flow, record the outcome."""

    def __init__(self, store: TaskStore, flow: Flow) -> None:
        self.store = store
        self.flow = flow

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("action") == "fail":
            return self.fail(event)
        task_id = str(event["taskId"])
        turn = int(event["turn"])
        step = int(event.get("step", 0))
        annotate(task_id=task_id, turn=turn, step=step)
        done = {"taskId": task_id, "turn": turn, "step": step, "continue": False}
        snapshot = self.store.get_snapshot(task_id, None)
        if snapshot is None:
            logger.warning("task %s not found", task_id)
            return done
        record = snapshot.record
        annotate(context_id=record.context_id)
        if record.turn != turn or record.state not in (TaskState.SUBMITTED, TaskState.WORKING):
            return done  # canceled, or a stale execution of an earlier turn
        seq = snapshot.seq
        if record.state is TaskState.SUBMITTED:
            try:
                _, seq = transition(self.store, record, TaskState.WORKING, seq=seq + 1)
            except StateMoved:
                return done
            record.state = TaskState.WORKING
            record.status_seq = seq
        user_messages = [m for m in snapshot.history if m.role.value == "ROLE_USER"]
        emitter = LogEmitter(self.store, record, seq)
        ctx = StepContext(
            task_id=task_id,
            context_id=record.context_id,
            turn=turn,
            step=step,
            message=user_messages[-1] if user_messages else snapshot.history[-1],
            history=snapshot.history,
            state=dict(record.flow_state),
            emitter=emitter,
            metadata=dict(record.metadata or {}),
        )
        started = time.perf_counter()
        try:
            outcome = self.flow.run_step(ctx)
        except FlowCanceled:
            return done
        finally:
            emit(Metric.STEP_DURATION, (time.perf_counter() - started) * 1000)
        if outcome.kind is OutcomeKind.NEXT_STEP:
            try:
                self.store.save_flow_state(task_id, turn, ctx.state)
            except ConflictError:
                return done
            return {**done, "step": step + 1, "continue": True}
        message = (
            agent_message(outcome.message, task_id, record.context_id)
            if outcome.message is not None
            else None
        )
        final = outcome.state or TaskState.COMPLETED
        try:
            # Conditional on WORKING at this turn: a cancel that got there first wins.
            transition(
                self.store,
                record,
                final,
                message=message,
                seq=emitter.seq + 1,
                flow_state=ctx.state,
            )
        except StateMoved:
            return done  # canceled while finishing: the cancel won (and counted itself)
        task_ended(final)
        return done

    def fail(self, event: dict[str, Any]) -> dict[str, Any]:
        """The state machine caught an error: the turn ends failed, with an explanation."""
        task_id = str(event["taskId"])
        turn = int(event["turn"])
        error = event.get("error") or {}
        error_name = str(error.get("Error", "Error"))[:100]
        annotate(task_id=task_id, turn=turn)
        logger.error("turn %s of task %s failed: %s", turn, task_id, error_name)
        record = self.store.get_record(task_id)
        if record is None or record.turn != turn:
            return {"taskId": task_id, "turn": turn, "continue": False}
        annotate(context_id=record.context_id)
        text = _failure_text(error_name)
        while record.state not in TERMINAL_STATES:
            try:
                transition(
                    self.store,
                    record,
                    TaskState.FAILED,
                    message=agent_message(text, task_id, record.context_id),
                    seq=self.store.last_seq(task_id) + 1,
                )
                task_ended(TaskState.FAILED)
                break
            except StateMoved as moved:
                if moved.record is None or moved.record.turn != turn:
                    break
                record = moved.record
        return {"taskId": task_id, "turn": turn, "continue": False}


def _failure_text(error_name: str) -> str:
    # Only the error class reaches the client: exception messages may carry secrets.
    if error_name in ("States.Timeout", "Sandbox.Timedout") or "Timeout" in error_name:
        return "The agent step timed out before finishing; the task was stopped."
    if error_name.startswith(("Lambda.", "States.", "Runtime.")):
        return f"The agent step crashed ({error_name}); the task was stopped."
    return f"The agent raised {error_name} while processing this task; the task was stopped."
