"""An in-memory TaskStore for unit tests: the four store interfaces on dicts (and an
in-memory ApiKeyStore, LeaseStore and ContentStore).

Test code only (production has one store, DynamoDB). It keeps the semantics the contract tests
(tests/contract/cases.py) pin for both: conditional writes raise ConflictError
naming the failed items, reads return copies, page tokens are opaque and validated.
"""

from __future__ import annotations

import base64
import binascii
import copy
import dataclasses
import hashlib
import io
import json
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from a2a_serverless import models
from a2a_serverless.store import (
    ApiKeyRecord,
    ConflictError,
    Dedupe,
    DelegationRecord,
    DelegationState,
    InvalidPageToken,
    LeaseGrant,
    ListQuery,
    PushDelivery,
    StatusChange,
    TaskRecord,
    TaskSnapshot,
    TooLarge,
    round_of_key,
)
from a2a_serverless.store.base import ListedContents
from a2a_serverless.store.content import object_key
from a2a_serverless.store.dynamodb import delegations as table_delegations
from a2a_serverless.store.dynamodb import keys
from a2a_serverless.store.fold import fold_events, task_from_events
from a2a_serverless.store.s3 import PART_BYTES, read_full


def _wire_json(event: models.StreamResponse) -> str:
    return json.dumps(event.wire(), separators=(",", ":"), ensure_ascii=False)


@dataclass
class _Push:
    """A stored config (as wire JSON + payload version, like the table) and its queue state."""

    config_json: str
    payload_version: str
    after_seq: int = 0
    parked: bool = False
    queued_through: int | None = None
    failures: int = 0

    def config(self) -> models.TaskPushNotificationConfig:
        config = models.TaskPushNotificationConfig.model_validate_json(self.config_json)
        return config.for_payload_version(self.payload_version).for_events_after(self.after_seq)


@dataclass
class _Task:
    record: TaskRecord
    status_ts: str  # the listing order: formatted status timestamp, then task id
    events: dict[int, str] = field(default_factory=dict)  # seq -> wire JSON
    history: dict[int, str] = field(default_factory=dict)  # index -> wire JSON
    event_ids: dict[int, str] = field(default_factory=dict)  # seq -> writer identity


def _push(config: models.TaskPushNotificationConfig) -> _Push:
    return _Push(json.dumps(config.wire()), config.payload_version, config.after_seq)


def _status_ts(status: models.TaskStatus) -> str:
    return models.format_timestamp(status.timestamp or datetime.now(UTC))


class InMemoryTaskStore:
    """TaskLogStore + TaskListing + PushConfigStore + DeliveryStateStore + DelegationStore in
    memory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one "transaction" at a time, like conditional writes
        self.tasks: dict[str, _Task] = {}
        self.dedupes: dict[tuple[str, str], tuple[str, str, int]] = {}
        self.pushes: dict[tuple[str, str], _Push] = {}
        self._expired: set[str] = set()  # tasks TTL removed, not yet counted off
        self.delegations: dict[tuple[str, str], DelegationRecord] = {}  # (task, key)
        self.seen: set[tuple[str, str, str]] = set()  # (task, key, digest)

    # -- task log --------------------------------------------------------------------------

    def create_task(
        self,
        record: TaskRecord,
        message: models.Message,
        event: models.StreamResponse,
        dedupe: Dedupe | None,
        push_config: models.TaskPushNotificationConfig | None = None,
    ) -> None:
        with self._lock:
            failed = []
            if record.task_id in self.tasks:
                failed += ["header", "event"]
            if dedupe is not None and self._dedupe_live(dedupe.owner, dedupe.message_id):
                failed.append("dedupe")
            if failed:
                raise ConflictError(f"condition failed on {', '.join(failed)}", tuple(failed))
            status_ts = _status_ts(record.status)
            stored = copy.deepcopy(record)
            stored.history_count = 1
            stored.created_at = record.created_at or status_ts
            stored.metadata = record.metadata or None
            task = _Task(stored, status_ts)
            task.events[record.status_seq] = _wire_json(event)
            task.history[1] = json.dumps(message.wire())
            self.tasks[record.task_id] = task
            self._write_extras(record.task_id, dedupe, push_config)

    def _write_extras(
        self,
        task_id: str,
        dedupe: Dedupe | None,
        push_config: models.TaskPushNotificationConfig | None,
    ) -> None:
        if dedupe is not None:
            self.dedupes[(dedupe.owner, dedupe.message_id)] = (
                task_id,
                dedupe.content_hash,
                dedupe.expires_at,
            )
        if push_config is not None:
            self.pushes[(task_id, push_config.id or "")] = _push(push_config)

    def apply_status(self, change: StatusChange) -> None:
        with self._lock:
            task = self.tasks.get(change.task_id)
            record = task.record if task else None
            failed = []
            if (
                record is None
                or record.state != change.from_state
                or (change.expected_turn is not None and record.turn != change.expected_turn)
                or (
                    change.history_message is not None
                    and record.history_count != change.history_index - 1
                )
            ):
                failed.append("header")
            if task is not None and change.seq in task.events:
                failed.append("event")
            if change.dedupe is not None and self._dedupe_live(
                change.dedupe.owner, change.dedupe.message_id
            ):
                failed.append("dedupe")
            if failed:
                raise ConflictError(f"condition failed on {', '.join(failed)}", tuple(failed))
            assert task is not None and record is not None
            record.state = change.to_status.state
            record.status = change.to_status.model_copy(deep=True)
            record.status_seq = change.seq
            record.turn = change.turn
            task.status_ts = _status_ts(change.to_status)
            if change.execution is not None:
                record.execution = change.execution
            if change.flow_state is not None:
                record.flow_state = copy.deepcopy(change.flow_state)
            if change.history_message is not None:
                record.history_count = change.history_index
                task.history[change.history_index] = json.dumps(change.history_message.wire())
            task.events[change.seq] = _wire_json(change.event)
            self._write_extras(change.task_id, change.dedupe, change.push_config)

    def append_event(
        self, task_id: str, seq: int, event: models.StreamResponse, event_id: str = ""
    ) -> bool:
        with self._lock:
            task = self.tasks.get(task_id)
            if task is None:
                # The table would store an orphan event; nothing reads one without a header.
                task = self.tasks.setdefault(task_id, _Task(_orphan(task_id), ""))
            if seq in task.events:
                if event_id and task.event_ids.get(seq) == event_id:
                    return False
                raise ConflictError(f"event {seq} of {task_id} exists", ("event",))
            task.events[seq] = _wire_json(event)
            if event_id:
                task.event_ids[seq] = event_id
            return True

    def save_flow_state(
        self, task_id: str, turn: int, flow_state: dict[str, Any], step: int | None = None
    ) -> None:
        with self._lock:
            task = self.tasks.get(task_id)
            if (
                task is None
                or task.record.turn != turn
                or task.record.state != models.TaskState.WORKING
                or (
                    step is not None
                    and task.record.flow_step is not None
                    and task.record.flow_step >= (turn, step)
                )
            ):
                raise ConflictError("task moved on", ("header",))
            task.record.flow_state = copy.deepcopy(flow_state)
            if step is not None:
                task.record.flow_step = (turn, step)

    def _task(self, task_id: str) -> _Task | None:
        task = self.tasks.get(task_id)
        return task if task is not None and task.status_ts else None

    def get_record(self, task_id: str) -> TaskRecord | None:
        task = self._task(task_id)
        return copy.deepcopy(task.record) if task else None

    def find_dedupe(self, owner: str, message_id: str) -> tuple[str, str] | None:
        found = self._dedupe_live(owner, message_id)
        return (found[0], found[1]) if found else None

    def _dedupe_live(self, owner: str, message_id: str) -> tuple[str, str, int] | None:
        found = self.dedupes.get((owner, message_id))
        if found is None or (found[2] and found[2] <= time.time()):
            return None
        return found

    def _events(
        self, task_id: str, first: int = 0, last: int | None = None
    ) -> list[models.StreamResponse]:
        task = self.tasks.get(task_id)
        if task is None:
            return []
        return [
            models.StreamResponse.model_validate_json(body)
            for seq, body in sorted(task.events.items())
            if first <= seq and (last is None or seq <= last)
        ]

    def get_snapshot(self, task_id: str, history_length: int | None) -> TaskSnapshot | None:
        task = self._task(task_id)
        if task is None:
            return None
        record = copy.deepcopy(task.record)
        status, artifacts = fold_events(self._events(task_id), record.status)
        return TaskSnapshot(
            record=record,
            status=status or record.status,
            artifacts=artifacts,
            history=self.read_history(task_id, history_length),
            seq=max(task.events, default=0),
            event_ids=frozenset(task.event_ids.values()),
        )

    def read_events(
        self, task_id: str, after_seq: int, limit: int = 100
    ) -> list[tuple[int, models.StreamResponse]]:
        task = self.tasks.get(task_id)
        if task is None:
            return []
        seqs = sorted(seq for seq in task.events if seq > after_seq)[:limit]
        return [(seq, models.StreamResponse.model_validate_json(task.events[seq])) for seq in seqs]

    def last_seq(self, task_id: str) -> int:
        task = self.tasks.get(task_id)
        return max(task.events, default=0) if task else 0

    def read_artifacts(self, task_id: str) -> list[models.Artifact]:
        _, artifacts = fold_events(e for e in self._events(task_id) if e.status_update is None)
        return artifacts

    def read_history(self, task_id: str, history_length: int | None) -> list[models.Message]:
        task = self.tasks.get(task_id)
        if task is None or history_length == 0:
            return []
        bodies = [body for _, body in sorted(task.history.items())]
        if history_length is not None:
            bodies = bodies[-history_length:]
        return [models.Message.model_validate_json(body) for body in bodies]

    def task_as_of(self, task_id: str, seq: int) -> models.Task | None:
        return task_from_events(task_id, self._events(task_id, 0, seq))

    def get_event_json(self, task_id: str, seq: int) -> bytes | None:
        task = self.tasks.get(task_id)
        body = task.events.get(seq) if task else None
        return body.encode() if body is not None else None

    # -- listing ---------------------------------------------------------------------------

    def _matching(self, query: ListQuery) -> list[_Task]:
        after = keys.status_at_or_after(query.status_after) if query.status_after else None
        found = [
            task
            for task in self.tasks.values()
            if task.status_ts
            and task.record.owner == query.owner
            and (query.context_id is None or task.record.context_id == query.context_id)
            and (query.state is None or task.record.state == query.state)
            and (after is None or task.status_ts >= after)
        ]
        return sorted(found, key=lambda t: (t.status_ts, t.record.task_id), reverse=True)

    def list_tasks(self, query: ListQuery) -> tuple[list[TaskRecord], str | None]:
        tasks = self._matching(query)
        if query.page_token:
            position = _decode_token(query.page_token)
            tasks = [t for t in tasks if (t.status_ts, t.record.task_id) < position]
        page = tasks[: query.page_size]
        token = None
        if len(tasks) > query.page_size and page:
            token = _encode_token((page[-1].status_ts, page[-1].record.task_id))
        records = [copy.deepcopy(t.record) for t in page]
        for record, task in zip(records, page, strict=True):
            record.page_cursor = _encode_token((task.status_ts, task.record.task_id))
        return records, token

    def read_listed(
        self, records: list[TaskRecord], include_artifacts: bool, history_length: int
    ) -> list[ListedContents]:
        return [
            ListedContents(
                artifacts=self.read_artifacts(r.task_id) if include_artifacts else [],
                history=self.read_history(r.task_id, history_length) if history_length else [],
            )
            for r in records
        ]

    def count_tasks(self, query: ListQuery) -> int:
        return len(self._matching(query))

    def expire(self, task_id: str) -> dict[str, Any]:
        """What the table's TTL does to a task (test helper): the task is gone; returns the
        header's old image as the table's stream carries it (deserialized)."""
        with self._lock:
            task = self.tasks.pop(task_id)
            self._expired.add(task_id)
            for found in [k for k in self.delegations if k[0] == task_id]:
                del self.delegations[found]
            self.seen = {seen for seen in self.seen if seen[0] != task_id}
        record = task.record
        return {
            "pk": f"T#{task_id}",
            "sk": "H",
            "owner": record.owner,
            "contextId": record.context_id,
            "state": record.state.value,
        }

    def forget_expired(self, image: Mapping[str, Any]) -> bool:
        # Counts come from the live tasks here: only the once-only answer is to keep.
        pk, sk = image.get("pk"), image.get("sk")
        if not (isinstance(pk, str) and pk.startswith("T#") and sk == "H"):
            return False
        with self._lock:
            if pk[2:] not in self._expired:
                return False
            self._expired.discard(pk[2:])
            return True

    # -- push configs ----------------------------------------------------------------------

    def put_push_config(self, config: models.TaskPushNotificationConfig) -> None:
        self.pushes[(config.task_id or "", config.id or "")] = _push(config)

    def get_push_config(
        self, task_id: str, config_id: str
    ) -> models.TaskPushNotificationConfig | None:
        found = self.pushes.get((task_id, config_id))
        return found.config() if found else None

    def list_push_configs(
        self, task_id: str
    ) -> list[tuple[models.TaskPushNotificationConfig, bool]]:
        return [
            (push.config(), push.parked)
            for (tid, _), push in sorted(self.pushes.items())
            if tid == task_id
        ]

    def push_configs_of(
        self, task_ids: Iterable[str]
    ) -> dict[str, list[tuple[models.TaskPushNotificationConfig, bool]]]:
        return {task_id: self.list_push_configs(task_id) for task_id in task_ids}

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        self.pushes.pop((task_id, config_id), None)

    # -- delivery state --------------------------------------------------------------------

    def get_push_delivery(self, task_id: str, config_id: str) -> PushDelivery | None:
        found = self.pushes.get((task_id, config_id))
        if found is None:
            return None
        return PushDelivery(found.config(), found.failures, found.queued_through)

    def park_push_config(self, task_id: str, config_id: str, seq: int) -> None:
        with self._lock:
            found = self.pushes.get((task_id, config_id))
            if found is not None:
                found.parked, found.queued_through = True, seq

    def queue_behind(self, task_id: str, config_id: str, seq: int) -> bool:
        with self._lock:
            found = self.pushes.get((task_id, config_id))
            if found is None or not found.parked:
                return False
            if found.queued_through is not None and found.queued_through < seq:
                found.queued_through = seq
            return True

    def unpark_if_drained(self, task_id: str, config_id: str, seq: int) -> bool:
        with self._lock:
            found = self.pushes.get((task_id, config_id))
            if found is None or not found.parked or found.queued_through != seq:
                return False
            found.parked, found.queued_through, found.failures = False, None, 0
            return True

    def count_push_failure(self, task_id: str, config_id: str) -> int | None:
        with self._lock:
            found = self.pushes.get((task_id, config_id))
            if found is None:
                return None
            found.failures += 1
            return found.failures

    def reset_push_failures(self, task_id: str, config_id: str) -> None:
        found = self.pushes.get((task_id, config_id))
        if found is not None:
            found.failures = 0

    # -- delegations (the table's bounds: store/dynamodb/delegations.py) -------------------

    def begin_round(
        self,
        task_id: str,
        turn: int,
        step: int,
        records: list[DelegationRecord],
        flow_state: dict[str, Any],
    ) -> bool:
        round = f"{turn}.{step}"
        if not 0 < len(records) <= table_delegations.MAX_ROUND_RECORDS:
            raise ValueError("a round has 1 to 99 delegations")
        if any(round_of_key(r.key) != round for r in records):
            raise ValueError(f"every delegation of round {round} has a key {round}.{{index}}")
        if len({r.key for r in records}) != len(records):
            raise ValueError("a round's delegations have distinct keys")
        for record in records:
            if record.task_id != task_id or keys.delegation_sk(record.key) is None:
                raise ValueError(f"{record.key!r} is no delegation of {task_id}")
            size = keys.item_bytes(keys.delegation_values(record))
            if size > table_delegations.MAX_DELEGATION_BYTES:
                raise TooLarge(
                    "a delegation", size, table_delegations.MAX_DELEGATION_BYTES, "MAX_ITEM_BYTES"
                )
        with self._lock:
            task = self._task(task_id)
            live = (
                task is not None
                and task.record.turn == turn
                and task.record.state == models.TaskState.WORKING
            )
            if not live or (
                task is not None
                and task.record.flow_step is not None
                and task.record.flow_step >= (turn, step)
            ):
                if live and (task_id, records[0].key) in self.delegations:
                    return False
                raise ConflictError("task moved on", ("header",))
            assert task is not None
            now = models.format_timestamp(datetime.now(UTC))
            for record in records:
                stored = copy.deepcopy(record)
                stored.updated_at = stored.updated_at or now
                self.delegations[(task_id, record.key)] = stored
            task.record.flow_state = copy.deepcopy(flow_state)
            task.record.flow_step = (turn, step)
            task.record.delegation_round = round
            task.record.waiting = True
            return True

    def get_delegation(self, task_id: str, key: str) -> DelegationRecord | None:
        found = self.delegations.get((task_id, key))
        return copy.deepcopy(found) if found else None

    def _delegations(self, task_id: str, prefix: str | None) -> list[DelegationRecord]:
        found = [
            (keys.delegation_sk(key) or "", record)
            for (tid, key), record in self.delegations.items()
            if tid == task_id
        ]
        return [
            copy.deepcopy(record)
            for sk, record in sorted(found, key=lambda pair: pair[0])
            if prefix is not None and sk.startswith(prefix)
        ]

    def round_delegations(self, task_id: str, round: str) -> list[DelegationRecord]:
        return self._delegations(task_id, keys.round_sk_prefix(round))

    def task_delegations(self, task_id: str) -> list[DelegationRecord]:
        return self._delegations(task_id, keys.DELEGATION_PREFIX)

    def _touched(self, record: DelegationRecord) -> None:
        record.updated_at = models.format_timestamp(datetime.now(UTC))

    def mark_sent(
        self,
        task_id: str,
        key: str,
        mode: str,
        deadline: float,
        remote_task_id: str | None,
        remote_context_id: str | None,
    ) -> bool:
        with self._lock:
            found = self.delegations.get((task_id, key))
            if found is None or found.state != DelegationState.SENDING:
                return False
            found.state, found.mode, found.deadline = DelegationState.WAITING, mode, deadline
            if found.remote_task_id is None:
                found.remote_task_id = remote_task_id
            if found.remote_context_id is None:
                found.remote_context_id = remote_context_id
            self._touched(found)
            return True

    def record_status(
        self, task_id: str, key: str, state: str, at: str, message: dict[str, Any] | None
    ) -> bool:
        order = keys.status_order(at)
        _check_remote_message(message)
        with self._lock:
            found = self.delegations.get((task_id, key))
            if found is None or found.state == DelegationState.SETTLED:
                return False
            applied = found.remote_status_at
            if applied is not None and keys.status_order(applied) >= order:
                return False
            found.remote_state, found.remote_status_at = state, at
            found.remote_message = copy.deepcopy(message)
            self._touched(found)
            return True

    def bind_remote_task(
        self, task_id: str, key: str, remote_task_id: str, context_id: str
    ) -> bool:
        with self._lock:
            found = self.delegations.get((task_id, key))
            if found is None:
                return False
            if found.remote_task_id is None:
                found.remote_task_id = remote_task_id
                found.remote_context_id = found.remote_context_id or context_id
            return found.remote_task_id == remote_task_id

    def count_poll(self, task_id: str, key: str) -> None:
        with self._lock:
            found = self.delegations.get((task_id, key))
            if found is not None:
                found.polls += 1

    def settle(
        self,
        task_id: str,
        key: str,
        outcome: str,
        error: str | None = None,
        state: str | None = None,
        message: dict[str, Any] | None = None,
    ) -> bool:
        _check_remote_message(message)
        with self._lock:
            found = self.delegations.get((task_id, key))
            if found is None or found.state == DelegationState.SETTLED:
                return False
            found.state, found.outcome = DelegationState.SETTLED, outcome
            if error is not None:
                found.error = table_delegations.cut_error(error)
            if state is not None:
                found.remote_state = state
            if message is not None:
                found.remote_message = copy.deepcopy(message)
            self._touched(found)
            return True

    def note_seen(self, task_id: str, key: str, digest: str) -> bool:
        sk = keys.seen_sk(key, digest)
        with self._lock:
            if sk is None or not keys.key_fits(keys.task_key(task_id, sk)):
                return False  # no delegation has that key: the table could not hold it
            if (task_id, key, digest) in self.seen:
                return False
            self.seen.add((task_id, key, digest))
            return True

    def end_wait(self, task_id: str, round: str) -> bool:
        with self._lock:
            task = self._task(task_id)
            if task is None or not task.record.waiting or task.record.delegation_round != round:
                return False
            task.record.waiting = False
            return True

    def resume_wait(self, task_id: str, round: str) -> None:
        with self._lock:
            task = self._task(task_id)
            if (
                task is not None
                and task.record.state == models.TaskState.WORKING
                and task.record.delegation_round == round
            ):
                task.record.waiting = True


class InMemoryApiKeyStore:
    """ApiKeyStore in memory: records by key id (frozen dataclasses: reads cannot alter them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keys: dict[str, ApiKeyRecord] = {}

    def put_api_key(self, record: ApiKeyRecord) -> None:
        with self._lock:
            if record.key_id in self.keys:
                raise ConflictError(f"API key {record.key_id} exists", ("apiKey", "listing"))
            self.keys[record.key_id] = record

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        return self.keys.get(key_id)

    def revoke_api_key(self, key_id: str) -> bool:
        with self._lock:
            record = self.keys.get(key_id)
            if record is None:
                return False
            if record.revoked_at is None:
                now = models.format_timestamp(datetime.now(UTC))
                self.keys[key_id] = dataclasses.replace(record, revoked_at=now)
            return True

    def list_api_keys(self, principal: str | None = None) -> list[ApiKeyRecord]:
        return [
            record
            for _, record in sorted(self.keys.items())
            if principal is None or record.principal == principal
        ]


class InMemoryLeaseStore:
    """LeaseStore in memory: (pool, slot) -> (lease id, expiry), whole seconds as DynamoDB's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.leases: dict[tuple[str, int], tuple[str, int]] = {}

    def acquire_lease(
        self, pool: str, slots: int, lease_id: str, expires_at: float, now: float
    ) -> LeaseGrant:
        with self._lock:
            held = {
                slot: expiry
                for (name, slot), (_, expiry) in self.leases.items()
                if name == pool and slot < slots and expiry >= int(now)
            }
            free = [slot for slot in range(slots) if slot not in held]
            if not free:
                return LeaseGrant(None, min(held.values(), default=now + 1))
            self.leases[(pool, free[0])] = (lease_id, math.ceil(expires_at))
            return LeaseGrant(free[0])

    def release_lease(self, pool: str, slot: int, lease_id: str) -> bool:
        with self._lock:
            held = self.leases.get((pool, slot))
            if held is None or held[0] != lease_id:
                return False
            del self.leases[(pool, slot)]
            return True


class InMemoryContentStore:
    """ContentStore (store/content.py) in memory, by (task id, name). `put_stream` reads its
    source in S3's part size (store/s3.py PART_BYTES) and counts the parts it would upload;
    with `keep=False` only each object's size and sha256 are kept (a large file's bytes are
    dropped as they pass). `opened` lists the objects read, in order."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.objects: dict[tuple[str, str], bytes] = {}
        self.media_types: dict[tuple[str, str], str] = {}
        self.sizes: dict[tuple[str, str], int] = {}
        self.digests: dict[tuple[str, str], str] = {}
        self.parts: dict[tuple[str, str], int] = {}
        self.opened: list[tuple[str, str]] = []

    def put(self, task_id: str, name: str, body: bytes, media_type: str) -> None:
        self.put_stream(task_id, name, io.BytesIO(body), media_type)

    def put_stream(self, task_id: str, name: str, source: IO[bytes], media_type: str) -> int:
        key = (task_id, name)
        digest, size, parts, kept = hashlib.sha256(), 0, 0, []
        while True:
            piece = read_full(source, PART_BYTES)
            if piece or not parts:
                parts += 1
                digest.update(piece)
                size += len(piece)
                if self.keep:
                    kept.append(piece)
            if len(piece) < PART_BYTES:
                break
        if self.keep:
            self.objects[key] = b"".join(kept)
        self.media_types[key], self.sizes[key] = media_type, size
        self.digests[key], self.parts[key] = digest.hexdigest(), parts
        return size

    def open(self, task_id: str, name: str) -> IO[bytes]:
        self.opened.append((task_id, name))
        return io.BytesIO(self.objects[(task_id, name)])

    def link(self, task_id: str, name: str) -> str:
        return f"https://content.example/{object_key(task_id, name)}?signed"


def _check_remote_message(message: dict[str, Any] | None) -> None:
    """TooLarge for a remote message past the table's bound for it."""
    if message is not None:
        keys.checked_json(
            message,
            "the remote status message",
            table_delegations.MAX_REMOTE_MESSAGE_BYTES,
            "MAX_STATUS_MESSAGE_BYTES",
        )


def _orphan(task_id: str) -> TaskRecord:
    """A placeholder record for events written before (or without) their task's header."""
    return TaskRecord(
        task_id,
        "",
        "",
        models.TaskState.SUBMITTED,
        models.TaskStatus(state=models.TaskState.SUBMITTED),
        0,
        0,
    )


def _encode_token(position: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(position)).encode()).decode().rstrip("=")


def _decode_token(token: str) -> tuple[str, str]:
    try:
        position = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidPageToken("is not a token issued by this store") from None
    if not (
        isinstance(position, list)
        and len(position) == 2
        and all(isinstance(part, str) and part for part in position)
    ):
        raise InvalidPageToken("is not a token issued by this store")
    return position[0], position[1]
