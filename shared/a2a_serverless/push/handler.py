"""The Lambda entry of WebhookSenderFunction: stream batches and retry-queue batches."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)

from a2a_serverless.models import TaskPushNotificationConfig
from a2a_serverless.observability import log_context
from a2a_serverless.push.sender import WebhookSender


class _StreamBatch:
    """Per-invocation state: configs read once per task, webhooks parked in this batch, and
    tasks with an earlier failure (their later records fail too, so none overtakes)."""

    def __init__(self, sender: WebhookSender) -> None:
        self.sender = sender
        self.configs: dict[str, list[tuple[TaskPushNotificationConfig, bool]]] = {}
        self.parked: set[tuple[str, str]] = set()
        self.failed_tasks: set[str] = set()

    def record(self, record: Any) -> None:
        raw = record.raw_event
        keys = raw["dynamodb"]["Keys"]
        task_id = keys["pk"]["S"].removeprefix("T#")
        seq = int(keys["sk"]["S"].removeprefix("E#"))
        if task_id in self.failed_tasks:
            raise RuntimeError(f"an earlier event of task {task_id} failed in this batch")
        try:
            if task_id not in self.configs:
                self.configs[task_id] = self.sender.store.list_push_configs(task_id)
            configs = self.configs[task_id]
            if not configs:
                return
            body = raw["dynamodb"]["NewImage"]["ev"]["S"].encode()
            with log_context(task_id=task_id, seq=seq):
                self.sender.deliver_stream_event(task_id, seq, body, configs, self.parked)
        except Exception:
            self.failed_tasks.add(task_id)
            raise


def handle(sender: WebhookSender, event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event.get("Records") or []
    if records and records[0].get("eventSource") == "aws:sqs":
        processor = SqsFifoPartialProcessor(skip_group_on_error=True)
        # Report an all-failed batch as item failures instead of raising, so that the skipped
        # messages below are still released (its constructor does not take the flag).
        processor.raise_on_entire_batch_failure = False
        attempted: set[str] = set()

        def queued(record: Any) -> None:
            attempted.add(record.message_id)
            attributes = record.raw_event.get("attributes", {})
            body = json.loads(record.raw_event["body"])
            with log_context(task_id=body.get("taskId"), seq=body.get("seq")):
                sender.deliver_queued(
                    body,
                    record.raw_event["receiptHandle"],
                    int(attributes.get("ApproximateReceiveCount", "1")),
                )

        response = process_partial_response(
            event=event, record_handler=queued, processor=processor, context=context
        )
        # Messages skipped behind a failed one of their group were not attempted: make them
        # visible again now (the group stays locked while the failed one backs off) instead of
        # after the queue's whole visibility timeout.
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        sender.release(
            [
                r["receiptHandle"]
                for r in records
                if r["messageId"] in failed and r["messageId"] not in attempted
            ]
        )
        return response
    batch = _StreamBatch(sender)
    return process_partial_response(
        event=event,
        record_handler=batch.record,
        processor=BatchProcessor(event_type=EventType.DynamoDBStreams),
        context=context,
    )
