"""The a2a-sdk adapter (flows/a2a_sdk.py): an AgentExecutor's events onto the event log, its
RequestContext from the step, cancel reaching executor.cancel(), direct replies.

Executors here are written against the SDK only (TaskUpdater, EventQueue); steps run either
on a recording emitter or through the real FlowWorker over the in-memory store."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from a2a.helpers import new_data_part, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill as SdkSkill
from a2a.types import Part as SdkPart
from a2a.types import Role as SdkRole
from a2a.types import TaskState as SdkState

from a2a_serverless.core import context as core_context
from a2a_serverless.core.query import TaskQueries
from a2a_serverless.core.tail import PollPolicy
from a2a_serverless.flows import Flow, FlowCanceled, OutcomeKind, ReplyContext, StepContext
from a2a_serverless.flows.a2a_sdk import STATE_KEY, ExecutorFlow, request_context
from a2a_serverless.flows.base import ArtifactChunk
from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.models import Caller, Message, Part, TaskState
from a2a_serverless.store import TaskRecord
from tests.fakes import InMemoryContentStore, InMemoryTaskStore
from tests.helpers import NoExecutions, add_submitted_task

Execute = Callable[[RequestContext, EventQueue], Awaitable[None]]


class Executor(AgentExecutor):
    """An executor whose execute is a test's coroutine; records what cancel() saw."""

    def __init__(self, execute: Execute) -> None:
        self._execute = execute
        self.contexts: list[RequestContext] = []
        self.canceled: list[RequestContext] = []
        self.execute_cancelled = False

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.contexts.append(context)
        try:
            await self._execute(context, event_queue)
        except asyncio.CancelledError:
            self.execute_cancelled = True
            raise

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.canceled.append(context)
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


@dataclass
class Recorder:
    """An emitter that records what the step wrote, and can refuse writes (a cancel)."""

    events: list[Message | ArtifactChunk] = field(default_factory=list)
    cancel_at: int | None = None  # the write that finds the task canceled
    is_canceled: bool = False

    def _write(self, event: Message | ArtifactChunk) -> None:
        if self.cancel_at is not None and len(self.events) >= self.cancel_at:
            raise FlowCanceled()
        self.events.append(event)

    def status(self, message: Message) -> None:
        self._write(message)

    def artifact(self, chunk: ArtifactChunk) -> None:
        self._write(chunk)


class PollableRecorder(Recorder):
    """An emitter that can also be asked whether the task was canceled."""

    def canceled(self) -> bool:
        return self.is_canceled


def user(text: str, message_id: str = "m-1") -> Message:
    return Message.model_validate(
        {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    )


def step_context(
    emitter: Recorder | None = None,
    text: str = "hi",
    *,
    turn: int = 1,
    history: list[Message] | None = None,
    state: dict[str, Any] | None = None,
    caller: Caller | None = None,
) -> StepContext:
    message = user(text, f"m-{turn}")
    return StepContext(
        task_id="t-1",
        context_id="c-1",
        turn=turn,
        step=0,
        message=message,
        history=[*(history or []), message],
        state=dict(state or {}),
        emitter=emitter or Recorder(),
        caller=caller or Caller("alice", "jwt", {"sub": "alice"}, ("read",)),
        extensions=["urn:x"],
        request_metadata={"trace": "abc"},
    )


def run(flow: Flow, ctx: StepContext) -> Any:
    return flow.run_step(ctx)


async def start_task(context: RequestContext, queue: EventQueue) -> TaskUpdater:
    """What the samples do first: the current task, or a new one from the message."""
    task = context.current_task
    if task is None:
        assert context.message is not None
        task = new_task_from_user_message(context.message)
        await queue.enqueue_event(task)
    return TaskUpdater(queue, task.id, task.context_id)


# -- events onto the log --------------------------------------------------------------------


def test_artifact_chunks_are_written_as_they_come_not_at_the_end() -> None:
    recorder = Recorder()
    written_before_next: list[int] = []

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        updater = await start_task(context, queue)
        await updater.start_work(updater.new_agent_message([SdkPart(text="working")]))
        for index, text in enumerate(["a", "b", "c"]):
            await updater.add_artifact(
                [SdkPart(text=text)],
                artifact_id="art",
                name="out",
                append=index > 0,
                last_chunk=index == 2,
                metadata={"i": index},
            )
            written_before_next.append(len(recorder.events))
        await updater.complete()

    outcome = run(ExecutorFlow(Executor(execute)), step_context(recorder))
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.message is None
    assert written_before_next == [2, 3, 4]  # each chunk was in the log when enqueue returned
    status, *chunks = recorder.events
    assert isinstance(status, Message) and status.parts == [Part(text="working")]
    assert status.task_id == "t-1" and status.role.value == "ROLE_AGENT"
    assert [
        (c.artifact_id, c.name, c.parts[0].text, c.append, c.last_chunk, c.metadata)
        for c in chunks
        if isinstance(c, ArtifactChunk)
    ] == [
        ("art", "out", "a", False, False, {"i": 0}),
        ("art", "out", "b", True, False, {"i": 1}),
        ("art", "out", "c", True, True, {"i": 2}),
    ]


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        (SdkState.TASK_STATE_INPUT_REQUIRED, OutcomeKind.INPUT_REQUIRED),
        (SdkState.TASK_STATE_AUTH_REQUIRED, OutcomeKind.AUTH_REQUIRED),
        (SdkState.TASK_STATE_COMPLETED, OutcomeKind.COMPLETED),
        (SdkState.TASK_STATE_FAILED, OutcomeKind.FAILED),
        (SdkState.TASK_STATE_REJECTED, OutcomeKind.REJECTED),
    ],
)
def test_a_final_status_ends_the_turn_with_its_message(state: int, kind: OutcomeKind) -> None:
    async def execute(context: RequestContext, queue: EventQueue) -> None:
        updater = await start_task(context, queue)
        await updater.update_status(
            state, updater.new_agent_message([SdkPart(text="why"), new_data_part({"k": 1})])
        )

    ctx = step_context()
    outcome = run(ExecutorFlow(Executor(execute)), ctx)
    assert outcome.kind is kind
    assert outcome.message == [Part(text="why"), Part(data={"k": 1})]
    assert ctx.state[STATE_KEY] == {"state": outcome.state.value}


async def cancels_its_own_task(context: RequestContext, queue: EventQueue) -> None:
    await (await start_task(context, queue)).cancel()


async def answers_with_a_message(context: RequestContext, queue: EventQueue) -> None:
    await queue.enqueue_event(new_text_message("Hello World", role=SdkRole.ROLE_AGENT))


@pytest.mark.parametrize(
    ("execute", "kind", "text"),
    [
        # The agent canceling its own task fails it, saying so.
        (cancels_its_own_task, OutcomeKind.FAILED, "The agent canceled the task."),
        # A Message answers as a completed task.
        (answers_with_a_message, OutcomeKind.COMPLETED, "Hello World"),
    ],
)
def test_the_turn_ends_as_the_agent_ended_it(
    execute: Execute, kind: OutcomeKind, text: str
) -> None:
    outcome = run(ExecutorFlow(Executor(execute)), step_context())
    assert outcome.kind is kind
    assert outcome.message == [Part(text=text)]


def test_events_after_the_final_state_are_dropped() -> None:
    recorder = Recorder()

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        updater = await start_task(context, queue)
        await updater.requires_input(updater.new_agent_message([SdkPart(text="name?")]))
        await updater.add_artifact([SdkPart(text="late")])

    outcome = run(ExecutorFlow(Executor(execute)), step_context(recorder))
    assert outcome.kind is OutcomeKind.INPUT_REQUIRED
    assert recorder.events == []


def test_a_task_event_carrying_artifacts_writes_them() -> None:
    recorder = Recorder()

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        assert context.message is not None
        task = new_task_from_user_message(context.message)
        task.status.state = SdkState.TASK_STATE_COMPLETED
        task.artifacts.add(artifact_id="x", name="n", parts=[SdkPart(text="all at once")])
        await queue.enqueue_event(task)

    outcome = run(ExecutorFlow(Executor(execute)), step_context(recorder))
    assert outcome.kind is OutcomeKind.COMPLETED
    [chunk] = recorder.events
    assert isinstance(chunk, ArtifactChunk) and chunk.last_chunk and not chunk.append
    assert (chunk.artifact_id, chunk.parts) == ("x", [Part(text="all at once")])


def test_returning_without_a_final_state_completes_and_raising_fails() -> None:
    async def quiet(context: RequestContext, queue: EventQueue) -> None:
        await start_task(context, queue)

    assert run(ExecutorFlow(Executor(quiet)), step_context()).kind is OutcomeKind.COMPLETED

    async def broken(context: RequestContext, queue: EventQueue) -> None:
        raise ValueError("model down")

    with pytest.raises(ValueError, match="model down"):
        run(ExecutorFlow(Executor(broken)), step_context())


# -- the RequestContext ---------------------------------------------------------------------


def test_the_first_turn_has_no_task_and_the_message_names_ours() -> None:
    executor = Executor(lambda context, queue: asyncio.sleep(0))
    run(ExecutorFlow(executor), step_context(text="hello"))
    [context] = executor.contexts
    assert context.current_task is None
    assert (context.task_id, context.context_id) == ("t-1", "c-1")
    assert context.message is not None and context.message.task_id == "t-1"
    assert context.get_user_input() == "hello"
    assert context.metadata == {"trace": "abc"}
    assert context.requested_extensions == {"urn:x"}
    user_ = context.call_context.user
    assert user_.is_authenticated and user_.user_name == "alice"
    assert context.call_context.state["scopes"] == ["read"]


def test_a_follow_up_sees_the_task_with_its_history_and_last_state() -> None:
    executor = Executor(lambda context, queue: asyncio.sleep(0))
    first = user("hi", "m-1")
    question = Message.model_validate(
        {"messageId": "a-1", "role": "ROLE_AGENT", "parts": [{"text": "name?"}]}
    )
    ctx = step_context(
        text="Ada",
        turn=2,
        history=[first, question],
        state={STATE_KEY: {"state": "TASK_STATE_INPUT_REQUIRED"}},
    )
    run(ExecutorFlow(executor), ctx)
    task = executor.contexts[0].current_task
    assert task is not None
    assert (task.id, task.context_id) == ("t-1", "c-1")
    assert task.status.state == SdkState.TASK_STATE_INPUT_REQUIRED
    assert [m.message_id for m in task.history] == ["m-1", "a-1"]
    assert executor.contexts[0].get_user_input() == "Ada"


def test_sample_style_multi_turn_over_two_steps() -> None:
    async def execute(context: RequestContext, queue: EventQueue) -> None:
        updater = await start_task(context, queue)
        task = context.current_task
        if task is None or task.status.state != SdkState.TASK_STATE_INPUT_REQUIRED:
            await updater.requires_input(updater.new_agent_message([SdkPart(text="name?")]))
            return
        await updater.add_artifact([SdkPart(text=f"Hi {context.get_user_input()}")])
        await updater.complete()

    flow = ExecutorFlow(Executor(execute))
    first = step_context(text="hi")
    assert run(flow, first).kind is OutcomeKind.INPUT_REQUIRED
    recorder = Recorder()
    second = step_context(recorder, "Ada", turn=2, history=[first.message], state=first.state)
    assert run(flow, second).kind is OutcomeKind.COMPLETED
    [chunk] = recorder.events
    assert isinstance(chunk, ArtifactChunk) and chunk.parts == [Part(text="Hi Ada")]


# -- cancel ---------------------------------------------------------------------------------


def test_a_write_that_finds_the_task_canceled_calls_cancel_and_stops_execute() -> None:
    recorder = Recorder(cancel_at=1)
    after_cancel: list[str] = []

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        updater = await start_task(context, queue)
        await updater.add_artifact([SdkPart(text="one")], artifact_id="a")
        try:
            await updater.add_artifact([SdkPart(text="two")], artifact_id="a", append=True)
        except Exception as error:  # an executor's catch-all must not see our cancel
            after_cancel.append(repr(error))
        after_cancel.append("went on")

    executor = Executor(execute)
    with pytest.raises(FlowCanceled):
        run(ExecutorFlow(executor), step_context(recorder))
    assert [c.task_id for c in executor.canceled] == ["t-1"]
    assert executor.execute_cancelled and after_cancel == []
    assert len(recorder.events) == 1  # cancel()'s canceled status went nowhere


def test_a_polled_cancel_reaches_an_executor_that_writes_nothing() -> None:
    recorder = PollableRecorder()

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        await start_task(context, queue)
        recorder.is_canceled = True  # CancelTask, while the "model" thinks
        await asyncio.sleep(30)

    executor = Executor(execute)
    started = time.monotonic()
    with pytest.raises(FlowCanceled):
        run(ExecutorFlow(executor, cancel_poll_seconds=0.05), step_context(recorder))
    assert time.monotonic() - started < 5
    assert len(executor.canceled) == 1 and executor.execute_cancelled


def test_cancel_that_raises_still_stops_the_step() -> None:
    class Unsupported(Executor):
        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            self.canceled.append(context)
            raise RuntimeError("cancel not supported")  # what helloworld does

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        await (await start_task(context, queue)).add_artifact([SdkPart(text="x")])

    executor = Unsupported(execute)
    with pytest.raises(FlowCanceled):
        run(ExecutorFlow(executor), step_context(Recorder(cancel_at=0)))
    assert len(executor.canceled) == 1


def add_task(store: InMemoryTaskStore) -> TaskRecord:
    return add_submitted_task(store, user("hi"))


def test_cancel_task_reaches_cancel_through_the_flow_worker() -> None:
    """The real path: CancelTask (core) ends the task while the step streams; the step's next
    write loses to it, and the executor's cancel() runs."""
    store = InMemoryTaskStore()
    add_task(store)
    queries = TaskQueries(store, NoExecutions(), PollPolicy())  # type: ignore[arg-type]
    chunk_written = threading.Event()

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        updater = await start_task(context, queue)
        await updater.add_artifact([SdkPart(text="one ")], artifact_id="a", name="a")
        queries.cancel_task("alice", "t-1")
        await updater.add_artifact([SdkPart(text="two")], artifact_id="a", append=True)
        chunk_written.set()

    executor = Executor(execute)
    answer = FlowWorker(store, ExecutorFlow(executor)).handle({"taskId": "t-1", "turn": 1})
    assert answer["continue"] is False
    assert len(executor.canceled) == 1 and not chunk_written.is_set()
    task = queries.get_task("alice", "t-1")
    assert task.status.state is TaskState.CANCELED
    assert [p.text for a in task.artifacts or [] for p in a.parts] == ["one "]


def test_a_turn_through_the_flow_worker_ends_input_required() -> None:
    store = InMemoryTaskStore()
    add_task(store)

    async def execute(context: RequestContext, queue: EventQueue) -> None:
        updater = await start_task(context, queue)
        await updater.start_work(updater.new_agent_message([SdkPart(text="thinking")]))
        await updater.requires_input(updater.new_agent_message([SdkPart(text="name?")]))

    FlowWorker(store, ExecutorFlow(Executor(execute))).handle({"taskId": "t-1", "turn": 1})
    record = store.get_record("t-1")
    assert record is not None and record.state is TaskState.INPUT_REQUIRED
    assert record.flow_state == {STATE_KEY: {"state": "TASK_STATE_INPUT_REQUIRED"}}
    texts = [p.text for m in store.read_history("t-1", None) for p in m.parts]
    assert texts[0] == "hi" and texts[-1] == "name?"


# -- direct replies, the card ---------------------------------------------------------------


def reply_context(text: str) -> ReplyContext:
    return ReplyContext(user(text), "c-1", Caller("alice"))


def test_direct_replies_answer_with_the_executors_message() -> None:
    async def execute(context: RequestContext, queue: EventQueue) -> None:
        if context.get_user_input() == "ping":
            await queue.enqueue_event(new_text_message("pong", role=SdkRole.ROLE_AGENT))
            return
        await (await start_task(context, queue)).complete()

    flow = ExecutorFlow(Executor(execute), direct_replies=True)
    alice = core_context.RequestContext(Caller("alice"))
    reply = flow.reply_to(alice, user("ping"), "c-1", {})
    assert reply is not None and reply.parts == [Part(text="pong")]
    assert reply.context_id == "c-1" and reply.task_id is None
    assert flow.reply_to(alice, user("a task"), "c-1", {}) is None
    # Off by default: execute is not run in the receiving function at all.
    plain = Executor(execute)
    assert ExecutorFlow(plain).reply(reply_context("ping")) is None and plain.contexts == []


def test_card_fields_come_from_the_parameters_sdk_skills_too() -> None:
    flow = ExecutorFlow(
        Executor(lambda context, queue: asyncio.sleep(0)),
        name="greeter",
        title="Greeter",
        description="Greets.",
        version="2.0.0",
        skills=[SdkSkill(id="greet", name="Greet", description="d", tags=["t"])],
        input_modes=["text/plain", "application/json"],
    )
    assert (flow.name, flow.title, flow.description, flow.version) == (
        "greeter",
        "Greeter",
        "Greets.",
        "2.0.0",
    )
    assert [(s.id, s.tags) for s in flow.skills] == [("greet", ["t"])]
    assert flow.input_modes == ["text/plain", "application/json"]
    with pytest.raises(TypeError, match="AgentExecutor"):
        ExecutorFlow(object())  # type: ignore[arg-type]


def test_request_context_is_built_without_running_anything() -> None:
    context = request_context(step_context(text="x"))
    assert context.task_id == "t-1" and context.current_task is None


def test_an_executor_reads_stored_files_as_download_urls() -> None:
    """A stored part (a file too large for the table) reaches the executor as the URL a client
    would download, in this turn's message and in the history."""
    executor = Executor(lambda context, queue: asyncio.sleep(0))
    photo = {"url": "a2a-content:raw.abc", "mediaType": "image/png", "filename": "p.png"}
    earlier = Message.model_validate({"messageId": "m-1", "role": "ROLE_USER", "parts": [photo]})
    ctx = step_context(turn=2, history=[earlier])
    ctx.message = Message.model_validate(
        {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "look"}, photo]}
    )
    ctx.history[-1] = ctx.message
    ctx.content = InMemoryContentStore()
    run(ExecutorFlow(executor), ctx)
    [context] = executor.contexts
    assert context.message is not None
    sent = context.message.parts[1]
    assert sent.url == "https://content.example/tasks/t-1/raw.abc?signed"
    assert (sent.media_type, sent.filename) == ("image/png", "p.png")
    assert context.current_task is not None
    assert context.current_task.history[0].parts[0].url == sent.url
