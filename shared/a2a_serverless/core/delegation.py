"""Delegation: a flow step hands a message to remote A2A agents, and its task waits, with
nothing running, until their news wake the flow's next step.

A round (every delegation of one step) begins in one store write (`begin_round`), is sent
non-blocking (with a push config per delegation that points back at the receiver route and
carries a token minted for that delegation only; a remote without push notifications is
polled), and is complete when all of it (or the first, `wait="first"`) has settled: a terminal
or interrupted remote state, or none that will come (refused, unreachable, timed out). Exactly
one caller ends the wait (`end_wait`) and starts the next step.

- `Delegator` (the flow worker): begin and send a round, check it on the timer, gather its
  results for the woken step, cancel what is open.
- `DelegationInbox` (the receiver): a remote's push notification, authenticated by its
  delegation's token; no call to any remote.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import ValidationError

from a2a_serverless.core.executor import Executor, Timer, TurnContext
from a2a_serverless.core.tasklog import status_event
from a2a_serverless.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    format_timestamp,
    limits,
    parse_task_state,
    utcnow,
)
from a2a_serverless.store import (
    ConflictError,
    DelegationRecord,
    DelegationState,
    TaskRecord,
    TaskStore,
    TooLarge,
)

logger = logging.getLogger(__name__)

# At most this many delegations in one step (one transaction holds them all).
MAX_DELEGATIONS = 16
# A delegation waits at least a second and at most 30 days (tasks expire with RetentionDays).
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 30 * 86400
DEFAULT_TIMEOUT_SECONDS = 3600
# Polling a remote without push: 2, 4, 8... seconds apart, then once a minute.
MAX_POLL_SECONDS = 60
# A remote status message, as kept with its delegation (larger: its text cut).
MAX_REMOTE_MESSAGE_BYTES = limits.MAX_STATUS_MESSAGE_BYTES - 1024
RECEIVER_PATH = "/delegations/{task_id}/{key}"


class DelegationOutcome(StrEnum):
    """How a delegation ended: the remote task's state, or why it has none."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"
    INPUT_REQUIRED = "input_required"
    AUTH_REQUIRED = "auth_required"
    ANSWERED = "answered"  # the remote answered with a message, no task
    TIMED_OUT = "timed_out"  # no result within the delegation's timeout
    UNREACHABLE = "unreachable"  # the remote could not be reached (or kept failing)
    REFUSED = "refused"  # the egress guard refused the remote's URL
    ERROR = "error"  # the remote answered an error, or an answer that is not A2A
    ABANDONED = "abandoned"  # another delegation of a wait="first" round answered first


_OUTCOME_OF_STATE = {
    TaskState.COMPLETED: DelegationOutcome.COMPLETED,
    TaskState.FAILED: DelegationOutcome.FAILED,
    TaskState.CANCELED: DelegationOutcome.CANCELED,
    TaskState.REJECTED: DelegationOutcome.REJECTED,
    TaskState.INPUT_REQUIRED: DelegationOutcome.INPUT_REQUIRED,
    TaskState.AUTH_REQUIRED: DelegationOutcome.AUTH_REQUIRED,
}
# Outcomes after which the remote task still waits for us (an answer, or a cancel).
_OPEN_OUTCOMES = frozenset({DelegationOutcome.INPUT_REQUIRED, DelegationOutcome.AUTH_REQUIRED})


class RemoteFailure(Exception):
    """A call to a remote agent failed: `outcome` is REFUSED, UNREACHABLE or ERROR, and
    `retryable` says whether trying again later may help. The text is safe to show."""

    def __init__(
        self,
        message: str,
        outcome: DelegationOutcome = DelegationOutcome.ERROR,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.retryable = retryable


class RemoteClient(Protocol):
    """A remote agent whose card was read (push/remote.py RemoteAgent)."""

    @property
    def name(self) -> str: ...

    @property
    def push_notifications(self) -> bool: ...

    def send(
        self, message: Message, *, push: TaskPushNotificationConfig | None = None
    ) -> Task | Message: ...

    def get_task(self, task_id: str, *, history_length: int | None = None) -> Task: ...

    def cancel_task(self, task_id: str) -> Task: ...


# (agent URL, credentials secret name or None) -> a client of that agent; raises RemoteFailure.
RemoteConnector = Callable[[str, str | None], RemoteClient]


@dataclass(frozen=True)
class Delegate:
    """One delegation a step asks for: `message` to the agent whose Agent Card is at `agent`
    (or under that base URL). `task_id`/`context_id` continue a remote task (an answer to its
    question). `forward_artifacts`: the remote's artifacts appear in this task as they arrive.
    `credentials`: the secret holding the headers for the agent (default: by its host)."""

    agent: str
    message: Message | str | list[Part]
    forward_artifacts: bool = False
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    credentials: str | None = None
    task_id: str | None = None
    context_id: str | None = None


@dataclass(frozen=True)
class DelegationResult:
    """What one delegation brought back. `state` and `message` are the remote task's last
    status (None when it has none: see `outcome` and `error`); `task` is the remote task as
    read when the round ended (artifacts, history), when it could be read."""

    agent: str
    outcome: DelegationOutcome
    task_id: str | None = None
    context_id: str | None = None
    state: TaskState | None = None
    message: Message | None = None
    error: str | None = None
    task: Task | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """The remote completed the task, or answered with a message."""
        return self.outcome in (DelegationOutcome.COMPLETED, DelegationOutcome.ANSWERED)

    @property
    def text(self) -> str:
        """The text of the remote's last message, joined."""
        parts = self.message.parts if self.message is not None else []
        return "".join(p.text for p in parts if p.text is not None)

    @property
    def artifacts(self) -> list[Artifact]:
        return list(self.task.artifacts or []) if self.task is not None else []

    def reply(self, message: Message | str | list[Part], **options: Any) -> Delegate:
        """A delegation that answers this remote task (its question) with `message`."""
        return Delegate(
            self.agent, message, task_id=self.task_id, context_id=self.context_id, **options
        )


def result_of(record: DelegationRecord, task: Task | None = None) -> DelegationResult:
    """A record's result (outcome UNREACHABLE with no news while not settled)."""
    state = parse_task_state(record.remote_state) if record.remote_state else None
    message = _message(record.remote_message)
    outcome = (
        DelegationOutcome(record.outcome)
        if record.outcome
        else DelegationOutcome.TIMED_OUT
        if record.state is DelegationState.SETTLED
        else DelegationOutcome.ABANDONED
    )
    return DelegationResult(
        record.agent_url,
        outcome,
        record.remote_task_id,
        record.remote_context_id,
        state,
        message,
        record.error,
        task,
    )


def round_key(turn: int, step: int) -> str:
    return f"{turn}.{step}"


def delegation_key(turn: int, step: int, index: int) -> str:
    return f"{turn}.{step}.{index}"


def parse_round(round: str) -> tuple[int, int]:
    turn, step = round.split(".")
    return int(turn), int(step)


def receiver_url(base_url: str, task_id: str, key: str) -> str:
    return base_url.rstrip("/") + RECEIVER_PATH.format(task_id=task_id, key=key)


def round_complete(records: Sequence[DelegationRecord]) -> bool:
    """Whether a round may wake its flow: every delegation settled, or (wait="first") one
    settled with a remote result."""
    if not records:
        return False
    if records[0].wait == "first":
        return any(r.state is DelegationState.SETTLED for r in records)
    return all(r.state is DelegationState.SETTLED for r in records)


def check_delegates(delegates: Sequence[Delegate], wait: str) -> None:
    """Refuse (ValueError, naming it) a round the stack will not run."""
    if not delegates:
        raise ValueError("Outcome.delegate needs at least one Delegate")
    if len(delegates) > MAX_DELEGATIONS:
        raise ValueError(f"a step delegates to at most {MAX_DELEGATIONS} agents at once")
    if wait not in ("all", "first"):
        raise ValueError(f'wait is "all" or "first", got {wait!r}')
    for delegate in delegates:
        seconds = delegate.timeout_seconds
        if not MIN_TIMEOUT_SECONDS <= seconds <= MAX_TIMEOUT_SECONDS:
            raise ValueError(
                f"timeout_seconds must be {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS}, "
                f"got {seconds!r}"
            )
        if not delegate.agent.startswith(("https://", "http://")):
            raise ValueError(f"a Delegate's agent is an http(s) URL, got {delegate.agent!r}")


class _RoundWaker:
    """What the worker and the receiver share: settling, and waking a complete round."""

    def __init__(
        self,
        store: TaskStore,
        executor: Callable[[], Executor] | None,
        timer: Callable[[], Timer] | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.timer = timer

    def wake_if_complete(self, task_id: str, round: str, on_timer: bool = False) -> bool:
        """Start the flow's next step if the round is complete and this caller is the one
        that ends the wait (its stored turn context goes with it), then stop the round's
        timer (unless this is its own visit, `on_timer`). True when it started the step."""
        records = self.store.round_delegations(task_id, round)
        if not round_complete(records) or not self.store.end_wait(task_id, round):
            return False
        turn, step = parse_round(round)
        context = TurnContext.from_wire(records[0].turn_context or {})
        if self.executor is None:
            raise RuntimeError("no executor to start the flow's next step")
        try:
            self.executor().start(task_id, turn, context, step + 1)
        except Exception:
            # Waiting again: the next notification or the timer wakes it.
            self.store.resume_wait(task_id, round)
            raise
        if not on_timer and self.timer is not None:
            try:
                self.timer().stop_wait(task_id, round)
            except Exception as error:  # a wait left running ends at its deadline
                logger.info("the wait of round %s was not stopped: %s", round, type(error).__name__)
        return True

    def apply_status(self, record: DelegationRecord, status: TaskStatus) -> bool:
        """A remote status, newest first (older or repeated ones are skipped); a terminal or
        interrupted one settles the delegation. True when the delegation settled now."""
        message = _kept_message(status.message)
        if status.timestamp is None:
            # No time to order it by (our time of receipt would outrank the remote's own):
            # only a final or interrupted state counts, as it is.
            if not _final(status.state):
                return False
            return self.store.settle(
                record.task_id,
                record.key,
                _OUTCOME_OF_STATE[status.state].value,
                state=status.state.value,
                message=message,
            )
        at = status.timestamp.isoformat()  # to the microsecond, as remotes stamp them
        applied = self.store.record_status(
            record.task_id, record.key, status.state.value, at, message
        )
        if not applied:
            # Older news; or this very status again, after a run that recorded it and died
            # before settling: the newest status recorded decides. A final state stamped the
            # same instant as the one recorded (millisecond clocks) is newer.
            fresh = self.store.get_delegation(record.task_id, record.key)
            if fresh is None or fresh.state is DelegationState.SETTLED or not fresh.remote_state:
                return False
            state, message = parse_task_state(fresh.remote_state), fresh.remote_message
            if _same_instant(fresh.remote_status_at, status.timestamp) and _final(status.state):
                state, message = status.state, _kept_message(status.message)
        else:
            state = status.state
        if _final(state):
            return self.store.settle(
                record.task_id,
                record.key,
                _OUTCOME_OF_STATE[state].value,
                state=state.value,
                message=message,
            )
        return False

    def waiting_task(self, task_id: str, round: str) -> TaskRecord | None:
        """The task, while it waits on `round` (else None: canceled, or moved on)."""
        task = self.store.get_record(task_id)
        if task is None or not task.waiting or task.delegation_round != round:
            return None
        return task if task.state is TaskState.WORKING else None

    def append(self, task: TaskRecord, event: StreamResponse, event_id: str) -> bool:
        """Append `event` to the task's log after its last event (once per `event_id`)."""
        for _ in range(8):
            try:
                self.store.append_event(
                    task.task_id, self.store.last_seq(task.task_id) + 1, event, event_id
                )
                return True
            except ConflictError:
                continue
            except TooLarge as error:
                logger.warning("a forwarded event was not kept: %s", error)
                return False
        return False

    def forward_artifact(
        self, record: DelegationRecord, update: TaskArtifactUpdateEvent, event_id: str
    ) -> bool:
        """The remote's artifact chunk, into the local task (while it waits on the round)."""
        task = self.waiting_task(record.task_id, record.round)
        if task is None:
            return False
        artifact = update.artifact.model_copy(
            update={"artifact_id": local_artifact_id(record, update.artifact.artifact_id)}
        )
        event = StreamResponse(
            artifact_update=TaskArtifactUpdateEvent(
                task_id=task.task_id,
                context_id=task.context_id,
                artifact=artifact,
                append=update.append,
                last_chunk=update.last_chunk,
            )
        )
        return self.append(task, event, event_id)

    def forward_status(self, record: DelegationRecord, message: Message, event_id: str) -> bool:
        """The remote's progress message, as a progress status of the local task."""
        task = self.waiting_task(record.task_id, record.round)
        if task is None:
            return False
        local = message.model_copy(
            update={
                "message_id": f"{task.task_id}.{event_id}",
                "task_id": task.task_id,
                "context_id": task.context_id,
                "role": Role.AGENT,
            }
        )
        status = TaskStatus(state=TaskState.WORKING, message=local, timestamp=utcnow())
        return self.append(task, status_event(task, status), event_id)


def local_artifact_id(record: DelegationRecord, remote_id: str) -> str:
    """The remote's artifact id in the local task (prefixed by the delegation's index when
    the round has several, so that two agents' "result" stay apart)."""
    if record.count <= 1:
        return remote_id
    return f"{record.key.rsplit('.', 1)[1]}.{remote_id}"


class Receipt(StrEnum):
    """What the receiver made of a notification (the binding answers with its status)."""

    APPLIED = "applied"  # 200
    IGNORED = "ignored"  # 200: a repeat, an older status, or the delegation has settled
    UNAUTHORIZED = "unauthorized"  # 401: no delegation with this token
    FORBIDDEN = "forbidden"  # 403: about another remote task than the delegation's
    INVALID = "invalid"  # 400: not an A2A StreamResponse (or Task)


class DelegationInbox(_RoundWaker):
    """A remote agent's push notifications about the task a delegation gave it."""

    def receive(self, task_id: str, key: str, token: str | None, payload: Any) -> Receipt:
        """Authenticate (the delegation's own token, compared in constant time: nothing is
        read or written for a wrong one but the delegation), then apply the news."""
        record = self.store.get_delegation(task_id, key) if _plausible(task_id, key) else None
        expected = record.token if record is not None else ""
        given = token or ""
        if not hmac.compare_digest(given.encode(), (expected or "\0").encode()) or record is None:
            return Receipt.UNAUTHORIZED
        event = parse_notification(payload)
        if event is None:
            return Receipt.INVALID
        remote_task, remote_context = _remote_ids(event)
        if record.state is DelegationState.SETTLED:
            return Receipt.IGNORED
        if remote_task is not None and (
            record.remote_task_id not in (None, remote_task)
            or not self.store.bind_remote_task(task_id, key, remote_task, remote_context or "")
        ):
            return Receipt.FORBIDDEN
        return self.apply(record, event, _digest(payload))

    def apply(self, record: DelegationRecord, event: StreamResponse, digest: str) -> Receipt:
        """One notification's news, then the wake if its round is complete."""
        applied = False
        settled = False
        if event.status_update is not None or event.task is not None:
            status = (
                event.status_update.status if event.status_update is not None else event.task.status  # type: ignore[union-attr]
            )
            settled = self.apply_status(record, status)
            applied = True
            if (
                record.forward
                and status.state is TaskState.WORKING
                and status.message is not None
                and self.store.note_seen(record.task_id, record.key, digest)
            ):
                self.forward_status(record, status.message, f"d{record.key}.{digest[:20]}")
        if record.forward and event.artifact_update is not None:
            if not self.store.note_seen(record.task_id, record.key, digest):
                return Receipt.IGNORED
            self.forward_artifact(record, event.artifact_update, f"d{record.key}.{digest[:20]}")
            applied = True
        if settled:
            self.wake_if_complete(record.task_id, record.round)
        return Receipt.APPLIED if applied else Receipt.IGNORED


class Delegator(_RoundWaker):
    """The worker's side: begin and send a round, check it on the timer, gather its results,
    cancel what is open. `connect` reaches a remote agent, `timer` wakes the worker later."""

    def __init__(
        self,
        store: TaskStore,
        executor: Callable[[], Executor] | None,
        connect: RemoteConnector,
        timer: Callable[[], Timer] | None,
        base_url: str = "",
    ) -> None:
        super().__init__(store, executor, timer)
        self.connect = connect
        # This stack's public base URL (PUBLIC_BASE_URL): else the one the turn came in at.
        self.base_url = base_url
        self._clients: dict[tuple[str, str | None], RemoteClient] = {}

    # -- a round -------------------------------------------------------------------------------

    def records_for(
        self,
        task: TaskRecord,
        turn: int,
        step: int,
        delegates: Sequence[Delegate],
        wait: str,
        context: TurnContext | None,
    ) -> list[DelegationRecord]:
        """The round's records, SENDING, each with a fresh token and its message's id derived
        from this step (a remote that drops repeated message ids creates one task)."""
        check_delegates(delegates, wait)
        records = []
        for index, delegate in enumerate(delegates):
            key = delegation_key(turn, step, index)
            message = _as_message(delegate.message).model_copy(
                update={
                    "message_id": f"{task.task_id}.{key}",
                    "task_id": delegate.task_id,
                    "context_id": delegate.context_id,
                    "role": Role.USER,
                }
            )
            records.append(
                DelegationRecord(
                    task_id=task.task_id,
                    key=key,
                    agent_url=delegate.agent,
                    token=secrets.token_urlsafe(32),
                    message=message.wire(),
                    wait=wait,
                    count=len(delegates),
                    forward=delegate.forward_artifacts,
                    timeout_seconds=int(delegate.timeout_seconds),
                    credentials=delegate.credentials,
                    turn_context=context.wire() if context is not None else None,
                    updated_at=_now(),
                )
            )
        return records

    def send_round(self, task_id: str, round: str) -> list[DelegationRecord]:
        """Send every delegation of the round not sent yet; then wake the flow if the round is
        already complete, else arm the timer. The round's records, as they now stand."""
        for record in self.store.round_delegations(task_id, round):
            if record.state is DelegationState.SENDING:
                self._send(record)
        records = self.store.round_delegations(task_id, round)
        if self.wake_if_complete(task_id, round):
            return records
        task = self.waiting_task(task_id, round)
        wait = self._next_wait(records)
        if task is None:
            # Canceled while sending: what was just sent is canceled too.
            current = self.store.get_record(task_id)
            if current is not None and current.state is TaskState.CANCELED:
                self.cancel_open(task_id)
            return records
        if wait is None:
            return records
        text = self.waiting_status(records)
        if text:
            message = Message(
                message_id=f"{task_id}.{round}.wait",
                role=Role.AGENT,
                parts=[Part(text=text)],
                task_id=task_id,
                context_id=task.context_id,
            )
            status = TaskStatus(state=TaskState.WORKING, message=message, timestamp=utcnow())
            self.append(task, status_event(task, status), f"{round}.wait")
        if self.timer is None:
            raise RuntimeError("no timer to wait on the delegations")
        self.timer().start_wait(task_id, round, wait)
        return records

    def _send(self, record: DelegationRecord) -> None:
        message = Message.model_validate(record.message)
        base = self.base_url or _base_of(record.turn_context)
        try:
            client = self._client(record)
            push = client.push_notifications and bool(base)
            config = (
                TaskPushNotificationConfig(
                    id=f"delegation-{record.key}",
                    url=receiver_url(base, record.task_id, record.key),
                    token=record.token,
                )
                if push
                else None
            )
            answer = self._retrying(lambda: client.send(message, push=config))
        except RemoteFailure as failure:
            self.store.settle(record.task_id, record.key, failure.outcome.value, error=str(failure))
            return
        deadline = time.time() + record.timeout_seconds
        if isinstance(answer, Message):
            self.store.mark_sent(record.task_id, record.key, "push", deadline, None, None)
            self.store.settle(
                record.task_id,
                record.key,
                DelegationOutcome.ANSWERED.value,
                message=_kept_message(answer),
            )
            return
        mode = "push" if config is not None else "poll"
        self.store.mark_sent(
            record.task_id, record.key, mode, deadline, answer.id, answer.context_id
        )
        fresh = self.store.get_delegation(record.task_id, record.key)
        if fresh is not None:
            self.apply_status(fresh, answer.status)

    def waiting_status(self, records: Sequence[DelegationRecord]) -> str:
        """The local task's progress text while it waits (naming the remote tasks)."""
        named = []
        for record in records:
            if record.state is DelegationState.WAITING and record.remote_task_id:
                client = self._clients.get((record.agent_url, record.credentials))
                who = client.name if client is not None else record.agent_url
                named.append(f"{who} (task {record.remote_task_id})")
        if not named:
            return ""
        return "Waiting for " + ", ".join(named) + "."

    # -- the timer -----------------------------------------------------------------------------

    def check(self, task_id: str, round: str) -> int | None:
        """The timer's visit: poll what is due, give up on what is past its deadline, wake the
        flow if the round is complete. Seconds until the next visit, None for none."""
        if self.waiting_task(task_id, round) is None:
            return None
        now = time.time()
        for record in self.store.round_delegations(task_id, round):
            if record.state is DelegationState.SENDING:
                self._send(record)
            elif record.state is DelegationState.WAITING:
                if now >= record.deadline:
                    self._final_look(record)
                elif record.mode == "poll" and now >= _next_poll(record):
                    self._poll(record)
        if self.wake_if_complete(task_id, round, on_timer=True):
            return None
        if self.waiting_task(task_id, round) is None:
            return None
        return self._next_wait(self.store.round_delegations(task_id, round))

    def _poll(self, record: DelegationRecord) -> None:
        self.store.count_poll(record.task_id, record.key)
        try:
            task = self._client(record).get_task(record.remote_task_id or "", history_length=0)
        except RemoteFailure as failure:
            logger.info("polling delegation %s failed: %s", record.key, failure)
            return
        self._take_task(record, task)

    def _final_look(self, record: DelegationRecord) -> None:
        """At the deadline: one last read of the remote task, else the delegation timed out
        (and its remote task is canceled: nobody waits for it any more)."""
        try:
            client = self._client(record)
            task = client.get_task(record.remote_task_id or "", history_length=0)
        except RemoteFailure as failure:
            self.store.settle(
                record.task_id,
                record.key,
                DelegationOutcome.UNREACHABLE.value,
                error=f"no answer within {record.timeout_seconds} s; at the deadline: {failure}",
            )
            return
        self._take_task(record, task)
        fresh = self.store.get_delegation(record.task_id, record.key)
        if fresh is not None and fresh.state is not DelegationState.SETTLED:
            self.store.settle(
                record.task_id,
                record.key,
                DelegationOutcome.TIMED_OUT.value,
                error=f"no answer within {record.timeout_seconds} s",
            )
            self._cancel_remote(fresh)

    def _take_task(self, record: DelegationRecord, task: Task) -> None:
        """A remote task as read: its artifacts (forwarded when asked, as whole artifacts
        when changed) and its status."""
        if record.forward:
            for artifact in task.artifacts or []:
                digest = _digest({"artifact": artifact.wire()})
                if self.store.note_seen(record.task_id, record.key, digest):
                    update = TaskArtifactUpdateEvent(
                        task_id=task.id, context_id=task.context_id, artifact=artifact
                    )
                    self.forward_artifact(record, update, f"d{record.key}.{digest[:20]}")
        self.apply_status(record, task.status)

    # -- the woken step ------------------------------------------------------------------------

    def results(self, task_id: str, round: str, fetch: bool) -> list[DelegationResult]:
        """The round's results, in the order the step delegated. `fetch`: read each remote
        task (its artifacts and history) and abandon (cancel) what a wait="first" round left
        running."""
        records = self.store.round_delegations(task_id, round)
        results = []
        for record in records:
            task = None
            if fetch and record.state is not DelegationState.SETTLED:
                if self.store.settle(
                    task_id,
                    record.key,
                    DelegationOutcome.ABANDONED.value,
                    error="another delegation answered first",
                ):
                    self._cancel_remote(record)
                record = self.store.get_delegation(task_id, record.key) or record
            elif fetch and record.remote_task_id:
                try:
                    task = self._client(record).get_task(record.remote_task_id)
                except RemoteFailure as failure:
                    logger.info("reading the remote task of %s failed: %s", record.key, failure)
            results.append(result_of(record, task))
        return results

    def stale_artifacts(
        self,
        task_id: str,
        round: str,
        results: Sequence[DelegationResult],
        local: Sequence[Artifact],
    ) -> list[Artifact]:
        """The remote artifacts of the round's forwarding delegations that the task does not
        hold as the remote task does (a chunk lost or reordered on the way), under their
        local ids: to send again whole."""
        records = self.store.round_delegations(task_id, round)
        held = {artifact.artifact_id: artifact for artifact in local}
        stale = []
        for record, result in zip(records, results, strict=False):
            if not record.forward or result.task is None:
                continue
            for artifact in result.task.artifacts or []:
                local_id = local_artifact_id(record, artifact.artifact_id)
                mine = held.get(local_id)
                if mine is None or _comparable(mine.parts) != _comparable(artifact.parts):
                    stale.append(artifact.model_copy(update={"artifact_id": local_id}))
        return stale

    # -- cancel --------------------------------------------------------------------------------

    def cancel_open(self, task_id: str) -> int:
        """Cancel every remote task this task's delegations left running or waiting for an
        answer (the task was canceled). How many cancels were sent."""
        records = self.store.task_delegations(task_id)
        latest: dict[str, DelegationRecord] = {}
        for record in records:  # oldest first: the last record of a remote task decides
            if record.remote_task_id:
                latest[record.remote_task_id] = record
        sent = 0
        for record in latest.values():
            open_remote = record.state is not DelegationState.SETTLED or (
                record.outcome in _OPEN_OUTCOMES
            )
            if not open_remote:
                continue
            if record.state is not DelegationState.SETTLED:
                self.store.settle(
                    task_id, record.key, DelegationOutcome.CANCELED.value, error="task canceled"
                )
            if self._cancel_remote(record):
                sent += 1
        return sent

    def _cancel_remote(self, record: DelegationRecord) -> bool:
        if not record.remote_task_id:
            return False
        try:
            self._client(record).cancel_task(record.remote_task_id)
        except RemoteFailure as failure:
            logger.info("canceling the remote task of %s failed: %s", record.key, failure)
        return True

    # -- helpers -------------------------------------------------------------------------------

    def _client(self, record: DelegationRecord) -> RemoteClient:
        key = (record.agent_url, record.credentials)
        if key not in self._clients:
            self._clients[key] = self._retrying(
                lambda: self.connect(record.agent_url, record.credentials)
            )
        return self._clients[key]

    @staticmethod
    def _retrying(call: Callable[[], Any]) -> Any:
        """`call`, tried once more after a second when it failed in a way that may pass."""
        try:
            return call()
        except RemoteFailure as failure:
            if not failure.retryable:
                raise
        time.sleep(1.0)
        return call()

    @staticmethod
    def _next_wait(records: Sequence[DelegationRecord]) -> int | None:
        """Seconds until the round's next due poll or deadline; None when nothing waits."""
        now = time.time()
        due = []
        for record in records:
            if record.state is DelegationState.SENDING:
                due.append(now + 1)
            elif record.state is DelegationState.WAITING:
                due.append(record.deadline)
                if record.mode == "poll":
                    due.append(_next_poll(record))
        if not due:
            return None
        return max(1, int(min(due) - now + 0.999))


def parse_notification(payload: Any) -> StreamResponse | None:
    """A push notification's body: a StreamResponse, or a bare Task (as 0.3 agents send)."""
    if not isinstance(payload, dict):
        return None
    try:
        if "id" in payload and "status" in payload:
            return StreamResponse(task=Task.model_validate(payload))
        return StreamResponse.model_validate(payload)
    except (ValidationError, ValueError):
        return None


def _remote_ids(event: StreamResponse) -> tuple[str | None, str | None]:
    if event.task is not None:
        return event.task.id, event.task.context_id
    if event.status_update is not None:
        return event.status_update.task_id, event.status_update.context_id
    if event.artifact_update is not None:
        return event.artifact_update.task_id, event.artifact_update.context_id
    return None, None


def _plausible(task_id: str, key: str) -> bool:
    """Whether the path could name a delegation (else no read is made for it)."""
    pieces = key.split(".")
    return (
        0 < len(task_id) <= 256
        and len(pieces) == 3
        and all(p.isdigit() and len(p) <= 9 for p in pieces)
    )


def _final(state: TaskState) -> bool:
    """A state that settles a delegation: terminal, or interrupted (a question)."""
    return state in TERMINAL_STATES or state in INTERRUPTED_STATES


def _same_instant(recorded: str | None, at: datetime) -> bool:
    if not recorded:
        return False
    try:
        when = datetime.fromisoformat(recorded.replace("Z", "+00:00"))
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamped = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return when == stamped


def _comparable(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """Parts as compared across reads: a URL without its query (a presigned URL's signature
    changes with every read)."""
    out = []
    for part in parts:
        wire = part.wire()
        if isinstance(wire.get("url"), str):
            wire["url"] = wire["url"].split("?", 1)[0]
        out.append(wire)
    return out


def _digest(payload: Any) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


def _kept_message(message: Message | None) -> dict[str, Any] | None:
    """A remote message as a delegation keeps it: whole when small, else its non-text parts
    dropped and its text cut (the full message is in the remote task)."""
    if message is None:
        return None
    wire = message.wire()
    size = len(json.dumps(wire, separators=(",", ":"), ensure_ascii=False).encode())
    if size <= MAX_REMOTE_MESSAGE_BYTES:
        return wire
    text = "".join(p.text for p in message.parts if p.text is not None)
    cut = text.encode()[: MAX_REMOTE_MESSAGE_BYTES // 2].decode(errors="ignore")
    parts = [Part(text=cut or "(the message is too large to keep; read the remote task)")]
    return message.model_copy(update={"parts": parts, "metadata": None}).wire()


def _as_message(content: Message | str | list[Part]) -> Message:
    if isinstance(content, Message):
        return content
    parts = [Part(text=content)] if isinstance(content, str) else list(content)
    return Message(message_id="-", role=Role.USER, parts=parts)


def _message(wire: dict[str, Any] | None) -> Message | None:
    if not wire:
        return None
    try:
        return Message.model_validate(wire)
    except ValidationError:
        return None


def _base_of(turn_context: dict[str, Any] | None) -> str:
    base = (turn_context or {}).get("baseUrl")
    return base if isinstance(base, str) else ""


def _next_poll(record: DelegationRecord) -> float:
    """When a polled delegation is due next: 2, 4, 8... seconds after the send, then every
    minute (`polls` counts the polls made)."""
    offset = sum(min(MAX_POLL_SECONDS, 2 ** (n + 1)) for n in range(record.polls + 1))
    return record.deadline - record.timeout_seconds + offset


def _now() -> str:
    return format_timestamp(utcnow())
