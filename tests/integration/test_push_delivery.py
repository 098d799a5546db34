"""Webhooks end to end: tasks created through the service, the real WebhookSenderFunction fed
by the stack's emulated stream and retry-queue mappings, and real HTTP receivers on
127.0.0.1 answering from a script.

The stack runs with PushMaxAttempts=2 and no queued-retry backoff (PUSH_RETRY_BASE_SECONDS=0)
so that parking, retrying and dead-lettering take moments. Most tests poll the template's
mappings by hand (`event_sources="manual"`: the stream first, then the queue), which fixes
which events share a batch; the first two let the pollers run in their threads, as
`scripts/dev` does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import httpx
import pytest

from a2a_serverless import wiring
from a2a_serverless.core.context import RequestContext
from a2a_serverless.local import events
from a2a_serverless.local.events import EventSources, QueueMapping, StreamMapping
from a2a_serverless.local.stack import REGION, LocalStack
from a2a_serverless.models import SendMessageRequest, TaskPushNotificationConfig
from a2a_serverless.push.sender import fifo_ids
from a2a_serverless.settings import Settings
from tests import wire
from tests.integration.harness import event_log, queue_depth, sqs, wait_for, wait_idle
from tests.integration.webhooks import Answer, Webhooks, always, failing_first

OWNER = "alice"
TOKEN = "notification-token"
CREDENTIALS = "webhook-secret"
MAX_ATTEMPTS = 2  # PushMaxAttempts of these stacks
STREAM = "WebhookSenderFunction.TaskEvents"
RETRIES = "WebhookSenderFunction.Retries"

# -- webhook receivers --------------------------------------------------------------------


@pytest.fixture
def webhooks() -> Iterator[Webhooks]:
    receivers = Webhooks()
    yield receivers
    receivers.close()


# -- the stack ------------------------------------------------------------------------------


@contextlib.contextmanager
def push_stack(mode: bool | str = "manual", **env: str) -> Iterator[LocalStack]:
    stack = LocalStack(
        parameters={"PushMaxAttempts": str(MAX_ATTEMPTS)},
        env_overrides={"PUSH_RETRY_BASE_SECONDS": "0", **env},
        event_sources=mode,
    ).start()
    try:
        yield stack
    finally:
        try:
            wait_idle(stack)
        finally:
            stack.stop()


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """Mappings polled by hand; a failing stream batch is retried without Lambda's pause."""
    monkeypatch.setattr(events, "RETRY_PAUSE_SECONDS", 0.0)
    with push_stack() as stack:
        yield stack


@pytest.fixture
def running_stack() -> Iterator[LocalStack]:
    """Pollers in their threads, as deployed."""
    with push_stack(mode=True) as stack:
        yield stack


@pytest.fixture
def local_speedups_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local stack's speed-ups, whatever A2A_LOCAL_SPEEDUPS says: a timing test's figures
    must be the sender's, not moto's (on moto alone a call costs tens of times more)."""
    monkeypatch.setenv("A2A_LOCAL_SPEEDUPS", "all")


def mappings(stack: LocalStack) -> EventSources:
    assert stack.event_sources is not None
    return stack.event_sources


def pump(mapping: StreamMapping | QueueMapping, limit: int = 500) -> None:
    """Poll until the mapping finds no work."""
    for _ in range(limit):
        if not mapping.poll_once():
            return
    raise AssertionError(f"{mapping.name} still busy after {limit} polls")


def pump_stream(stack: LocalStack) -> StreamMapping:
    stream = mappings(stack).by_name(STREAM)
    assert isinstance(stream, StreamMapping)
    pump(stream)
    return stream


def pump_queue(stack: LocalStack) -> QueueMapping:
    queue = mappings(stack).by_name(RETRIES)
    assert isinstance(queue, QueueMapping)
    pump(queue)
    return queue


# -- tasks and queues -----------------------------------------------------------------------


def start_task(
    url: str, text: str = "hello webhook", *, blocking: bool = True, owner: str = OWNER
) -> str:
    """A task of `owner` created through the service with an inline push config; its id."""
    request = SendMessageRequest.model_validate(
        {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            },
            "configuration": {
                "returnImmediately": not blocking,
                "taskPushNotificationConfig": {
                    "url": url,
                    "token": TOKEN,
                    "authentication": {"scheme": "Bearer", "credentials": CREDENTIALS},
                },
            },
        }
    )
    task = wiring.get_service().sender.send(RequestContext.of_owner(owner), request).task
    assert task is not None and task.id
    return task.id


def wait_settled(task_id: str, timeout: float = 20.0) -> None:
    def settled() -> bool:
        record = wiring.get_store().get_record(task_id)
        return record is not None and record.state.value == "TASK_STATE_COMPLETED"

    wait_for(settled, timeout=timeout, interval=0.05)


def config_id(task_id: str) -> str:
    (config,) = wiring.get_push().list(OWNER, task_id).configs or []
    assert config.id
    return config.id


def parked(task_id: str) -> bool:
    ((_, is_parked),) = wiring.get_store().list_push_configs(task_id)
    return is_parked


def events_of(stack: LocalStack, task_id: str) -> list[dict[str, Any]]:
    """The task's event log in seq order (seqs 1..N): what its webhook must receive."""
    log = event_log(stack, task_id)
    assert [seq for seq, _ in log] == list(range(1, len(log) + 1))
    return [event for _, event in log]


def take_all(url: str) -> list[dict[str, Any]]:
    """Every message body of a queue, read and deleted, in the order the queue gives them."""
    client = sqs()  # one for the lot: making a client costs more than a call
    bodies: list[dict[str, Any]] = []
    while True:
        messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages")
        if not messages:
            return bodies
        bodies.extend(json.loads(message["Body"]) for message in messages)
        deleted = client.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": message["ReceiptHandle"]}
                for i, message in enumerate(messages)
            ],
        )
        assert not deleted.get("Failed"), deleted["Failed"]


def dead_letters(stack: LocalStack) -> list[dict[str, Any]]:
    return take_all(stack.queues["PushDeadLetterQueue"])


# -- pollers in threads ---------------------------------------------------------------------


def test_every_event_is_delivered_in_order_with_its_headers(
    running_stack: LocalStack, webhooks: Webhooks
) -> None:
    task_id = start_task(webhooks.hook("ok", always(200)))
    expected = events_of(running_stack, task_id)
    assert len(expected) >= 4  # submitted, working, artifact chunks, completed
    wait_for(lambda: len(webhooks.delivered("ok")) >= len(expected), timeout=10)
    mappings(running_stack).drain()
    assert webhooks.delivered("ok") == expected  # each once, in seq order
    for post in webhooks.posts_to("ok"):
        assert post.headers["content-type"] == "application/a2a+json"
        assert post.headers["x-a2a-notification-token"] == TOKEN
        assert post.headers["authorization"] == f"Bearer {CREDENTIALS}"
        assert post.headers["host"] == f"127.0.0.1:{webhooks.port}"
        ((kind, update),) = post.body.items()  # a StreamResponse: one of its fields
        assert kind in ("statusUpdate", "artifactUpdate") and update["taskId"] == task_id
    assert not parked(task_id)


def test_a_failing_webhook_is_dead_lettered_in_order_without_holding_back_others(
    running_stack: LocalStack, webhooks: Webhooks
) -> None:
    failing = start_task(webhooks.hook("down", always(500)), "one", blocking=False)
    # Another owner's: the failing webhook's owner is penalized (PenaltyBox), so a webhook of
    # the same owner whose events come in a later batch is parked too, by design.
    healthy = start_task(webhooks.hook("up", always(200)), "two", blocking=False, owner="bob")
    wait_settled(failing)
    wait_settled(healthy)
    expected = events_of(running_stack, healthy)
    # The healthy webhook gets all of its task's events at once, whatever the other does.
    wait_for(lambda: len(webhooks.delivered("up")) >= len(expected), timeout=10)
    assert webhooks.delivered("up") == expected
    assert not parked(healthy)
    # Every event of the failing webhook ends in the dead-letter queue, in seq order.
    count = len(events_of(running_stack, failing))
    found: list[dict[str, Any]] = []

    def all_dead_lettered() -> bool:
        found.extend(dead_letters(running_stack))
        return len(found) >= count

    wait_for(all_dead_lettered, timeout=10, interval=0.2)
    assert found == [
        {
            "taskId": failing,
            "configId": config_id(failing),
            "seq": seq,
            "attempts": MAX_ATTEMPTS,
            "lastError": "HTTP 500",
        }
        for seq in range(1, count + 1)
    ]
    # The queue drains (into the dead-letter queue) and the config is unparked: a later event
    # would be tried directly again (and parked again if it failed).
    wait_for(
        lambda: queue_depth(running_stack.queues["PushRetryQueue"]) == 0 and not parked(failing),
        timeout=10,
    )
    assert webhooks.delivered("down") == []


# -- mappings polled by hand ------------------------------------------------------------------


def test_a_recovering_webhook_gets_everything_in_order(
    stack: LocalStack, webhooks: Webhooks
) -> None:
    """500 for both stream attempts and the first queued one, then 200 (the second queued
    attempt of the first event, its last allowed one, succeeds)."""
    task_id = start_task(webhooks.hook("flaky", failing_first(3)))
    expected = events_of(stack, task_id)
    pump_stream(stack)
    assert parked(task_id)
    assert len(webhooks.posts_to("flaky")) == 2  # two inline attempts, then the queue
    pump_queue(stack)
    assert webhooks.delivered("flaky") == expected
    assert dead_letters(stack) == []
    assert queue_depth(stack.queues["PushRetryQueue"]) == 0


@pytest.mark.parametrize("penalty", ["0", "300"])
def test_a_recovered_webhook_is_unparked_and_later_events_go_directly(
    monkeypatch: pytest.MonkeyPatch, webhooks: Webhooks, penalty: str
) -> None:
    """Once the queue has delivered the last event it held, the webhook leaves the queue
    path: the next turn's events are POSTed by the stream batch itself, still in order —
    once its owner's penalty is over (PUSH_PENALTY_SECONDS; until then they are queued
    again, still in order; the penalty's span is tests/integration/test_sender.py's)."""
    monkeypatch.setattr(events, "RETRY_PAUSE_SECONDS", 0.0)
    with push_stack(PUSH_PENALTY_SECONDS=penalty) as stack:
        _recovered_webhook(stack, webhooks, penalized=penalty != "0")


def _recovered_webhook(stack: LocalStack, webhooks: Webhooks, penalized: bool) -> None:
    task_id = start_task(webhooks.hook("back", failing_first(3)), "ask me [input]")
    pump_stream(stack)
    assert parked(task_id)
    queue = pump_queue(stack)
    assert webhooks.delivered("back") == events_of(stack, task_id)
    assert not parked(task_id)
    record = wiring.get_store().get_record(task_id)
    assert record is not None and record.state.value == "TASK_STATE_INPUT_REQUIRED"
    answer = SendMessageRequest.model_validate(
        {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "the answer"}],
                "taskId": task_id,
                "contextId": record.context_id,
            }
        }
    )
    wiring.get_service().sender.send(RequestContext.of_owner(OWNER), answer)
    invocations = queue.invocations
    pump_stream(stack)
    if penalized:
        assert parked(task_id)
        assert pump_queue(stack).invocations > invocations  # queued again
    else:
        assert pump_queue(stack).invocations == invocations  # nothing went through the queue
    assert webhooks.delivered("back") == events_of(stack, task_id)  # both turns, in order
    assert not parked(task_id)


def test_events_behind_a_dead_lettered_one_still_get_their_attempts(
    stack: LocalStack, webhooks: Webhooks
) -> None:
    """The first event fails all its attempts (2 inline, MAX_ATTEMPTS queued) and is
    dead-lettered; the webhook is fine from then on, so every later event is delivered.
    PushMaxAttempts is "delivery attempts of a parked webhook event before it goes to the
    dead-letter queue" (template.yaml): an event must not be dead-lettered unattempted."""
    task_id = start_task(webhooks.hook("late", failing_first(2 + MAX_ATTEMPTS)))
    expected = events_of(stack, task_id)
    pump_stream(stack)
    pump_queue(stack)
    lost = [body["seq"] for body in dead_letters(stack)]
    attempted = [p.body for p in webhooks.posts_to("late")]
    never_attempted = [seq for seq in lost if expected[seq - 1] not in attempted]
    assert never_attempted == [], f"dead-lettered without a single POST: events {never_attempted}"
    assert lost == [1]
    assert webhooks.delivered("late") == expected[1:]


def test_a_webhook_gets_the_events_written_after_it_was_made(
    stack: LocalStack, webhooks: Webhooks
) -> None:
    """The stream is read after all the configs were made (here by hand; on AWS its batches
    trail the writes by about a second): the inline config of the new task gets the whole
    log, one made through the API at input-required and the follow-up's inline one get the
    second turn only, from its SUBMITTED status, none of the events written before them."""
    task_id = start_task(webhooks.hook("inline", always(200)), "ask [input]")
    turn_1 = events_of(stack, task_id)
    assert turn_1[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    made = TaskPushNotificationConfig(url=webhooks.hook("api", always(200)))
    wiring.get_push().create(OWNER, task_id, made)
    follow_up = _message("more", task_id)
    follow_up.configuration.task_push_notification_config = TaskPushNotificationConfig(
        url=webhooks.hook("turn-2", always(200))
    )
    wiring.get_service().sender.send(RequestContext.of_owner(OWNER), follow_up)
    wait_settled(task_id)
    pump_stream(stack)
    pump_queue(stack)  # a first attempt slower than PUSH_SLOW_SECONDS (a loaded host) parks it
    everything = events_of(stack, task_id)
    turn_2 = everything[len(turn_1) :]
    assert turn_2[0]["statusUpdate"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert webhooks.delivered("inline") == everything
    assert webhooks.delivered("api") == turn_2
    assert webhooks.delivered("turn-2") == turn_2


def test_a_refusing_webhook_is_not_retried(stack: LocalStack, webhooks: Webhooks) -> None:
    task_id = start_task(webhooks.hook("gone", always(404)))
    expected = events_of(stack, task_id)
    pump_stream(stack)
    pump_queue(stack)
    # One POST per event, in order; 404 is final: nothing parked, queued or dead-lettered.
    assert [p.body for p in webhooks.posts_to("gone")] == expected
    assert not parked(task_id)
    assert queue_depth(stack.queues["PushRetryQueue"]) == 0
    assert dead_letters(stack) == []


def test_a_slow_webhook_is_retried_from_the_queue(
    monkeypatch: pytest.MonkeyPatch, webhooks: Webhooks
) -> None:
    """Slower than the read timeout: a retryable failure (parked), delivered once it is fast."""
    monkeypatch.setattr(events, "RETRY_PAUSE_SECONDS", 0.0)

    def slow_then_fast(n: int) -> Answer:
        return (1.0, 200) if n < 2 else 200

    with push_stack(PUSH_READ_TIMEOUT="0.3") as stack:
        task_id = start_task(webhooks.hook("slow", slow_then_fast))
        expected = events_of(stack, task_id)
        pump_stream(stack)
        assert parked(task_id)
        pump_queue(stack)
        # Two POSTs timed out (the inline one: a timeout parks at once; the first queued one)
        # and were answered 200 too late: only the later queued ones count.
        assert [p.body for p in webhooks.posts_to("slow")][2:] == expected
        assert dead_letters(stack) == []


def test_deleting_a_parked_config_stops_its_queued_deliveries(
    stack: LocalStack, webhooks: Webhooks
) -> None:
    task_id = start_task(webhooks.hook("deleted", always(500)))
    count = len(events_of(stack, task_id))
    pump_stream(stack)
    assert parked(task_id)
    retry_queue = stack.queues["PushRetryQueue"]
    assert queue_depth(retry_queue) == count  # every event waits behind the first
    wiring.get_push().delete(OWNER, task_id, config_id(task_id))
    posts = len(webhooks.posts_to("deleted"))
    pump_queue(stack)
    assert len(webhooks.posts_to("deleted")) == posts  # not one more POST
    assert queue_depth(retry_queue) == 0  # consumed, not retried
    assert dead_letters(stack) == []


def test_batches_the_sender_cannot_process_go_to_the_stream_failure_queue(
    monkeypatch: pytest.MonkeyPatch, webhooks: Webhooks
) -> None:
    """The sender's own failure, not a webhook's: its retry queue is missing (as a wrong
    PUSH_RETRY_QUEUE_URL or a lost sqs:SendMessage grant would make it), so parking a failing
    webhook fails the stream records. Lambda retries (10), bisects, then sends batch info to
    PushStreamFailureQueue and moves on."""
    monkeypatch.setattr(events, "RETRY_PAUSE_SECONDS", 0.0)
    missing = f"https://sqs.{REGION}.amazonaws.com/123456789012/no-such-queue.fifo"
    with push_stack(PUSH_RETRY_QUEUE_URL=missing) as stack:
        stuck = start_task(webhooks.hook("down", always(500)))
        stream = pump_stream(stack)
        info = [
            record["DDBStreamBatchInfo"]
            for record in take_all(stack.queues["PushStreamFailureQueue"])
        ]
        assert info and all(i["streamArn"] == stream.stream_arn for i in info)
        covered = sorted(
            n
            for i in info
            for n in range(int(i["startSequenceNumber"]), int(i["endSequenceNumber"]) + 1)
        )
        assert covered == stuck_event_sequence_numbers(stream, stuck)
        assert sum(i["batchSize"] for i in info) == len(covered)
        # Processing moved on: a later task's healthy webhook is served.
        later = start_task(webhooks.hook("up", always(200)))
        pump_stream(stack)
        assert webhooks.delivered("up") == events_of(stack, later)


def stuck_event_sequence_numbers(stream: StreamMapping, task_id: str) -> list[int]:
    """The stream sequence numbers of a task's events: its inserted event items, and the
    header's writes that add the events it stands for (its insert for event 1, the update
    that adds event 2)."""
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    iterator = streams.get_shard_iterator(
        StreamArn=stream.stream_arn, ShardId=stream.shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    return [
        int(r["dynamodb"]["SequenceNumber"])
        for r in records
        if r["dynamodb"]["Keys"]["pk"]["S"] == f"T#{task_id}"
        and (
            (
                r["eventName"] == "INSERT"
                and (
                    r["dynamodb"]["Keys"]["sk"]["S"].startswith("E#")
                    or r["dynamodb"]["NewImage"].get("e1") == {"BOOL": True}
                )
            )
            or (
                r["eventName"] == "MODIFY"
                and "w1" in r["dynamodb"]["NewImage"]
                and "w1" not in r["dynamodb"]["OldImage"]
            )
        )
    ]


# -- noisy neighbours --------------------------------------------------------------------------


def _message(text: str, task_id: str | None = None, context_id: str | None = None) -> Any:
    return SendMessageRequest.model_validate(
        {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
                **({"taskId": task_id, "contextId": context_id} if task_id else {}),
            },
            "configuration": {"returnImmediately": True},
        }
    )


def _first_delivery_seconds(webhooks: Webhooks, name: str) -> float:
    """Seconds from a new task of another owner (its webhook `name`, inline) to the first
    POST its webhook receives.

    Each is a new owner's: on a loaded machine a quick webhook's answer can still take longer
    than the (scaled-down) slow threshold, which parks it and penalizes its owner, and a
    penalized owner's next webhook is parked without a direct attempt (nothing here drains
    the retry queue), so a shared owner would wait for a POST that never comes."""
    hook = webhooks.hook(name, always(200))
    sent = time.monotonic()
    start_task(hook, f"quick {name}", blocking=False, owner=f"owner-of-{name}")
    wait_for(lambda: webhooks.posts_to(name), timeout=30, interval=0.005)
    return webhooks.posts_to(name)[0].at - sent


def _hostile_turn(
    webhooks: Webhooks, round_: int, delay: float, retry_queue: str, settle: Callable[[], None]
) -> list[str]:
    """Another owner's task with the most configs allowed (10), each answering 200 after
    `delay` seconds, gets a new turn (several events) now: `_hostile_turns` for "mallory"."""
    return _hostile_turns(webhooks, f"{round_}", delay, retry_queue, settle, ["mallory"])


def _hostile_turns(
    webhooks: Webhooks,
    label: str,
    delay: float,
    retry_queue: str,
    settle: Callable[[], None],
    owners: list[str],
    paused: StreamMapping | None = None,
) -> list[str]:
    """A task of each of `owners` with the most configs allowed (10), each answering 200 after
    `delay` seconds, gets a new turn (several events) now, the owners' turns back to back.
    Returns once a stream batch of them is in flight: the first of their POSTs has arrived (the
    batch waits on the answers) or the first of their events is on the retry queue (the batch
    is parking their webhooks). Returns the webhooks' names. With the stream mapping
    `paused`, its poller is stopped until the turns are over: their events come in one batch.

    The configs are made once the first turns' events have been through the stream
    (`settle`): a batch of them read while configs were still being added (on a loaded
    machine) POSTed them to the first few hooks only, penalized the owner, and the later
    hooks were parked without a direct attempt."""
    service, push, store = wiring.get_service(), wiring.get_push(), wiring.get_store()
    tasks = []
    for owner in owners:
        task = service.sender.send(RequestContext.of_owner(owner), _message("ask me [input]")).task
        assert task is not None and task.id
        tasks.append(task)
    for task in tasks:
        wait_for(
            lambda t=task: (
                (r := store.get_record(t.id)) and r.state.value.endswith("INPUT_REQUIRED")
            )
        )
    settle()
    hooks = []
    for index, (owner, task) in enumerate(zip(owners, tasks, strict=True)):
        prefix = f"hostile-{label}" if len(owners) == 1 else f"hostile-{label}-{index}"
        for n in range(10):
            name = f"{prefix}-{n}"
            url = webhooks.hook(name, lambda _n: (delay, 200))
            push.create(owner, task.id, TaskPushNotificationConfig(url=url))
            hooks.append(name)
    if paused is not None:
        paused.stop()
    for owner, task in zip(owners, tasks, strict=True):
        service.sender.send(
            RequestContext.of_owner(owner), _message("the answer", task.id, task.context_id)
        )
    if paused is not None:
        for task in tasks:
            wait_settled(task.id)
        paused.stop_event.clear()
        paused.start()
    wait_for(
        lambda: any(webhooks.posts_to(h) for h in hooks) or queue_depth(retry_queue) > 0,
        timeout=10,
        interval=0.005,
    )
    return hooks


# A quiet first delivery on AWS: Lambda polls a stream shard 4 times a second (0-0.25 s wait),
# then the invocation, the config query and a fresh TLS connection for the POST add a few tenths.
# The default PushSlowSeconds (settings: 0.5 s) is chosen not to exceed it.
AWS_QUIET_SECONDS = 0.5
ROUNDS = 5
# What a penalized owner's batch costs locally: it parks its ten webhooks without POSTing (ten
# conditional writes and ten queue calls, serialized by moto's locks); tens of ms on AWS, where
# the calls of the lanes run side by side.
PENALIZED_PARKING_MARGIN = 0.3


def _stream_idle(stack: LocalStack, stream: StreamMapping) -> None:
    """Until the flow's executions are done and the stream mapping has found nothing new."""
    wait_idle(stack)
    wait_for(lambda: not stream.busy, timeout=30, interval=0.01)


def _stream_settled(stack: LocalStack) -> None:
    """Until the flow's executions are done and the stream mapping has looked again since the
    last write and found nothing (`drain`: not being busy only says no batch is in flight)."""
    wait_idle(stack)
    mappings(stack).drain(timeout=30)


def _quiet_rounds(webhooks: Webhooks) -> list[float]:
    """First deliveries with no one else about, each once the previous task is done and
    delivered (so none waits behind another's later events). Each task starts at a random
    point of the mapping's idle poll cycle, as writes do on AWS (right after an idle poll,
    every one would wait out the whole cycle)."""
    phases = random.Random(11)
    quiet = []
    with _polling_stream() as (stack, stream):
        for n in range(ROUNDS):
            time.sleep(phases.uniform(0, stream.idle_seconds))
            quiet.append(_first_delivery_seconds(webhooks, f"quiet-{n}"))
            _stream_idle(stack, stream)
    return quiet


@contextlib.contextmanager
def _polling_stream(**env: str) -> Iterator[tuple[LocalStack, StreamMapping]]:
    """A push stack whose stream mapping (only) polls in its thread, as deployed."""
    with push_stack(**env) as stack:
        stream = mappings(stack).by_name(STREAM)
        assert isinstance(stream, StreamMapping)
        stream.start()
        try:
            yield stack, stream
        finally:
            stream.stop()


@pytest.mark.usefixtures("local_speedups_on")
def test_a_hostile_owners_slow_webhooks_delay_another_owners_first_delivery_once(
    webhooks: Webhooks,
) -> None:
    """10 configs answering after 8 s once took another owner's first delivery from
    ~0.5 s to ~480 s (posted one after another, each slow answer waited out). Measured here
    with a hostile owner present throughout: each round it makes a new task with 10 new
    webhooks answering after 3 s and starts a turn, and another owner's task is sent while
    the hostile batch is in flight.

    The stream mapping runs one batch per shard at a time (the template's
    ParallelizationFactor is 1, see tests/template/test_push_parallelization.py: with more,
    AWS keeps order per item only and a task's events would reach its webhooks out of order),
    so the other owner's event waits for the hostile batch. The first time, its slow webhooks'
    direct attempts run side by side and give up after one slow threshold, then they are
    parked: the wait is one threshold plus parking, whatever their delay or number (asserted
    by what the webhooks saw: one POST each, all sent side by side, and the other owner's POST
    before any hostile answer could have come back; its time is printed, not asserted: a
    loaded machine stretches it, see scripts/bench for times). From then on the owner is
    penalized (PUSH_PENALTY_SECONDS): its webhooks are parked without a direct attempt
    (asserted: none of them is POSTed on the stream's time), and the other owner's first
    delivery stays within 2x of the quiet case (the median of the later rounds, asserted with
    the local stack's parking margin; printed).

    The threshold is the default scaled by this stack's quiet first delivery over AWS's
    (AWS_QUIET_SECONDS), the same proportion as deployed. Only the stream mapping polls (in
    its thread, at Lambda's cadence): the first delivery is its job. The parked hostile events
    pile up on the retry queue, whose consumer runs in other invocations in AWS; here moto's
    FIFO receive gets slower with every queued message and would tax the whole process, which
    is not what is measured (nor is the pile-up: the queue is emptied after each round)."""
    delay = 3.0
    quiet = _quiet_rounds(webhooks)
    quiet_median = statistics.median(quiet)
    default = Settings.model_fields["push_slow_seconds"].default
    slow = round(default * quiet_median / AWS_QUIET_SECONDS, 3)
    noisy = []
    with _polling_stream(PUSH_SLOW_SECONDS=str(slow)) as (stack, stream):
        retry_queue = stack.queues["PushRetryQueue"]
        for round_ in range(ROUNDS + 1):
            hooks = _hostile_turn(
                webhooks, round_, delay, retry_queue, lambda: _stream_settled(stack)
            )
            noisy.append(_first_delivery_seconds(webhooks, f"noisy-{round_}"))
            _stream_idle(stack, stream)
            if round_ == 0:  # the first offence: one direct attempt each, side by side
                # A POST the sender made may be recorded late: the receiver's thread for it
                # can start after the sender gave up waiting (a loaded machine). It records
                # before it waits `delay`, and the queued retries are taken away below.
                with contextlib.suppress(AssertionError):
                    wait_for(
                        lambda names=hooks: all(webhooks.posts_to(h) for h in names),
                        timeout=delay,
                    )
                first_posts = [webhooks.posts_to(h) for h in hooks]
                assert [len(p) for p in first_posts] == [1] * len(hooks), first_posts
                arrivals = [p[0].at for p in first_posts]
                # One after another, each would start once the one before gave up (>= slow).
                assert max(arrivals) - min(arrivals) < (len(hooks) - 1) * slow, (arrivals, slow)
                # The other owner's webhook did not wait for any hostile answer.
                assert webhooks.posts_to("noisy-0")[0].at < min(arrivals) + delay
            if round_ > 0:  # penalized: parked at once, never POSTed on the stream's time
                assert not any(webhooks.posts_to(h) for h in hooks), round_
            # Its events were queued. Emptied for the next round: moto's SQS calls slow down
            # with every queued message.
            assert len(take_all(retry_queue)) >= 10
    first, later = noisy[0], statistics.median(noisy[1:])
    print(
        f"\nfirst delivery, quiet: {sorted(round(q, 3) for q in quiet)} s; with a hostile "
        f"owner (threshold {slow} s): first offence {first:.3f} s, then "
        f"{sorted(round(n, 3) for n in noisy[1:])} s; median ratio {later / quiet_median:.2f}"
    )
    # Unfixed, the quiet owner waited out the hostile answers (3 s each, one after another).
    assert max(noisy) < delay, (quiet, noisy)
    assert later <= 2 * quiet_median + PENALIZED_PARKING_MARGIN, (quiet, noisy)


FRESH_OWNERS = 8
# Parking a batch's webhooks here, as measured by `_parking_seconds`, may take this much longer
# inside the batch (its lanes' threads and the receivers' share the process with moto).
PARKING_SLACK = 1.25


def _parking_seconds(queued: list[dict[str, Any]], retry_queue: str) -> float:
    """How long this stack takes to park what a batch parked (`queued`: the retry queue's
    messages) as the sender does: a conditional write per webhook, then a SendMessageBatch
    per ten events; the copies are taken off the queue again. The local cost of parking
    (moto serializes the calls: most of it is its SQS, over a millisecond an event; on AWS
    the writes run side by side), measured here rather than assumed."""
    store, client = wiring.get_store(), sqs()
    started = time.monotonic()
    last: dict[tuple[str, str], int] = {}
    for body in queued:
        key = (body["taskId"], body["configId"])
        last[key] = max(last.get(key, 0), body["seq"])
    for (task_id, config), seq in last.items():
        store.park_push_config(task_id, config, seq)
    for start in range(0, len(queued), 10):
        entries = [
            {
                "Id": str(i),
                "MessageBody": json.dumps(body),
                **fifo_ids(body["taskId"], body["configId"], body["seq"]),
            }
            for i, body in enumerate(queued[start : start + 10])
        ]
        client.send_message_batch(QueueUrl=retry_queue, Entries=entries)
    took = time.monotonic() - started
    take_all(retry_queue)
    return took


@pytest.mark.usefixtures("local_speedups_on")
def test_fresh_hostile_owners_slow_webhooks_delay_another_owners_first_delivery_at_most_2x(
    webhooks: Webhooks,
) -> None:
    """Principals are cheap: each round, FRESH_OWNERS owners never seen before (no penalty
    yet) each make a task with 10 webhooks answering after 3 s and start a turn, back to
    back (their events written while the stream is paused, so that they come in one batch
    of 80 lanes), and another owner's task is sent while that batch is in flight. The
    stream's batches hold the shard (ParallelizationFactor 1) for at most one window each
    (every lane's first attempt starts at once; no lane queues behind another), so the other
    owner's first delivery stays within 2x of the quiet case (medians), plus what parking
    their 80 webhooks costs on this stack (`_parking_seconds`, measured each round; printed).
    Unfixed, 80 lanes on 16 threads waited out five slow thresholds in turn.

    Threshold scaled as in the one-owner test above; the parked events are taken off the
    retry queue after each round, for the same reason."""
    delay = 3.0
    quiet = _quiet_rounds(webhooks)
    quiet_median = statistics.median(quiet)
    default = Settings.model_fields["push_slow_seconds"].default
    slow = round(default * quiet_median / AWS_QUIET_SECONDS, 3)
    noisy, parking = [], []
    with _polling_stream(PUSH_SLOW_SECONDS=str(slow)) as (stack, stream):
        retry_queue = stack.queues["PushRetryQueue"]
        for round_ in range(ROUNDS):
            owners = [f"fresh-{round_}-{n}" for n in range(FRESH_OWNERS)]
            hooks = _hostile_turns(
                webhooks,
                f"fresh-{round_}",
                delay,
                retry_queue,
                lambda: _stream_settled(stack),
                owners,
                paused=stream,
            )
            noisy.append(_first_delivery_seconds(webhooks, f"fresh-noisy-{round_}"))
            _stream_idle(stack, stream)
            # At most one direct attempt each (then parked), and everything queued.
            assert all(len(webhooks.posts_to(h)) <= 1 for h in hooks), round_
            queued = take_all(retry_queue)
            assert len({(m["taskId"], m["configId"]) for m in queued}) == len(hooks)
            parking.append(_parking_seconds(queued, retry_queue))
    noisy_median = statistics.median(noisy)
    margin = round(PARKING_SLACK * statistics.median(parking), 3)
    print(
        f"\nfirst delivery, quiet: {sorted(round(q, 3) for q in quiet)} s (median "
        f"{quiet_median:.3f}); with {FRESH_OWNERS} fresh hostile owners x 10 slow webhooks a "
        f"round (threshold {slow} s): {sorted(round(n, 3) for n in noisy)} s (median "
        f"{noisy_median:.3f}); median ratio {noisy_median / quiet_median:.2f} "
        f"(allowed 2x + {margin} s: parking here {sorted(round(p, 3) for p in parking)} s)"
    )
    assert max(noisy) < delay, (quiet, noisy)
    assert noisy_median <= 2 * quiet_median + margin, (quiet, noisy)


# -- the per-task config cap ------------------------------------------------------------------

CAP = 3  # PushMaxConfigsPerTask of the cap test's stack (the template's default is 10)


def _violations(details: list[dict[str, Any]]) -> list[str]:
    return [
        v["field"]
        for d in details
        if d["@type"].endswith("google.rpc.BadRequest")
        for v in d["fieldViolations"]
    ]


def _reasons(details: list[dict[str, Any]]) -> list[str]:
    return [d["reason"] for d in details if d["@type"].endswith("google.rpc.ErrorInfo")]


def test_configs_per_task_are_capped_over_rest_and_jsonrpc(webhooks: Webhooks) -> None:
    """PushMaxConfigsPerTask reaches the functions; past it, creating a config (REST and
    JSON-RPC) and an inline config in a send (REST and JSON-RPC) are InvalidParams naming
    the field, and nothing more is stored. Replacing a config by its id adds none."""
    url = webhooks.hook("capped", always(200))
    with LocalStack(parameters={"PushMaxConfigsPerTask": str(CAP)}, event_sources=False) as stack:

        async def calls() -> list[httpx.Response]:
            transport = httpx.ASGITransport(app=stack.gateway())
            headers = {"A2A-Version": "1.0", "x-local-principal": OWNER}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://local", headers=headers
            ) as http:

                def rpc(method: str, params: dict[str, Any]) -> Any:
                    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                    return http.post("/", json=body)

                def send(task_id: str, context_id: str) -> dict[str, Any]:
                    return {
                        "message": {
                            "messageId": str(uuid.uuid4()),
                            "role": "ROLE_USER",
                            "parts": [{"text": "more"}],
                            "taskId": task_id,
                            "contextId": context_id,
                        },
                        "configuration": {
                            "returnImmediately": True,
                            "taskPushNotificationConfig": {"url": url},
                        },
                    }

                asked = await http.post(
                    "/message:send",
                    json={
                        "message": {
                            "messageId": str(uuid.uuid4()),
                            "role": "ROLE_USER",
                            "parts": [{"text": "ask me [input]"}],
                        }
                    },
                )
                task = asked.json()["task"]
                assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
                configs = f"/tasks/{task['id']}/pushNotificationConfigs"
                created = [await http.post(configs, json={"url": url}) for _ in range(CAP)]
                assert [r.status_code for r in created] == [200] * CAP
                same_id = {"id": created[0].json()["id"], "url": url}
                return [
                    *created,
                    await http.post(configs, json=same_id),  # a replacement: allowed
                    await http.post(configs, json={"url": url}),
                    await rpc(
                        "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url}
                    ),
                    await http.post("/message:send", json=send(task["id"], task["contextId"])),
                    await rpc("SendMessage", send(task["id"], task["contextId"])),
                    await http.get(configs),
                ]

        *_, replaced, rest, jsonrpc, rest_send, jsonrpc_send, listed = asyncio.run(calls())

    assert replaced.status_code == 200, replaced.text
    for response, field in (
        (rest, "taskId"),
        (rest_send, "configuration.taskPushNotificationConfig"),
    ):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT"
        assert _reasons(error["details"]) == ["INVALID_PARAMS"]
        assert _violations(error["details"]) == [field], error
        assert f"most allowed ({CAP})" in error["message"]
    for response, field in (
        (jsonrpc, "taskId"),
        (jsonrpc_send, "configuration.taskPushNotificationConfig"),
    ):
        error = response.json()["error"]
        assert error["code"] == -32602, error
        assert _violations(error["data"]) == [field], error
    assert len(listed.json()["configs"]) == CAP


# -- 0.3 webhooks ---------------------------------------------------------------------------


def _start_v03_task(url: str, text: str) -> str:
    """A task with an inline config registered as the JSON-RPC 0.3 binding registers it."""
    request = SendMessageRequest.model_validate(
        {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            },
            "configuration": {"returnImmediately": False},
        }
    )
    assert request.configuration is not None
    inline = TaskPushNotificationConfig(url=url, token=TOKEN)
    request.configuration.task_push_notification_config = inline.for_payload_version("0.3")
    task = wiring.get_service().sender.send(RequestContext.of_owner(OWNER), request).task
    assert task is not None and task.id
    return task.id


@pytest.mark.parametrize("path", ["stream", "queue"])
def test_v03_webhooks_get_the_task_with_its_history(
    stack: LocalStack, webhooks: Webhooks, path: str
) -> None:
    """A config made over 0.3 gets the 0.3 Task (0.3 spec §9.5; the 0.3 a2a-sdk
    posts its stored task), so with its `history` too: the user's message first, the same
    messages GetTask shows, every body a valid 0.3 Task (schema and 0.3 SDK). Both paths
    build it: the stream batch, and the retry queue of a parked webhook (it fails twice)."""
    script = always(200) if path == "stream" else failing_first(2)
    text = f"history over 0.3 via the {path}"
    task_id = _start_v03_task(webhooks.hook("v03", script), text)
    pump_stream(stack)
    pump_queue(stack)
    pushed = webhooks.delivered("v03")
    assert len(pushed) == len(events_of(stack, task_id)), pushed
    with wire.unrecorded():  # not an e2e client's response (tests/e2e/coverage.py)
        for body in pushed:
            wire.check_v03(body, "Task")
    assert all(body["kind"] == "task" and body["id"] == task_id for body in pushed)
    for body in pushed:
        first = body["history"][0]
        assert first["role"] == "user" and first["kind"] == "message", first
        assert first["parts"] == [{"kind": "text", "text": text}], first
    task = wiring.get_service().get_task(OWNER, task_id)
    assert task.history and len(task.history) >= 1
    last = pushed[-1]
    assert last["status"]["state"] == "completed"
    assert [m["messageId"] for m in last["history"]] == [m.message_id for m in task.history]
    for headers in (p.headers for p in webhooks.posts_to("v03")):
        assert headers["content-type"] == "application/json"
        assert headers["x-a2a-notification-token"] == TOKEN
