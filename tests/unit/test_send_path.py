"""The SEND path (core/send.py) over the in-memory store: the opening steps SendMessage and
SendStreamingMessage share (validate, dedupe, create or continue, start the turn)."""

from __future__ import annotations

import time

import pytest

from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.core.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from a2a_serverless.core.executor import TurnContext
from a2a_serverless.core.push import PushService
from a2a_serverless.core.query import TaskQueries
from a2a_serverless.core.send import MessageSender, ModePolicy, WaitPolicy
from a2a_serverless.core.tasklog import transition
from a2a_serverless.models import (
    Caller,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from tests.fakes import InMemoryTaskStore


class RecordingExecutor:
    """Starts nothing: records which turns were started (or fails, when told to)."""

    def __init__(self, fail: bool = False) -> None:
        self.started: list[tuple[str, int]] = []
        self.callers: list[Caller | None] = []
        self.extensions: list[tuple[str, ...]] = []
        self.fail = fail

    def start(self, task_id: str, turn: int, context: TurnContext | None = None) -> str:
        if self.fail:
            raise RuntimeError("state machine unavailable")
        self.started.append((task_id, turn))
        self.callers.append(context.caller if context else None)
        self.extensions.append(context.extensions if context else ())
        return f"{task_id}-{turn}"

    def stop(self, name: str, cause: str) -> None:
        pass


def make_sender(
    store: InMemoryTaskStore,
    executor: RecordingExecutor,
    push_enabled: bool = False,
    dedupe_window_seconds: float = 600.0,
) -> MessageSender:
    """A sender that deduplicates retries within 10 minutes unless told otherwise (the
    product's default is off: see the test of that)."""
    wait = WaitPolicy()
    push = PushService(store, push_enabled, EgressPolicy())
    queries = TaskQueries(store, executor, wait.poll)
    return MessageSender(store, executor, queries, ModePolicy(), wait, push, dedupe_window_seconds)


def request(message_id: str = "m1", text: str = "hi", **extra: object) -> SendMessageRequest:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **extra}
    return SendMessageRequest.model_validate(
        {"message": message, "configuration": {"returnImmediately": True}}
    )


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()


def test_a_new_message_creates_a_task_and_starts_its_first_turn(store: InMemoryTaskStore) -> None:
    executor = RecordingExecutor()
    admitted = make_sender(store, executor).enter(RequestContext.of_owner("alice"), request())
    assert not admitted.retried
    assert admitted.seq == 1
    assert admitted.created is not None and admitted.created.id == admitted.task_id
    assert admitted.created.status.state is TaskState.SUBMITTED
    assert executor.started == [(admitted.task_id, 1)]
    record = store.get_record(admitted.task_id)
    assert record is not None and record.owner == "alice"


def test_the_same_message_again_is_a_retry_that_writes_and_starts_nothing(
    store: InMemoryTaskStore,
) -> None:
    executor = RecordingExecutor()
    sender = make_sender(store, executor)
    first = sender.enter(RequestContext.of_owner("alice"), request())
    again = sender.enter(RequestContext.of_owner("alice"), request())
    assert again.retried and again.task_id == first.task_id and again.created is None
    assert len(executor.started) == 1 and len(store.tasks) == 1
    # Same messageId, other content: a new message, a new task.
    other = sender.enter(RequestContext.of_owner("alice"), request(text="something else"))
    assert not other.retried and other.task_id != first.task_id


def test_continuing_an_interrupted_task_starts_its_next_turn(store: InMemoryTaskStore) -> None:
    executor = RecordingExecutor()
    sender = make_sender(store, executor)
    task_id = sender.enter(RequestContext.of_owner("alice"), request()).task_id
    record = store.get_record(task_id)
    assert record is not None
    transition(store, record, TaskState.INPUT_REQUIRED)
    admitted = sender.enter(RequestContext.of_owner("alice"), request("m2", "more", taskId=task_id))
    assert admitted.task_id == task_id and admitted.created is None and not admitted.retried
    assert executor.started[-1] == (task_id, 2)
    again = sender.enter(RequestContext.of_owner("alice"), request("m2", "more", taskId=task_id))
    assert again.retried and len(executor.started) == 2


class QuickExecutor(RecordingExecutor):
    """Runs a continued task's turn to its end as it starts it (a worker quicker than the
    stream's first read)."""

    def __init__(self, store: InMemoryTaskStore) -> None:
        super().__init__()
        self.store = store

    def start(self, task_id: str, turn: int, context: TurnContext | None = None) -> str:
        name = super().start(task_id, turn, context)
        if turn > 1:
            for state in (TaskState.WORKING, TaskState.COMPLETED):
                record = self.store.get_record(task_id)
                assert record is not None
                transition(self.store, record, state)
        return name


def test_a_continued_task_s_stream_opens_before_its_turn_runs(store: InMemoryTaskStore) -> None:
    """However quick the turn, its stream opens on the task the answer left (submitted, at the
    turn's first status) and the turn's every event follows it, as on a new task's stream."""
    sender = make_sender(store, QuickExecutor(store))
    task_id = sender.enter(RequestContext.of_owner("alice"), request()).task_id
    record = store.get_record(task_id)
    assert record is not None
    transition(store, record, TaskState.INPUT_REQUIRED)
    start = sender.open_stream(
        RequestContext.of_owner("alice"), request("m2", "more", taskId=task_id)
    )
    assert store.get_record(task_id).state is TaskState.COMPLETED  # type: ignore[union-attr]
    assert start.open and start.first.task is not None
    assert start.first.task.status.state is TaskState.SUBMITTED
    assert [m.message_id for m in start.first.task.history or []] == ["m1", "m2"]
    after = store.read_events(task_id, start.after_seq)
    updates = [e.status_update for _, e in after if e.status_update is not None]
    assert [u.status.state for u in updates] == [
        TaskState.WORKING,
        TaskState.COMPLETED,
    ]


def with_hook(sent: SendMessageRequest, config_id: str) -> SendMessageRequest:
    """`sent` carrying an inline webhook (a public address: vetted without DNS)."""
    assert sent.configuration is not None
    hook = TaskPushNotificationConfig(id=config_id, url="https://93.184.216.34/hook")
    sent.configuration.task_push_notification_config = hook
    return sent


def test_a_webhook_gets_the_events_written_after_it_was_made(store: InMemoryTaskStore) -> None:
    """A config's `after_seq` (the sender skips the events up to it): an inline config of a
    new task 0 (the whole log), one made through the API the task's last event then, an inline
    config of a follow-up the seq before its turn's first status. Not on the wire."""
    sender = make_sender(store, RecordingExecutor(), push_enabled=True)
    push = PushService(store, True, EgressPolicy())
    task_id = sender.enter(RequestContext.of_owner("alice"), with_hook(request(), "inline")).task_id
    record = store.get_record(task_id)
    assert record is not None
    transition(store, record, TaskState.WORKING)
    made = push.create(
        "alice", task_id, TaskPushNotificationConfig(id="api", url="https://93.184.216.34/a")
    )
    assert made.after_seq == 2 == store.last_seq(task_id)
    record = store.get_record(task_id)
    assert record is not None
    transition(store, record, TaskState.INPUT_REQUIRED)
    follow_up = with_hook(request("m2", "more", taskId=task_id), "turn-2")
    assert sender.enter(RequestContext.of_owner("alice"), follow_up).seq == 4
    stored = {c.id: c for c, _ in store.list_push_configs(task_id)}
    assert {i: c.after_seq for i, c in stored.items()} == {"inline": 0, "api": 2, "turn-2": 3}
    assert push.get("alice", task_id, "api").wire() == {
        "id": "api",
        "taskId": task_id,
        "url": "https://93.184.216.34/a",
    }


def test_a_working_task_refuses_a_new_message(store: InMemoryTaskStore) -> None:
    sender = make_sender(store, RecordingExecutor())
    task_id = sender.enter(RequestContext.of_owner("alice"), request()).task_id
    with pytest.raises(UnsupportedOperationError, match="TASK_STATE_INPUT_REQUIRED"):
        sender.enter(RequestContext.of_owner("alice"), request("m2", taskId=task_id))


def test_refusals_come_before_any_write(store: InMemoryTaskStore) -> None:
    sender = make_sender(store, RecordingExecutor())
    agent_said = SendMessageRequest.model_validate(
        {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}
    )
    with pytest.raises(InvalidParamsError):
        sender.enter(RequestContext.of_owner("alice"), agent_said)
    image = SendMessageRequest.model_validate(
        {
            "message": {
                "messageId": "m",
                "role": "ROLE_USER",
                "parts": [{"raw": "AAAA", "mediaType": "image/png"}],
            }
        }
    )
    with pytest.raises(ContentTypeNotSupportedError):
        sender.enter(RequestContext.of_owner("alice"), image)
    inline_push = SendMessageRequest.model_validate(
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"taskPushNotificationConfig": {"url": "https://hooks.example/"}},
        }
    )
    with pytest.raises(PushNotificationNotSupportedError):
        sender.enter(RequestContext.of_owner("alice"), inline_push)
    assert store.tasks == {}


def test_a_turn_that_cannot_start_fails_the_task(store: InMemoryTaskStore) -> None:
    sender = make_sender(store, RecordingExecutor(fail=True))
    with pytest.raises(RuntimeError):
        sender.enter(RequestContext.of_owner("alice"), request())
    (task,) = store.tasks.values()
    assert task.record.state is TaskState.FAILED


def test_accept_answers_a_new_task_without_reading_it_back(
    store: InMemoryTaskStore,
) -> None:
    sender = make_sender(store, RecordingExecutor())
    accepted = sender.accept(RequestContext.of_owner("alice"), request())
    assert not accepted.blocking and accepted.answer is not None
    assert accepted.answer.task is not None and accepted.answer.task.id == accepted.task_id
    retried = sender.accept(RequestContext.of_owner("alice"), request())
    assert retried.answer is None  # a retry reads the task as it is now
    answered = sender.answer(retried).task
    assert answered is not None and answered.id == accepted.task_id


def test_open_stream_starts_from_the_new_task_or_a_snapshot(
    store: InMemoryTaskStore,
) -> None:
    sender = make_sender(store, RecordingExecutor())
    start = sender.open_stream(RequestContext.of_owner("alice"), request())
    assert start.open and start.after_seq == 1 and start.first.task is not None
    again = sender.open_stream(RequestContext.of_owner("alice"), request())
    assert again.task_id == start.task_id and again.first.task is not None
    assert again.first.task.status.state is TaskState.SUBMITTED


def test_the_caller_reaches_the_turns_execution(store: InMemoryTaskStore) -> None:
    executor = RecordingExecutor()
    sender = make_sender(store, executor)
    alice = Caller("alice", "jwt", {"sub": "alice", "email": "a@example.com"}, ("read",))
    sender.enter(RequestContext(alice), request())
    assert executor.callers == [alice]
    # A context naming an owner only: the owner, anonymous.
    sender.enter(RequestContext.of_owner("carol"), request("m3"))
    assert executor.callers[-1] == Caller("carol")


def test_every_field_violation_is_reported_at_once(store: InMemoryTaskStore) -> None:
    from a2a_serverless.core.errors import InvalidParamsError

    long_id = "x" * 300
    bad = request(role="ROLE_AGENT", contextId=long_id, taskId=long_id)
    bad.metadata = {"big": "y" * 70_000}  # over MAX_METADATA_BYTES as JSON
    with pytest.raises(InvalidParamsError) as refused:
        make_sender(store, RecordingExecutor()).enter(RequestContext.of_owner("alice"), bad)
    assert [field for field, _ in refused.value.violations] == [
        "message.role",
        "message.contextId",
        "message.taskId",
        "metadata",
    ]
    assert store.tasks == {}


def test_the_same_checks_run_on_a_request_its_schema_refused() -> None:
    """What a binding merges into the schema's violations (bindings/errors.py `validated`)."""
    from a2a_serverless.core.send import request_violations

    long_id = "x" * 300
    payload = {
        "message": {"role": "agent", "contextId": long_id, "messageId": 7, "parts": []},
        "metadata": {"big": "y" * 70_000},
    }
    assert [field for field, _ in request_violations(payload)] == [
        "message.role",
        "message.contextId",
        "metadata",
    ]
    # Values of the wrong type are the schema's to name; a user's message has nothing to add.
    assert request_violations({"message": {"role": ["x"], "taskId": 5}}) == []
    assert request_violations({"message": {"role": "ROLE_USER", "messageId": "m"}}) == []
    assert request_violations([]) == []


def test_extensions_activate_as_the_flow_declares_them(store: InMemoryTaskStore) -> None:
    from a2a_serverless.core.errors import ExtensionSupportRequiredError
    from a2a_serverless.models import AgentExtension

    modes = ModePolicy(
        extensions=[
            AgentExtension(uri="urn:x:optional"),
            AgentExtension(uri="urn:x:required", required=True),
        ]
    )
    # Unknown ones are ignored; the card's order is kept.
    assert modes.activate(["urn:x:unknown", "urn:x:required", "urn:x:optional"]) == [
        "urn:x:optional",
        "urn:x:required",
    ]
    with pytest.raises(ExtensionSupportRequiredError) as refused:
        modes.activate(["urn:x:optional"])
    assert refused.value.metadata == {"extensions": "urn:x:required"}
    assert ModePolicy().activate(["urn:x:optional"]) == []

    executor = RecordingExecutor()
    context = RequestContext.of_owner("alice", ["urn:x:optional"])
    make_sender(store, executor).enter(context, request())
    assert executor.extensions == [("urn:x:optional",)]


def test_without_a_dedupe_window_every_send_is_new(store: InMemoryTaskStore) -> None:
    """The default: conformance suites reuse messageIds across separate sends, and the spec
    makes deduplication a MAY. No retry record is written either."""
    executor = RecordingExecutor()
    sender = make_sender(store, executor, dedupe_window_seconds=0)
    first = sender.enter(RequestContext.of_owner("alice"), request())
    again = sender.enter(RequestContext.of_owner("alice"), request())
    assert not again.retried and again.task_id != first.task_id
    assert len(store.tasks) == 2 and store.dedupes == {}


def test_a_retry_must_repeat_the_whole_request(store: InMemoryTaskStore) -> None:
    """Same messageId and text but other configuration or metadata: a new send (an inline
    push config of the second send would otherwise be dropped)."""
    executor = RecordingExecutor()
    sender = make_sender(store, executor)
    first = sender.enter(RequestContext.of_owner("alice"), request())
    with_metadata = request()
    with_metadata.metadata = {"k": "v"}
    assert sender.enter(RequestContext.of_owner("alice"), with_metadata).task_id != first.task_id
    blocking = request()
    blocking.configuration.return_immediately = False  # type: ignore[union-attr]
    assert sender.enter(RequestContext.of_owner("alice"), blocking).task_id != first.task_id
    assert sender.enter(RequestContext.of_owner("alice"), request()).retried


def test_a_retry_after_the_window_is_a_new_send(
    store: InMemoryTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = RecordingExecutor()
    sender = make_sender(store, executor, dedupe_window_seconds=60)
    first = sender.enter(RequestContext.of_owner("alice"), request())
    assert sender.enter(RequestContext.of_owner("alice"), request()).retried
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    again = sender.enter(RequestContext.of_owner("alice"), request())
    assert not again.retried and again.task_id != first.task_id


def test_a_flow_may_answer_a_new_message_directly(store: InMemoryTaskStore) -> None:
    """A Message reply (spec §3.1.1): nothing stored, nothing started; follow-ups of a task
    never reach `reply`; the same checks as any send come first."""
    from a2a_serverless.core.errors import InvalidParamsError
    from a2a_serverless.flows.echo import EchoFlow

    executor = RecordingExecutor()
    sender = make_sender(store, executor)
    sender.replier = EchoFlow()
    accepted = sender.accept(
        RequestContext.of_owner("alice"), request(text="hi [reply]", contextId="ctx-1")
    )
    assert accepted.answer is not None and accepted.answer.task is None
    reply = accepted.answer.message
    assert reply is not None and reply.role.value == "ROLE_AGENT"
    assert reply.parts[0].text == "Echo: hi [reply]"
    assert reply.context_id == "ctx-1" and reply.task_id is None
    assert store.tasks == {} and executor.started == [] and not accepted.blocking

    start = sender.open_stream(RequestContext.of_owner("alice"), request("m2", "again [reply]"))
    assert start.first.message is not None and not start.open
    assert start.first.message.context_id  # a fresh context when none was given
    assert store.tasks == {}

    # Not asked for a reply: a task, as ever.
    task = sender.accept(RequestContext.of_owner("alice"), request("m3", "a task please"))
    assert task.task_id in store.tasks
    with pytest.raises(InvalidParamsError):
        sender.accept(RequestContext.of_owner("alice"), request("m4", "[reply]", role="ROLE_AGENT"))
