"""The Lambda entry of WebhookSenderFunction: stream batches and retry-queue batches."""

from __future__ import annotations

import json
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
from a2a_serverless.push.sender import WebhookSender
from a2a_serverless.store import stream_event


class _StreamBatch:
    """Per-invocation state: configs read once per task, webhooks parked in this batch, and
    tasks with an earlier failure (their later records fail too, so none overtakes)."""

    def __init__(self, sender: WebhookSender) -> None:
        self.sender = sender
        self.configs: dict[str, list[tuple[TaskPushNotificationConfig, bool]]] = {}
        self.parked: set[tuple[str, str]] = set()
        self.failed_tasks: set[str] = set()

    def record(self, record: DynamoDBRecord) -> None:
        # The item layout is the store's: it says which task and event a new image is.
        found = stream_event(record.dynamodb.new_image) if record.dynamodb else None
        if found is None:
            return  # not an event item (the mapping's filter lets only events through)
        task_id, seq, body = found
        if task_id in self.failed_tasks:
            raise RuntimeError(f"an earlier event of task {task_id} failed in this batch")
        try:
            if task_id not in self.configs:
                self.configs[task_id] = self.sender.store.list_push_configs(task_id)
            configs = self.configs[task_id]
            if not configs:
                return
            with log_context(task_id=task_id, seq=seq):
                self.sender.deliver_stream_event(task_id, seq, body, configs, self.parked)
        except Exception:
            self.failed_tasks.add(task_id)
            raise


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
        # Messages skipped behind a failed one of their group were not attempted: make them
        # visible again now (the group stays locked while the failed one backs off) instead of
        # after the queue's whole visibility timeout.
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        skipped = failed - attempted
        sender.release(
            [r.receipt_handle for r in map(SQSRecord, records) if r.message_id in skipped]
        )
        return response
    batch = _StreamBatch(sender)
    return process_partial_response(
        event=event,
        record_handler=batch.record,
        processor=BatchProcessor(event_type=EventType.DynamoDBStreams),
        context=context,
    )
