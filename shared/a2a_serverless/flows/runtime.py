"""Runs one flow step for the state machine (FlowWorkerFunction).

Input  {"taskId", "turn", "step", "caller"?, "extensions"?, "requestMetadata"?}
       -> the same with "continue" (whether a next step's execution was started)
Input  {"action": "fail", "taskId", "turn", "error"} marks the turn failed (the Catch path).
Input  {"action": "check_delegations", "taskId", "round"}: the delegation timer's visit
       -> {"taskId", "round", "waitSeconds"} (until the next visit; 0: no more visits)
Input  {"action": "cancel_delegations", "taskId", "turn"}: cancel the remote tasks of a
       canceled task.

A step past a storage bound (store.TooLarge) ends its turn FAILED, naming the bound. A step
that asks for another saves its state, then starts the next step's execution itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a_serverless.core.delegation import Delegator, parse_round, round_key
from a2a_serverless.core.executor import Executor, TurnContext
from a2a_serverless.core.tasklog import StateMoved, transition
from a2a_serverless.flows.base import (
    DEFAULT_FETCH_MAX_BYTES,
    ArtifactChunk,
    DelegationResult,
    Flow,
    FlowCanceled,
    Outcome,
    OutcomeKind,
    StepContext,
    UrlOpener,
    restore_message,
    stored_state,
)
from a2a_serverless.flows.emitter import LogEmitter
from a2a_serverless.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    Caller,
    Message,
    Role,
    TaskState,
    agent_message,
)
from a2a_serverless.observability import Metric, annotate, emit, task_ended
from a2a_serverless.store import ConflictError, TaskRecord, TaskStore, TooLarge
from a2a_serverless.store.content import ContentStore

logger = logging.getLogger(__name__)

# A step runs only while its turn is live: submitted (first step) or working.
ACTIVE_STATES = (
    frozenset(TaskState) - TERMINAL_STATES - INTERRUPTED_STATES - {TaskState.UNSPECIFIED}
)


@dataclass(frozen=True)
class _Step:
    """Which step of which turn the state machine asked for."""

    task_id: str
    turn: int
    step: int
    # Who sent the turn's message, the extensions it activated, its request metadata: set by
    # the send that started the execution, handed on from step to step unchanged.
    context: TurnContext | None = None

    def answer(self, go_on: bool = False) -> dict[str, Any]:
        """The state machine's input for its next choice (another step, or the end)."""
        step = self.step + 1 if go_on else self.step
        return {
            **(self.context.wire() if self.context else {}),
            "taskId": self.task_id,
            "turn": self.turn,
            "step": step,
            "continue": go_on,
        }


@dataclass
class _Turn:
    """A turn that may run this step: its record (now working), its history, and the
    emitter that appends the step's updates after the last event so far."""

    record: TaskRecord
    history: list[Message]
    emitter: LogEmitter
    artifacts: list[Artifact]


def _step_done(record: TaskRecord, step: _Step) -> bool:
    """Whether this step's outcome is already saved: this run is a retry or a redelivery."""
    return record.flow_step is not None and record.flow_step >= (step.turn, step.step)


def _caller_of(step: _Step, record: TaskRecord) -> Caller:
    """Who sent this turn's message: what the execution input says, if it names the task's
    owner, principal and tenant (an execution started before callers were passed on: the
    owner, anonymous)."""
    if step.context is not None and step.context.caller.owner == record.owner:
        return step.context.caller
    return Caller.of_owner(record.owner)


class NextStepNotStarted(RuntimeError):
    """The next step's execution could not be started. Raised out of the handler so that the
    state machine retries this step (whose re-run finds it done and starts the next step
    again) and, if that keeps failing, ends the turn failed."""


class FlowWorker:
    """One step of one turn: begin (load and guard the turn), build the step's context, run
    the flow, finish (record the outcome, or start the next step's execution).

    `content` is the content bucket (stored parts, flow states and files; None: none),
    `open_url` fetches `url` parts, reading at most `fetch_max_bytes` by default."""

    def __init__(
        self,
        store: TaskStore,
        flow: Flow,
        executor: Callable[[], Executor] | None = None,
        content: ContentStore | None = None,
        open_url: UrlOpener | None = None,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        delegator: Callable[[], Delegator] | None = None,
    ) -> None:
        self.store = store
        self.flow = flow
        # A factory: the Step Functions client is made only when a step asks for another
        # (a single-step turn never needs one, and the worker's cold start stays short).
        self.executor = executor
        self.content = content
        self.open_url = open_url
        self.fetch_max_bytes = fetch_max_bytes
        # Built at first use (a step that never delegates makes no remote client).
        self.delegator = delegator
        self._made_delegator: Delegator | None = None

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        action = event.get("action")
        if action == "fail":
            return self.fail(event)
        if action == "check_delegations":
            return self.check_delegations(event)
        if action == "cancel_delegations":
            return self.cancel_delegations(event)
        step = _Step(
            str(event["taskId"]),
            int(event["turn"]),
            int(event.get("step", 0)),
            TurnContext.from_wire(event),
        )
        annotate(task_id=step.task_id, turn=step.turn, step=step.step)
        turn = self.begin(step)
        if turn is None:
            return step.answer()
        if _step_done(turn.record, step):
            if turn.record.waiting and turn.record.delegation_round == round_key(
                step.turn, step.step
            ):
                # An earlier run began this step's delegation round: send what it did not.
                self.send_round(step)
                return step.answer()
            # An earlier run finished this step (a lost answer, a redelivery) and may have died
            # before starting the next one: start it again, which is harmless.
            return self.next_step(step, turn.record)
        ctx = self.context(step, turn)
        started = time.perf_counter()
        try:
            outcome = self.flow.run_step(ctx)
        except FlowCanceled:
            return step.answer()
        except TooLarge as error:  # an emit past a bound: nothing of it was written
            return self.too_large(step, error)
        finally:
            emit(Metric.STEP_DURATION, (time.perf_counter() - started) * 1000)
        try:
            return self.finish(step, turn, ctx, outcome)
        except TooLarge as error:  # the flow state or final message past a bound: not saved
            return self.too_large(step, error)

    def begin(self, step: _Step) -> _Turn | None:
        """The turn to run, moved to working; None when it must not run (any more)."""
        snapshot = self.store.get_snapshot(step.task_id, None)
        if snapshot is None:
            logger.warning("task %s not found", step.task_id)
            return None
        record = snapshot.record
        annotate(context_id=record.context_id)
        if record.turn != step.turn or record.state not in ACTIVE_STATES:
            return None  # canceled, or a stale execution of an earlier turn
        seq = snapshot.seq
        if record.state is TaskState.SUBMITTED:
            try:
                _, seq = transition(self.store, record, TaskState.WORKING, seq=seq + 1)
            except StateMoved:
                return None
            record.state = TaskState.WORKING
            record.status_seq = seq
        emitter = LogEmitter(
            self.store, record, seq, step.step, snapshot.event_ids, self.content is not None
        )
        return _Turn(record, snapshot.history, emitter, snapshot.artifacts)

    def context(self, step: _Step, turn: _Turn) -> StepContext:
        """What the flow sees: this turn's user message (its stored text and data read back),
        the history as stored, its own state (read from the content store when kept there)."""
        record = turn.record
        user_messages = [m for m in turn.history if m.role is Role.USER]
        message = user_messages[-1] if user_messages else turn.history[-1]
        state = (
            stored_state(step.task_id, record.flow_state_ref, self.content)
            if record.flow_state_ref is not None
            else dict(record.flow_state)
        )
        delegations: list[DelegationResult] = []
        woken = False
        if record.delegation_round is not None and self.delegator is not None:
            woken = record.delegation_round == round_key(step.turn, step.step - 1)
            delegator = self._delegator()
            delegations = delegator.results(step.task_id, record.delegation_round, fetch=woken)
            if woken:
                for artifact in delegator.stale_artifacts(
                    step.task_id, record.delegation_round, delegations, turn.artifacts
                ):
                    turn.emitter.artifact(_whole(artifact))
        return StepContext(
            task_id=step.task_id,
            context_id=record.context_id,
            turn=step.turn,
            step=step.step,
            message=restore_message(message, step.task_id, self.content),
            history=turn.history,
            state=state,
            emitter=turn.emitter,
            metadata=dict(record.metadata or {}),
            caller=_caller_of(step, record),
            extensions=list(step.context.extensions if step.context else ()),
            request_metadata=dict(step.context.metadata or {}) if step.context else {},
            content=self.content,
            open_url=self.open_url,
            fetch_max_bytes=self.fetch_max_bytes,
            delegations=delegations,
            woken=woken,
        )

    def finish(
        self, step: _Step, turn: _Turn, ctx: StepContext, outcome: Outcome
    ) -> dict[str, Any]:
        """Record the outcome: the flow state for the next step, a delegation round, or the
        turn's final status."""
        if outcome.kind is OutcomeKind.DELEGATE:
            return self.delegate(step, turn, ctx, outcome)
        if outcome.kind is OutcomeKind.NEXT_STEP:
            try:
                # Conditional on working at this turn, once per step: a cancel that got there
                # first, or a duplicate run of this step that saved first, wins.
                self.store.save_flow_state(step.task_id, step.turn, ctx.state, step.step)
            except ConflictError:
                # Canceled: no next step. A duplicate saved first: it starts the next step.
                fresh = self.store.get_record(step.task_id)
                done = (
                    fresh is not None
                    and fresh.turn == step.turn
                    and fresh.state is TaskState.WORKING
                    and _step_done(fresh, step)
                )
                return step.answer(go_on=done)
            return self.next_step(step, turn.record)
        record = turn.record
        message = (
            agent_message(outcome.message, step.task_id, record.context_id)
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
                seq=turn.emitter.seq + 1,
                flow_state=ctx.state,
            )
        except StateMoved:
            return step.answer()  # canceled while finishing: the cancel won (and counted itself)
        task_ended(final)
        return step.answer()

    def delegate(
        self, step: _Step, turn: _Turn, ctx: StepContext, outcome: Outcome
    ) -> dict[str, Any]:
        """Begin the step's delegation round (its records and the flow state, in one write:
        the step is done), send it, and end the step: the round's news start the next one."""
        delegator = self._delegator()
        records = delegator.records_for(
            turn.record, step.turn, step.step, outcome.delegates, outcome.wait, step.context
        )
        try:
            self.store.begin_round(step.task_id, step.turn, step.step, records, ctx.state)
        except ConflictError:
            return step.answer()  # canceled (or a duplicate run began it and sends it)
        self.send_round(step)
        return step.answer()

    def send_round(self, step: _Step) -> None:
        """Send the step's round (what is not sent yet). A failure past the remote calls (the
        store, the timer) is retried by the state machine: the re-run sends what is left."""
        try:
            self._delegator().send_round(step.task_id, round_key(step.turn, step.step))
        except Exception as error:
            logger.warning(
                "sending round %s of task %s failed: %s",
                round_key(step.turn, step.step),
                step.task_id,
                type(error).__name__,
            )
            raise NextStepNotStarted(type(error).__name__) from error

    def check_delegations(self, event: dict[str, Any]) -> dict[str, Any]:
        """The delegation timer's visit; the answer names the next one's wait (0: none)."""
        task_id, round = str(event["taskId"]), str(event["round"])
        annotate(task_id=task_id, turn=parse_round(round)[0])
        wait = self._delegator().check(task_id, round)
        return {"taskId": task_id, "round": round, "waitSeconds": wait or 0}

    def cancel_delegations(self, event: dict[str, Any]) -> dict[str, Any]:
        """Cancel the remote tasks of a canceled task."""
        task_id = str(event["taskId"])
        annotate(task_id=task_id)
        canceled = self._delegator().cancel_open(task_id)
        return {"taskId": task_id, "turn": int(event.get("turn", 0)), "canceled": canceled}

    def _delegator(self) -> Delegator:
        """One per worker (an invocation): its remote clients are reused within it."""
        if self.delegator is None:
            raise RuntimeError("this worker cannot delegate (no delegator was given)")
        if self._made_delegator is None:
            self._made_delegator = self.delegator()
        return self._made_delegator

    def next_step(self, step: _Step, record: TaskRecord) -> dict[str, Any]:
        """Start the execution of the step after `step`, whose outcome is saved; `record` is
        the task as this run read it (working at this turn: `begin` checked)."""
        if record.flow_step is not None and record.flow_step > (step.turn, step.step):
            return step.answer(go_on=True)  # the next step has finished: it went on itself
        if self.executor is None:
            raise NextStepNotStarted("this worker has no executor to start the next step")
        try:
            # The same name and input as any earlier start of it: STANDARD refuses a second
            # execution; under EXPRESS a second one runs the step again (steps are idempotent).
            self.executor().start(step.task_id, step.turn, step.context, step.step + 1)
        except Exception as error:
            logger.warning(
                "starting step %s of task %s failed: %s",
                step.step + 1,
                step.task_id,
                type(error).__name__,
            )
            raise NextStepNotStarted(type(error).__name__) from error
        return step.answer(go_on=True)

    def too_large(self, step: _Step, error: TooLarge) -> dict[str, Any]:
        """The step went past a storage bound: its turn ends failed, the text naming it."""
        logger.error("step %s of turn %s of task %s: %s", step.step, step.turn, step.task_id, error)
        text = f"Step {step.step} of turn {step.turn} was stopped: {error}."
        self.fail_turn(step.task_id, step.turn, text)
        return step.answer()

    def fail(self, event: dict[str, Any]) -> dict[str, Any]:
        """The state machine caught an error: the turn ends failed, with an explanation."""
        task_id = str(event["taskId"])
        turn = int(event["turn"])
        error = event.get("error") or {}
        error_name = str(error.get("Error", "Error"))[:100]
        annotate(task_id=task_id, turn=turn)
        logger.error("turn %s of task %s failed: %s", turn, task_id, error_name)
        self.fail_turn(task_id, turn, _failure_text(error_name))
        return {"taskId": task_id, "turn": turn, "continue": False}

    def fail_turn(self, task_id: str, turn: int, text: str) -> None:
        """End `turn` of the task FAILED with `text` as the status message, unless the task has
        moved on (another turn) or ended already."""
        record = self.store.get_record(task_id)
        if record is None or record.turn != turn:
            return
        annotate(context_id=record.context_id)
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


def _whole(artifact: Artifact) -> ArtifactChunk:
    """An artifact as one chunk that replaces any sent before under its id."""
    return ArtifactChunk(
        artifact.parts,
        artifact.artifact_id,
        artifact.name,
        artifact.description,
        append=False,
        last_chunk=True,
        metadata=artifact.metadata,
        extensions=artifact.extensions,
    )


def _failure_text(error_name: str) -> str:
    # Only the error class reaches the client: exception messages may carry secrets.
    if error_name in ("States.Timeout", "Sandbox.Timedout") or "Timeout" in error_name:
        return "The agent step timed out before finishing; the task was stopped."
    if error_name == NextStepNotStarted.__name__:
        return "The agent's next step could not be started; the task was stopped."
    if error_name.startswith(("Lambda.", "States.", "Runtime.")):
        return f"The agent step crashed ({error_name}); the task was stopped."
    return f"The agent raised {error_name} while processing this task; the task was stopped."
