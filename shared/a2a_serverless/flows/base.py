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

Files. `ctx.files` are the file parts of this turn's message (inline `raw`, stored, or a
client's `url`); `ctx.open(part)` streams the bytes of any part (read them in pieces, a large
file is never loaded whole), `ctx.read(part)` returns them. A `url` part is fetched through
the egress guard (no private or metadata address) and at most `max_bytes` (FETCH_MAX_BYTES by
default) are read: past it, ContentTooLarge. `ctx.artifact_file(source)` streams bytes, a
binary file or an iterable of chunks to the content bucket (in parts when large) and emits an
artifact whose part refers to it; clients get a download URL.

    def digest(ctx: StepContext) -> Outcome:
        for file in ctx.files:
            sha = hashlib.sha256()
            with file.open() as stream:
                while chunk := stream.read(1 << 20):
                    sha.update(chunk)
            ctx.status(f"{file.filename}: {sha.hexdigest()}")
        ctx.artifact_file(render_report(), filename="report.pdf")  # bytes, file or chunks
        return Outcome.completed()

`ctx.text` is the whole text of this turn's message; `ctx.history` holds earlier messages as
stored (a large part is a reference: `ctx.open` it, or `ctx.restore(message)`).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import io
import json
import mimetypes
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Any, Protocol

from a2a_serverless.core.content import present_message
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.delegation import Delegate, DelegationResult, check_delegates

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
from a2a_serverless.store.content import (
    REF_SCHEME,
    ContentStore,
    IterableReader,
    Kind,
    content_of,
    kind_of,
    read_all,
    reference,
    restored,
    stored_name,
)

# What `ctx.open` reads of a `url` part by default (settings FETCH_MAX_BYTES; the worker
# passes the deployed value).
DEFAULT_FETCH_MAX_BYTES = 100 * 1024 * 1024
# A readable body of a client's url and its declared length (None: not declared); raises
# core.egress.UnsafeWebhookUrl when the egress guard refuses the URL, OSError when the fetch
# fails (push/delivery.py `open_url` is the one the worker is given).
UrlOpener = Callable[[str], tuple[IO[bytes], int | None]]
# Where a step's files go: names unique to the step, so a re-run overwrites its own objects.
_FILE_NAME = "raw.out-{turn}-{step}-{index}"


class FlowCanceled(Exception):
    """Raised inside a step when the task was canceled (or moved on) while it ran."""


class ContentTooLarge(ValueError):
    """A part's content is larger than the `max_bytes` it was opened or read with."""


class UrlRefused(ValueError):
    """The egress guard refused a `url` part's URL (not https, a private, loopback or
    metadata address...); `reason` is a short code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class NoContentStore(RuntimeError):
    """The stack has no content bucket (CONTENT_BUCKET is unset), and the step needs one."""


class OutcomeKind(StrEnum):
    NEXT_STEP = "next_step"
    DELEGATE = "delegate"
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
    delegates: tuple[Delegate, ...] = ()
    wait: str = "all"

    @property
    def state(self) -> TaskState | None:
        return _OUTCOME_STATES.get(self.kind)

    @classmethod
    def next_step(cls) -> Outcome:
        """Run another step in this turn (a new Lambda invocation; `ctx.state` is kept)."""
        return cls(OutcomeKind.NEXT_STEP)

    @classmethod
    def delegate(cls, *delegates: Delegate, wait: str = "all") -> Outcome:
        """Hand each `Delegate`'s message to its remote agent (sent non-blocking, its push
        notifications routed back here) and end the step: the task stays working, with
        nothing running, until the remote tasks settle, then the next step runs with their
        results in `ctx.delegations`. `wait="first"`: go on when the first has settled (the
        others are canceled). `ctx.state` is kept."""
        check_delegates(delegates, wait)
        return cls(OutcomeKind.DELEGATE, None, tuple(delegates), wait)

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
    # The content bucket (None: the stack has none), where stored parts are read and files
    # written; how `url` parts are fetched, and at most how many bytes by default.
    content: ContentStore | None = None
    open_url: UrlOpener | None = None
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    # The results of the task's latest delegation round (`Outcome.delegate`), in the order it
    # delegated; read afresh (remote tasks included) in the step that round woke.
    delegations: list[DelegationResult] = field(default_factory=list)
    # Whether this step is the one the latest round woke.
    woken: bool = False
    _files_written: int = field(default=0, init=False, repr=False)

    @property
    def text(self) -> str:
        """The text parts of this turn's message, joined."""
        return "".join(p.text for p in self.message.parts if p.text is not None)

    @property
    def files(self) -> list[File]:
        """The file parts of this turn's message: inline `raw`, stored, or a client's `url`."""
        return [File(part, self) for part in self.message.parts if _is_file(part)]

    def open(self, part: Part, max_bytes: int | None = None) -> IO[bytes]:
        """The bytes of `part` as a stream (use it in `with`; read it in pieces): a file's,
        a stored part's (read from the content bucket), a text's UTF-8, a data part's JSON, a
        `url` part's body (fetched through the egress guard, at most `max_bytes`, by default
        `fetch_max_bytes`). Past `max_bytes`, reading raises ContentTooLarge; a refused URL
        raises UrlRefused, a failed fetch OSError."""
        name = stored_name(part)
        if name is not None:
            stream = self._store("read stored content").open(self.task_id, name)
        elif part.url is not None:
            return self._fetch(part.url, self.fetch_max_bytes if max_bytes is None else max_bytes)
        else:
            content = content_of(part)
            stream = io.BytesIO(content[1] if content is not None else b"")
        return io.BufferedReader(_Capped(stream, max_bytes))

    def read(self, part: Part, max_bytes: int | None = None) -> bytes:
        """Every byte of `part` (as `open` reads it, with the same cap)."""
        with self.open(part, max_bytes) as stream:
            return stream.read()

    def linked(self, message: Message) -> Message:
        """`message` with its stored parts as short-lived download URLs, as clients read them
        (for code that takes URLs, such as an a2a-sdk executor)."""
        if self.content is None:
            return message
        return present_message(message, self.task_id, self.content)

    def restore(self, message: Message) -> Message:
        """`message` with its stored text and data parts read back in place (files stay
        references: `open` them)."""
        return restore_message(message, self.task_id, self.content)

    def artifact_file(
        self,
        source: bytes | IO[bytes] | Iterable[bytes],
        *,
        filename: str | None = None,
        media_type: str | None = None,
        artifact_id: str = "result",
        name: str | None = None,
        description: str | None = None,
        append: bool = False,
        last_chunk: bool = True,
        metadata: dict[str, Any] | None = None,
    ) -> Part:
        """A file artifact of any size: `source` (bytes, a binary file object, or an iterable
        of byte chunks) is streamed to the content bucket, then emitted as an artifact whose
        part refers to it (clients get a download URL). The media type defaults to the
        filename's guess, else application/octet-stream. Returns the emitted part.

        Raises NoContentStore when the stack has no content bucket."""
        store = self._store("emit a file")
        media = media_type or _guess_type(filename)
        object_name = _FILE_NAME.format(turn=self.turn, step=self.step, index=self._files_written)
        self._files_written += 1
        store.put_stream(self.task_id, object_name, _readable(source), media)
        part = Part(url=reference(object_name), media_type=media, filename=filename)
        self.emitter.artifact(
            ArtifactChunk([part], artifact_id, name, description, append, last_chunk, metadata)
        )
        return part

    def _store(self, doing: str) -> ContentStore:
        if self.content is None:
            raise NoContentStore(
                f"cannot {doing}: this stack has no content bucket (CONTENT_BUCKET is unset)"
            )
        return self.content

    def _fetch(self, url: str, max_bytes: int) -> IO[bytes]:
        from a2a_serverless.core.egress import UnsafeWebhookUrl

        if url.startswith(REF_SCHEME):
            raise ValueError("the part refers to no stored content of this task")
        if self.open_url is None:
            raise RuntimeError("this step cannot fetch url parts (no URL opener was given)")
        try:
            stream, length = self.open_url(url)
        except UnsafeWebhookUrl as error:
            reason = str(error).removeprefix("webhook URL ")
            raise UrlRefused(error.reason, f"the url part was refused: {reason}") from None
        if length is not None and length > max_bytes:
            stream.close()
            raise ContentTooLarge(f"the url part is {length} bytes, more than {max_bytes}")
        return io.BufferedReader(_Capped(stream, max_bytes))

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


@dataclass(frozen=True)
class File:
    """A file part of a step's message (`ctx.files`): its name, media type and bytes."""

    part: Part
    ctx: StepContext = field(repr=False, compare=False)

    @property
    def filename(self) -> str | None:
        return self.part.filename

    @property
    def media_type(self) -> str | None:
        return self.part.media_type

    def open(self, max_bytes: int | None = None) -> IO[bytes]:
        """The file's bytes as a stream (`StepContext.open`)."""
        return self.ctx.open(self.part, max_bytes)

    def read(self, max_bytes: int | None = None) -> bytes:
        """Every byte of the file (`StepContext.read`)."""
        return self.ctx.read(self.part, max_bytes)


def restore_message(message: Message, task_id: str, store: ContentStore | None) -> Message:
    """`message` with its stored text and data parts read back from `store` (store/content.py
    `restored`); files stay references."""
    stored = [
        part
        for part in message.parts
        if (name := stored_name(part)) is not None and kind_of(name) in (Kind.TEXT, Kind.DATA)
    ]
    if not stored:
        return message
    if store is None:
        raise NoContentStore("cannot read a stored part: this stack has no content bucket")
    parts = [restored(part, task_id, store) for part in message.parts]
    return message.model_copy(update={"parts": parts})


def stored_state(task_id: str, name: str, store: ContentStore | None) -> dict[str, Any]:
    """A flow state kept in the content store under `name`."""
    if store is None:
        raise NoContentStore("cannot read the stored flow state: this stack has no content bucket")
    state = json.loads(read_all(store.open(task_id, name)))
    if not isinstance(state, dict):
        raise ValueError("the stored flow state is not a JSON object")
    return state


def _is_file(part: Part) -> bool:
    if part.raw is not None:
        return True
    name = stored_name(part)
    return kind_of(name) is Kind.RAW if name is not None else part.url is not None


def _guess_type(filename: str | None) -> str:
    guessed = mimetypes.guess_type(filename)[0] if filename else None
    return guessed or "application/octet-stream"


def _readable(source: bytes | IO[bytes] | Iterable[bytes]) -> IO[bytes]:
    if isinstance(source, bytes | bytearray | memoryview):
        return io.BytesIO(source)
    if hasattr(source, "read"):
        return source  # type: ignore[return-value]  # a file object: read as it is
    if isinstance(source, str) or not isinstance(source, Iterable):
        raise TypeError("a file's source is bytes, a binary file object or chunks of bytes")
    return IterableReader(source)  # type: ignore[return-value]  # reads like a file


class _Capped(io.RawIOBase):
    """A stream's bytes, refusing more than `limit` (None: no limit); closes the stream."""

    def __init__(self, stream: IO[bytes], limit: int | None) -> None:
        self._stream = stream
        self._limit = limit
        self._seen = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        want = len(buffer)
        if self._limit is not None:
            # One byte past the limit tells a stream at the limit from one beyond it.
            want = min(want, self._limit - self._seen + 1)
        data = self._stream.read(want)
        self._seen += len(data)
        if self._limit is not None and self._seen > self._limit:
            raise ContentTooLarge(f"the content is larger than {self._limit} bytes")
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


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
