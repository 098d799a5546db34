"""How the webhook sender schedules a stream batch: lanes per (task, config) run concurrently,
each in event order; slow webhooks are parked after one short attempt; past the batch's
deadline nothing more is POSTed inline. The store is the in-memory fake, the queue a list, the
receiver a scripted `post` seam (the real HTTP path is tests/integration/test_push_delivery.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from a2a_serverless.core.egress import EgressPolicy, VettedTarget
from a2a_serverless.models import TaskPushNotificationConfig
from a2a_serverless.push.delivery import DeliveryResult
from a2a_serverless.push.sender import SenderConfig, StreamEvent, WebhookSender
from tests.fakes import InMemoryTaskStore

OK = DeliveryResult(status=200, retryable=False, error=None)
TIMED_OUT = DeliveryResult(status=None, retryable=True, error="timeout (read)", timed_out=True)


@dataclass(frozen=True)
class Call:
    hook: str
    seq: int
    read_timeout: float
    started: float
    ended: float


class Receiver:
    """`post` seam: per hook, how long to take and what to answer; records every call."""

    def __init__(self, scripts: dict[str, Callable[[int], tuple[float, DeliveryResult]]]):
        self.scripts = scripts
        self.lock = threading.Lock()
        self.calls: list[Call] = []
        self.in_flight: dict[str, int] = {}
        self.overlapped: set[str] = set()  # hooks that had two POSTs in flight at once

    def __call__(
        self, target: VettedTarget, body: bytes, headers: Any, **timeouts: float
    ) -> DeliveryResult:
        hook = target.target.removeprefix("/hooks/")
        started = time.monotonic()
        with self.lock:
            self.in_flight[hook] = self.in_flight.get(hook, 0) + 1
            if self.in_flight[hook] > 1:
                self.overlapped.add(hook)
            delay, result = self.scripts[hook](sum(1 for c in self.calls if c.hook == hook))
        time.sleep(delay)
        with self.lock:
            self.in_flight[hook] -= 1
            seq = json.loads(body)["seq"]
            self.calls.append(Call(hook, seq, timeouts["read_timeout"], started, time.monotonic()))
        return result

    def seqs(self, hook: str) -> list[int]:
        with self.lock:
            return [c.seq for c in sorted(self.calls, key=lambda c: c.ended) if c.hook == hook]


class Queue:
    """The retry queue's `send_message`, recorded."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **kwargs: Any) -> None:
        with self.lock:
            self.sent.append(json.loads(kwargs["MessageBody"]))

    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
        with self.lock:
            self.sent.extend(json.loads(e["MessageBody"]) for e in kwargs["Entries"])
        return {"Successful": kwargs["Entries"], "Failed": []}

    def seqs(self, config_id: str) -> list[int]:
        return [m["seq"] for m in self.sent if m["configId"] == config_id]


def taking(seconds: float, result: DeliveryResult = OK) -> Callable[[int], Any]:
    return lambda _n: (seconds, result)


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()


def add_configs(store: InMemoryTaskStore, task_id: str, *hooks: str) -> None:
    for hook in hooks:
        store.put_push_config(
            TaskPushNotificationConfig(
                id=hook, task_id=task_id, url=f"http://127.0.0.1:9/hooks/{hook}"
            )
        )


def sender(
    store: InMemoryTaskStore, receiver: Receiver, queue: Queue, **config: Any
) -> WebhookSender:
    policy = EgressPolicy(allow_http=True, allow_hosts=frozenset({"127.0.0.1"}))
    settings = {"slow_seconds": 2.0, "read_timeout": 10.0, **config}
    return WebhookSender(
        store,
        queue,
        SenderConfig(egress=policy, retry_queue_url="queue", **settings),
        post=receiver,
        sleep=lambda _: None,
    )


def events(*pairs: tuple[str, int]) -> list[StreamEvent]:
    return [StreamEvent(task, seq, json.dumps({"seq": seq}).encode()) for task, seq in pairs]


def deliver(
    webhooks: WebhookSender, store: InMemoryTaskStore, batch: list[StreamEvent], deadline: float
) -> dict[int, Exception]:
    configs = {e.task_id: store.list_push_configs(e.task_id) for e in batch}
    return webhooks.deliver_stream_batch(batch, configs, time.monotonic() + deadline)


def test_configs_run_concurrently_each_in_event_order(store: InMemoryTaskStore) -> None:
    add_configs(store, "t", "a", "b", "c")
    receiver = Receiver({hook: taking(0.1) for hook in "abc"})
    webhooks = sender(store, receiver, Queue())
    started = time.monotonic()
    failures = deliver(webhooks, store, events(*[("t", seq) for seq in (1, 2, 3, 4)]), 30)
    elapsed = time.monotonic() - started
    assert failures == {}
    for hook in "abc":
        assert receiver.seqs(hook) == [1, 2, 3, 4]
    assert receiver.overlapped == set()  # one config's events never overlap
    assert elapsed < 0.8, elapsed  # 12 POSTs of 0.1 s one after another would take 1.2 s


def test_a_slow_task_does_not_hold_back_another_tasks_webhook(store: InMemoryTaskStore) -> None:
    """Both answer in time (below the slow threshold): nothing is parked, but the other task's
    first event does not wait for the slow task's three."""
    add_configs(store, "slow-task", "slow")
    add_configs(store, "other-task", "fast")
    receiver = Receiver({"slow": taking(0.4), "fast": taking(0.0)})
    webhooks = sender(store, receiver, Queue())
    started = time.monotonic()
    batch = events(("slow-task", 1), ("slow-task", 2), ("slow-task", 3), ("other-task", 1))
    assert deliver(webhooks, store, batch, 30) == {}
    (fast,) = [c for c in receiver.calls if c.hook == "fast"]
    assert fast.ended - started < 0.3  # not after the slow webhook's 1.2 s
    assert receiver.seqs("slow") == [1, 2, 3]
    assert store.list_push_configs("slow-task")[0][1] is False  # answered in time: not parked


def test_a_webhook_slower_than_the_threshold_is_parked_after_one_short_attempt(
    store: InMemoryTaskStore,
) -> None:
    add_configs(store, "t", "slow", "fine")
    receiver = Receiver({"slow": taking(0.0, TIMED_OUT), "fine": taking(0.0)})
    queue = Queue()
    webhooks = sender(store, receiver, queue, slow_seconds=0.5, read_timeout=10.0)
    assert deliver(webhooks, store, events(("t", 1), ("t", 2), ("t", 3)), 30) == {}
    slow_calls = [c for c in receiver.calls if c.hook == "slow"]
    # One attempt (a timeout is not retried inline), waiting the threshold, not 10 s.
    assert [(c.seq, c.read_timeout) for c in slow_calls] == [(1, 0.5)]
    assert queue.seqs("slow") == [1, 2, 3]  # parked: every event queued, in order
    assert dict((c.id, p) for c, p in store.list_push_configs("t")) == {
        "slow": True,
        "fine": False,
    }
    assert receiver.seqs("fine") == [1, 2, 3]
    assert queue.seqs("fine") == []


def test_past_the_deadline_the_rest_is_parked_in_order(store: InMemoryTaskStore) -> None:
    """Each POST takes 0.25 s (under the 0.5 s threshold); the batch has 1.4 s. No attempt
    starts that could end after it (0.5 s connect + 0.5 s read): the lane posts what fits,
    then parks and queues the rest, in order."""
    add_configs(store, "t", "steady")
    receiver = Receiver({"steady": taking(0.25)})
    queue = Queue()
    webhooks = sender(store, receiver, queue, slow_seconds=0.5, connect_timeout=0.5)
    started = time.monotonic()
    failures = deliver(webhooks, store, events(*[("t", seq) for seq in range(1, 9)]), 1.4)
    elapsed = time.monotonic() - started
    assert failures == {}
    posted, queued = receiver.seqs("steady"), queue.seqs("steady")
    assert 0 < len(posted) < 8
    assert posted + queued == list(range(1, 9))
    assert store.list_push_configs("t")[0][1] is True
    assert elapsed < 1.4, elapsed


def test_a_sender_failure_stops_its_lane_and_is_reported_by_index(
    store: InMemoryTaskStore,
) -> None:
    """The queue refuses (the sender's own failure): the failing webhook's lane stops at the
    event it could not park; other lanes are not affected."""
    add_configs(store, "t", "down")
    add_configs(store, "u", "up")
    down = DeliveryResult(status=503, retryable=True, error="HTTP 503")
    receiver = Receiver({"down": taking(0.0, down), "up": taking(0.0)})

    class Broken(Queue):
        def send_message(self, **kwargs: Any) -> None:
            raise RuntimeError("no such queue")

        def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
            raise RuntimeError("no such queue")

    webhooks = sender(store, receiver, Broken())
    batch = events(("t", 1), ("u", 1), ("t", 2), ("u", 2))
    failures = deliver(webhooks, store, batch, 30)
    assert list(failures) == [0]
    assert isinstance(failures[0], RuntimeError)
    assert receiver.seqs("up") == [1, 2]
    assert receiver.seqs("down") == [1, 1]  # two inline attempts of event 1; event 2 untouched
