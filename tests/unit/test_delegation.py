"""Delegation over the in-memory store (core/delegation.py, flows/runtime.py): a step hands a
message to remote agents and ends; the receiver (token-checked, idempotent, in order) or the
timer settles each delegation, exactly one of them wakes the next step, which sees the results;
polling for agents without push, deadlines, fan-out, cancel, and the relay flow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from a2a_serverless.core.delegation import (
    Delegate,
    DelegationInbox,
    DelegationOutcome,
    Delegator,
    Receipt,
    RemoteFailure,
    check_delegates,
)
from a2a_serverless.core.executor import TurnContext
from a2a_serverless.flows import Outcome, StepContext
from a2a_serverless.flows.base import load_flow
from a2a_serverless.flows.relay import Relay, relayed
from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.models import (
    Artifact,
    Caller,
    Message,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_serverless.store import DelegationState
from tests.fakes import InMemoryTaskStore
from tests.helpers import add_submitted_task

AGENT = "https://b.example.com"
OTHER = "https://c.example.com"
BASE = "https://a.example.com/prod"
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


class FakeRemote:
    """A remote agent: its card's push capability, the tasks it made, the calls it got."""

    def __init__(self, name: str = "B", push: bool = True) -> None:
        self.name = name
        self.push_notifications = push
        self.sent: list[tuple[Message, TaskPushNotificationConfig | None]] = []
        self.canceled: list[str] = []
        self.tasks: dict[str, Task] = {}
        self.down = False
        self.refuse: RemoteFailure | None = None

    def send(self, message: Message, *, push: TaskPushNotificationConfig | None = None) -> Any:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append((message, push))
        task_id = message.task_id or f"{self.name}-task-{len(self.sent)}"
        task = Task(
            id=task_id,
            context_id=message.context_id or f"{self.name}-ctx",
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=T0),
        )
        self.tasks[task_id] = task
        return task

    def get_task(self, task_id: str, *, history_length: int | None = None) -> Task:
        if self.down:
            raise RemoteFailure("connect failed", DelegationOutcome.UNREACHABLE, True)
        return self.tasks[task_id]

    def cancel_task(self, task_id: str) -> Task:
        self.canceled.append(task_id)
        return self.tasks[task_id]

    def finish(self, task_id: str, state: TaskState, text: str, at: datetime) -> None:
        message = Message(
            message_id=f"m-{at.timestamp()}", role="ROLE_AGENT", parts=[Part(text=text)]
        )
        task = self.tasks[task_id]
        self.tasks[task_id] = task.model_copy(
            update={"status": TaskStatus(state=state, message=message, timestamp=at)}
        )


class Executions:
    """The flow state machine and the timer, as the worker and the receiver start them."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int, int, TurnContext | None]] = []
        self.actions: list[tuple[str, int, str]] = []
        self.waits: list[tuple[str, str, int]] = []
        self.stopped: list[tuple[str, str]] = []

    def start(
        self, task_id: str, turn: int, context: TurnContext | None = None, step: int = 0
    ) -> str:
        self.started.append((task_id, turn, step, context))
        return "x"

    def start_action(self, task_id: str, turn: int, action: str) -> str:
        self.actions.append((task_id, turn, action))
        return "x"

    def start_wait(self, task_id: str, round: str, wait_seconds: int) -> str:
        self.waits.append((task_id, round, wait_seconds))
        return "w"

    def stop_wait(self, task_id: str, round: str) -> None:
        self.stopped.append((task_id, round))


class World:
    """One local task (t-1, working), its store, two remote agents, the executions."""

    def __init__(self, flow: str = "delegating", push: bool = True) -> None:
        self.store = InMemoryTaskStore()
        message = Message.model_validate(
            {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "question"}]}
        )
        add_submitted_task(self.store, message)
        self.remotes = {AGENT: FakeRemote("B", push), OTHER: FakeRemote("C", push)}
        self.runs = Executions()
        self.flow = load_flow(f"{__name__}:{flow}")
        self.context = TurnContext(Caller.of_owner("alice"), base_url=BASE)

    def connect(self, url: str, credentials: str | None) -> FakeRemote:
        return self.remotes[url]

    def delegator(self) -> Delegator:
        return Delegator(self.store, lambda: self.runs, self.connect, lambda: self.runs)

    def inbox(self) -> DelegationInbox:
        return DelegationInbox(self.store, lambda: self.runs, lambda: self.runs)

    def run_step(self, step: int, turn: int = 1) -> dict[str, Any]:
        worker = FlowWorker(self.store, self.flow, lambda: self.runs, delegator=self.delegator)
        event = {"taskId": "t-1", "turn": turn, "step": step, **self.context.wire()}
        return worker.handle(event)

    def check(self, round: str = "1.0") -> dict[str, Any]:
        worker = FlowWorker(self.store, self.flow, lambda: self.runs, delegator=self.delegator)
        return worker.handle({"action": "check_delegations", "taskId": "t-1", "round": round})

    def record(self, key: str = "1.0.0") -> Any:
        return self.store.get_delegation("t-1", key) or pytest.fail(f"no delegation {key}")

    def notify(
        self, event: StreamResponse, key: str = "1.0.0", token: str | None = None
    ) -> Receipt:
        token = self.record(key).token if token is None else token
        return self.inbox().receive("t-1", key, token, event.wire())

    def task(self) -> Any:
        return self.store.get_snapshot("t-1", None) or pytest.fail("no task")


def status(task_id: str, state: TaskState, at: datetime, text: str | None = None) -> StreamResponse:
    message = (
        Message(message_id=f"s-{at.timestamp()}", role="ROLE_AGENT", parts=[Part(text=text)])
        if text
        else None
    )
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task_id,
            context_id="B-ctx",
            status=TaskStatus(state=state, message=message, timestamp=at),
        )
    )


def chunk(task_id: str, text: str, append: bool = False, last: bool = False) -> StreamResponse:
    return StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id=task_id,
            context_id="B-ctx",
            artifact=Artifact(artifact_id="answer", parts=[Part(text=text)]),
            append=append,
            last_chunk=last,
        )
    )


# -- flows ------------------------------------------------------------------------------------


def delegating(ctx: StepContext) -> Outcome:
    if ctx.woken:
        result = ctx.delegations[0]
        ctx.state["outcome"] = result.outcome.value
        return Outcome.completed(f"{result.outcome.value}: {result.text}")
    return Outcome.delegate(Delegate(AGENT, ctx.text, forward_artifacts=True, timeout_seconds=60))


def delegating_for_an_hour(ctx: StepContext) -> Outcome:
    return Outcome.delegate(Delegate(AGENT, ctx.text))


relay_flow = Relay()


def fan_out_first(ctx: StepContext) -> Outcome:
    if ctx.woken:
        done = [r.outcome.value for r in ctx.delegations]
        return Outcome.completed(",".join(done))
    return Outcome.delegate(Delegate(AGENT, "a"), Delegate(OTHER, "b"), wait="first")


def fan_out_all(ctx: StepContext) -> Outcome:
    if ctx.woken:
        return Outcome.completed(",".join(r.text for r in ctx.delegations))
    return Outcome.delegate(Delegate(AGENT, "a"), Delegate(OTHER, "b"))


# -- a round ----------------------------------------------------------------------------------


def test_a_delegating_step_sends_non_blocking_with_a_push_config_and_ends() -> None:
    world = World()
    answer = world.run_step(0)
    assert answer["continue"] is False
    ((message, config),) = world.remotes[AGENT].sent
    record = world.record()
    assert record.state is DelegationState.WAITING and record.mode == "push"
    assert record.remote_task_id == "B-task-1"
    # The message id derives from the step: a retried send is the same message.
    assert message.message_id == "t-1.1.0.0" and message.role.value == "ROLE_USER"
    assert config is not None and config.token == record.token
    assert config.url == f"{BASE}/delegations/t-1/1.0.0"
    header = world.store.get_record("t-1") or pytest.fail()
    assert header.state is TaskState.WORKING and header.waiting
    assert header.delegation_round == "1.0" and header.flow_step == (1, 0)
    # Nothing runs while it waits: no next step, one timer (at the deadline).
    assert world.runs.started == []
    assert [(t, r) for t, r, _ in world.runs.waits] == [("t-1", "1.0")]
    assert 55 <= world.runs.waits[0][2] <= 60
    texts = [p.text for m in [world.task().status.message] if m is not None for p in m.parts]
    assert texts == ["Waiting for B (task B-task-1)."]


def test_a_rerun_of_the_delegating_step_sends_nothing_twice() -> None:
    world = World()
    world.run_step(0)
    world.run_step(0)  # a redelivered execution of the same step
    assert len(world.remotes[AGENT].sent) == 1
    assert len(world.store.task_delegations("t-1")) == 1


def test_a_wrong_token_touches_nothing() -> None:
    world = World()
    world.run_step(0)
    before = world.record()
    # Its own token with the last character changed (to one it surely is not).
    changed = before.token[:-1] + ("A" if before.token[-1] != "A" else "B")
    for token in ("", "x" * 43, changed):
        got = world.inbox().receive(
            "t-1", "1.0.0", token, status("B-task-1", TaskState.COMPLETED, T0).wire()
        )
        assert got is Receipt.UNAUTHORIZED
    assert world.inbox().receive("t-2", "1.0.0", before.token, {}) is Receipt.UNAUTHORIZED
    assert world.inbox().receive("t-1", "../x", before.token, {}) is Receipt.UNAUTHORIZED
    assert world.record() == before
    assert world.runs.started == []


def test_completion_wakes_the_next_step_once_with_the_remote_result() -> None:
    world = World()
    world.run_step(0)
    later = T0 + timedelta(seconds=5)
    world.remotes[AGENT].finish("B-task-1", TaskState.COMPLETED, "forty-two", later)
    done = status("B-task-1", TaskState.COMPLETED, later, "forty-two")
    assert world.notify(done) is Receipt.APPLIED
    assert world.notify(done) is Receipt.IGNORED  # redelivered
    assert world.notify(done) is Receipt.IGNORED
    assert [(t, turn, step) for t, turn, step, _ in world.runs.started] == [("t-1", 1, 1)]
    assert world.runs.stopped == [("t-1", "1.0")]  # the wait bills no more transitions
    context = world.runs.started[0][3] or pytest.fail()
    assert context.caller.owner == "alice" and context.base_url == BASE
    world.run_step(1)
    task = world.task()
    assert task.record.state is TaskState.COMPLETED
    assert task.status.message is not None
    assert task.status.message.parts[0].text == "completed: forty-two"
    assert task.record.flow_state["outcome"] == "completed"


def test_statuses_apply_in_time_order_and_never_after_settling() -> None:
    world = World()
    world.run_step(0)
    t1, t2 = T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)
    assert world.notify(status("B-task-1", TaskState.WORKING, t2)) is Receipt.APPLIED
    assert world.notify(status("B-task-1", TaskState.COMPLETED, t1)) is Receipt.APPLIED
    # Older than what was applied: skipped, nothing settled.
    assert world.record().state is DelegationState.WAITING
    assert world.record().remote_state == TaskState.WORKING.value
    world.notify(status("B-task-1", TaskState.INPUT_REQUIRED, T0 + timedelta(seconds=3), "which?"))
    assert world.record().outcome == DelegationOutcome.INPUT_REQUIRED.value
    world.notify(status("B-task-1", TaskState.WORKING, T0 + timedelta(seconds=4)))
    assert world.record().outcome == DelegationOutcome.INPUT_REQUIRED.value
    assert len(world.runs.started) == 1


def test_news_about_another_remote_task_are_refused() -> None:
    world = World()
    world.run_step(0)
    got = world.notify(status("someone-else", TaskState.COMPLETED, T0 + timedelta(seconds=1)))
    assert got is Receipt.FORBIDDEN
    assert world.record().state is DelegationState.WAITING
    assert world.record().remote_task_id == "B-task-1"
    token = world.record().token
    assert world.inbox().receive("t-1", "1.0.0", token, {"x": 1}) is Receipt.INVALID
    assert world.inbox().receive("t-1", "1.0.0", token, ["not", "an", "object"]) is Receipt.INVALID


def test_forwarded_artifacts_arrive_once_and_are_made_whole_at_the_end() -> None:
    world = World()
    world.run_step(0)
    first, second = chunk("B-task-1", "the "), chunk("B-task-1", "answer", append=True)
    for event in (first, first, second, second):  # each redelivered
        world.notify(event)
    assert [p.text for a in world.task().artifacts for p in a.parts] == ["the ", "answer"]
    # The remote's final artifact differs (a chunk the receiver never saw): replaced whole.
    final = Artifact(
        artifact_id="answer", parts=[Part(text="the "), Part(text="answer"), Part(text="!")]
    )
    remote = world.remotes[AGENT]
    remote.tasks["B-task-1"] = remote.tasks["B-task-1"].model_copy(update={"artifacts": [final]})
    world.notify(status("B-task-1", TaskState.COMPLETED, T0 + timedelta(seconds=9)))
    world.run_step(1)
    artifacts = world.task().artifacts
    assert [p.text for a in artifacts for p in a.parts] == ["the ", "answer", "!"]


def test_an_agent_without_push_is_polled_by_the_timer() -> None:
    world = World(push=False)
    world.run_step(0)
    remote = world.remotes[AGENT]
    ((_, config),) = remote.sent
    assert config is None and world.record().mode == "poll"
    assert world.runs.waits[0][2] <= 2  # the first poll, not the deadline
    polls_before = world.record().polls
    at = T0 + timedelta(seconds=3)
    remote.finish("B-task-1", TaskState.COMPLETED, "polled", at)
    answer = _check_until_woken(world)
    assert answer["waitSeconds"] == 0
    assert world.record().polls > polls_before
    assert world.record().outcome == DelegationOutcome.COMPLETED.value
    assert [step for _, _, step, _ in world.runs.started] == [1]


def test_polling_backs_off() -> None:
    world = World("delegating_for_an_hour", push=False)
    world.run_step(0)
    waits = []
    from unittest import mock

    import a2a_serverless.core.delegation as delegation

    now = [__import__("time").time()]
    with mock.patch.object(delegation.time, "time", lambda: now[0]):
        for _ in range(8):
            wait = world.check()["waitSeconds"]
            waits.append(wait)
            now[0] += wait
    assert waits == [2, 4, 8, 16, 32, 60, 60, 60]


def _check_until_woken(world: World) -> dict[str, Any]:
    from unittest import mock

    import a2a_serverless.core.delegation as delegation

    now = [__import__("time").time()]
    with mock.patch.object(delegation.time, "time", lambda: now[0]):
        for _ in range(20):
            answer = world.check()
            if answer["waitSeconds"] == 0:
                return answer
            now[0] += answer["waitSeconds"]
    raise AssertionError("never woken")


def test_at_the_deadline_an_unreachable_agent_ends_the_wait() -> None:
    world = World()
    world.run_step(0)
    world.remotes[AGENT].down = True
    answer = _check_until_woken(world)
    assert answer["waitSeconds"] == 0
    record = world.record()
    assert record.outcome == DelegationOutcome.UNREACHABLE.value
    world.run_step(1)
    assert world.task().record.flow_state["outcome"] == "unreachable"


def test_at_the_deadline_a_running_remote_task_times_out_and_is_canceled() -> None:
    world = World()
    world.run_step(0)
    _check_until_woken(world)
    assert world.record().outcome == DelegationOutcome.TIMED_OUT.value
    assert world.remotes[AGENT].canceled == ["B-task-1"]


def test_a_refused_agent_settles_at_once_and_wakes_the_flow() -> None:
    world = World()
    world.remotes[AGENT].refuse = RemoteFailure("private address", DelegationOutcome.REFUSED)
    world.run_step(0)
    assert world.record().outcome == DelegationOutcome.REFUSED.value
    assert [step for _, _, step, _ in world.runs.started] == [1]
    assert world.runs.waits == []


def test_fan_out_first_wakes_on_the_first_and_abandons_the_rest() -> None:
    world = World("fan_out_first")
    world.run_step(0)
    assert [len(r.sent) for r in world.remotes.values()] == [1, 1]
    world.notify(status("C-task-1", TaskState.COMPLETED, T0 + timedelta(seconds=1)), key="1.0.1")
    assert len(world.runs.started) == 1
    world.run_step(1)
    message = world.task().status.message or pytest.fail()
    assert message.parts[0].text == "abandoned,completed"
    assert world.remotes[AGENT].canceled == ["B-task-1"]
    # The abandoned one's late news change nothing.
    world.notify(status("B-task-1", TaskState.COMPLETED, T0 + timedelta(seconds=2)))
    assert len(world.runs.started) == 1


def test_fan_out_all_waits_for_every_agent() -> None:
    world = World("fan_out_all")
    world.run_step(0)
    at = T0 + timedelta(seconds=1)
    world.remotes[OTHER].finish("C-task-1", TaskState.COMPLETED, "c", at)
    world.notify(status("C-task-1", TaskState.COMPLETED, at, "c"), key="1.0.1")
    assert world.runs.started == []
    world.remotes[AGENT].finish("B-task-1", TaskState.COMPLETED, "b", at)
    world.notify(status("B-task-1", TaskState.COMPLETED, at, "b"))
    assert len(world.runs.started) == 1
    world.run_step(1)
    assert (world.task().status.message or pytest.fail()).parts[0].text == "b,c"


def test_cancel_reaches_waiting_and_asking_remote_tasks() -> None:
    world = World("fan_out_all")
    world.run_step(0)
    world.notify(
        status("C-task-1", TaskState.INPUT_REQUIRED, T0 + timedelta(seconds=1), "?"), key="1.0.1"
    )
    canceled = world.delegator().cancel_open("t-1")
    assert canceled == 2
    assert world.remotes[AGENT].canceled == ["B-task-1"]
    assert world.remotes[OTHER].canceled == ["C-task-1"]
    assert world.record().outcome == DelegationOutcome.CANCELED.value


def test_rounds_are_checked_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="at least one"):
        check_delegates([], "all")
    with pytest.raises(ValueError, match="wait"):
        check_delegates([Delegate(AGENT, "x")], "any")
    with pytest.raises(ValueError, match="timeout_seconds"):
        check_delegates([Delegate(AGENT, "x", timeout_seconds=0)], "all")
    with pytest.raises(ValueError, match="http"):
        check_delegates([Delegate("ftp://x", "x")], "all")
    with pytest.raises(ValueError, match="at most"):
        Outcome.delegate(*[Delegate(AGENT, "x")] * 17)


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        (DelegationOutcome.COMPLETED, TaskState.COMPLETED),
        (DelegationOutcome.ANSWERED, TaskState.COMPLETED),
        (DelegationOutcome.INPUT_REQUIRED, TaskState.INPUT_REQUIRED),
        (DelegationOutcome.AUTH_REQUIRED, TaskState.AUTH_REQUIRED),
        (DelegationOutcome.REJECTED, TaskState.REJECTED),
        (DelegationOutcome.FAILED, TaskState.FAILED),
        (DelegationOutcome.CANCELED, TaskState.FAILED),
        (DelegationOutcome.TIMED_OUT, TaskState.FAILED),
        (DelegationOutcome.UNREACHABLE, TaskState.FAILED),
    ],
)
def test_the_relay_relays_every_outcome(outcome: DelegationOutcome, state: TaskState) -> None:
    from a2a_serverless.core.delegation import DelegationResult

    assert relayed(DelegationResult(AGENT, outcome, error="why")).state is state


@pytest.fixture
def relay_to_b(monkeypatch: pytest.MonkeyPatch) -> Any:
    from a2a_serverless.settings import get_settings

    monkeypatch.setenv("RELAY_AGENT_URL", AGENT)
    monkeypatch.setenv("RELAY_TIMEOUT_SECONDS", "120")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def answer_turn(world: World, text: str) -> None:
    """The client's answer to the local task's question: a follow-up message (turn 2)."""
    from a2a_serverless.core.tasklog import transition

    record = world.store.get_record("t-1") or pytest.fail()
    message = Message(
        message_id="m-2", role="ROLE_USER", parts=[Part(text=text)], task_id="t-1", context_id="c-1"
    )
    transition(
        world.store,
        record,
        TaskState.SUBMITTED,
        seq=world.store.last_seq("t-1") + 1,
        turn=2,
        execution="t-1-2",
        user_message=message,
    )


def test_the_relay_relays_a_question_and_the_answer_to_the_same_remote_task(
    relay_to_b: Any,
) -> None:
    world = World("relay_flow")
    world.run_step(0)
    record = world.record()
    assert record.forward and record.timeout_seconds == 120
    remote = world.remotes[AGENT]
    at = T0 + timedelta(seconds=1)
    remote.finish("B-task-1", TaskState.INPUT_REQUIRED, "Which city?", at)
    world.notify(status("B-task-1", TaskState.INPUT_REQUIRED, at, "Which city?"))
    world.run_step(1)
    task = world.task()
    assert task.record.state is TaskState.INPUT_REQUIRED
    assert (task.status.message or pytest.fail()).parts[0].text == "Which city?"
    answer_turn(world, "Paris")
    world.run_step(0, turn=2)
    _, (answer, config) = remote.sent
    assert answer.task_id == "B-task-1" and answer.context_id == "B-ctx"
    assert answer.parts[0].text == "Paris" and answer.message_id == "t-1.2.0.0"
    assert config is not None and config.url.endswith("/delegations/t-1/2.0.0")
    later = T0 + timedelta(seconds=2)
    world.notify(chunk("B-task-1", "Sunny in Paris", last=True), key="2.0.0")
    remote.finish("B-task-1", TaskState.COMPLETED, "done", later)
    final = Artifact(artifact_id="answer", parts=[Part(text="Sunny in Paris")])
    remote.tasks["B-task-1"] = remote.tasks["B-task-1"].model_copy(update={"artifacts": [final]})
    world.notify(status("B-task-1", TaskState.COMPLETED, later, "done"), key="2.0.0")
    world.run_step(1, turn=2)
    task = world.task()
    assert task.record.state is TaskState.COMPLETED
    assert [p.text for a in task.artifacts for p in a.parts] == ["Sunny in Paris"]


def test_the_relay_without_an_agent_fails_the_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    from a2a_serverless.settings import get_settings

    monkeypatch.setenv("RELAY_AGENT_URL", "")
    get_settings.cache_clear()
    try:
        world = World("relay_flow")
        world.run_step(0)
        assert world.task().record.state is TaskState.FAILED
    finally:
        get_settings.cache_clear()


def test_a_canceled_task_starts_the_cancel_of_its_delegations() -> None:
    from a2a_serverless.core.query import TaskQueries
    from a2a_serverless.core.tail import PollPolicy

    world = World()
    world.run_step(0)
    queries = TaskQueries(world.store, world.runs, PollPolicy())
    queries.cancel_task("alice", "t-1")
    assert world.runs.actions == [("t-1", 1, "cancel_delegations")]
    worker = FlowWorker(world.store, world.flow, lambda: world.runs, delegator=world.delegator)
    worker.handle({"action": "cancel_delegations", "taskId": "t-1", "turn": 1})
    assert world.remotes[AGENT].canceled == ["B-task-1"]
    # The remote's late completion wakes nothing: the task is canceled.
    world.notify(status("B-task-1", TaskState.COMPLETED, T0 + timedelta(seconds=5)))
    assert world.runs.started == []


def test_the_receiver_route_answers_with_the_binding_status() -> None:
    from a2a_serverless.bindings.delegations import delegation_router
    from a2a_serverless.bindings.rest import create_app
    from tests.asgi_client import AsgiClient

    world = World()
    world.run_step(0)
    token = world.record().token
    client = AsgiClient(create_app(delegation_router(world.inbox())))
    url = "/delegations/t-1/1.0.0"
    done = status("B-task-1", TaskState.COMPLETED, T0 + timedelta(seconds=1)).wire()
    other = status("X", TaskState.COMPLETED, T0 + timedelta(seconds=1)).wire()

    def post(body: Any, **headers: str) -> httpx.Response:
        return client.request("POST", url, json=body, headers=headers)

    assert post(done).status_code == 401
    assert post(done, **{"X-A2A-Notification-Token": "nope"}).status_code == 401
    refused = post(done, Authorization="Bearer nope")
    assert refused.status_code == 401 and token not in refused.text
    assert post(other, **{"X-A2A-Notification-Token": token}).status_code == 403
    assert post({"x": 1}, **{"X-A2A-Notification-Token": token}).status_code == 400
    assert world.runs.started == []
    assert post(done, Authorization=f"Bearer {token}").status_code == 200
    assert post(done, **{"X-A2A-Notification-Token": token}).status_code == 200
    assert len(world.runs.started) == 1


def test_a_failed_timer_start_is_retried_and_the_rerun_sends_nothing_twice() -> None:
    from a2a_serverless.flows.runtime import NextStepNotStarted

    world = World()
    broken = Executions()

    def no_timer(*_: Any) -> str:
        raise ConnectionError("states unreachable")

    broken.start_wait = no_timer  # type: ignore[method-assign]
    worker = FlowWorker(
        world.store,
        world.flow,
        lambda: world.runs,
        delegator=lambda: Delegator(world.store, lambda: world.runs, world.connect, lambda: broken),
    )
    with pytest.raises(NextStepNotStarted):
        worker.handle({"taskId": "t-1", "turn": 1, "step": 0, **world.context.wire()})
    world.run_step(0)  # the state machine's retry
    assert len(world.remotes[AGENT].sent) == 1
    assert [r for _, r, _ in world.runs.waits] == ["1.0"]


def test_a_task_canceled_while_sending_cancels_what_was_sent() -> None:
    from a2a_serverless.core.tasklog import transition

    world = World()
    remote = world.remotes[AGENT]
    sent = remote.send

    def send_then_cancel(message: Message, *, push: Any = None) -> Any:
        task = sent(message, push=push)
        record = world.store.get_record("t-1") or pytest.fail()
        transition(world.store, record, TaskState.CANCELED, seq=world.store.last_seq("t-1") + 1)
        return task

    remote.send = send_then_cancel  # type: ignore[method-assign]
    world.run_step(0)
    assert remote.canceled == ["B-task-1"]
    assert world.runs.waits == [] and world.runs.started == []


def test_a_status_recorded_by_a_run_that_died_before_settling_settles_on_redelivery() -> None:
    world = World()
    world.run_step(0)
    at = T0 + timedelta(seconds=3)
    done = status("B-task-1", TaskState.COMPLETED, at, "ok")
    # The first delivery's run recorded the status and died before settling.
    world.store.record_status(
        "t-1", "1.0.0", TaskState.COMPLETED.value, "2026-11-28T12:00:03Z", None
    )
    assert world.record().state is DelegationState.WAITING
    world.notify(done)  # redelivered
    assert world.record().outcome == DelegationOutcome.COMPLETED.value
    assert len(world.runs.started) == 1


def test_statuses_microseconds_apart_keep_their_order() -> None:
    world = World()
    world.run_step(0)
    token = world.record().token

    def stamped(state: TaskState, at: str) -> dict[str, Any]:
        return {
            "statusUpdate": {
                "taskId": "B-task-1",
                "contextId": "B-ctx",
                "status": {"state": state.value, "timestamp": at},
            }
        }

    # As the a2a-sdk stamps them: the same millisecond, microseconds apart.
    world.inbox().receive(
        "t-1", "1.0.0", token, stamped(TaskState.WORKING, "2026-11-28T12:00:01.782371Z")
    )
    world.inbox().receive(
        "t-1", "1.0.0", token, stamped(TaskState.COMPLETED, "2026-11-28T12:00:01.782472Z")
    )
    assert world.record().outcome == DelegationOutcome.COMPLETED.value


def test_a_final_status_stamped_the_same_millisecond_settles() -> None:
    world = World()
    world.run_step(0)
    at = T0 + timedelta(seconds=1)  # a millisecond clock: WORKING and COMPLETED alike
    world.notify(status("B-task-1", TaskState.WORKING, at))
    world.notify(status("B-task-1", TaskState.COMPLETED, at, "done"))
    assert world.record().outcome == DelegationOutcome.COMPLETED.value
    assert len(world.runs.started) == 1


def test_unstamped_statuses_never_outrank_stamped_ones() -> None:
    world = World()
    world.run_step(0)
    bare = StreamResponse(
        task=Task(id="B-task-1", context_id="B-ctx", status=TaskStatus(state=TaskState.SUBMITTED))
    )
    world.notify(bare)  # the a2a-sdk's first event carries no time
    world.notify(status("B-task-1", TaskState.WORKING, T0 + timedelta(seconds=1)))
    assert world.record().remote_state == TaskState.WORKING.value
    unstamped_done = StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id="B-task-1", context_id="B-ctx", status=TaskStatus(state=TaskState.COMPLETED)
        )
    )
    world.notify(unstamped_done)
    assert world.record().outcome == DelegationOutcome.COMPLETED.value
    assert len(world.runs.started) == 1
