"""The webhook sender's decisions, against moto (table and queue) with a scripted receiver."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from a2a_serverless import wiring
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.egress import EgressPolicy, VettedTarget
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import (
    AuthenticationInfo,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_serverless.push.delivery import DeliveryResult
from a2a_serverless.push.sender import (
    PenaltyBox,
    SenderConfig,
    StreamEvent,
    WebhookSender,
    webhook_headers,
)
from tests.contract.cases import create

OK = DeliveryResult(status=200, retryable=False, error=None)
DOWN = DeliveryResult(status=503, retryable=True, error="HTTP 503")
GONE = DeliveryResult(status=404, retryable=False, error="HTTP 404")


class Receiver:
    """Scripted answers, recording what was posted (the `post` seam of the sender)."""

    def __init__(self, answers: list[DeliveryResult]) -> None:
        self.answers = answers
        self.calls: list[tuple[VettedTarget, bytes, dict[str, str]]] = []

    def __call__(self, target: VettedTarget, body: bytes, headers: Any, **_: Any) -> Any:
        self.calls.append((target, body, dict(headers)))
        return self.answers.pop(0) if self.answers else OK


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack(event_sources=False) as stack:  # the sender is driven by hand here
        yield stack


@pytest.fixture
def queue_url(stack: LocalStack) -> str:
    sqs = boto3.client("sqs", region_name="us-east-1")
    return sqs.create_queue(QueueName="sender-test.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]


def _sender(queue_url: str, receiver: Receiver, allow: bool = True) -> WebhookSender:
    policy = EgressPolicy(
        allow_http=True, allow_hosts=frozenset({"127.0.0.1"}) if allow else frozenset()
    )
    return WebhookSender(
        wiring.get_store(),
        boto3.client("sqs", region_name="us-east-1"),
        SenderConfig(egress=policy, retry_queue_url=queue_url),
        post=receiver,
        sleep=lambda _: None,
    )


def _config(task_id: str, config_id: str = "c1") -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        id=config_id,
        task_id=task_id,
        url="http://127.0.0.1:9/hook",
        token="tok",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="secret"),
    )


def _stored_config(task_id: str) -> tuple[Any, TaskPushNotificationConfig]:
    """The stack's store, holding a push config of the task."""
    store = wiring.get_store()
    config = _config(task_id)
    store.put_push_config(config)
    return store, config


def _body(task_id: str, state: TaskState) -> bytes:
    event = StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task_id, context_id="ctx", status=TaskStatus(state=state)
        )
    )
    return json.dumps(event.wire()).encode()


def _queued(queue_url: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name="us-east-1")
    found = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in found.get("Messages", [])]


def test_headers_carry_token_and_authorization() -> None:
    headers = webhook_headers(_config("t"))
    assert headers == {
        "Content-Type": "application/a2a+json",
        "X-A2A-Notification-Token": "tok",
        "Authorization": "Bearer secret",
    }
    bare = TaskPushNotificationConfig(url="https://x.example/")
    assert webhook_headers(bare) == {"Content-Type": "application/a2a+json"}


def test_success_posts_the_event_bytes_to_the_pinned_address(queue_url: str) -> None:
    receiver = Receiver([OK])
    sender = _sender(queue_url, receiver)
    body = _body("t1", TaskState.WORKING)
    sender.deliver_stream_event("t1", 3, body, [(_config("t1"), False)], set())
    (target, posted, headers) = receiver.calls[0]
    assert posted == body and target.address == "127.0.0.1" and target.port == 9
    assert headers["X-A2A-Notification-Token"] == "tok"
    assert _queued(queue_url) == []


def test_a_failing_webhook_is_parked_and_later_events_queue_behind_it(
    stack: LocalStack, queue_url: str
) -> None:
    store, config = _stored_config("t2")
    receiver = Receiver([DOWN, DOWN])  # both inline attempts fail
    sender = _sender(queue_url, receiver)
    parked: set[tuple[str, str]] = set()
    sender.deliver_stream_event("t2", 1, _body("t2", TaskState.WORKING), [(config, False)], parked)
    sender.deliver_stream_event(
        "t2", 2, _body("t2", TaskState.COMPLETED), [(config, False)], parked
    )
    assert len(receiver.calls) == 2  # event 2 was not attempted: it must not overtake event 1
    assert [m["seq"] for m in _queued(queue_url)] == [1, 2]
    assert store.list_push_configs("t2") == [(config, True)]  # later batches see it parked


def test_a_refusing_webhook_is_not_retried(queue_url: str) -> None:
    receiver = Receiver([GONE])
    sender = _sender(queue_url, receiver)
    sender.deliver_stream_event(
        "t3", 1, _body("t3", TaskState.WORKING), [(_config("t3"), False)], set()
    )
    assert len(receiver.calls) == 1 and _queued(queue_url) == []


def test_unsafe_urls_are_never_posted(queue_url: str) -> None:
    receiver = Receiver([])
    sender = _sender(queue_url, receiver, allow=False)  # production policy: loopback refused
    result = sender.attempt(_config("t4"), b"{}")
    assert not result.ok and not result.retryable and result.error.startswith("refused")
    assert receiver.calls == []


def test_queued_delivery_backs_off_and_reports_failure(stack: LocalStack, queue_url: str) -> None:
    store = wiring.get_store()
    service = wiring.get_service()
    from a2a_serverless.models import SendMessageRequest

    created = service.sender.send(
        RequestContext.of_owner("alice"),
        SendMessageRequest.model_validate(
            {
                "message": {"messageId": "m", "role": "user", "parts": [{"text": "hi"}]},
                "configuration": {"returnImmediately": True},
            }
        ),
    )
    task_id = created.task.id
    config = _config(task_id)
    store.put_push_config(config)
    sender = _sender(queue_url, Receiver([DOWN]))
    sender.enqueue(task_id, "c1", 1)
    sqs = boto3.client("sqs", region_name="us-east-1")
    (message,) = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1)["Messages"]
    with pytest.raises(Exception, match="HTTP 503"):
        sender.deliver_queued(json.loads(message["Body"]), message["ReceiptHandle"], receives=3)
    # A deleted config stops deliveries: the message succeeds without a POST.
    store.delete_push_config(task_id, "c1")
    quiet = Receiver([])
    _sender(queue_url, quiet).deliver_queued(
        {"taskId": task_id, "configId": "c1", "seq": 1}, "x", 1
    )
    assert quiet.calls == []


def test_parked_webhooks_queue_in_order_and_unparked_ones_go_directly(
    stack: LocalStack, queue_url: str
) -> None:
    store, config = _stored_config("t5")
    receiver = Receiver([OK, OK])
    sender = _sender(queue_url, receiver)
    body = _body("t5", TaskState.WORKING)
    store.park_push_config("t5", "c1", 3)  # events from 3 on go through the queue
    sender.deliver_stream_event("t5", 4, body, [(config, True)], set())
    sender.deliver_stream_event("t5", 2, body, [(config, True)], set())  # a retried batch
    assert receiver.calls == [] and [m["seq"] for m in _queued(queue_url)] == [4, 2]
    assert store.get_push_delivery("t5", "c1").queued_through == 4  # never lowered
    # The queue delivered 3, not the last queued: still parked.
    assert not store.unpark_if_drained("t5", "c1", 3)
    assert store.unpark_if_drained("t5", "c1", 4)
    # A batch that read the config while it was parked: the event goes directly now.
    sender.deliver_stream_event("t5", 5, body, [(config, True)], set())
    assert len(receiver.calls) == 1
    counts = boto3.client("sqs", region_name="us-east-1").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert sum(int(v) for v in counts.values()) == 2  # 4 and 2 only: 5 was not queued


def test_a_parked_webhooks_events_of_a_batch_are_queued_in_order_in_few_calls(
    stack: LocalStack, queue_url: str
) -> None:
    """A stream batch with 12 events for a parked webhook: one conditional write and two
    SendMessageBatch calls (10 + 2), and the FIFO group holds them in event order."""
    store, _ = _stored_config("t6")
    store.park_push_config("t6", "c1", 1)
    receiver = Receiver([])
    sender = _sender(queue_url, receiver)
    sqs = boto3.client("sqs", region_name="us-east-1")
    calls: list[str] = []
    sqs.meta.events.register("before-call.sqs.*", lambda model, **_: calls.append(model.name))
    sender.sqs = sqs
    events = [StreamEvent("t6", seq, _body("t6", TaskState.WORKING)) for seq in range(1, 13)]
    failures = sender.deliver_stream_batch(
        events, {"t6": store.list_push_configs("t6")}, deadline=float("inf")
    )
    assert failures == {} and receiver.calls == []
    assert calls == ["SendMessageBatch", "SendMessageBatch"]
    assert store.get_push_delivery("t6", "c1").queued_through == 12
    seqs: list[int] = []
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
        "Messages"
    ):
        for message in messages:
            seqs.append(json.loads(message["Body"])["seq"])
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert seqs == list(range(1, 13))


def test_a_config_gets_only_the_events_after_the_one_it_was_made_after(
    stack: LocalStack, queue_url: str
) -> None:
    """A stream batch read after a config was made can hold the task's older events: the
    config gets those after its `after_seq` only, on both paths that deliver stream events."""
    receiver = Receiver([])
    sender = _sender(queue_url, receiver)
    store = wiring.get_store()
    task_id = create(store, "alice").task_id
    store.put_push_config(_config(task_id, "all"))
    store.put_push_config(_config(task_id, "late").for_events_after(2))
    events = [StreamEvent(task_id, seq, _body(task_id, TaskState.WORKING)) for seq in (1, 2, 3, 4)]
    configs = {task_id: store.list_push_configs(task_id)}
    assert sender.deliver_stream_batch(events, configs, deadline=float("inf")) == {}
    assert len(receiver.calls) == 6  # 4 to "all", 2 to "late"
    one_config = [(_config(task_id, "late").for_events_after(4), False)]
    sender.deliver_stream_event(task_id, 4, events[3].body, one_config, set())
    sender.deliver_stream_event(task_id, 5, events[3].body, one_config, set())
    assert len(receiver.calls) == 7
    assert _queued(queue_url) == []


def test_an_owner_whose_webhook_was_parked_has_its_webhooks_parked_at_once_for_a_while(
    stack: LocalStack, queue_url: str
) -> None:
    """Each new slow webhook costs the stream shard one slow threshold before it is
    parked; an owner who keeps making new ones (new tasks, new configs) is penalized instead:
    while penalized, its webhooks are parked without a direct POST, other owners' are not, and
    when the penalty is over its webhooks go directly again."""
    store = wiring.get_store()
    first, second, later = (create(store, "mallory").task_id for _ in range(3))
    alice = create(store, "alice").task_id
    for task_id in (first, second, later, alice):
        store.put_push_config(_config(task_id))
    now = [100.0]
    receiver = Receiver([DOWN, DOWN])  # mallory's first webhook fails both direct attempts
    sender = _sender(queue_url, receiver)
    sender.penalty = PenaltyBox(60, clock=lambda: now[0])

    def batch(*task_ids: str) -> None:
        events = [StreamEvent(t, 1, _body(t, TaskState.WORKING)) for t in task_ids]
        configs = {t: store.list_push_configs(t) for t in task_ids}
        assert sender.deliver_stream_batch(events, configs, deadline=float("inf")) == {}

    batch(first)
    assert len(receiver.calls) == 2 and "mallory" in sender.penalty
    batch(second, alice)  # mallory's other task: parked at once; alice's: posted
    assert len(receiver.calls) == 3 and b'"' + alice.encode() in receiver.calls[2][1]
    assert store.list_push_configs(second) == [(_config(second), True)]
    assert sorted(m["taskId"] for m in _queued(queue_url)) == sorted([first, second])
    now[0] += 61  # the penalty is over: direct again
    assert "mallory" not in sender.penalty and not sender.penalty.active()
    batch(later)
    assert len(receiver.calls) == 4 and later.encode() in receiver.calls[3][1]
    assert store.list_push_configs(later) == [(_config(later), False)]


def test_the_penalty_box_forgets_the_oldest_owners_past_its_capacity() -> None:
    now = [0.0]
    box = PenaltyBox(10, clock=lambda: now[0], capacity=2)
    box.penalize("a")
    now[0] = 1
    box.penalize("b")
    box.penalize("c")  # over capacity: "a", penalized first, is forgotten
    assert "a" not in box and "b" in box and "c" in box
    now[0] = 5
    box.penalize("b")  # penalized again: its time starts over (until 15; "c" until 11)
    now[0] = 12
    assert box.active() and "b" in box and "c" not in box
    assert not PenaltyBox(0).active()
    off = PenaltyBox(0)
    off.penalize("a")  # 0 s: never penalized
    assert "a" not in off


def _batch_sender(queue_url: str, post: Any, **config: Any) -> WebhookSender:
    policy = EgressPolicy(allow_http=True, allow_hosts=frozenset({"127.0.0.1"}))
    return WebhookSender(
        wiring.get_store(),
        boto3.client("sqs", region_name="us-east-1"),
        SenderConfig(egress=policy, retry_queue_url=queue_url, **config),
        post=post,
        sleep=lambda _: None,
    )


def test_lanes_past_the_batchs_threads_are_parked_at_once_without_a_post(
    stack: LocalStack, queue_url: str
) -> None:
    """A lane that would wait for a busy thread would hold the shard a slow threshold longer:
    past `stream_workers` lanes, the rest are parked and queued at once, with no POST (each
    task's first config before anyone's second, so every task but the last gets one)."""
    store = wiring.get_store()
    tasks = [create(store, f"owner-{n}").task_id for n in range(3)]
    for task_id in tasks:
        store.put_push_config(_config(task_id, "first"))
        store.put_push_config(_config(task_id, "second"))
    receiver = Receiver([])
    sender = _batch_sender(queue_url, receiver, stream_workers=2)
    events = [StreamEvent(t, 1, _body(t, TaskState.WORKING)) for t in tasks]
    configs = {t: store.list_push_configs(t) for t in tasks}
    assert sender.deliver_stream_batch(events, configs, deadline=float("inf")) == {}
    posted = sorted(json.loads(body)["statusUpdate"]["taskId"] for _, body, _ in receiver.calls)
    assert posted == sorted(tasks[:2])  # the first two tasks' first configs
    parked = {(t, c.id) for t in tasks for c, is_parked in store.list_push_configs(t) if is_parked}
    assert parked == {(tasks[2], "first")} | {(t, "second") for t in tasks}
    queued = sorted((m["taskId"], m["configId"], m["seq"]) for m in _queued(queue_url))
    assert queued == sorted((t, c, 1) for t, c in parked)


def test_every_inline_post_of_a_batch_ends_within_its_window(
    stack: LocalStack, queue_url: str
) -> None:
    """A batch holds the shard for one inline budget (connect + slow threshold, here 0.2 s +
    0.2 s) and a short grace at most, however many events a lane has: a webhook answering
    each POST in 0.1 s (quick) gets the events that fit, attempts late in the window get their
    timeouts cut to what is left, and the rest is parked, in order. Cut short is not slow: its
    owner is not penalized."""
    store = wiring.get_store()
    task_id = create(store, "alice").task_id
    store.put_push_config(_config(task_id))
    windows: list[tuple[float, float]] = []  # per POST: when it started, its timeouts' sum
    answered: list[bool] = []

    def post(target: Any, body: bytes, headers: Any, **timeouts: float) -> DeliveryResult:
        windows.append((time.monotonic(), timeouts["connect_timeout"] + timeouts["read_timeout"]))
        if timeouts["read_timeout"] < 0.1:  # cut below the webhook's 0.1 s
            time.sleep(timeouts["read_timeout"])
            answered.append(False)
            return DeliveryResult(None, True, "timeout (read)", timed_out=True)
        time.sleep(0.1)
        answered.append(True)
        return OK

    sender = _batch_sender(queue_url, post, slow_seconds=0.2, connect_timeout=0.2)
    events = [StreamEvent(task_id, seq, _body(task_id, TaskState.WORKING)) for seq in range(1, 11)]
    started = time.monotonic()
    failures = sender.deliver_stream_batch(
        events, {task_id: store.list_push_configs(task_id)}, deadline=float("inf")
    )
    assert failures == {}
    assert 2 <= len(windows) < 10
    # The window opens before the first POST starts: it closes by 1.1 budgets after it. Each
    # POST's budget is cut when it is computed, a moment before the POST starts (20 ms of
    # slack for that moment on a loaded machine; an uncut POST would end 0.3 s past it).
    window_end = windows[0][0] + 0.4 * 1.1 + 0.02
    assert all(start + budget <= window_end for start, budget in windows), windows
    assert time.monotonic() - started < 0.4 * 1.1 + 0.2  # then parking: a write, a call
    delivered = answered.count(True)
    assert answered == [True] * delivered + [False] * (len(answered) - delivered)
    assert [m["seq"] for m in _queued(queue_url)] == list(range(delivered + 1, 11))
    assert store.list_push_configs(task_id)[0][1] is True
    assert "alice" not in sender.penalty
