"""The Lambda entry of WebhookSenderFunction: stream batches and retry-queue batches."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from a2a_serverless.models import TaskPushNotificationConfig
from a2a_serverless.observability import log_context
from a2a_serverless.push.sender import StreamEvent, WebhookSender
from a2a_serverless.store.dynamodb.keys import stream_event

# Left of the function's remaining time when the batch's deadline is set: enough to queue
# the rest and report.
DEADLINE_MARGIN_SECONDS = 5.0

# Who removed an item when DynamoDB's Time to Live did (the stream record's userIdentity).
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def _expired_by_ttl(raw: Mapping[str, Any]) -> bool:
    identity = raw.get("userIdentity") or {}
    return raw.get("eventName") == "REMOVE" and all(
        identity.get(k) == v for k, v in TTL_IDENTITY.items()
    )


class _StreamBatch:
    """A stream batch delivered as a whole (lanes run concurrently, see
    `WebhookSender.deliver_stream_batch`), then reported record by record: a record fails when
    the sender failed on it or on an earlier record of its task (so none overtakes)."""

    def __init__(self, sender: WebhookSender, records: list[dict[str, Any]], context: Any) -> None:
        self.sender = sender
        self.failed: dict[str, Exception] = {}  # stream sequence number -> why
        events: list[StreamEvent] = []
        numbers: list[str] = []
        for raw in records:
            record = DynamoDBRecord(raw)
            if _expired_by_ttl(raw) and record.dynamodb is not None:
                # TTL removed a task header: off the ListTasks counters (idempotent, so a
                # retried record counts once; a failure retries the record).
                try:
                    sender.store.forget_expired(record.dynamodb.old_image)
                except Exception as exc:
                    self.failed[record.dynamodb.sequence_number or ""] = exc
                continue
            # The item layout is the store's: it says which task and event a record is (an
            # inserted event item, or a task header's write that adds an event it stands for).
            name = raw.get("eventName")
            if name not in ("INSERT", "MODIFY") or record.dynamodb is None:
                continue
            previous = record.dynamodb.old_image if name == "MODIFY" else None
            found = stream_event(record.dynamodb.new_image, previous)
            if found is not None:
                events.append(StreamEvent(*found))
                numbers.append(record.dynamodb.sequence_number or "")
        configs: dict[str, list[tuple[TaskPushNotificationConfig, bool]]] = {}
        broken: dict[str, Exception] = {}  # tasks whose configs could not be read
        task_ids = list(dict.fromkeys(event.task_id for event in events))
        try:
            configs = sender.store.push_configs_of(task_ids)
        except Exception as exc:  # their records fail: the batch is retried
            broken = dict.fromkeys(task_ids, exc)
        failures = sender.deliver_stream_batch(events, configs, self._deadline(context))
        first_failure: dict[str, int] = {}
        for index in sorted(failures):
            first_failure.setdefault(events[index].task_id, index)
        for index, event in enumerate(events):
            if event.task_id in broken:
                self.failed[numbers[index]] = broken[event.task_id]
            elif index >= first_failure.get(event.task_id, len(events)):
                self.failed[numbers[index]] = failures.get(index) or RuntimeError(
                    f"an earlier event of task {event.task_id} failed in this batch"
                )

    def _deadline(self, context: Any) -> float:
        budget = self.sender.config.batch_deadline_seconds
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if callable(remaining):
            budget = min(budget, remaining() / 1000 - DEADLINE_MARGIN_SECONDS)
        return time.monotonic() + budget

    def record(self, record: DynamoDBRecord) -> None:
        """Report what the batch found for this record (delivery already happened)."""
        number = record.dynamodb.sequence_number if record.dynamodb else None
        if number is not None and number in self.failed:
            raise self.failed[number]


def handle(sender: WebhookSender, event: dict[str, Any], context: Any) -> Mapping[str, Any]:
    records = event.get("Records") or []
    if records and records[0].get("eventSource") == "aws:sqs":
        processor = SqsFifoPartialProcessor(skip_group_on_error=True)
        # Report an all-failed batch as item failures instead of raising, so that the skipped
        # messages below are still released (its constructor does not take the flag).
        processor.raise_on_entire_batch_failure = False
        attempted: set[str] = set()

        def queued(record: SQSRecord) -> None:
            attempted.add(record.message_id)
            body = json.loads(record.body)
            with log_context(task_id=body.get("taskId"), seq=body.get("seq")):
                sender.deliver_queued(
                    body,
                    record.receipt_handle,
                    int(record.attributes.approximate_receive_count or "1"),
                )

        response = process_partial_response(
            event=event, record_handler=queued, processor=processor, context=context
        )
        # Messages skipped behind a failed one were not attempted: make them visible now, not after
        # the queue's whole visibility timeout.
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        skipped = failed - attempted
        sender.release(
            [r.receipt_handle for r in map(SQSRecord, records) if r.message_id in skipped]
        )
        return response
    batch = _StreamBatch(sender, records, context)
    return process_partial_response(
        event=event,
        record_handler=batch.record,
        processor=BatchProcessor(event_type=EventType.DynamoDBStreams),
        context=context,
    )
