"""Run an existing `a2a-sdk` `AgentExecutor` as a flow, unmodified.

    flow = ExecutorFlow(MyExecutor(), name="my-agent", skills=[...])   # FLOW=my_agent:flow

Each turn is one step: it builds the SDK's `RequestContext`, runs `executor.execute` and writes
every event the executor enqueues to the task's event log as it comes. The first terminal or
interrupted event decides the turn; returning without one completes the task, raising fails
it. A cancel awaits `executor.cancel` and cancels `execute`, as the SDK's server does. A turn
must end within the function's timeout. Needs the `a2a-sdk` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

# The flow API as flow authors see it (flows/__init__.py), taken from flows.base: that package
# imports this module.
from a2a_serverless.flows.base import (
    AgentExtension,
    AgentSkill,
    Caller,
    Flow,
    FlowCanceled,
    Outcome,
    OutcomeKind,
    Part,
    ReplyContext,
    StepContext,
)
from a2a_serverless.models import Message, TaskState, agent_message

try:
    from a2a.auth.user import User
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.context import ServerCallContext
    from a2a.server.events import EventQueue
    from a2a.types import a2a_pb2 as pb
    from google.protobuf import json_format  # type: ignore[import-untyped]
except ImportError as missing:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "a2a_serverless.flows.a2a_sdk needs the a2a-sdk package: install the extra with "
        "`pip install 'a2a-serverless[a2a-sdk]'` (a2a-sdk>=1.3,<1.4)"
    ) from missing

logger = logging.getLogger(__name__)

# Where the adapter keeps its own memory in the flow state (the turn's final state, so the
# next turn's `context.current_task` shows the state the task was left in).
STATE_KEY = "a2a_sdk"
# How long a cancelled `execute` may take to unwind before the step gives up waiting.
CANCEL_GRACE_SECONDS = 10.0

_SDK_STATES: dict[int, TaskState] = {
    pb.TaskState.TASK_STATE_SUBMITTED: TaskState.SUBMITTED,
    pb.TaskState.TASK_STATE_WORKING: TaskState.WORKING,
    pb.TaskState.TASK_STATE_INPUT_REQUIRED: TaskState.INPUT_REQUIRED,
    pb.TaskState.TASK_STATE_AUTH_REQUIRED: TaskState.AUTH_REQUIRED,
    pb.TaskState.TASK_STATE_COMPLETED: TaskState.COMPLETED,
    pb.TaskState.TASK_STATE_FAILED: TaskState.FAILED,
    pb.TaskState.TASK_STATE_REJECTED: TaskState.REJECTED,
    pb.TaskState.TASK_STATE_CANCELED: TaskState.CANCELED,
}
_FINAL_KINDS = {
    TaskState.INPUT_REQUIRED: OutcomeKind.INPUT_REQUIRED,
    TaskState.AUTH_REQUIRED: OutcomeKind.AUTH_REQUIRED,
    TaskState.COMPLETED: OutcomeKind.COMPLETED,
    TaskState.FAILED: OutcomeKind.FAILED,
    TaskState.REJECTED: OutcomeKind.REJECTED,
    # Our flows cannot end a task canceled (only CancelTask does): an executor that cancels
    # its own task ends it failed, and the status message says so.
    TaskState.CANCELED: OutcomeKind.FAILED,
}
AGENT_CANCELED_TEXT = "The agent canceled the task."


# -- conversions between our pydantic models and the SDK's protobuf types ------------------


def to_sdk(value: Any, message_type: type[Any]) -> Any:
    """One of our models (proto JSON on the wire) as the SDK's protobuf message."""
    return json_format.ParseDict(value.wire(), message_type(), ignore_unknown_fields=True)


def parts_of(parts: Any) -> list[Part]:
    """SDK parts as ours (both are the same proto JSON)."""
    return [Part.model_validate(json_format.MessageToDict(part)) for part in parts]


def _state_of(value: int) -> TaskState:
    return _SDK_STATES.get(value, TaskState.WORKING)


class CallerUser(User):
    """Our caller as the SDK's `User` (`context.call_context.user`)."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    @property
    def is_authenticated(self) -> bool:
        return self.caller.authenticated

    @property
    def user_name(self) -> str:
        return self.caller.principal


def call_context(caller: Caller, extensions: list[str]) -> ServerCallContext:
    """The SDK's call context: the caller as its user (claims and scopes in `state`), the
    extensions this send activated as the requested ones."""
    return ServerCallContext(
        user=CallerUser(caller),
        requested_extensions=set(extensions),
        state={"caller": caller, "claims": dict(caller.claims), "scopes": list(caller.scopes)},
    )


def _request(message: Message, metadata: dict[str, Any]) -> Any:
    request = pb.SendMessageRequest(message=to_sdk(message, pb.Message))
    if metadata:
        request.metadata.update(metadata)
    return request


def request_context(ctx: StepContext) -> RequestContext:
    """The SDK's RequestContext of a step. On a follow-up turn `current_task` is the task as
    the SDK's server would show it: its history before this turn's message, and the state
    the last turn left it in (input-required, typically)."""
    current = None
    if ctx.turn > 1:
        remembered = ctx.state.get(STATE_KEY) or {}
        state = remembered.get("state", TaskState.WORKING.value)
        current = pb.Task(
            id=ctx.task_id,
            context_id=ctx.context_id,
            status=pb.TaskStatus(state=pb.TaskState.Value(state)),
            history=[
                to_sdk(ctx.linked(m), pb.Message)
                for m in ctx.history
                if m.message_id != ctx.message.message_id
            ],
        )
    return RequestContext(
        call_context=call_context(ctx.caller, ctx.extensions),
        # Stored files as download URLs: the executor reads them as a client would.
        request=_request(ctx.linked(ctx.message), ctx.request_metadata),
        task_id=ctx.task_id,
        context_id=ctx.context_id,
        task=current,
    )


# -- the queue the executor writes to -------------------------------------------------------


@dataclass
class _Final:
    kind: OutcomeKind
    parts: list[Part] | None


class StepQueue(EventQueue):
    """The EventQueue an executor gets: each event goes to the step's event log when it is
    enqueued. A cancel seen at a write (`FlowCanceled`) suspends the producer there and
    signals the step, which runs the cancel path."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self.final: _Final | None = None
        self.canceled = asyncio.Event()

    async def enqueue_event(self, event: Any) -> None:
        if self.canceled.is_set():
            # What cancel() (or execute, until it is cancelled) enqueues: the task is over.
            logger.debug("task %s is canceled: %s dropped", self.ctx.task_id, type(event).__name__)
            return
        if self.final is not None:
            logger.warning(
                "a2a-sdk executor enqueued %s after the turn's final state; dropped",
                type(event).__name__,
            )
            return
        try:
            self._write(event)
        except FlowCanceled:
            self.canceled.set()
            # Park the producer here (it never sees our exception): the step now awaits
            # executor.cancel(), then cancels the producer: CancelledError at this await.
            await _parked()

    def _write(self, event: Any) -> None:
        if isinstance(event, pb.TaskArtifactUpdateEvent):
            self._artifact(event.artifact, event.append, event.last_chunk)
        elif isinstance(event, pb.TaskStatusUpdateEvent):
            self._status(event.status)
        elif isinstance(event, pb.Task):
            # The task object an executor enqueues first (`new_task_from_user_message`): our
            # task exists already; only its status and artifacts mean anything here.
            self._status(event.status)
            for artifact in event.artifacts:
                self._artifact(artifact, False, True)
        elif isinstance(event, pb.Message):
            # A Message answers the request: the SDK ends the request with it, so do we.
            self.final = _Final(OutcomeKind.COMPLETED, parts_of(event.parts) or None)
        else:
            raise TypeError(f"a2a-sdk executor enqueued {type(event).__name__}, not an event")

    def _artifact(self, artifact: Any, append: bool, last_chunk: bool) -> None:
        self.ctx.artifact(
            parts_of(artifact.parts),
            artifact_id=artifact.artifact_id or "result",
            name=artifact.name or None,
            description=artifact.description or None,
            append=append,
            last_chunk=last_chunk,
            metadata=json_format.MessageToDict(artifact.metadata) or None,
            extensions=list(artifact.extensions) or None,
        )

    def _status(self, status: Any) -> None:
        state = _state_of(status.state)
        parts = parts_of(status.message.parts) if status.HasField("message") else []
        kind = _FINAL_KINDS.get(state)
        if kind is not None:
            if state is TaskState.CANCELED and not parts:
                parts = [Part(text=AGENT_CANCELED_TEXT)]
            self.final = _Final(kind, parts or None)
        elif parts:
            self.ctx.emitter.status(_agent_message(status.message, parts, self.ctx))

    def is_closed(self) -> bool:  # what older executors may ask of a queue
        return self.final is not None

    async def close(self, immediate: bool = False) -> None:
        """Nothing to close: each event is written when enqueued."""


def _agent_message(message: Any, parts: list[Part], ctx: StepContext) -> Message:
    """An SDK status message as ours, in this task (its message id kept when it has one)."""
    ours = agent_message(parts, ctx.task_id, ctx.context_id)
    if message.message_id:
        ours.message_id = message.message_id
    if message.HasField("metadata"):
        ours.metadata = json_format.MessageToDict(message.metadata)
    if message.extensions:
        ours.extensions = list(message.extensions)
    return ours


async def _parked() -> None:
    """Wait until cancelled (the producer, once the step has called executor.cancel)."""
    await asyncio.Event().wait()


# -- the flow ---------------------------------------------------------------------------------


class ExecutorFlow(Flow):
    """An a2a-sdk `AgentExecutor` as a flow; `name`, `title`, `skills`, ... are what the Agent Card
    says. `cancel_poll_seconds`: how often to ask whether the task was canceled (0: never).
    `direct_replies`: run `execute` where a new message arrives; a first `Message` event is the
    answer (no task); needs an `execute` that does nothing before its first event.
    `max_step_seconds`: the longest one `execute` may run (over 150 s needs STANDARD workflows)."""

    def __init__(
        self,
        executor: AgentExecutor,
        *,
        name: str = "a2a-sdk-agent",
        title: str = "",
        description: str = "",
        version: str = "0.1.0",
        skills: list[Any] | None = None,
        extended_skills: list[Any] | None = None,
        extensions: list[AgentExtension] | None = None,
        input_modes: list[str] | None = None,
        output_modes: list[str] | None = None,
        cancel_poll_seconds: float = 2.0,
        direct_replies: bool = False,
        max_step_seconds: float | None = None,
    ) -> None:
        if not isinstance(executor, AgentExecutor):
            raise TypeError(f"{type(executor).__name__} is not an a2a-sdk AgentExecutor")
        self.executor = executor
        self.name = name
        self.title = title
        self.description = description
        self.version = version
        self.skills = _skills(skills)
        self.extended_skills = _skills(extended_skills)
        self.extensions = list(extensions or [])
        self.input_modes = list(input_modes or ["text/plain"])
        self.output_modes = list(output_modes or ["text/plain"])
        self.cancel_poll_seconds = cancel_poll_seconds
        self.direct_replies = direct_replies
        self.max_step_seconds = max_step_seconds

    async def step(self, ctx: StepContext) -> Outcome:  # type: ignore[override]
        context = request_context(ctx)
        queue = StepQueue(ctx)
        producer = asyncio.ensure_future(self.executor.execute(context, queue))
        signal = asyncio.ensure_future(queue.canceled.wait())
        watcher = asyncio.ensure_future(self._watch(ctx, queue))
        try:
            await asyncio.wait({producer, signal}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            signal.cancel()
            watcher.cancel()
        if queue.canceled.is_set() and not producer.done():
            await self._cancel(context, queue, producer)
            raise FlowCanceled()
        error = producer.exception()
        if error is not None:
            if queue.final is None:
                raise error
            logger.warning("a2a-sdk executor raised after the turn's final state: %r", error)
        final = queue.final or _Final(OutcomeKind.COMPLETED, None)
        ctx.state[STATE_KEY] = {"state": _state_for(final.kind).value}
        return Outcome(final.kind, final.parts)

    async def _watch(self, ctx: StepContext, queue: StepQueue) -> None:
        """Ask the emitter every `cancel_poll_seconds` whether the task was canceled (when it
        can tell), so an executor waiting on something long is canceled promptly."""
        probe: Callable[[], bool] | None = getattr(ctx.emitter, "canceled", None)
        if probe is None or not callable(probe) or self.cancel_poll_seconds <= 0:
            return
        while not queue.canceled.is_set():
            await asyncio.sleep(self.cancel_poll_seconds)
            if await asyncio.to_thread(probe):
                queue.canceled.set()

    async def _cancel(
        self, context: RequestContext, queue: StepQueue, producer: asyncio.Future[None]
    ) -> None:
        """The SDK server's order: executor.cancel() first (its events are dropped: the task
        is canceled already), then the execute coroutine is cancelled."""
        logger.info("task %s canceled: calling the executor's cancel()", context.task_id)
        try:
            await self.executor.cancel(context, queue)
        except Exception as error:  # e.g. UnsupportedOperationError: the task is canceled anyway
            logger.warning("a2a-sdk executor cancel() raised %r", error)
        finally:
            producer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(producer, CANCEL_GRACE_SECONDS)

    def reply(self, ctx: ReplyContext) -> Awaitable[list[Part] | None] | None:  # type: ignore[override]
        if not self.direct_replies:
            return None
        return self._reply(ctx)

    async def _reply(self, ctx: ReplyContext) -> list[Part] | None:
        context = RequestContext(
            call_context=call_context(ctx.caller, ctx.extensions),
            request=_request(ctx.message, ctx.metadata),
            context_id=ctx.context_id,
        )
        first: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        producer = asyncio.ensure_future(self.executor.execute(context, _FirstEvent(first)))
        await asyncio.wait({producer, first}, return_when=asyncio.FIRST_COMPLETED)
        if first.done() and isinstance(first.result(), pb.Message):
            # The answer: let execute finish (the SDK ignores what follows a Message).
            with contextlib.suppress(Exception):
                await producer
            return parts_of(first.result().parts) or None
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(producer, CANCEL_GRACE_SECONDS)
        return None


class _FirstEvent(EventQueue):
    """A queue that keeps the first event and parks the producer after it."""

    def __init__(self, first: asyncio.Future[Any]) -> None:
        self.first = first

    async def enqueue_event(self, event: Any) -> None:
        if not self.first.done():
            self.first.set_result(event)
            if isinstance(event, pb.Message):
                return
        elif isinstance(self.first.result(), pb.Message):
            return  # after the answer: dropped
        await _parked()


def _skills(skills: list[Any] | None) -> list[AgentSkill]:
    """Skills as ours: an SDK `AgentSkill` (protobuf) is the same proto JSON."""
    return [
        s if isinstance(s, AgentSkill) else AgentSkill.model_validate(json_format.MessageToDict(s))
        for s in skills or []
    ]


def _state_for(kind: OutcomeKind) -> TaskState:
    return Outcome(kind).state or TaskState.COMPLETED


__all__ = ["ExecutorFlow", "StepQueue", "call_context", "request_context", "to_sdk"]
