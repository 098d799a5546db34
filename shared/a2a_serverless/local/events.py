"""Lambda event source mappings of template.yaml, emulated over moto.

- DynamoDB stream: StartingPosition, BatchSize, FilterCriteria, ReportBatchItemFailures,
  BisectBatchOnFunctionError, MaximumRetryAttempts, OnFailure (SQS), ParallelizationFactor
  (lanes by a stable hash of partition and sort key).
- SQS: BatchSize, batchItemFailures; FIFO order and RedrivePolicy are moto's.
Each mapping is polled by one thread at Lambda's cadence, or by `poll_once()`
(`LocalStack(event_sources="manual")`); `drain()` waits until every mapping is idle.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from a2a_serverless.local.calls import acting_as
from a2a_serverless.local.patching import DYNAMODB_LOCK

logger = logging.getLogger(__name__)

Invoke = Callable[[dict[str, Any]], Any]
# After a poll that found nothing: a queue poller looks again soon (Lambda long-polls SQS, so a
# message is received as it arrives); a stream shard is polled at Lambda's base rate, 4 a
# second (a quiet stack's first delivery waits for that poll, as a deployed one does).
IDLE_POLL_SECONDS = 0.05
STREAM_IDLE_POLL_SECONDS = 0.25
# Records per read ahead (GetRecords allows 1000): a batch needing more reads again, so a
# backlog is not all copied at once.
STREAM_READ_LIMIT = 100
# Lambda backs off between retries of a failing stream batch; locally a short, growing pause.
RETRY_PAUSE_SECONDS = 0.1
RETRY_PAUSE_CAP_SECONDS = 2.0


# -- filter criteria (the event-pattern subset Lambda accepts) ------------------------------

_NUMERIC_CHECKS: dict[str, Callable[[float, float], bool]] = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _same_literal(rule: Any, value: Any) -> bool:
    """JSON equality: `true` is not `1` (Python's `True == 1` is)."""
    if isinstance(rule, bool) or isinstance(value, bool):
        return isinstance(rule, bool) and isinstance(value, bool) and rule is value
    return value == rule


def _string_operator(op: str, arg: Any, value: Any) -> bool:
    if not isinstance(arg, str):
        raise ValueError(f"filter operator {op!r} with {arg!r} is not supported by the local stack")
    if not isinstance(value, str):
        return False
    if op == "prefix":
        return value.startswith(arg)
    if op == "suffix":
        return value.endswith(arg)
    return value.lower() == arg.lower()  # equals-ignore-case


def _anything_but(arg: Any, value: Any) -> bool:
    if isinstance(arg, dict):  # {"anything-but": {"prefix": "x"}} and the like
        ((op, inner),) = arg.items()
        if op not in ("prefix", "suffix", "equals-ignore-case"):
            raise ValueError(f"anything-but {op!r} is not supported by the local stack")
        excluded = inner if isinstance(inner, list) else [inner]
        return isinstance(value, str) and not any(_string_operator(op, e, value) for e in excluded)
    excluded = arg if isinstance(arg, list) else [arg]
    return not any(_same_literal(e, value) for e in excluded)


def _matches_value(rule: Any, value: Any, present: bool) -> bool:
    if isinstance(rule, dict):
        ((op, arg),) = rule.items()
        if op == "exists":
            return present is bool(arg)
        if not present:
            return False
        if op in ("prefix", "suffix", "equals-ignore-case"):
            return _string_operator(op, arg, value)
        if op == "anything-but":
            return _anything_but(arg, value)
        if op == "numeric":
            return _numeric(arg, value)
        raise ValueError(f"filter operator {op!r} is not supported by the local stack")
    return present and _same_literal(rule, value)


def _numeric(conditions: list[Any], value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    pairs = zip(conditions[::2], conditions[1::2], strict=True)
    return all(_NUMERIC_CHECKS[op](value, bound) for op, bound in pairs)


def matches_pattern(pattern: dict[str, Any], event: Any) -> bool:
    """Whether `event` matches an event pattern: every key of the pattern must match; a list
    of rules matches when any rule does (values in an event list: any element). Fields are
    matched by path, as EventBridge does: below a missing (or non-object) field every field
    is missing, so only `{"exists": false}` matches there."""
    if not isinstance(event, dict):
        event = {}
    for key, rule in pattern.items():
        present = key in event
        value = event.get(key)
        if isinstance(value, bytes | list):  # a stream record's view (_shard_records)
            value = _as_json(value)
        if isinstance(rule, dict):
            if not matches_pattern(rule, value):
                return False
            continue
        if not isinstance(rule, list):
            raise ValueError(f"filter pattern field {key!r}: rules must be a list, not {rule!r}")
        values = value if isinstance(value, list) else [value]
        if not any(_matches_value(r, v, present) for r in rule for v in values):
            return False
    return True


def _as_json(value: Any) -> Any:
    """A value as the JSON of the event carries it (binary in base64)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    return value


def parse_filters(filter_criteria: dict[str, Any] | None) -> list[dict[str, Any]]:
    patterns = []
    for item in (filter_criteria or {}).get("Filters") or []:
        pattern = item["Pattern"]
        patterns.append(json.loads(pattern) if isinstance(pattern, str) else pattern)
    return patterns


def passes(filters: list[dict[str, Any]], record: dict[str, Any]) -> bool:
    return not filters or any(matches_pattern(p, record) for p in filters)


# -- shared ---------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """boto3's decoded stream records back into the JSON Lambda sends (epoch seconds for
    dates, base64 for binary)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def _item_failures(result: Any) -> list[str] | None:
    """The failed identifiers of a partial-batch response; None when the response is not
    one (Lambda then treats the whole batch as failed)."""
    if result is None:
        return []
    if not isinstance(result, dict):
        return None
    failures = result.get("batchItemFailures")
    if failures is None:
        return []
    if not isinstance(failures, list):
        return None
    identifiers = []
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(identifier, str) or not identifier:
            return None
        identifiers.append(identifier)
    return identifiers


@dataclass
class _Poller:
    name: str
    invoke: Invoke
    # The function whose role the poller's own calls use, as Lambda's do (local/calls.py).
    principal: str | None = None
    busy: bool = False
    stop_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    # The pause after a poll that found nothing (see the module's docstring).
    idle_seconds: float = IDLE_POLL_SECONDS

    def poll_once(self) -> bool:
        with acting_as(self.principal):
            return self._poll()

    def is_busy(self) -> bool:
        return self.busy

    def _poll(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"esm-{self.name}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stop_event.is_set():
            try:
                worked = self.poll_once()
            except Exception:  # the poller survives what the function or moto throws
                logger.exception("event source %s: poll failed", self.name)
                worked = False
            if not worked:
                self.busy = False
                self.stop_event.wait(self.idle_seconds)


# -- DynamoDB stream -> function ------------------------------------------------------------


def _forget_iterators(stream_arn: str, *iterators: str | None) -> None:
    """moto keeps every shard iterator it ever handed out (the service expires them after
    15 minutes); a poller asks for two per poll, so drop them once read (else an idle local
    stack grows by about 300 MB an hour)."""
    try:
        from moto.dynamodbstreams.models import dynamodbstreams_backends
    except ImportError:  # not over moto
        return
    _, _, _, region, account, _ = stream_arn.split(":", 5)
    known = dynamodbstreams_backends[account][region].shard_iterators
    for iterator in iterators:
        if iterator:
            known.pop(iterator, None)


def _moto_shard(stream_arn: str) -> Any | None:
    """moto's shard of the table's stream (None: not over moto, or no such stream)."""
    try:
        from moto.dynamodb.models import dynamodb_backends
    except ImportError:  # not over moto
        return None
    try:
        _, _, _, region, account, resource = stream_arn.split(":", 5)
        table = dynamodb_backends[account][region].tables.get(resource.split("/")[1])
        return table.stream_shard if table is not None else None
    except (ValueError, IndexError, KeyError, AttributeError):
        return None


def _stream_end(stream_arn: str) -> int | None:
    """The sequence number the table's stream will give its next record, read from moto
    (None: not over moto, or no such stream). A poller standing there skips the API call.
    Read without moto's lock: a stale answer only delays the read to the next poll."""
    shard = _moto_shard(stream_arn)
    if shard is None:
        return None
    try:
        return int(shard.starting_sequence_number) + len(shard.items)
    except (ValueError, TypeError, AttributeError):
        return None


def _wire_value(value: Any) -> Any:
    """What the Streams API's JSON says for a value moto keeps as a Python object."""
    if isinstance(value, dt.datetime):  # moto's are naive UTC
        moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return moment.timestamp()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} in a stream record")


def _shard_records(stream_arn: str, start: int | None, limit: int) -> list[dict[str, Any]] | None:
    """Up to `limit` records from sequence number `start` (None: the oldest kept), taken from
    moto's shard as GetRecords' JSON carries them (None: not over moto), holding moto's lock
    only to take them. Records never change in the shard, so these are views sharing moto's
    keys and images: read them only (`_fresh` copies a batch when it is invoked)."""
    shard = _moto_shard(stream_arn)
    if shard is None:
        return None
    with DYNAMODB_LOCK:
        first = int(shard.starting_sequence_number)
        if start is not None and start < first:  # as the service's TrimmedDataAccessException
            raise RuntimeError(f"stream records before {first} were trimmed (asked {start})")
        offset = 0 if start is None else start - first
        records = [item.record for item in shard.items[offset : offset + limit]]
    return [_record_view(r) for r in records]


def _record_view(record: dict[str, Any]) -> dict[str, Any]:
    change = dict(record["dynamodb"])
    change["ApproximateCreationDateTime"] = _wire_value(change["ApproximateCreationDateTime"])
    return {**record, "dynamodb": change}


def _fresh(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records as JSON gives them to a function: its own copy, binary values in base64."""
    copied: list[dict[str, Any]] = json.loads(json.dumps(records, default=_wire_value))
    return copied


def _seq(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def lane_of(record: dict[str, Any], lanes: int) -> int:
    """The lane (0..lanes-1) of a stream record under a parallelization factor of `lanes`: a
    stable hash of the item's whole key, so every record of one item lands in one lane (the
    only order AWS keeps for DynamoDB streams with more than one batch per shard)."""
    if lanes <= 1:
        return 0
    key = json.dumps(record["dynamodb"].get("Keys") or {}, sort_keys=True, default=_wire_value)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % lanes


def _iso(epoch: Any) -> str | None:
    if not isinstance(epoch, int | float):
        return None
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class StreamMapping(_Poller):
    """One shard of a DynamoDB stream feeding one function."""

    streams: Any = None  # boto3 dynamodbstreams client
    sqs: Any = None  # boto3 sqs client (the on-failure destination)
    stream_arn: str = ""
    batch_size: int = 100
    filters: list[dict[str, Any]] = field(default_factory=list)
    report_item_failures: bool = False
    bisect: bool = False
    maximum_retry_attempts: int = -1  # -1: until the records expire
    on_failure_queue_url: str | None = None
    starting_position: str = "TRIM_HORIZON"
    # Where processing stands: the next sequence number to deliver (None: from the start).
    position: int | None = None
    retries: int = 0
    # Sizes of the pieces of a bisected batch still to process, the current one first (each
    # piece is its own batch, as Lambda retries each half); empty: batches of `batch_size`.
    pieces: list[int] = field(default_factory=list)
    invocations: int = 0
    last_error: str | None = None  # why the current batch failed (the function raised)
    # Concurrent batches per shard (ParallelizationFactor). Above 1 this mapping only fans
    # out: its `lanes` (one StreamMapping each, over the records of `lane` of `lane_count`)
    # do the batching, invoking, retrying and checkpointing, each independently.
    parallelization_factor: int = 1
    lane: int = 0
    lane_count: int = 1
    lanes: list[StreamMapping] = field(default_factory=list)
    idle_seconds: float = STREAM_IDLE_POLL_SECONDS
    # Records read and not yet passed: those from `read_from` (None: the shard's start) up to
    # `read_to` (the position after the last one read), in stream order. Batches are cut from
    # here; a read goes on from `read_to` when a batch needs more.
    buffer: list[dict[str, Any]] = field(default_factory=list)
    read_from: int | None = None
    read_to: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.parallelization_factor <= 10:  # Lambda's bounds
            raise ValueError(f"ParallelizationFactor {self.parallelization_factor} not in 1-10")
        with acting_as(self.principal):
            shard = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
                "Shards"
            ][0]
            self.shard_id = shard["ShardId"]
            if self.starting_position == "LATEST":
                while records := self._read(self.position, 1000):
                    self.position = _seq(records[-1]) + 1
        if self.parallelization_factor > 1:
            self.lanes = [self._lane(i) for i in range(self.parallelization_factor)]

    def _lane(self, index: int) -> StreamMapping:
        """One lane: the settings of this mapping, from where it stands, over its records."""
        return StreamMapping(
            name=f"{self.name}#{index}",
            invoke=self.invoke,
            principal=self.principal,
            streams=self.streams,
            sqs=self.sqs,
            stream_arn=self.stream_arn,
            batch_size=self.batch_size,
            filters=self.filters,
            report_item_failures=self.report_item_failures,
            bisect=self.bisect,
            maximum_retry_attempts=self.maximum_retry_attempts,
            on_failure_queue_url=self.on_failure_queue_url,
            position=self.position,  # LATEST was resolved above
            lane=index,
            lane_count=self.parallelization_factor,
        )

    @property
    def checkpoint(self) -> int | None:
        """The shard's checkpoint: where the furthest-behind lane stands."""
        if not self.lanes:
            return self.position
        positions = [lane.position for lane in self.lanes]
        return None if None in positions else min(p for p in positions if p is not None)

    def poll_once(self) -> bool:
        if not self.lanes:
            return super().poll_once()
        # One poll of every lane at once: their batches are concurrent invocations.
        with ThreadPoolExecutor(len(self.lanes), thread_name_prefix=f"esm-{self.name}") as pool:
            return any(list(pool.map(StreamMapping.poll_once, self.lanes)))

    def is_busy(self) -> bool:
        return any(lane.busy for lane in self.lanes) if self.lanes else self.busy

    def start(self) -> None:
        if not self.lanes:
            super().start()
        for lane in self.lanes:  # each lane polls in its own thread, as concurrent batches
            lane.start()

    def stop(self) -> None:
        self.stop_event.set()
        for lane in self.lanes:
            lane.stop_event.set()
        for lane in self.lanes:
            lane.stop()
        super().stop()

    def _read(self, start: int | None, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` records from sequence number `start` (None: the shard's oldest), as
        Lambda passes them; from moto's shard directly (see _shard_records) when over moto."""
        raw = _shard_records(self.stream_arn, start, limit)
        if raw is None:
            return self._read_api(start, limit)
        return [self._lambda_record(r, view=True) for r in raw]

    def _read_api(self, start: int | None, limit: int) -> list[dict[str, Any]]:
        """`_read` through the Streams API (GetShardIterator + GetRecords)."""
        kwargs: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": self.shard_id}
        if start is None:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            kwargs["ShardIteratorType"] = "AT_SEQUENCE_NUMBER"
            kwargs["SequenceNumber"] = str(start)
        iterator = self.streams.get_shard_iterator(**kwargs)["ShardIterator"]
        response = self.streams.get_records(ShardIterator=iterator, Limit=limit)
        _forget_iterators(self.stream_arn, iterator, response.get("NextShardIterator"))
        return [self._lambda_record(r) for r in response["Records"]]

    def _lambda_record(self, record: dict[str, Any], view: bool = False) -> dict[str, Any]:
        """A Streams API record as Lambda passes it; `view`: a record of moto's shard as
        `_shard_records` gives it (its own top level, dates in epoch seconds), not boto3's
        decoded one."""
        shaped = record if view else _jsonable(record)
        shaped["eventSourceARN"] = self.stream_arn
        identity = shaped.get("userIdentity")
        if isinstance(identity, dict) and "PrincipalId" in identity:
            # The Streams API spells it {"PrincipalId", "Type"}; Lambda events (and filter
            # patterns) {"principalId", "type"}.
            shaped["userIdentity"] = {
                "type": identity.get("Type"),
                "principalId": identity.get("PrincipalId"),
            }
        return shaped

    def _buffered(self) -> list[dict[str, Any]]:
        """The read-ahead records from `position` on (emptied when `position` is outside what
        was read: a test or an operator moved it)."""
        position = self.position
        if self.buffer and position is not None:
            if (
                self.read_to is None
                or position > self.read_to
                or (self.read_from is not None and position < self.read_from)
            ):
                self.buffer = []
            else:
                passed = 0
                while passed < len(self.buffer) and _seq(self.buffer[passed]) < position:
                    passed += 1
                del self.buffer[:passed]
                self.read_from = position
        if not self.buffer:
            self.read_from = self.read_to = position
        return self.buffer

    def _read_more(self, stream_end: int | None) -> bool:
        """Read the next records after the buffer's into it; False: none yet."""
        if stream_end is not None and (self.read_to or 0) >= stream_end:
            return False  # nothing written since the last record read
        records = self._read(self.read_to, STREAM_READ_LIMIT)
        if not records:
            return False
        self.buffer.extend(records)
        self.read_to = _seq(records[-1]) + 1
        return True

    def _batch(self) -> tuple[list[dict[str, Any]], int | None]:
        """The next batch of matching records and the position after what it covers."""
        size = self.pieces[0] if self.pieces else self.batch_size
        batch: list[dict[str, Any]] = []
        end: int | None = None
        stream_end = _stream_end(self.stream_arn)
        buffer = self._buffered()
        index = 0
        while True:
            if index == len(buffer) and (len(batch) == size or not self._read_more(stream_end)):
                break  # full (what follows is the next batch's), or all read so far is in it
            record = buffer[index]
            # Another lane's records are passed over like filtered ones: that lane has them.
            mine = self.lane_count == 1 or lane_of(record, self.lane_count) == self.lane
            if mine and passes(self.filters, record):
                if len(batch) == size:
                    break
                batch.append(record)
            end = _seq(record) + 1
            index += 1
        return batch, end

    def _failed_records(self, result: Any, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The records a partial-batch response names; an invalid response (or one naming
        anything but a sequence number of the batch) is a failure of the whole batch."""
        if not self.report_item_failures:
            return []
        identifiers = _item_failures(result)
        if identifiers is None:
            raise RuntimeError(f"invalid partial-batch response: {result!r}")
        by_seq = {r["dynamodb"]["SequenceNumber"]: r for r in batch}
        unknown = [i for i in identifiers if i not in by_seq]
        if unknown:
            raise RuntimeError(f"partial-batch response names no record of the batch: {unknown}")
        return [by_seq[i] for i in identifiers]

    def _poll(self) -> bool:
        batch, end = self._batch()
        if end is None:
            return False
        self.busy = True
        if not batch:  # nothing matched the filters: Lambda drops them without an invoke
            self.position = end
            return True
        self.invocations += 1
        try:
            failed = self._failed_records(self.invoke({"Records": _fresh(batch)}), batch)
        except Exception as exc:
            logger.warning("event source %s: batch of %d failed: %s", self.name, len(batch), exc)
            self.last_error = type(exc).__name__
            if self.bisect and len(batch) > 1:  # splitting is not a retry
                half = math.ceil(len(batch) / 2)
                self.pieces[:1] = [half, len(batch) - half]
                return True
            return self._retry_or_give_up(batch)
        self.last_error = None
        if not failed:
            self.position, self.retries = end, 0
            self.pieces = self.pieces[1:]
            return True
        lowest = min(_seq(r) for r in failed)
        remaining = [r for r in batch if _seq(r) >= lowest]
        self.position = lowest
        if lowest > _seq(batch[0]):  # progress: a fresh batch from the failed record
            self.retries = 0
            if self.pieces:
                self.pieces[0] = len(remaining)
            return True
        return self._retry_or_give_up(remaining)

    def _retry_or_give_up(self, batch: list[dict[str, Any]]) -> bool:
        self.retries += 1
        if self.maximum_retry_attempts < 0 or self.retries <= self.maximum_retry_attempts:
            pause = min(RETRY_PAUSE_CAP_SECONDS, RETRY_PAUSE_SECONDS * 2 ** (self.retries - 1))
            self.stop_event.wait(pause)
            return True
        self._send_to_on_failure(batch)
        # Past this batch (not past what a bisected batch left unread).
        self.position = _seq(batch[-1]) + 1
        self.retries, self.last_error = 0, None
        self.pieces = self.pieces[1:]
        return True

    def _send_to_on_failure(self, batch: list[dict[str, Any]]) -> None:
        logger.error(
            "event source %s: %d records failed after %d retries; sent to the on-failure "
            "destination",
            self.name,
            len(batch),
            self.maximum_retry_attempts,
        )
        if not self.on_failure_queue_url:
            return
        first, last = batch[0]["dynamodb"], batch[-1]["dynamodb"]
        response: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if self.last_error:
            response["functionError"] = "Unhandled"
        record = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self.name.split("#")[0],  # a lane reports as its mapping
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": self.retries,
            },
            "responseContext": response,
            "version": "1.0",
            "timestamp": _iso(time.time()),
            "DDBStreamBatchInfo": {
                "shardId": self.shard_id,
                "startSequenceNumber": first["SequenceNumber"],
                "endSequenceNumber": last["SequenceNumber"],
                "approximateArrivalOfFirstRecord": _iso(first.get("ApproximateCreationDateTime")),
                "approximateArrivalOfLastRecord": _iso(last.get("ApproximateCreationDateTime")),
                "batchSize": len(batch),
                "streamArn": self.stream_arn,
            },
        }
        self.sqs.send_message(QueueUrl=self.on_failure_queue_url, MessageBody=json.dumps(record))


# -- SQS queue -> function ------------------------------------------------------------------


@dataclass
class QueueMapping(_Poller):
    sqs: Any = None
    queue_url: str = ""
    queue_arn: str = ""
    batch_size: int = 10
    report_item_failures: bool = False
    invocations: int = 0

    def _poll(self) -> bool:
        if _queue_is_empty(self.queue_url):
            return False
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not messages:
            return False
        self.busy = True
        records = [self._lambda_record(m) for m in messages]
        self.invocations += 1
        try:
            result = self.invoke({"Records": records})
            failed = _item_failures(result) if self.report_item_failures else []
            if failed is None:
                raise RuntimeError(f"invalid partial-batch response: {result!r}")
        except Exception as exc:  # nothing deleted: the batch returns after its visibility
            logger.warning("event source %s: batch of %d failed: %s", self.name, len(records), exc)
            return True
        failed_ids = set(failed)
        if failed_ids - {r["messageId"] for r in records}:  # unknown: the whole batch failed
            return True
        done = [m for m in messages if m["MessageId"] not in failed_ids]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + 10])
                ],
            )
        return True

    def _lambda_record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": {
                name: _lambda_attribute(value)
                for name, value in (message.get("MessageAttributes") or {}).items()
            },
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.queue_arn.split(":")[3] if self.queue_arn else "us-east-1",
        }


def _queue_is_empty(queue_url: str) -> bool:
    """Whether moto holds no message at all (visible, in flight or delayed) for the queue
    (False when unsure, or not over moto); lets an idle poller skip ReceiveMessage, as a
    long poll would. Read without moto's lock: a stale answer only delays the next receive."""
    try:
        from moto.sqs.models import sqs_backends
    except ImportError:  # not over moto
        return False
    try:
        host_path = queue_url.split("://", 1)[1].split("/")
        account, name = host_path[1], host_path[2]
        region = next(
            region for region, backend in sqs_backends[account].items() if name in backend.queues
        )
        return not sqs_backends[account][region].queues[name]._messages
    except (IndexError, KeyError, StopIteration, AttributeError, RuntimeError):
        return False


def _lambda_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """An SQS message attribute as Lambda shows it (camelCase, binary in base64)."""
    shaped: dict[str, Any] = {
        "stringListValues": value.get("StringListValues", []),
        "binaryListValues": _jsonable(value.get("BinaryListValues", [])),
        "dataType": value["DataType"],
    }
    if "StringValue" in value:
        shaped["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        shaped["binaryValue"] = _jsonable(value["BinaryValue"])
    return shaped


class EventSources:
    """Every event source mapping of the stack, each polled by its own thread."""

    def __init__(self, mappings: Sequence[_Poller]) -> None:
        self.mappings = mappings

    def start(self) -> None:
        for mapping in self.mappings:
            mapping.start()

    def stop(self) -> None:
        for mapping in self.mappings:
            mapping.stop_event.set()
        for mapping in self.mappings:
            mapping.stop()

    def by_name(self, name: str) -> _Poller:
        return next(m for m in self.mappings if m.name == name)

    def drain(self, timeout: float = 10.0, quiet: float = 0.2) -> None:
        """Wait until no mapping has found work for `quiet` seconds (tests: deliveries done);
        at least one idle pause of every mapping and a bit, so each has looked again since
        the caller's last write."""
        longest_pause = max((m.idle_seconds for m in self.mappings), default=0.0)
        quiet = max(quiet, longest_pause + 0.1)
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if any(m.is_busy() for m in self.mappings):
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= quiet:
                return
            time.sleep(0.02)
        raise TimeoutError(f"event sources still busy after {timeout} s")
