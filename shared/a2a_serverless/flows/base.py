"""The flow API.

A flow is the agent's logic. Each Step Functions step calls `Flow.step(ctx)` once (one Lambda
invocation); the step streams progress through `ctx` and returns one `Outcome`: `next_step()`,
an interrupted state (`input_required`, `auth_required`) or a terminal one. `ctx.state` is the
flow's JSON state across steps and turns. A write past a bound of models/limits.py ends the
turn FAILED, naming the bound (store.TooLarge), and nothing past it is written.

    class Shout(Flow):
        def step(self, ctx: StepContext) -> Outcome:
            ctx.artifact(ctx.text.upper(), name="shout", last_chunk=True)
            return Outcome.completed()

    flow = Shout()          # FLOW=my_package.shout:flow
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from a2a_serverless.core.context import RequestContext

# agent_message lives in models (core needs it too); re-exported here for flow authors.
from a2a_serverless.models import (
    AgentExtension,
    AgentSkill,
    Caller,
    Message,
    Part,
    TaskState,
    agent_message,
)


class FlowCanceled(Exception):
    """Raised inside a step when the task was canceled (or moved on) while it ran."""


class OutcomeKind(StrEnum):
    NEXT_STEP = "next_step"
    INPUT_REQUIRED = "input_required"
    AUTH_REQUIRED = "auth_required"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"


_OUTCOME_STATES = {
    OutcomeKind.INPUT_REQUIRED: TaskState.INPUT_REQUIRED,
    OutcomeKind.AUTH_REQUIRED: TaskState.AUTH_REQUIRED,
    OutcomeKind.COMPLETED: TaskState.COMPLETED,
    OutcomeKind.FAILED: TaskState.FAILED,
    OutcomeKind.REJECTED: TaskState.REJECTED,
}


@dataclass(frozen=True)
class Outcome:
    """What a step decided. `message` (text or parts) goes into the status and history."""

    kind: OutcomeKind
    message: str | list[Part] | None = None

    @property
    def state(self) -> TaskState | None:
        return _OUTCOME_STATES.get(self.kind)

    @classmethod
    def next_step(cls) -> Outcome:
        """Run another step in this turn (a new Lambda invocation; `ctx.state` is kept)."""
        return cls(OutcomeKind.NEXT_STEP)

    @classmethod
    def input_required(cls, message: str | list[Part]) -> Outcome:
        """End the turn until the client answers `message` (TASK_STATE_INPUT_REQUIRED)."""
        return cls(OutcomeKind.INPUT_REQUIRED, message)

    @classmethod
    def auth_required(cls, message: str | list[Part]) -> Outcome:
        """End the turn until the client has authorized (TASK_STATE_AUTH_REQUIRED)."""
        return cls(OutcomeKind.AUTH_REQUIRED, message)

    @classmethod
    def completed(cls, message: str | list[Part] | None = None) -> Outcome:
        """The task is done; its artifacts are the answer."""
        return cls(OutcomeKind.COMPLETED, message)

    @classmethod
    def failed(cls, message: str | list[Part]) -> Outcome:
        """The task could not be done; `message` says why."""
        return cls(OutcomeKind.FAILED, message)

    @classmethod
    def rejected(cls, message: str | list[Part]) -> Outcome:
        """The agent will not do this task; `message` says why."""
        return cls(OutcomeKind.REJECTED, message)


@dataclass(frozen=True)
class ArtifactChunk:
    """An artifact, or one chunk of it (`append` adds to the chunks sent before)."""

    parts: list[Part]
    artifact_id: str = "result"
    name: str | None = None
    description: str | None = None
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None
    extensions: list[str] | None = None  # URIs of extensions whose data the artifact carries


class Emitter(Protocol):
    """Where a step's updates go (the task's event log)."""

    def status(self, message: Message) -> None: ...

    def artifact(self, chunk: ArtifactChunk) -> None: ...


@dataclass
class StepContext:
    """Everything one step sees, and the emitter it reports through."""

    task_id: str
    context_id: str
    turn: int
    step: int
    message: Message
    history: list[Message]
    state: dict[str, Any]
    emitter: Emitter
    metadata: dict[str, Any] = field(default_factory=dict)
    # Who sent this turn's message: the owning principal and its credential's claims and scopes
    # (authorize per skill with them, or answer `auth_required`).
    caller: Caller = field(default_factory=lambda: Caller("anonymous"))
    # The extensions this turn's send activated: ones the client asked for in A2A-Extensions
    # that the flow declares in `extensions` (spec §4.6).
    extensions: list[str] = field(default_factory=list)
    # This turn's SendMessageRequest.metadata (a follow-up's own); `metadata` is the task's,
    # from the send that created it.
    request_metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text parts of this turn's message, joined."""
        return "".join(p.text for p in self.message.parts if p.text is not None)

    def status(self, content: str | list[Part]) -> None:
        """A progress message (state stays working)."""
        self.emitter.status(agent_message(content, self.task_id, self.context_id))

    def artifact(
        self,
        content: str | list[Part],
        *,
        artifact_id: str = "result",
        name: str | None = None,
        description: str | None = None,
        append: bool = False,
        last_chunk: bool = False,
        metadata: dict[str, Any] | None = None,
        extensions: list[str] | None = None,
    ) -> None:
        """An artifact, or one chunk of it (`append=True` adds to earlier chunks);
        `extensions` names the extensions whose data its metadata carries."""
        parts = [Part(text=content)] if isinstance(content, str) else content
        self.emitter.artifact(
            ArtifactChunk(
                parts, artifact_id, name, description, append, last_chunk, metadata, extensions
            )
        )


@dataclass
class ReplyContext:
    """What `Flow.reply` sees: a new message (not a follow-up of a task), who sent it, the
    extensions it activated and the request's metadata."""

    message: Message
    context_id: str
    caller: Caller
    extensions: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text parts of the message, joined."""
        return "".join(p.text for p in self.message.parts if p.text is not None)


class Flow:
    """Subclass and implement `step`; sync or `async def` both work.

    Optionally implement `reply`: it sees each new message first (in the function that
    received it) and may answer with a Message directly — no task is created then.
    """

    name: str = "flow"
    # What the Agent Card says (AgentName / AgentDescription override them): a display name
    # (default: `name`), the description, the agent's version.
    title: str = ""
    description: str = ""
    version: str = "0.1.0"
    skills: list[AgentSkill] = []
    # Skills listed only on the extended Agent Card (GetExtendedAgentCard), which callers get
    # once authenticated; a stack with Auth=None has no extended card.
    extended_skills: list[AgentSkill] = []
    # Extensions the flow supports (the card's capabilities.extensions); a client opts in with
    # the A2A-Extensions header and the step sees the activated ones in `ctx.extensions`.
    extensions: list[AgentExtension] = []
    input_modes: list[str] = ["text/plain"]
    output_modes: list[str] = ["text/plain"]
    # The longest one step may run, in seconds (None: not said); a workflow that runs steps for
    # less (EXPRESS: 150 s) refuses to start rather than time out long steps.
    max_step_seconds: float | None = None

    def step(self, ctx: StepContext) -> Outcome:  # pragma: no cover - interface
        raise NotImplementedError

    def reply(self, ctx: ReplyContext) -> str | list[Part] | None:
        """A direct answer to a new message (spec §3.1.1: a Message instead of a Task), or
        None (the default) to handle it as a task. Runs in the SendMessage/stream function
        before anything is stored, so keep it quick; it costs no DynamoDB write and no
        Step Functions execution."""
        return None

    def reply_to(
        self, context: RequestContext, message: Message, context_id: str, metadata: dict[str, Any]
    ) -> Message | None:
        """`reply`, as the core calls it (core/send.py `Replier`): the answer as an agent
        Message of the message's context, or None."""
        extensions = list(context.extensions)
        answer = self.reply(ReplyContext(message, context_id, context.caller, extensions, metadata))
        if inspect.isawaitable(answer):
            answer = asyncio.run(_await(answer))
        if answer is None:
            return None
        if not isinstance(answer, str | list):
            raise TypeError(f"flow reply returned {type(answer).__name__}, expected str or parts")
        return agent_message(answer, None, context_id)

    def run_step(self, ctx: StepContext) -> Outcome:
        result = self.step(ctx)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        if not isinstance(result, Outcome):
            raise TypeError(f"flow step returned {type(result).__name__}, expected Outcome")
        return result


# How long each workflow lets one step run: template.yaml's FlowWorkerFunction Timeout (an
# EXPRESS execution ends at 5 minutes, so its steps get 150 s and their retries the rest).
STEP_LIMIT_SECONDS = {"EXPRESS": 150, "STANDARD": 900}


def step_length_problem(flow: Flow, workflow_type: str) -> str | None:
    """Why `flow` cannot run on `workflow_type` (its declared `max_step_seconds` is longer
    than the workflow lets a step run, or is no number of seconds); None when it can."""
    declared = flow.max_step_seconds
    if declared is None:
        return None
    if isinstance(declared, bool) or not isinstance(declared, int | float) or not declared > 0:
        return f"max_step_seconds must be a positive number of seconds, got {declared!r}"
    longest = max(STEP_LIMIT_SECONDS.values())
    if declared > longest:
        return (
            f"max_step_seconds is {declared:g}, and no workflow runs a step for more than "
            f"{longest} s (Lambda's limit): split the work into steps (Outcome.next_step())"
        )
    limit = STEP_LIMIT_SECONDS.get(workflow_type)
    if limit is not None and declared > limit:
        fits = min(
            (name for name, seconds in STEP_LIMIT_SECONDS.items() if seconds >= declared),
            key=STEP_LIMIT_SECONDS.__getitem__,
        )
        return (
            f"the flow's steps may run {declared:g} s (max_step_seconds) and "
            f"WorkflowType={workflow_type} runs a step for at most {limit} s: deploy with "
            f"WorkflowType={fits} (locally: --param WorkflowType={fits})"
        )
    return None


def load_problem(flow: str, exc: Exception, missing_module_hint: str) -> str:
    """Why the flow `flow` (as the message names it) did not load: the exception, and
    `missing_module_hint` when its module was not found."""
    hint = f" ({missing_module_hint})" if isinstance(exc, ModuleNotFoundError) else ""
    return f"cannot load the flow {flow}: {type(exc).__name__}: {exc}{hint}"


async def _await(awaitable: Any) -> Any:
    return await awaitable


class _FunctionFlow(Flow):
    def __init__(self, fn: Callable[[StepContext], Any]) -> None:
        self._fn = fn
        self.name = getattr(fn, "__name__", "flow")

    def step(self, ctx: StepContext) -> Outcome:
        return self._fn(ctx)


def load_flow(spec: str) -> Flow:
    """`module:attribute` → a Flow (an instance, a Flow subclass, or a step function)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"FLOW must be 'module:attribute', got {spec!r}")
    target = getattr(importlib.import_module(module_name), attribute)
    if isinstance(target, Flow):
        return target
    if isinstance(target, type) and issubclass(target, Flow):
        return target()
    if callable(target):
        return _FunctionFlow(target)
    raise TypeError(f"{spec} is not a Flow, a Flow subclass or a step function")
