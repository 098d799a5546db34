"""The storage interfaces of the core, by concern, and the values they exchange.

DynamoDB (store/dynamodb/) is the one production implementation; tests/fakes.py holds an
in-memory one that passes the same contract tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from a2a_serverless.models import (
    Artifact,
    Message,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)


class ConflictError(Exception):
    """A conditional write lost a race (expected state, turn or event seq changed).

    `failed` names the items whose condition failed (`header`, `event`, `dedupe`, ...).
    """

    def __init__(self, message: str = "", failed: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.failed = failed


class TooLarge(ValueError):
    """A value past one of the size bounds of models/limits.py, found before any write (so
    nothing was written). Its text names the value, its size and the bound: safe to show."""

    def __init__(self, what: str, size: int, limit: int, bound: str, advice: str = "") -> None:
        text = f"{what} is {size:,} bytes; the limit is {limit:,} ({bound})"
        super().__init__(f"{text}; {advice}" if advice else text)
        self.bound = bound
        self.size = size
        self.limit = limit


@dataclass
class TaskRecord:
    """The task header: identity, owner, current state and execution bookkeeping."""

    task_id: str
    context_id: str
    owner: str
    state: TaskState
    status: TaskStatus
    status_seq: int
    turn: int
    execution: str = ""
    flow_state: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    history_count: int = 0
    created_at: str = ""
    # (turn, step) of the last flow step whose outcome was saved: a re-run of that step (or an
    # earlier one) of the same turn finds it done. None before the first save.
    flow_step: tuple[int, int] | None = None
    # The content store's object holding the flow state when it was too large to keep inline
    # (`flow_state` is then empty): read it with `store.content` (store/content.py).
    flow_state_ref: str | None = None
    # The task's latest delegation round ("{turn}.{step}" of the step that delegated), and
    # whether the task waits on it (no step runs until `end_wait`). None/False: never delegated.
    delegation_round: str | None = None
    waiting: bool = False
    # Set by `list_tasks` only: the page token that resumes the listing right after this
    # record (so a caller may end a page early). Not part of the task: never compared.
    page_cursor: str = field(default="", compare=False, repr=False)

    @classmethod
    def submitted(
        cls,
        task_id: str,
        context_id: str,
        owner: str,
        status: TaskStatus,
        execution: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> TaskRecord:
        """A new task's header: SUBMITTED with `status` (its status seq 1), in turn 1."""
        state = TaskState.SUBMITTED
        return cls(task_id, context_id, owner, state, status, 1, 1, execution, metadata=metadata)


def status_update(task_id: str, context_id: str, status: TaskStatus) -> StreamResponse:
    """A status change as the event log holds it."""
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
    )


@dataclass
class TaskSnapshot:
    """A task folded from its event log up to `seq` (inclusive), plus history."""

    record: TaskRecord
    status: TaskStatus
    artifacts: list[Artifact]
    history: list[Message]
    seq: int
    # The writer identities (`append_event`'s `event_id`) of the events in the log.
    event_ids: frozenset[str] = frozenset()


@dataclass
class Dedupe:
    """Retry detection for SendMessage: owner + messageId + hash of the whole request, live
    until `expires_at` (epoch seconds; 0: no expiry). An expired record is replaced."""

    owner: str
    message_id: str
    content_hash: str
    expires_at: int = 0


@dataclass
class StatusChange:
    """One state transition, written atomically with its event (and history message)."""

    task_id: str
    owner: str
    context_id: str
    from_state: TaskState
    to_status: TaskStatus
    seq: int
    turn: int
    event: StreamResponse
    history_message: Message | None = None
    history_index: int = 0
    dedupe: Dedupe | None = None
    execution: str | None = None
    flow_state: dict[str, Any] | None = None
    expected_turn: int | None = None
    # An inline webhook of the message that starts this turn: it exists iff the turn does.
    push_config: TaskPushNotificationConfig | None = None


@dataclass
class PushDelivery:
    """A webhook config with the state of its queued (parked) deliveries."""

    config: TaskPushNotificationConfig
    failures: int = 0  # failed attempts of the oldest queued event
    queued_through: int | None = None  # last event queued while parked


@dataclass
class ListQuery:
    """One ListTasks page of an owner's tasks. `page_token` is opaque: only the store reads it."""

    owner: str
    context_id: str | None = None
    state: TaskState | None = None
    status_after: datetime | None = None
    page_size: int = 50
    page_token: str | None = None
    # What a store read about the context, kept for the rest of the same ListTasks call: its
    # page and its count need the same items (DynamoDBTaskListing._context_items).
    context_read: Any = field(default=None, compare=False, repr=False)


@dataclass
class ListedContents:
    """What ListTasks adds to a listed task on request: artifacts and recent history."""

    artifacts: list[Artifact] = field(default_factory=list)
    history: list[Message] = field(default_factory=list)


class InvalidPageToken(Exception):
    """A page token this store did not issue (malformed or forged)."""


class TaskLogStore(Protocol):
    """A task's header, event log and history: the record every operation works on."""

    def create_task(
        self,
        record: TaskRecord,
        message: Message,
        event: StreamResponse,
        dedupe: Dedupe | None,
        push_config: TaskPushNotificationConfig | None = None,
    ) -> Message | None:
        """Write a new task; the message as stored (content too large for the table replaced
        by references, store/content.py), or None when stored as given."""
        ...

    def get_record(self, task_id: str) -> TaskRecord | None: ...

    def get_snapshot(self, task_id: str, history_length: int | None) -> TaskSnapshot | None: ...

    def find_dedupe(self, owner: str, message_id: str) -> tuple[str, str] | None:
        """(task id, content hash) of the live retry record, None when there is none or it
        has expired."""
        ...

    def apply_status(self, change: StatusChange) -> None: ...

    def append_event(
        self, task_id: str, seq: int, event: StreamResponse, event_id: str = ""
    ) -> bool:
        """Write event `seq` if there is none: True. If event `seq` exists and carries the same
        non-empty `event_id`, this write was already done (a re-run): False, nothing written.
        Otherwise ConflictError (another writer got `seq`)."""
        ...

    def read_events(
        self, task_id: str, after_seq: int, limit: int = 100
    ) -> list[tuple[int, StreamResponse]]: ...

    def last_seq(self, task_id: str) -> int: ...

    def save_flow_state(
        self, task_id: str, turn: int, flow_state: dict[str, Any], step: int | None = None
    ) -> None:
        """Conditional on the task WORKING at `turn` and, with `step`, on that step's outcome
        not saved yet (`flow_step` before (turn, step)); records (turn, step) as `flow_step`.
        ConflictError otherwise."""
        ...

    def read_artifacts(self, task_id: str) -> list[Artifact]: ...

    def read_history(self, task_id: str, history_length: int | None) -> list[Message]: ...

    def task_as_of(self, task_id: str, seq: int) -> Task | None: ...

    def get_event_json(self, task_id: str, seq: int) -> bytes | None: ...


class TaskListing(Protocol):
    """An owner's tasks, newest status first, with exact counts (ListTasks)."""

    def list_tasks(self, query: ListQuery) -> tuple[list[TaskRecord], str | None]:
        """One page and the token of the next (None on the last page); raises
        InvalidPageToken for a token this store did not issue. A page may be shorter than
        `page_size`, even empty, and still have a next one: a store may bound what one page
        reads (a filter that few of an owner's tasks pass); paging on finds the rest."""
        ...

    def count_tasks(self, query: ListQuery) -> int: ...

    def forget_expired(self, image: Mapping[str, Any]) -> bool:
        """Take a task whose header the table's TTL removed off the counters, so `totalSize`
        stays exact. `image`: the removed item's old image (deserialized) from the table's
        stream. True when it was a task header counted off now; False for any other item and
        for a header already counted off (a redelivered record): idempotent."""
        ...

    def read_listed(
        self, records: list[TaskRecord], include_artifacts: bool, history_length: int
    ) -> list[ListedContents]:
        """The artifacts (when asked) and the last `history_length` history messages of each
        listed record (from `list_tasks`), in the records' order: batched reads, never a read
        per task (on DynamoDB the calls grow only with the items read, 100 keys a call)."""
        ...


class PushConfigStore(Protocol):
    """A task's webhook configs (CRUD); `list_push_configs` also says which are parked."""

    def put_push_config(self, config: TaskPushNotificationConfig) -> None: ...

    def get_push_config(
        self, task_id: str, config_id: str
    ) -> TaskPushNotificationConfig | None: ...

    def list_push_configs(self, task_id: str) -> list[tuple[TaskPushNotificationConfig, bool]]: ...

    def push_configs_of(
        self, task_ids: Iterable[str]
    ) -> dict[str, list[tuple[TaskPushNotificationConfig, bool]]]:
        """`list_push_configs` of each task (a stream batch's), read together."""
        ...

    def delete_push_config(self, task_id: str, config_id: str) -> None: ...


class DeliveryStateStore(Protocol):
    """Per-config webhook delivery state: parking on the ordered retry queue, failure counts."""

    def park_push_config(self, task_id: str, config_id: str, seq: int) -> None: ...

    def queue_behind(self, task_id: str, config_id: str, seq: int) -> bool: ...

    def unpark_if_drained(self, task_id: str, config_id: str, seq: int) -> bool: ...

    def get_push_delivery(self, task_id: str, config_id: str) -> PushDelivery | None: ...

    def count_push_failure(self, task_id: str, config_id: str) -> int | None: ...

    def reset_push_failures(self, task_id: str, config_id: str) -> None: ...


class DelegationState(StrEnum):
    """Where one delegation stands."""

    SENDING = "sending"  # recorded with its round; its message is not known to be sent
    WAITING = "waiting"  # sent: the remote task runs, its news come by push or by polling
    SETTLED = "settled"  # a result is in, or none will come: `outcome` says which


@dataclass
class DelegationRecord:
    """One delegation of a step to a remote agent (a round is every delegation of one step).

    `key` is "{turn}.{step}.{index}" (its round: `round_of_key`); `token` authenticates the
    remote's push notifications for this delegation only. Remote values are as the remote
    sent them (wire JSON), bounded by the caller before they are stored."""

    task_id: str
    key: str
    agent_url: str
    token: str
    message: dict[str, Any]  # the Message to send (wire JSON)
    state: DelegationState = DelegationState.SENDING
    wait: str = "all"  # the round's: "all" or "first"
    count: int = 1  # delegations in the round
    forward: bool = False  # forward the remote's artifacts into the task as they arrive
    timeout_seconds: int = 3600
    credentials: str | None = None  # the secret holding the remote's headers (None: default)
    turn_context: dict[str, Any] | None = None  # the turn's execution context (wire JSON)
    mode: str = ""  # "push" or "poll", once the card was read
    deadline: float = 0.0  # epoch seconds: the wait ends (timed out) then
    remote_task_id: str | None = None
    remote_context_id: str | None = None
    remote_state: str | None = None  # TaskState value of the newest remote status applied
    remote_status_at: str | None = None  # its timestamp (RFC 3339), the order of statuses
    remote_message: dict[str, Any] | None = None  # that status's message (wire JSON)
    outcome: str | None = None  # when SETTLED: the DelegationOutcome value
    error: str | None = None  # when SETTLED without a remote result: why (safe to show)
    polls: int = 0  # polls made (the backoff's position)
    updated_at: str = ""

    @property
    def round(self) -> str:
        return round_of_key(self.key)


def round_of_key(key: str) -> str:
    """The round ("{turn}.{step}") of a delegation key ("{turn}.{step}.{index}")."""
    return key.rsplit(".", 1)[0]


class DelegationStore(Protocol):
    """A task's delegations to remote agents: rounds, their news, and the wait on them."""

    def begin_round(
        self,
        task_id: str,
        turn: int,
        step: int,
        records: list[DelegationRecord],
        flow_state: dict[str, Any],
    ) -> bool:
        """One write: the round's records (SENDING) and the header's flow state, `flow_step`
        (turn, step), `delegation_round` "{turn}.{step}" and `waiting`; conditional on the
        task WORKING at `turn` with that step's outcome not saved yet. False when this round
        began before (a re-run: its records are kept as they are); ConflictError when the task
        moved on (canceled)."""
        ...

    def get_delegation(self, task_id: str, key: str) -> DelegationRecord | None:
        """One delegation, read strongly consistent."""
        ...

    def round_delegations(self, task_id: str, round: str) -> list[DelegationRecord]:
        """Every delegation of a round, by index, read strongly consistent."""
        ...

    def task_delegations(self, task_id: str) -> list[DelegationRecord]:
        """Every delegation of the task, oldest round first."""
        ...

    def mark_sent(
        self,
        task_id: str,
        key: str,
        mode: str,
        deadline: float,
        remote_task_id: str | None,
        remote_context_id: str | None,
    ) -> bool:
        """SENDING → WAITING with what the send told; False when not SENDING (nothing
        written)."""
        ...

    def record_status(
        self, task_id: str, key: str, state: str, at: str, message: dict[str, Any] | None
    ) -> bool:
        """Apply a remote status newer than the one applied (`at` after
        `remote_status_at`, or none applied) to a SENDING or WAITING delegation (a fast
        remote's news may come before its send's answer): True. False (nothing written) for
        an older or equal one, or a settled delegation."""
        ...

    def bind_remote_task(
        self, task_id: str, key: str, remote_task_id: str, context_id: str
    ) -> bool:
        """Record the remote task a delegation's news are about, if none is recorded yet;
        True when it is (now or before) `remote_task_id`, False when it is another task."""
        ...

    def count_poll(self, task_id: str, key: str) -> None:
        """One more poll made (`polls`)."""
        ...

    def settle(
        self,
        task_id: str,
        key: str,
        outcome: str,
        error: str | None = None,
        state: str | None = None,
        message: dict[str, Any] | None = None,
    ) -> bool:
        """SENDING or WAITING → SETTLED with `outcome` (and the remote's final state and
        message when given): True once; False when already settled (nothing written)."""
        ...

    def note_seen(self, task_id: str, key: str, digest: str) -> bool:
        """Remember that a notification (its digest) was applied: True the first time, False
        when it was seen before. Kept as long as the task."""
        ...

    def end_wait(self, task_id: str, round: str) -> bool:
        """Stop the task waiting on `round` (the header's `waiting`, while its
        `delegation_round` is `round`): True for the one caller that ended it."""
        ...

    def resume_wait(self, task_id: str, round: str) -> None:
        """Undo `end_wait` (the next step could not be started): `waiting` again, if the
        task is still WORKING on `round`."""
        ...


class TaskStore(
    TaskLogStore, TaskListing, PushConfigStore, DeliveryStateStore, DelegationStore, Protocol
):
    """Everything the store offers (callers that need one concern take its Protocol)."""


@dataclass(frozen=True)
class LeaseGrant:
    """What `acquire_lease` got: the slot it holds, or (`slot` None) every slot was held and
    the earliest of them expires at `retry_at` (epoch seconds)."""

    slot: int | None
    retry_at: float = 0.0


class LeaseStore(Protocol):
    """Bounded pools of expiring leases (one per open long-lived connection), shared by every
    function instance: a pool of `slots` holds at most that many live leases at once."""

    def acquire_lease(
        self, pool: str, slots: int, lease_id: str, expires_at: float, now: float
    ) -> LeaseGrant:
        """Take a slot `0..slots-1` of `pool` that is free or whose lease expired before `now`,
        for `lease_id` until `expires_at`. Concurrent acquirers never share a slot; slots at or
        beyond `slots` (a bound since lowered) are neither taken nor counted."""
        ...

    def release_lease(self, pool: str, slot: int, lease_id: str) -> bool:
        """Free the slot if `lease_id` still holds it (True); False when it does not (expired
        and taken by another lease, or already freed): idempotent."""
        ...


@dataclass(frozen=True)
class ApiKeyRecord:
    """One API key as stored: its owner and the SHA-256 of the full key, never the key.
    `usage_key_id` / `usage_key`: its API Gateway API key in the usage plan (a random value of
    its own, returned by the authorizer as `usageIdentifierKey`)."""

    key_id: str
    principal: str
    secret_hash: str
    usage_key_id: str = ""
    usage_key: str = ""
    description: str = ""
    created_at: str = ""
    revoked_at: str | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class ApiKeyStore(Protocol):
    """The API keys of the deployment (issue, look up, revoke, list)."""

    def put_api_key(self, record: ApiKeyRecord) -> None:
        """Store a new key; ConflictError (failed `apiKey`) if its id exists: never
        overwrites (a revoked key stays revoked)."""
        ...

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None: ...

    def revoke_api_key(self, key_id: str) -> bool:
        """Mark the key revoked (its first revocation time is kept: idempotent). True when
        the key exists (revoked now or before), False for an unknown id."""
        ...

    def list_api_keys(self, principal: str | None = None) -> list[ApiKeyRecord]:
        """Every key (of `principal` when given), revoked ones included, by key id."""
        ...
