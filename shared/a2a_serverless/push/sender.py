"""WebhookSenderFunction: deliver every new event of a task to the task's webhooks.

Two sources feed it (template.yaml):
- the table's stream (inserted `E#` items): one lane per (task, config), in order within a lane,
  lanes on threads side by side; a batch's POSTs end within one window. A webhook that fails
  or is slow is parked: its events go to a FIFO queue (one group per task and config), and its
  owner is penalized for a while (all its webhooks parked, no direct attempt).
- that FIFO queue: one attempt per message, counted on the config item, with growing backoff;
  after PushMaxAttempts the sender moves the message to the dead-letter queue itself.
Only the sender's own failures (table, queue) fail stream records.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from a2a_serverless.core.content import ContentLinks, present, present_event_json
from a2a_serverless.core.egress import EgressPolicy, UnsafeWebhookUrl, vet_url
from a2a_serverless.models import Message, TaskPushNotificationConfig
from a2a_serverless.models.v03 import task_to_v03
from a2a_serverless.observability import Metric, emit, log_context
from a2a_serverless.push.delivery import DeliveryResult, post_pinned
from a2a_serverless.settings import get_settings
from a2a_serverless.store import PushDelivery, TaskStore

logger = logging.getLogger(__name__)

A2A_MEDIA_TYPE = "application/a2a+json"
# Attempts on the stream path before a webhook is parked (short: the stream must move on).
INLINE_ATTEMPTS = 2
INLINE_BACKOFF_SECONDS = 0.25
# A batch's inline window: the inline budget (connect + slow threshold) from the batch's start,
# plus this share of it for the lanes' threads to start ("at once" takes a few ms).
WINDOW_GRACE_SHARE = 0.1
# No inline attempt with timeouts cut below this share of the full ones (too short to tell a
# slow webhook from a quick one): the lane is parked instead.
MIN_ATTEMPT_SHARE = 0.25
# A webhook that timed out with at least this share of the full timeouts counts as slow (its
# owner is penalized); one cut shorter by the window's end does not.
SLOW_SHARE = 0.5


@dataclass(frozen=True)
class StreamEvent:
    """One new event of a stream batch."""

    task_id: str
    seq: int
    body: bytes  # the event's wire JSON (a 1.0 StreamResponse)


@dataclass
class _Lane:
    """The events of one batch for one (task, config), delivered in order by one thread."""

    config: TaskPushNotificationConfig
    parked: bool  # as read at the start of the batch
    events: list[tuple[int, StreamEvent]]


class PenaltyBox:
    """Owners whose webhooks were parked (failing or slow) recently, until when; their webhooks go
    straight to the retry queue, in order and with full timeouts. Per execution environment
    (a fresh one starts empty); bounded, forgetting the oldest penalties first."""

    def __init__(
        self,
        seconds: float,
        clock: Callable[[], float] = time.monotonic,
        capacity: int = 10_000,
    ) -> None:
        self.seconds = seconds
        self.clock = clock
        self.capacity = capacity
        self._until: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def penalize(self, owner: str) -> None:
        if self.seconds <= 0:
            return
        with self._lock:
            self._until.pop(owner, None)
            self._until[owner] = self.clock() + self.seconds
            while len(self._until) > self.capacity:
                self._until.popitem(last=False)

    def active(self) -> bool:
        """Whether anyone is penalized now (forgets the owners whose time is up)."""
        now = self.clock()
        with self._lock:
            while self._until and next(iter(self._until.values())) <= now:
                self._until.popitem(last=False)
            return bool(self._until)

    def __contains__(self, owner: object) -> bool:
        with self._lock:
            until = self._until.get(owner) if isinstance(owner, str) else None
        return until is not None and until > self.clock()


class _Payloads:
    """Bodies per (version, task, seq), built once per batch and shared by the lanes (a 0.3
    body costs a read of the task as of the event; its history is read once per task)."""

    def __init__(self, sender: WebhookSender) -> None:
        self.sender = sender
        self.lock = threading.Lock()
        self.built: dict[tuple[str, str, int], bytes | None] = {}
        self.histories: dict[str, list[Message]] = {}

    def get(self, version: str, event: StreamEvent) -> bytes | None:
        if version != "0.3":
            return present_event_json(event.body, self.sender.links)
        key = (version, event.task_id, event.seq)
        with self.lock:
            if key in self.built:
                return self.built[key]
            history = self.histories.get(event.task_id)
        if history is None:
            history = self.sender.store.read_history(event.task_id, None)
            with self.lock:
                self.histories.setdefault(event.task_id, history)
        body = self.sender.payload(version, event.task_id, event.seq, event.body, history)
        with self.lock:
            self.built[key] = body
        return body


class _Queued:
    """A batch's events for the retry queue, sent together once its lanes are done: ten to a
    SendMessageBatch whatever their group (a call per parked webhook, else), each group's in
    order. Each entry keeps the index of its first event: the one to fail if sending fails;
    `slow`: the tasks whose owners are penalized once they are sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[int, list[tuple[str, str, int]]]] = []
        self.slow: set[str] = set()

    def add(
        self, index: int, task_id: str, config_id: str, seqs: list[int], slow: bool = False
    ) -> None:
        with self.lock:
            self.entries.append((index, [(task_id, config_id, seq) for seq in seqs]))
            if slow:
                self.slow.add(task_id)

    def adder(self, index: int, task_id: str, config_id: str) -> Callable[[list[int], bool], None]:
        """`add` for one webhook's events from the one at `index` on."""

        def add(seqs: list[int], slow: bool) -> None:
            self.add(index, task_id, config_id, seqs, slow)

        return add


def _lowered(configured: float, given: float | None) -> float:
    return configured if given is None else min(configured, given)


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
    # Stream path: inline attempt timeout (slower webhooks are parked), lanes run inline at once
    # (one thread and socket each; Lambda allows 1,024 of each), and the batch's window.
    # Defaults from the settings, so a caller naming only the fields above still gets them.
    slow_seconds: float = field(default_factory=lambda: get_settings().push_slow_seconds)
    stream_workers: int = 128
    batch_deadline_seconds: float = field(
        default_factory=lambda: get_settings().push_batch_deadline_seconds
    )
    # How long an owner whose webhook was parked has all its webhooks parked at once (0: never).
    penalty_seconds: float = field(default_factory=lambda: get_settings().push_penalty_seconds)


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
        links: ContentLinks | None = None,
    ) -> None:
        self.store = store
        # Makes the URLs of stored content in payloads (None: no content store).
        self.links = links
        self.sqs = sqs
        self.config = config
        self.post = post
        self.sleep = sleep
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self.penalty = PenaltyBox(config.penalty_seconds)
        # Task id -> owner (it never changes), read only while someone is penalized or when a
        # webhook is parked; bounded like the box.
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._owners_lock = threading.Lock()

    def owner_of(self, task_id: str) -> str | None:
        with self._owners_lock:
            owner = self._owners.get(task_id)
        if owner is not None:
            return owner
        record = self.store.get_record(task_id)
        if record is None:
            return None
        with self._owners_lock:
            self._owners[task_id] = record.owner
            while len(self._owners) > self.penalty.capacity:
                self._owners.popitem(last=False)
        return record.owner

    def _penalize_owner_of(self, task_id: str) -> None:
        if self.penalty.seconds <= 0:  # no penalty: no owner to read
            return
        owner = self.owner_of(task_id)
        if owner is not None:
            self.penalty.penalize(owner)

    def _lane_pool(self) -> ThreadPoolExecutor:
        """The lanes' threads, one pool for the sender's life, reused batch after batch (new threads
        per batch may each take a fresh malloc arena, and memory grows)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=max(1, self.config.stream_workers), thread_name_prefix="webhook"
                )
            return self._pool

    # -- one attempt -----------------------------------------------------------------------

    def payload(
        self,
        version: str,
        task_id: str,
        seq: int,
        event_json: bytes | None = None,
        history: list[Message] | None = None,
    ) -> bytes | None:
        """What a webhook expecting A2A `version` receives for event `seq`: the 1.0
        `StreamResponse`, or for 0.3 the Task as of that event with its history as stored now
        (0.3 spec §9.5), each read when not given. None: nothing left to deliver (expired)."""
        if version == "0.3":
            task = self.store.task_as_of(task_id, seq)
            if task is None:
                return None
            if history is None:
                history = self.store.read_history(task_id, None)
            task = present(task.model_copy(update={"history": history or None}), self.links)
            return json.dumps(task_to_v03(task), separators=(",", ":")).encode()
        body = event_json if event_json is not None else self.store.get_event_json(task_id, seq)
        return None if body is None else present_event_json(body, self.links)

    def attempt(
        self,
        config: TaskPushNotificationConfig,
        body: bytes,
        read_timeout: float | None = None,
        connect_timeout: float | None = None,
    ) -> DeliveryResult:
        """Vet the URL again (DNS may have changed) and POST once to the pinned address; a
        timeout given (inline attempts) lowers the configured one."""
        connect_timeout = _lowered(self.config.connect_timeout, connect_timeout)
        full_read = _lowered(self.config.read_timeout, read_timeout)
        try:
            target = vet_url(config.url, self.config.egress)
        except UnsafeWebhookUrl as exc:
            result = DeliveryResult(status=None, retryable=False, error=f"refused: {exc.reason}")
        else:
            result = self.post(
                target,
                body,
                webhook_headers(config),
                connect_timeout=connect_timeout,
                read_timeout=full_read,
            )
        # Every POST (both paths, every retry) is counted here, once.
        emit(Metric.WEBHOOK_DELIVERIES if result.ok else Metric.WEBHOOK_FAILURES)
        return result

    # -- stream path -----------------------------------------------------------------------

    def deliver_stream_batch(
        self,
        events: Sequence[StreamEvent],
        configs: Mapping[str, list[tuple[TaskPushNotificationConfig, bool]]],
        deadline: float,
    ) -> dict[int, Exception]:
        """Deliver a stream batch's events (in stream order) to their tasks' configs.

        One lane per (task, config), in order; the first `stream_workers` lanes run on threads,
        the rest and penalized owners' are parked. Every inline attempt ends within the batch's
        window and before `deadline` (`time.monotonic()`); a lane with too little time left is
        parked. Returns the sender's own failures (reading, queueing) by index into `events`."""
        lanes: dict[tuple[str, str], _Lane] = {}
        rank: dict[tuple[str, str], tuple[int, int]] = {}
        for index, event in enumerate(events):
            for position, (config, parked) in enumerate(configs.get(event.task_id, [])):
                if event.seq <= config.after_seq:
                    continue  # written before the config was made
                key = (event.task_id, config.id or "")
                if key not in lanes:
                    lanes[key] = _Lane(config, parked, [])
                    # Each task's first config before anyone's second: with more lanes than
                    # workers, a task with many webhooks waits its turn behind the others.
                    rank[key] = (position, index)
                lanes[key].events.append((index, event))
        failures: dict[int, Exception] = {}
        if not lanes:
            return failures
        penalized: set[tuple[str, str]] = set()
        if self.penalty.active():
            owners = {task_id: self.owner_of(task_id) for task_id in {t for t, _ in lanes}}
            penalized = {key for key in lanes if owners[key[0]] in self.penalty}
        window = min(deadline, time.monotonic() + self._inline_budget() * (1 + WINDOW_GRACE_SHARE))
        payloads = _Payloads(self)
        ordered = sorted(lanes, key=rank.__getitem__)
        direct = [key for key in ordered if key not in penalized]
        # Beyond the threads there are, a lane would wait for a busy one (a slow threshold at
        # worst) and hold the shard that much longer: parked at once instead.
        inline, overflow = (
            direct[: self.config.stream_workers],
            direct[self.config.stream_workers :],
        )
        queued = _Queued()
        pool = self._lane_pool()
        # A context copy per job: log keys and metrics of the invocation reach the thread.
        futures: list[Future[dict[int, Exception]]] = [
            pool.submit(
                contextvars.copy_context().run,
                self._run_lane,
                lanes[key],
                window,
                payloads,
                queued,
            )
            for key in inline
        ]
        # Meanwhile, in this thread: the lanes parked at once, queued at once.
        at_once = _Queued()
        if penalized:
            boxed = [lanes[key] for key in ordered if key in penalized]
            failures.update(
                self._park_all(boxed, "of penalized owners (slow or failing recently)", at_once)
            )
        if overflow:
            failures.update(
                self._park_all([lanes[key] for key in overflow], "past the lanes", at_once)
            )
        failures.update(self._send_queued(at_once))
        for future in futures:
            failures.update(future.result())
        failures.update(self._send_queued(queued))
        return failures

    def _send_queued(self, queued: _Queued) -> dict[int, Exception]:
        """Queue what `queued` holds; the failures to report, by event index."""
        messages = [message for _, entry in queued.entries for message in entry]
        if not messages:
            return {}
        try:
            self._send(messages)
        except Exception as exc:  # the stream records are retried; SQS drops the copies
            logger.exception("queueing %s events of parked webhooks failed", len(messages))
            return {index: exc for index, _ in queued.entries}
        for task_id in queued.slow:
            self._penalize_owner_of(task_id)
        return {}

    def _park_all(self, lanes: list[_Lane], which: str, queue: _Queued) -> dict[int, Exception]:
        """Park lanes without a POST (a penalized owner's, those past the batch's threads): one
        conditional write per webhook, its events joining the batch's `queue`."""
        failures: dict[int, Exception] = {}
        count = 0
        for lane in lanes:
            first_index, first = lane.events[0]
            config_id = lane.config.id or ""
            seqs = [event.seq for _, event in lane.events]
            try:
                if not (
                    lane.parked and self.store.queue_behind(first.task_id, config_id, seqs[-1])
                ):
                    self.store.park_push_config(first.task_id, config_id, seqs[-1])
            except Exception as exc:
                logger.exception("parking webhook %s of task %s failed", config_id, first.task_id)
                failures[first_index] = exc
                continue
            queue.add(first_index, first.task_id, config_id, seqs)
            count += 1
        if count:
            logger.info("%s webhooks %s parked at once", count, which)
        return failures

    def _run_lane(
        self, lane: _Lane, deadline: float, payloads: _Payloads, queue: _Queued
    ) -> dict[int, Exception]:
        config_id = lane.config.id or ""
        parked = lane.parked
        parked_now: set[tuple[str, str]] = set()
        for position, (index, event) in enumerate(lane.events):
            try:
                with log_context(task_id=event.task_id, seq=event.seq):
                    if parked or parked_now:
                        # Parked: the lane's remaining events all go behind it, in order, with
                        # one write and one queue call per 10 (not two calls per event).
                        rest = [e.seq for _, e in lane.events[position:]]
                        if self.store.queue_behind(event.task_id, config_id, rest[-1]):
                            queue.add(index, event.task_id, config_id, rest)
                            return {}
                        parked = False  # the queue drained it meanwhile: direct again
                        parked_now.clear()
                    rest = [e.seq for _, e in lane.events[position:]]
                    self._deliver_to(
                        event,
                        lane.config,
                        False,
                        parked_now,
                        payloads,
                        deadline,
                        rest,
                        queue.adder(index, event.task_id, config_id),
                    )
                    if parked_now:
                        return {}  # parked on this event: it and the rest are queued
            except Exception as exc:
                logger.exception(
                    "delivering event %s of task %s to webhook %s failed",
                    event.seq,
                    event.task_id,
                    lane.config.id,
                )
                return {index: exc}
        return {}

    def deliver_stream_event(
        self,
        task_id: str,
        seq: int,
        body: bytes,
        configs: list[tuple[TaskPushNotificationConfig, bool]],
        parked_now: set[tuple[str, str]],
        deadline: float | None = None,
    ) -> None:
        """One event to each of its task's configs, one after another (no deadline if None)."""
        event = StreamEvent(task_id, seq, body)
        payloads = _Payloads(self)
        for config, parked in configs:
            if seq > config.after_seq:  # else written before the config was made
                self._deliver_to(event, config, parked, parked_now, payloads, deadline)

    def _deliver_to(
        self,
        event: StreamEvent,
        config: TaskPushNotificationConfig,
        parked: bool,
        parked_now: set[tuple[str, str]],
        payloads: _Payloads,
        deadline: float | None,
        rest: list[int] | None = None,
        queue: Callable[[list[int], bool], None] | None = None,
    ) -> None:
        """`rest`: this event's seq and the later ones of its lane, queued together if the
        webhook is parked on this one (else only this event is); by `queue` if given (with
        whether the webhook was slow or failing), else sent now."""
        task_id, seq = event.task_id, event.seq
        queued = rest or [seq]
        config_id = config.id or ""
        key = (task_id, config_id)
        if (parked or key in parked_now) and self.store.queue_behind(task_id, config_id, seq):
            self.enqueue(task_id, config_id, seq)
            return
        payload = payloads.get(config.payload_version, event)
        if payload is None:
            return
        if self._share_left(deadline) < MIN_ATTEMPT_SHARE:
            self._park(
                task_id, config_id, queued, parked_now, "the batch's window is closing", queue
            )
            return
        result, share = self._attempt_inline(config, payload, deadline)
        if result.ok:
            return
        if not result.retryable:
            logger.warning(
                "webhook %s of task %s refused event %s (%s); not retried",
                config.id,
                task_id,
                seq,
                result.error,
            )
            return
        slow = not result.timed_out or share >= SLOW_SHARE
        why = result.error or "failed"
        # Not slow when the window's end cut it short: its owner is not penalized.
        why = why if slow else f"{why}, cut short"
        self._park(task_id, config_id, queued, parked_now, why, queue, slow)

    def _park(
        self,
        task_id: str,
        config_id: str,
        seqs: list[int],
        parked_now: set[tuple[str, str]],
        why: str,
        queue: Callable[[list[int], bool], None] | None = None,
        slow: bool = False,
    ) -> None:
        """Park the webhook and queue `seqs` (in order) behind it: parked through the last,
        so the queue cannot unpark it before it has delivered them all. Queued by `queue`
        (the batch's) if given, else now; once queued, a `slow` webhook's owner is penalized."""
        logger.warning(
            "webhook %s of task %s: %s; parking it on the retry queue", config_id, task_id, why
        )
        self.store.park_push_config(task_id, config_id, seqs[-1])
        parked_now.add((task_id, config_id))
        if queue is not None:
            queue(seqs, slow)
            return
        self.enqueue_many(task_id, config_id, seqs)
        if slow:  # once queued
            self._penalize_owner_of(task_id)

    def _inline_budget(self) -> float:
        """The longest one inline attempt can take (connect, then the slow threshold)."""
        return min(self.config.connect_timeout, self.config.slow_seconds) + (
            self.config.slow_seconds
        )

    def _share_left(self, deadline: float | None) -> float:
        """What is left of the batch's window, as a share of one inline budget (at most 1)."""
        if deadline is None:
            return 1.0
        return min(1.0, (deadline - time.monotonic()) / self._inline_budget())

    def _attempt_inline(
        self, config: TaskPushNotificationConfig, body: bytes, deadline: float | None
    ) -> tuple[DeliveryResult, float]:
        """The result, and the share of the full timeouts its last attempt had."""
        # Inline attempts wait at most the slow threshold (a slower webhook is parked and gets the
        # full read timeout from the queue), less late in the window, which they must end within.
        share = self._share_left(deadline)
        result = self._attempt_within(config, body, share)
        for attempt in range(1, INLINE_ATTEMPTS):
            if result.ok or not result.retryable or result.timed_out:
                break
            pause = random.uniform(0, INLINE_BACKOFF_SECONDS * 2**attempt)
            if deadline is not None and deadline - time.monotonic() - pause < (
                MIN_ATTEMPT_SHARE * self._inline_budget()
            ):
                break  # no time left for another attempt: parked
            self.sleep(pause)
            share = self._share_left(deadline)
            result = self._attempt_within(config, body, share)
        return result, share

    def _attempt_within(
        self, config: TaskPushNotificationConfig, body: bytes, share: float
    ) -> DeliveryResult:
        slow = self.config.slow_seconds
        connect = min(self.config.connect_timeout, slow)
        return self.attempt(
            config, body, read_timeout=slow * share, connect_timeout=connect * share
        )

    def enqueue(self, task_id: str, config_id: str, seq: int) -> None:
        self.sqs.send_message(
            QueueUrl=self.config.retry_queue_url,
            MessageBody=json.dumps({"taskId": task_id, "configId": config_id, "seq": seq}),
            **fifo_ids(task_id, config_id, seq),
        )

    def enqueue_many(self, task_id: str, config_id: str, seqs: list[int]) -> None:
        """Queue events of one (task, config) in order."""
        self._send([(task_id, config_id, seq) for seq in seqs])

    def _send(self, messages: list[tuple[str, str, int]]) -> None:
        """Queue (task, config, seq) messages, ten to a call: SQS enqueues a FIFO batch's
        messages in the order sent, so each group's stay in order. A failed entry fails the
        lot (the stream record is retried; the deduplication ids drop what did go through)."""
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            if len(chunk) == 1:
                self.enqueue(*chunk[0])
                continue
            entries = [
                {
                    "Id": str(i),
                    "MessageBody": json.dumps(
                        {"taskId": task_id, "configId": config_id, "seq": seq}
                    ),
                    **fifo_ids(task_id, config_id, seq),
                }
                for i, (task_id, config_id, seq) in enumerate(chunk)
            ]
            sent = self.sqs.send_message_batch(
                QueueUrl=self.config.retry_queue_url, Entries=entries
            )
            if sent.get("Failed"):
                codes = sorted({str(f.get("Code")) for f in sent["Failed"]})
                raise RuntimeError(f"queueing webhook events failed: {codes}")

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
