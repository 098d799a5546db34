"""Lambda event source mappings of template.yaml, emulated over moto: the table's DynamoDB
stream and SQS queues feed their functions as Lambda's pollers would.

What a deployed mapping does and this one does too:
- DynamoDB stream: `StartingPosition`, `BatchSize`, `FilterCriteria` (records that match no
  filter are dropped before batching), `FunctionResponseTypes: [ReportBatchItemFailures]`
  (processing resumes at the lowest failed sequence number), `BisectBatchOnFunctionError`
  (an erroring batch is split in two, not counted as a retry), `MaximumRetryAttempts`, and an
  `OnFailure` SQS destination that receives Lambda's batch-info record when retries run out.
- SQS: `BatchSize`, Lambda-shaped records, successful messages deleted, `batchItemFailures`
  (the others deleted), a raised error leaving the whole batch to reappear after its
  visibility timeout; FIFO group order and `RedrivePolicy` are moto's queue semantics.

Each mapping is polled by one thread (as one shard or one FIFO poller would be); `drain()`
lets tests wait until every mapping is idle.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

Invoke = Callable[[dict[str, Any]], Any]
IDLE_POLL_SECONDS = 0.05
# Lambda backs off between retries of a failing stream batch; locally a short, growing pause.
RETRY_PAUSE_SECONDS = 0.1
RETRY_PAUSE_CAP_SECONDS = 2.0


# -- filter criteria (the event-pattern subset Lambda accepts) ------------------------------


def _matches_value(rule: Any, value: Any, present: bool) -> bool:
    if isinstance(rule, dict):
        ((op, arg),) = rule.items()
        if op == "exists":
            return present is bool(arg)
        if not present:
            return False
        if op == "prefix":
            return isinstance(value, str) and value.startswith(arg)
        if op == "suffix":
            return isinstance(value, str) and value.endswith(arg)
        if op == "equals-ignore-case":
            return isinstance(value, str) and value.lower() == str(arg).lower()
        if op == "anything-but":
            excluded = arg if isinstance(arg, list) else [arg]
            return value not in excluded
        if op == "numeric":
            return _numeric(arg, value)
        raise ValueError(f"filter operator {op!r} is not supported by the local stack")
    return present and value == rule


def _numeric(conditions: list[Any], value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    checks = {
        "=": lambda a, b: a == b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    pairs = zip(conditions[::2], conditions[1::2], strict=True)
    return all(checks[op](value, bound) for op, bound in pairs)


def matches_pattern(pattern: dict[str, Any], event: Any) -> bool:
    """Whether `event` matches an event pattern: every key of the pattern must match; a list
    of rules matches when any rule does (values in an event list: any element)."""
    if not isinstance(event, dict):
        return False
    for key, rule in pattern.items():
        present = key in event
        value = event.get(key)
        if isinstance(rule, dict):
            if not present or not matches_pattern(rule, value):
                return False
            continue
        values = value if isinstance(value, list) else [value]
        if not any(_matches_value(r, v, present) for r in rule for v in values):
            return False
    return True


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
    busy: bool = False
    stop_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def poll_once(self) -> bool:
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
                self.stop_event.wait(IDLE_POLL_SECONDS)


# -- DynamoDB stream -> function ------------------------------------------------------------


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
    limit: int | None = None  # a bisected batch's size cap
    invocations: int = 0

    def __post_init__(self) -> None:
        shard = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ][0]
        self.shard_id = shard["ShardId"]
        if self.starting_position == "LATEST":
            records = self._read(None, 10_000)
            self.position = int(records[-1]["dynamodb"]["SequenceNumber"]) + 1 if records else None

    def _read(self, start: int | None, limit: int) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": self.shard_id}
        if start is None:
            kwargs["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            kwargs["ShardIteratorType"] = "AT_SEQUENCE_NUMBER"
            kwargs["SequenceNumber"] = str(start)
        iterator = self.streams.get_shard_iterator(**kwargs)["ShardIterator"]
        records = self.streams.get_records(ShardIterator=iterator, Limit=limit)["Records"]
        return [self._lambda_record(r) for r in records]

    def _lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        shaped = _jsonable(record)
        shaped["eventSourceARN"] = self.stream_arn
        return shaped

    def _batch(self) -> tuple[list[dict[str, Any]], int | None]:
        """The next batch of matching records and the position after what it covers."""
        size = self.limit or self.batch_size
        raw = self._read(self.position, 1000)
        batch: list[dict[str, Any]] = []
        end: int | None = None
        for record in raw:
            seq = int(record["dynamodb"]["SequenceNumber"])
            if passes(self.filters, record):
                if len(batch) == size:
                    break
                batch.append(record)
            end = seq + 1
        return batch, end

    def poll_once(self) -> bool:
        batch, end = self._batch()
        if end is None:
            return False
        self.busy = True
        if not batch:  # nothing matched the filters: Lambda drops them without an invoke
            self.position = end
            return True
        self.invocations += 1
        try:
            result = self.invoke({"Records": batch})
            failed = _item_failures(result) if self.report_item_failures else []
            if failed is None:
                raise RuntimeError(f"invalid partial-batch response: {result!r}")
        except Exception as exc:
            logger.warning("event source %s: batch of %d failed: %s", self.name, len(batch), exc)
            if self.bisect and len(batch) > 1:
                self.limit = math.ceil(len(batch) / 2)  # splitting is not a retry
                return True
            return self._retry_or_give_up(batch, end)
        if not failed:
            self.position, self.retries, self.limit = end, 0, None
            return True
        sequence_numbers = {r["eventID"]: r for r in batch} | {
            r["dynamodb"]["SequenceNumber"]: r for r in batch
        }
        unknown = [f for f in failed if f not in sequence_numbers]
        if unknown:  # an identifier that is no record of the batch fails the whole batch
            return self._retry_or_give_up(batch, end)
        lowest = min(int(sequence_numbers[f]["dynamodb"]["SequenceNumber"]) for f in failed)
        first = int(batch[0]["dynamodb"]["SequenceNumber"])
        self.position = lowest
        if lowest > first:  # progress was made: a fresh batch from the failed record
            self.retries, self.limit = 0, None
            return True
        remaining = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) >= lowest]
        return self._retry_or_give_up(remaining, end)

    def _retry_or_give_up(self, batch: list[dict[str, Any]], end: int) -> bool:
        self.retries += 1
        if self.maximum_retry_attempts < 0 or self.retries <= self.maximum_retry_attempts:
            pause = min(RETRY_PAUSE_CAP_SECONDS, RETRY_PAUSE_SECONDS * 2 ** (self.retries - 1))
            self.stop_event.wait(pause)
            return True
        self._send_to_on_failure(batch)
        # Past this batch (not past what a bisected batch left unread).
        self.position = int(batch[-1]["dynamodb"]["SequenceNumber"]) + 1
        self.retries, self.limit = 0, None
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
        record = {
            "requestContext": {
                "requestId": hashlib.sha256(json.dumps(batch[0]).encode()).hexdigest()[:36],
                "functionArn": self.name,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": self.retries,
            },
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
            "version": "1.0",
            "timestamp": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
            "DDBStreamBatchInfo": {
                "shardId": self.shard_id,
                "startSequenceNumber": first["SequenceNumber"],
                "endSequenceNumber": last["SequenceNumber"],
                "approximateArrivalOfFirstRecord": first.get("ApproximateCreationDateTime"),
                "approximateArrivalOfLastRecord": last.get("ApproximateCreationDateTime"),
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

    def poll_once(self) -> bool:
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
        known = {r["messageId"] for r in records}
        if set(failed) - known:  # an unknown identifier fails the whole batch
            return True
        done = [m for m in messages if m["MessageId"] not in set(failed)]
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
            "messageAttributes": _jsonable(message.get("MessageAttributes", {})),
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.queue_arn.split(":")[3] if self.queue_arn else "us-east-1",
        }


class EventSources:
    """Every event source mapping of the stack, each polled by its own thread."""

    def __init__(self, mappings: list[_Poller]) -> None:
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
        """Wait until no mapping has found work for `quiet` seconds (tests: deliveries done)."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if any(m.busy for m in self.mappings):
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= quiet:
                return
            time.sleep(0.02)
        raise TimeoutError(f"event sources still busy after {timeout} s")
