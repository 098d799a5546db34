"""What AWS forgets over time and moto keeps forever, forgotten by the local stack too.

- DynamoDB TTL: expired items deleted with a service REMOVE stream record
  (`A2A_LOCAL_TTL_SECONDS` shortens expiry, e.g. for scripts/soak).
- DynamoDB Streams: records read by every mapping, or older than 24 h, trimmed.
- Step Functions: finished executions beyond KEEP_FINISHED_EXECUTIONS dropped; moto's
  interpreter threads (`TMP_THREADS`) forgotten once finished.
- S3 lifecycle: the content bucket's objects deleted RetentionDays after they were written
  (shifted like the items).
`Sweeper` runs these in a thread every `interval` seconds; `sweep()` runs them once.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from a2a_serverless.local.patching import DYNAMODB_LOCK
from a2a_serverless.local.resources import ACCOUNT

logger = logging.getLogger(__name__)

# Local-only: seconds after which an item written with the RetentionDays TTL expires.
LOCAL_TTL_ENV = "A2A_LOCAL_TTL_SECONDS"
TTL_SERVICE_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
STREAM_RETENTION_SECONDS = 24 * 3600
READ_RECORDS_KEPT_SECONDS = 30.0
FIVE_YEARS_SECONDS = 5 * 365 * 86400
KEEP_FINISHED_EXECUTIONS = 200


def local_ttl_shift(retention_days: int) -> float:
    """Seconds by which expiry moves earlier locally (0 unless A2A_LOCAL_TTL_SECONDS is set)."""
    raw = os.environ.get(LOCAL_TTL_ENV, "").strip()
    if not raw:
        return 0.0
    return max(0.0, retention_days * 86400 - float(raw))


def _expiry(item: Any, attribute: str) -> float | None:
    value = item.attrs.get(attribute)
    if value is None or value.type != "N":
        return None  # not a Number: TTL ignores the item
    try:
        return float(Decimal(value.value))
    except (InvalidOperation, ValueError):
        return None


# An item's TTL beyond the local one by more than this is a margin item (see _local_due).
MARGIN_SLACK_SECONDS = 1.0
# A margin item's scaled margin is at least this: a saturated stack's stream backlog
# (scripts/soak at 8 workers: lag p95 38 s) must not outlast a counter its removals decrement.
LOCAL_MARGIN_FLOOR_SECONDS = 60.0
# Item key -> (its TTL value, when a sweep first saw that value): clocks of the scaled items.
MarginClocks = dict[tuple[Any, Any], tuple[float, float]]


def expire_items(
    table: Any,
    now: float | None = None,
    shift: float = 0.0,
    retention_seconds: float = 0.0,
    clocks: MarginClocks | None = None,
) -> int:
    """Delete the expired items of a moto table as DynamoDB TTL does; how many.

    `shift` moves every expiry earlier (A2A_LOCAL_TTL_SECONDS). With `retention_seconds` (the
    template's RetentionDays) and `clocks` (kept by the caller between sweeps, updated here),
    an item whose TTL was set for another span than RetentionDays has that span scaled as
    RetentionDays was (see `_local_due`)."""
    if table.ttl.get("TimeToLiveStatus") != "ENABLED" or not table.ttl.get("AttributeName"):
        return 0
    attribute = table.ttl["AttributeName"]
    now = time.time() if now is None else now
    with DYNAMODB_LOCK:
        partitions = list(table.items.values())
    seen: MarginClocks = {}
    expired = []
    for partition in partitions:
        for item in list(partition.values()) if table.range_key_attr else [partition]:
            expiry = _expiry(item, attribute)
            if expiry is None or not now - FIVE_YEARS_SECONDS < expiry - shift:
                continue
            key = (item.hash_key, item.range_key)
            due = _local_due(key, expiry, now, shift, retention_seconds, clocks, seen)
            if due <= now:
                expired.append((key, expiry))
    if clocks is not None:
        clocks.clear()  # only the items still there keep a clock: bounded by the table
        clocks.update(seen)
    deleted = 0
    for (hash_key, range_key), expiry in expired:
        with DYNAMODB_LOCK:
            item = table.get_item(hash_key, range_key)
            if item is None or _expiry(item, attribute) != expiry:
                continue  # deleted, or rewritten meanwhile with another expiry
            shard = table.stream_shard
            records_before = len(shard.items) if shard is not None else 0
            table.delete_item(hash_key, range_key)
            if shard is not None and len(shard.items) > records_before:
                shard.items[-1].record["userIdentity"] = dict(TTL_SERVICE_IDENTITY)
            deleted += 1
        if clocks is not None:
            clocks.pop((hash_key, range_key), None)
    return deleted


def expire_objects(
    buckets: list[Any], now: float | None = None, shift: float = 0.0, retention_seconds: float = 0.0
) -> int:
    """Delete the objects of moto buckets older than `retention_seconds` (less `shift`), as
    the bucket's lifecycle rule does; how many."""
    if retention_seconds <= 0:
        return 0
    from moto.s3.models import s3_backends

    now = time.time() if now is None else now
    backend = s3_backends[ACCOUNT]["aws"]
    deleted = 0
    for bucket in buckets:
        for name, key in list(bucket.keys.items()):
            if key.last_modified.timestamp() + retention_seconds - shift <= now:
                backend.delete_object(bucket.name, name)
                deleted += 1
    return deleted


def _local_due(
    key: tuple[Any, Any],
    expiry: float,
    now: float,
    shift: float,
    retention_seconds: float,
    clocks: MarginClocks | None,
    seen: MarginClocks,
) -> float:
    """When the item expires locally: `expiry - shift` for an item written to expire
    RetentionDays later; an item set for another span (ListTasks counters, expiry markers)
    keeps that span scaled by local TTL / RetentionDays, from the first sweep that saw it."""
    due = expiry - shift
    local_ttl = retention_seconds - shift
    if clocks is None or shift <= 0 or local_ttl <= 0:
        return due
    clock = clocks.get(key)
    first_seen = clock[1] if clock is not None and clock[0] == expiry else now
    span = expiry - first_seen
    margin = due - first_seen - local_ttl
    if not (margin > MARGIN_SLACK_SECONDS or 0 < span < retention_seconds / 2):
        return due  # a task's own item, or one whose TTL has passed on AWS too
    seen[key] = (expiry, first_seen)
    if margin > MARGIN_SLACK_SECONDS:
        # Not below the floor: a counter must outlive its tasks' removals through the stream.
        scaled = max(margin * local_ttl / retention_seconds, LOCAL_MARGIN_FLOOR_SECONDS)
        return first_seen + local_ttl + scaled
    return first_seen + span * local_ttl / retention_seconds


def trim_stream(
    table: Any,
    read_up_to: int | None,
    now: float | None = None,
    keep_read_seconds: float = READ_RECORDS_KEPT_SECONDS,
) -> int:
    """Drop the table's stream records below sequence number `read_up_to` (what every
    mapping has read past; None: no mapping reads, keep them) once `keep_read_seconds` old,
    and any older than 24 h."""
    shard = table.stream_shard
    if shard is None:
        return 0
    now = time.time() if now is None else now
    oldest_kept = dt.datetime.fromtimestamp(now - STREAM_RETENTION_SECONDS, dt.UTC)
    newest_read_dropped = dt.datetime.fromtimestamp(now - keep_read_seconds, dt.UTC)
    with DYNAMODB_LOCK:
        count = 0
        first = shard.starting_sequence_number
        for record in shard.items:
            seq = first + count
            created = record.record["dynamodb"].get("ApproximateCreationDateTime")
            created = _aware(created) if created is not None else None
            too_old = created is not None and created < oldest_kept
            read = read_up_to is not None and seq < read_up_to
            if not (too_old or (read and (created is None or created <= newest_read_dropped))):
                break
            count += 1
        if count:
            # moto numbers records by their place in the list: the list starts further on.
            del shard.items[:count]
            shard.starting_sequence_number += count
    return count


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def drop_finished_executions(keep: int = KEEP_FINISHED_EXECUTIONS) -> int:
    """Drop all but the newest `keep` finished executions of every state machine of moto."""
    from moto.stepfunctions.models import stepfunctions_backends
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    dropped = 0
    accounts: list[Any] = [
        *stepfunctions_backends.values(),
        *stepfunctions_parser_backends.values(),
    ]
    for account in accounts:
        for backend in list(account.values()):
            for machine in list(getattr(backend, "state_machines", [])):
                executions = machine.executions
                finished = [e for e in list(executions) if _status(e) != "RUNNING"]
                for execution in finished[: max(0, len(finished) - keep)]:
                    try:
                        executions.remove(execution)  # one atomic list operation
                        dropped += 1
                    except ValueError:
                        pass
    return dropped


def forget_finished_threads() -> int:
    """Remove the threads that have run and ended from moto's Step Functions thread list; how
    many. Each is removed on its own (one atomic list operation), so a thread the interpreter
    appends meanwhile is kept; one appended but not yet started (no ident) is kept too."""
    from moto.stepfunctions.parser.utils import TMP_THREADS

    forgotten = 0
    for thread in [t for t in list(TMP_THREADS) if t.ident is not None and not t.is_alive()]:
        try:
            TMP_THREADS.remove(thread)
            forgotten += 1
        except ValueError:
            pass
    return forgotten


def _status(execution: Any) -> str:
    status = getattr(execution, "status", "RUNNING")
    return str(getattr(status, "value", status))


# Unshifted expiry is days away, so the full-table read for expired items runs once a minute.
UNSHIFTED_ITEM_SWEEP_SECONDS = 60.0


class Sweeper:
    """Runs the sweeps every `interval` seconds in a daemon thread until stopped (the table's
    items every `item_interval`: `interval` when expiry is shifted, else a minute)."""

    def __init__(
        self,
        tables: Callable[[], list[Any]],
        stream_read_up_to: Callable[[], int | None],
        shift: float = 0.0,
        interval: float = 2.0,
        retention_seconds: float = 0.0,
        buckets: Callable[[], list[Any]] = list,
    ) -> None:
        self._tables = tables
        self._buckets = buckets
        self._read_up_to = stream_read_up_to
        self.shift = shift
        self.retention_seconds = retention_seconds
        self._clocks: MarginClocks = {}  # one table per stack (several would need one each)
        self.interval = interval
        self.deleted = 0
        self.deleted_objects = 0
        self.trimmed = 0
        self.dropped_executions = 0
        self.forgotten_threads = 0
        self.item_interval = interval if shift else UNSHIFTED_ITEM_SWEEP_SECONDS
        self._items_swept_at: float | None = None  # monotonic time of the thread's last read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self, now: float | None = None, items: bool = True) -> None:
        """One sweep: expired items and objects (unless `items` is False), read stream
        records, finished executions and threads."""
        for table in self._tables():
            if items:
                self.deleted += expire_items(
                    table, now, self.shift, self.retention_seconds, self._clocks
                )
            self.trimmed += trim_stream(table, self._read_up_to(), now)
        if items:
            self.deleted_objects += expire_objects(
                self._buckets(), now, self.shift, self.retention_seconds
            )
        self.dropped_executions += drop_finished_executions()
        self.forgotten_threads += forget_finished_threads()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="local-ttl-sweeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            last = self._items_swept_at
            items = last is None or time.monotonic() - last >= self.item_interval
            try:
                self.sweep(items=items)
            except Exception:  # the sweeper survives what moto throws; the next sweep retries
                logger.exception("local TTL sweep failed")
            if items:
                self._items_swept_at = time.monotonic()
