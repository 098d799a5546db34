"""WebhookSenderFunction: deliver every new event of a task to the task's webhooks.

Two event sources feed it (template.yaml):
- the table's stream (filter: inserted `E#` event items): each event is POSTed to every
  push config of its task, in order. A webhook that keeps failing is *parked*: this and all
  its later events go to a FIFO queue, one message group per task and config, so its order
  is kept while it is retried, and it never holds back other tasks' deliveries.
- that FIFO queue: one delivery attempt per message; a retryable failure is counted on the
  config item, backs off (visibility timeout, growing with the count) and reports the message
  failed, which holds its group; after PushMaxAttempts failed attempts the sender moves it to
  the dead-letter queue itself and the group goes on. (Counting its own attempts, not SQS
  receives: messages skipped behind a failing one are received without being attempted.)
Only the sender's own failures (reading the table, the queue) fail stream records; Lambda
then retries from the earliest failed record (later records of the same task are failed
with it, so nothing overtakes), bisects, and sends what never succeeds to the on-failure
queue.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a_serverless.core.egress import EgressPolicy, UnsafeWebhookUrl, vet_url
from a2a_serverless.models import TaskPushNotificationConfig
from a2a_serverless.models.v03 import task_to_v03
from a2a_serverless.observability import Metric, emit
from a2a_serverless.push.delivery import DeliveryResult, post_pinned
from a2a_serverless.store import PushDelivery, TaskStore

logger = logging.getLogger(__name__)

A2A_MEDIA_TYPE = "application/a2a+json"
# Attempts on the stream path before a webhook is parked (short: the stream must move on).
INLINE_ATTEMPTS = 2
INLINE_BACKOFF_SECONDS = 0.25


class DeliveryFailed(Exception):
    """A queued delivery failed retryably: the message goes back to its group."""


@dataclass(frozen=True)
class SenderConfig:
    egress: EgressPolicy
    retry_queue_url: str
    connect_timeout: float = 3.0
    read_timeout: float = 10.0
    # Backoff of queued retries: base * 2^(failures-1), jittered, capped (SQS allows 12 h).
    retry_base_seconds: float = 5.0
    retry_cap_seconds: float = 900.0
    max_attempts: int = 12
    dead_letter_queue_url: str = ""


Post = Callable[..., DeliveryResult]


def webhook_headers(config: TaskPushNotificationConfig) -> dict[str, str]:
    # 0.3 receivers take the Task as application/json (0.3 spec §9.5).
    media_type = "application/json" if config.payload_version == "0.3" else A2A_MEDIA_TYPE
    headers = {"Content-Type": media_type}
    if config.token:
        headers["X-A2A-Notification-Token"] = config.token
    if config.authentication is not None:
        credentials = config.authentication.credentials
        headers["Authorization"] = (
            f"{config.authentication.scheme} {credentials}"
            if credentials
            else config.authentication.scheme
        )
    return headers


class WebhookSender:
    def __init__(
        self,
        store: TaskStore,
        sqs: Any,
        config: SenderConfig,
        post: Post = post_pinned,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.sqs = sqs
        self.config = config
        self.post = post
        self.sleep = sleep

    # -- one attempt -----------------------------------------------------------------------

    def payload(
        self, version: str, task_id: str, seq: int, event_json: bytes | None = None
    ) -> bytes | None:
        """What a webhook expecting A2A `version` receives for event `seq`: the event itself
        (a 1.0 `StreamResponse`; read when not given), or for 0.3 the task as of that event
        in 0.3 shape, as 0.3 senders post it. None: nothing left to deliver (expired)."""
        if version == "0.3":
            task = self.store.task_as_of(task_id, seq)
            return json.dumps(task_to_v03(task), separators=(",", ":")).encode() if task else None
        return event_json if event_json is not None else self.store.get_event_json(task_id, seq)

    def attempt(self, config: TaskPushNotificationConfig, body: bytes) -> DeliveryResult:
        """Vet the URL again (DNS may have changed) and POST once to the pinned address."""
        try:
            target = vet_url(config.url, self.config.egress)
        except UnsafeWebhookUrl as exc:
            result = DeliveryResult(status=None, retryable=False, error=f"refused: {exc.reason}")
        else:
            result = self.post(
                target,
                body,
                webhook_headers(config),
                connect_timeout=self.config.connect_timeout,
                read_timeout=self.config.read_timeout,
            )
        # Every POST (both paths, every retry) is counted here, once.
        emit(Metric.WEBHOOK_DELIVERIES if result.ok else Metric.WEBHOOK_FAILURES)
        return result

    # -- stream path -----------------------------------------------------------------------

    def deliver_stream_event(
        self,
        task_id: str,
        seq: int,
        body: bytes,
        configs: list[tuple[TaskPushNotificationConfig, bool]],
        parked_now: set[tuple[str, str]],
    ) -> None:
        payloads: dict[str, bytes | None] = {}
        for config, parked in configs:
            config_id = config.id or ""
            key = (task_id, config_id)
            if (parked or key in parked_now) and self.store.queue_behind(task_id, config_id, seq):
                self.enqueue(task_id, config_id, seq)
                continue
            # Not parked, or unparked since this batch read it: the queue has delivered
            # everything before this event, so it goes directly.
            parked_now.discard(key)
            version = config.payload_version
            if version not in payloads:  # once per event, whatever the number of webhooks
                payloads[version] = self.payload(version, task_id, seq, body)
            payload = payloads[version]
            if payload is None:
                continue
            result = self._attempt_inline(config, payload)
            if result.ok:
                continue
            if not result.retryable:
                logger.warning(
                    "webhook %s of task %s refused event %s (%s); not retried",
                    config.id,
                    task_id,
                    seq,
                    result.error,
                )
                continue
            logger.warning(
                "webhook %s of task %s failed (%s); parking it on the retry queue",
                config.id,
                task_id,
                result.error,
            )
            self.store.park_push_config(task_id, config_id, seq)
            parked_now.add(key)
            self.enqueue(task_id, config_id, seq)

    def _attempt_inline(self, config: TaskPushNotificationConfig, body: bytes) -> DeliveryResult:
        result = self.attempt(config, body)
        for attempt in range(1, INLINE_ATTEMPTS):
            if result.ok or not result.retryable:
                break
            self.sleep(random.uniform(0, INLINE_BACKOFF_SECONDS * 2**attempt))
            result = self.attempt(config, body)
        return result

    def enqueue(self, task_id: str, config_id: str, seq: int) -> None:
        self.sqs.send_message(
            QueueUrl=self.config.retry_queue_url,
            MessageBody=json.dumps({"taskId": task_id, "configId": config_id, "seq": seq}),
            **fifo_ids(task_id, config_id, seq),
        )

    # -- queue path ------------------------------------------------------------------------

    def release(self, receipt_handles: list[str]) -> None:
        """Make received messages visible again at once (they were not attempted)."""
        for start in range(0, len(receipt_handles), 10):
            self.sqs.change_message_visibility_batch(
                QueueUrl=self.config.retry_queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                    for i, handle in enumerate(receipt_handles[start : start + 10])
                ],
            )

    def deliver_queued(self, body: dict[str, Any], receipt_handle: str, receives: int) -> None:
        """One attempt of a parked webhook's oldest undelivered event. `receives` (SQS's
        count) is only logged: the attempts that count are the config's own failures."""
        task_id, config_id, seq = str(body["taskId"]), str(body["configId"]), int(body["seq"])
        found = self.store.get_push_delivery(task_id, config_id)
        if found is None:
            return  # deleted: deliveries stop
        config = found.config
        result = None
        payload = self.payload(config.payload_version, task_id, seq)
        if payload is not None:  # else expired: nothing to deliver
            result = self.attempt(config, payload)
        if result is None or result.ok or not result.retryable:
            if result is not None and not result.ok:
                logger.warning(
                    "webhook %s of task %s refused event %s (%s); not retried",
                    config_id,
                    task_id,
                    seq,
                    result.error,
                )
            self._done(task_id, config_id, seq, found)
            return
        counted = self.store.count_push_failure(task_id, config_id)
        if counted is None:
            return  # deleted meanwhile
        failures = counted
        if failures >= self.config.max_attempts:
            self._dead_letter(task_id, config_id, seq, failures, result.error or "")
            self._done(task_id, config_id, seq, found, failed=True)
            return  # the message is deleted; the group moves on to the next event
        delay = min(
            self.config.retry_cap_seconds,
            self.config.retry_base_seconds * 2 ** max(0, failures - 1),
        )
        self.sqs.change_message_visibility(
            QueueUrl=self.config.retry_queue_url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=round(random.uniform(delay / 2, delay)),
        )
        raise DeliveryFailed(
            f"webhook {config_id} of task {task_id}: {result.error} "
            f"(attempt {failures} of {self.config.max_attempts}, receive {receives})"
        )

    def _done(
        self, task_id: str, config_id: str, seq: int, found: PushDelivery, failed: bool = False
    ) -> None:
        """The queue is done with event `seq`: the next one starts with a clean failure count,
        and when it was the last event queued the webhook is unparked (later events go
        directly again; the conditional write loses to a stream batch queueing a later
        one)."""
        if found.queued_through == seq and self.store.unpark_if_drained(task_id, config_id, seq):
            return  # unparking clears the count too
        if found.failures or failed:
            self.store.reset_push_failures(task_id, config_id)

    def _dead_letter(
        self, task_id: str, config_id: str, seq: int, attempts: int, error: str
    ) -> None:
        logger.error(
            "webhook %s of task %s: event %s undelivered after %s attempts (%s); moved to the "
            "dead-letter queue",
            config_id,
            task_id,
            seq,
            attempts,
            error,
        )
        emit(Metric.WEBHOOK_DEAD_LETTERS)
        if not self.config.dead_letter_queue_url:
            return
        self.sqs.send_message(
            QueueUrl=self.config.dead_letter_queue_url,
            MessageBody=json.dumps(
                {
                    "taskId": task_id,
                    "configId": config_id,
                    "seq": seq,
                    "attempts": attempts,
                    "lastError": error,
                }
            ),
            **fifo_ids(task_id, config_id, seq),
        )


def fifo_ids(task_id: str, config_id: str, seq: int) -> dict[str, str]:
    """SQS FIFO ids of one delivery: one message group per task and config (so a config's
    events stay in order), and a deduplication id per event, so retried stream batches that
    enqueue the same event again are dropped by SQS. Hashed: ids are capped at 128 chars."""
    group = f"{task_id}#{config_id}"
    return {
        "MessageGroupId": hashlib.sha256(group.encode()).hexdigest(),
        "MessageDeduplicationId": hashlib.sha256(f"{group}#{seq}".encode()).hexdigest(),
    }
