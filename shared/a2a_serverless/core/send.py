"""The SEND path of the A2A operations: SendMessage and SendStreamingMessage.

Both open the same way (validate, dedupe, create a task or continue one, start the turn);
they differ only in what they answer with: the task once it settles (or at once), or the
snapshot a stream starts from.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from a2a_serverless.core.content import present
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.errors import (
    ContentTypeNotSupportedError,
    ExtensionSupportRequiredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    invalid_field,
    streaming_unsupported,
)
from a2a_serverless.core.executor import Executor, TurnContext, execution_name
from a2a_serverless.core.push import PushService, config_violations
from a2a_serverless.core.query import (
    StreamStart,
    TaskQueries,
    build_task,
    check_id_size,
    check_owner_size,
)
from a2a_serverless.core.tail import LogTail, SettleWait, WaitPolicy
from a2a_serverless.core.tasklog import StateMoved, status_event, transition
from a2a_serverless.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    AgentExtension,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    agent_message,
    utcnow,
)
from a2a_serverless.models.a2a import RoleField
from a2a_serverless.models.limits import (
    MAX_EXTENSION_URI_BYTES,
    MAX_ID_BYTES,
    MAX_MESSAGE_EXTENSIONS,
    MAX_MESSAGE_FRAME_BYTES,
    MAX_MESSAGE_PARTS,
    MAX_PART_FILENAME_BYTES,
    MAX_PART_MEDIA_TYPE_BYTES,
    MAX_PART_URL_BYTES,
    MAX_REFERENCE_TASK_IDS,
    MAX_REQUEST_METADATA_BYTES,
)
from a2a_serverless.observability import annotate, task_ended
from a2a_serverless.store import (
    ConflictError,
    Dedupe,
    TaskRecord,
    TaskStore,
    TooLarge,
    utf8_size,
)
from a2a_serverless.store.content import REF_SCHEME


@dataclass
class ModePolicy:
    """What the flow declares on the Agent Card: media types it accepts and produces, and
    the extensions it supports (spec §4.6)."""

    input_modes: list[str] = field(default_factory=lambda: ["text/plain"])
    output_modes: list[str] = field(default_factory=lambda: ["text/plain"])
    extensions: list[AgentExtension] = field(default_factory=list)

    def activate(self, requested: Sequence[str]) -> list[str]:
        """The extensions a send uses: those the client asked for (A2A-Extensions) that the
        flow supports, in the card's order; others are ignored (§4.6.3). A required extension
        the client did not ask for refuses the send."""
        asked = set(requested)
        missing = [e.uri for e in self.extensions if e.required and e.uri not in asked]
        if missing:
            raise ExtensionSupportRequiredError(
                f"This agent requires the extension(s) {', '.join(missing)}: declare them in "
                "the A2A-Extensions header",
                extensions=",".join(missing),
            )
        return [e.uri for e in self.extensions if e.uri in asked]


def _media_match(offered: str, accepted: str) -> bool:
    offered_type, _, offered_sub = offered.lower().split(";")[0].strip().partition("/")
    accepted_type, _, accepted_sub = accepted.lower().split(";")[0].strip().partition("/")
    return (accepted_type in ("*", offered_type) or offered_type == "*") and (
        accepted_sub in ("*", offered_sub) or offered_sub == "*"
    )


MAX_METADATA_BYTES = MAX_REQUEST_METADATA_BYTES  # a SendMessageRequest's metadata, as JSON
INLINE_PUSH_FIELD = "configuration.taskPushNotificationConfig"


def content_hash(request: SendMessageRequest) -> str:
    """The whole request (message, configuration, metadata): a retry repeats all of it."""
    canonical = json.dumps(request.wire(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Accepted:
    """A message SendMessage accepted: where its wait starts (the status event at
    `after_seq`), whether the caller asked to wait, and the answer when it is already known."""

    owner: str
    task_id: str
    after_seq: int
    history_length: int | None
    blocking: bool
    answer: SendMessageResponse | None = None


@dataclass(frozen=True)
class Entry:
    """A message entered into a task. `seq`: the turn's first status event (0 when `retried`: this
    send repeats an identical earlier one and wrote nothing). `created`: the new task as written
    (None when continued or retried). `opened`: a continued task as read before its turn."""

    task_id: str
    seq: int
    retried: bool = False
    created: Task | None = None
    opened: StreamStart | None = None


class Replier(Protocol):
    """The agent's chance to answer a new message directly (a `flows.Flow` is one)."""

    def reply_to(
        self, context: RequestContext, message: Message, context_id: str, metadata: dict[str, Any]
    ) -> Message | None: ...


@dataclass
class MessageSender:
    """Takes messages into tasks and starts their turns."""

    store: TaskStore
    executor: Executor
    queries: TaskQueries  # the answer to a send is read like GetTask reads it
    modes: ModePolicy
    wait: WaitPolicy
    push: PushService | None
    # A repeated send (same messageId, identical request) within this many seconds is answered with
    # the original task; 0 (the default): every send is new (deduplication is a MAY in the spec).
    dedupe_window_seconds: float = 0.0
    # Asked first about every new message (no taskId): a Message it returns is the answer,
    # and no task is created.
    replier: Replier | None = None
    # Off (the Streaming parameter): the card says so and the stream methods refuse.
    streaming: bool = True

    # -- SendMessage -----------------------------------------------------------------------

    def send(self, context: RequestContext, request: SendMessageRequest) -> SendMessageResponse:
        """Accept the message, wait (unless told not to) and answer with the task."""
        accepted = self.accept(context, request)
        if accepted.blocking:
            wait = self.settle(accepted)
            while not wait.step():
                time.sleep(wait.pause())
        return self.answer(accepted)

    def accept(self, context: RequestContext, request: SendMessageRequest) -> Accepted:
        """SendMessage up to its wait: validate, enter the message into a task, start the
        turn. Every refusal is raised here, before any waiting; the caller then waits with
        `settle` (as it likes: blocking, or awaiting between reads) and calls `answer`."""
        config = request.configuration or SendMessageConfiguration()
        owner = context.owner
        self._check(context, request)
        reply = self._direct_reply(context, request)
        if reply is not None:
            return Accepted(
                owner, "", 0, config.history_length, False, SendMessageResponse(message=reply)
            )
        entry = self._enter(context, request)
        blocking = not config.return_immediately
        if not blocking and entry.created is not None:
            # Everything the answer holds was just written: no need to read it back.
            answer = SendMessageResponse(task=entry.created)
            return Accepted(owner, entry.task_id, entry.seq, config.history_length, False, answer)
        seq = entry.seq
        if blocking and entry.retried:
            # Wait from the earlier send's status on, as that send would have.
            original = self.store.get_record(entry.task_id)
            seq = original.status_seq if original else 0
        return Accepted(owner, entry.task_id, seq, config.history_length, blocking)

    def settle(self, accepted: Accepted) -> SettleWait:
        """The wait of a blocking send: its log from the accepted status on, up to the limit."""
        tail = LogTail(self.store, accepted.task_id, max(0, accepted.after_seq - 1), self.wait.poll)
        return SettleWait(tail, self.wait.max_wait_seconds)

    def answer(self, accepted: Accepted) -> SendMessageResponse:
        """The SendMessage response once the wait is over (or was not asked for)."""
        if accepted.answer is not None:
            return accepted.answer
        return SendMessageResponse(
            task=self.queries.get_task(accepted.owner, accepted.task_id, accepted.history_length)
        )

    # -- SendStreamingMessage --------------------------------------------------------------

    def open_stream(self, context: RequestContext, request: SendMessageRequest) -> StreamStart:
        """Accept a message like SendMessage (never blocking) and say where its stream starts:
        the first event is the task as of seq S; the stream continues with the log after S."""
        if not self.streaming:
            raise streaming_unsupported("SendStreamingMessage")
        config = request.configuration or SendMessageConfiguration()
        self._check(context, request)
        reply = self._direct_reply(context, request)
        if reply is not None:
            # A Message-only stream: exactly that one event.
            return StreamStart(StreamResponse(message=reply), "", 0, open=False)
        # A continued task is read before its turn starts (the stream then carries every
        # event of the turn, as a new task's does), a retried send's as it is now.
        entry = self._enter(context, request, stream=True)
        if entry.created is not None:
            return StreamStart(
                StreamResponse(task=entry.created), entry.task_id, entry.seq, open=True
            )
        if entry.opened is not None:
            return entry.opened
        return self.queries.snapshot_start(context.owner, entry.task_id, config.history_length)

    # -- the shared opening steps ----------------------------------------------------------

    def _direct_reply(self, context: RequestContext, request: SendMessageRequest) -> Message | None:
        """The agent's direct answer to a new (checked) message; None: the message becomes
        (or continues) a task."""
        message = request.message
        if self.replier is None or message.task_id:
            return None
        context_id = message.context_id or str(uuid.uuid4())
        return self.replier.reply_to(context, message, context_id, dict(request.metadata or {}))

    def enter(self, context: RequestContext, request: SendMessageRequest) -> Entry:
        """Validate the message, then create a task for it or continue the one it names; the
        context is what the turn's flow steps see."""
        self._check(context, request)
        return self._enter(context, request)

    def _check(self, context: RequestContext, request: SendMessageRequest) -> None:
        """The refusals every send gets first, direct replies included."""
        check_owner_size(context.owner)
        self._validate(request, request.configuration or SendMessageConfiguration())

    def _enter(
        self, context: RequestContext, request: SendMessageRequest, stream: bool = False
    ) -> Entry:
        """`stream`: read a continued task, to open a stream on, before its turn starts."""
        owner = context.owner
        turn = TurnContext(
            context.caller, context.extensions, request.metadata or None, context.base_url
        )
        message = request.message
        config = request.configuration or SendMessageConfiguration()
        dedupe = (
            Dedupe(
                owner,
                message.message_id,
                content_hash(request),
                expires_at=int(time.time() + self.dedupe_window_seconds),
            )
            if self.dedupe_window_seconds > 0
            else None
        )
        try:
            if message.task_id:
                return self._continue_task(owner, message, dedupe, config, turn, stream)
            return self._create_task(owner, message, dedupe, request, config, turn)
        except TooLarge as error:
            # Nothing was written: the message does not fit where it is kept (a stack without
            # a content bucket keeps every part in the table).
            raise InvalidParamsError(violations=[("message", str(error))]) from None

    def _validate(self, request: SendMessageRequest, config: SendMessageConfiguration) -> None:
        # Every field violation at once (the spec's example lists several), then the rest.
        message = request.message
        inline = config.task_push_notification_config
        violations = _field_violations(
            message.role,
            message.message_id,
            message.context_id,
            message.task_id,
            request.metadata,
            {
                "referenceTaskIds": message.reference_task_ids,
                "extensions": message.extensions,
                "metadata": message.metadata,
                "parts": [
                    {
                        "url": part.url,
                        "filename": part.filename,
                        "mediaType": part.media_type,
                        "metadata": part.metadata,
                    }
                    for part in message.parts
                ],
            },
            inline.wire() if inline is not None else None,
        )
        if violations:
            raise InvalidParamsError(violations=violations)
        if config.task_push_notification_config is not None:  # refused before any write
            self._push().require_enabled()
        for index, part in enumerate(message.parts):
            if part.media_type and not any(
                _media_match(part.media_type, mode) for mode in self.modes.input_modes
            ):
                raise ContentTypeNotSupportedError(
                    f"message.parts[{index}].mediaType {part.media_type!r} is not accepted; "
                    f"this agent accepts {', '.join(self.modes.input_modes)}",
                    field=f"message.parts[{index}].mediaType",
                )
        if config.accepted_output_modes and not any(
            _media_match(produced, accepted)
            for produced in self.modes.output_modes
            for accepted in config.accepted_output_modes
        ):
            raise ContentTypeNotSupportedError(
                "None of configuration.acceptedOutputModes can be produced; this agent "
                f"produces {', '.join(self.modes.output_modes)}",
                field="configuration.acceptedOutputModes",
            )

    def _retry_of(self, owner: str, message: Message, dedupe: Dedupe | None) -> Entry | None:
        """The task an identical earlier send created or continued, if this send is a retry
        (within the dedupe window; never with the window off)."""
        if dedupe is None:
            return None
        found = self.store.find_dedupe(owner, message.message_id)
        if found is not None and found[1] == dedupe.content_hash:
            return Entry(found[0], 0, retried=True)
        return None

    def _create_task(
        self,
        owner: str,
        message: Message,
        dedupe: Dedupe | None,
        request: SendMessageRequest,
        config: SendMessageConfiguration,
        turn: TurnContext,
    ) -> Entry:
        task_id = str(uuid.uuid4())
        # A new context is named after the task that opens it: the store counts that task in
        # its context with no counter write (keys.opens_context).
        context_id = message.context_id or task_id
        push_config = self._inline_push(config, task_id)
        stored = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        status = TaskStatus(state=TaskState.SUBMITTED, timestamp=utcnow())
        execution = execution_name(task_id, 1)
        metadata = request.metadata or None
        record = TaskRecord.submitted(task_id, context_id, owner, status, execution, metadata)
        annotate(task_id=task_id, context_id=context_id)
        try:
            kept = self.store.create_task(
                record, stored, status_event(record, status), dedupe, push_config
            )
        except ConflictError as conflict:
            if "dedupe" not in conflict.failed:
                raise
            retry = self._retry_of(owner, message, dedupe)
            if retry is not None:
                return retry
            # Same messageId, different content: a new message, processed normally.
            kept = self.store.create_task(
                record, stored, status_event(record, status), None, push_config
            )
        self._start(record, 1, turn)
        history = [kept or stored] if config.history_length != 0 else None
        created = present(build_task(record, history=history), self.queries.links)
        return Entry(task_id, 1, created=created)

    def _inline_push(
        self, config: SendMessageConfiguration, task_id: str
    ) -> TaskPushNotificationConfig | None:
        inline = config.task_push_notification_config
        if inline is None:
            return None
        return self._push().prepared(inline, task_id, INLINE_PUSH_FIELD)

    def _push(self) -> PushService:
        if self.push is None:
            raise PushNotificationNotSupportedError(
                "Push notifications are not supported by this agent"
            )
        return self.push

    def _continue_task(
        self,
        owner: str,
        message: Message,
        dedupe: Dedupe | None,
        config: SendMessageConfiguration,
        context: TurnContext,
        stream: bool = False,
    ) -> Entry:
        record = self.queries.load(owner, message.task_id or "")
        if message.context_id and message.context_id != record.context_id:
            raise invalid_field(
                "message.contextId",
                f"does not match the contextId of task {record.task_id}",
            )
        if record.state not in INTERRUPTED_STATES:
            retry = self._retry_of(owner, message, dedupe)
            if retry is not None:
                return retry
            raise _not_accepting(record)
        stored = message.model_copy(update={"context_id": record.context_id})
        # Written with the turn's first event (same transaction): a refused or retried message
        # leaves no webhook behind.
        push_config = self._inline_push(config, record.task_id)
        try:
            seq = self._next_turn(record, stored, dedupe, push_config)
            turn = record.turn + 1
        except StateMoved as moved:
            retry = self._retry_of(owner, message, dedupe)
            if retry is not None:
                return retry
            if moved.record is not None and moved.record.state not in INTERRUPTED_STATES:
                raise UnsupportedOperationError(
                    f"Task {record.task_id} moved to {moved.record.state.value} while this "
                    "message was being accepted",
                    taskId=record.task_id,
                ) from None
            # Same messageId reused with other content: accept it without the retry record.
            fresh = moved.record or record
            seq = self._next_turn(fresh, stored, None, push_config)
            turn = fresh.turn + 1
        opened = (
            self.queries.snapshot_start(owner, record.task_id, config.history_length)
            if stream
            else None
        )
        self._start(record, turn, context)
        return Entry(record.task_id, seq, opened=opened)

    def _next_turn(
        self,
        record: TaskRecord,
        message: Message,
        dedupe: Dedupe | None,
        push_config: TaskPushNotificationConfig | None,
    ) -> int:
        """Move an interrupted task back to submitted for its next turn; the status's seq."""
        turn = record.turn + 1
        _, seq = transition(
            self.store,
            record,
            TaskState.SUBMITTED,
            turn=turn,
            execution=execution_name(record.task_id, turn),
            user_message=message,
            dedupe=dedupe,
            push_config=push_config,
        )
        return seq

    def _start(self, record: TaskRecord, turn: int, context: TurnContext) -> None:
        try:
            self.executor.start(record.task_id, turn, context)
        except Exception:
            # The turn cannot run: end the task failed rather than leave it submitted.
            fresh = self.store.get_record(record.task_id)
            if fresh is not None and fresh.state not in TERMINAL_STATES:
                with contextlib.suppress(StateMoved):
                    transition(
                        self.store,
                        fresh,
                        TaskState.FAILED,
                        message=agent_message(
                            "The agent could not start processing this task.",
                            fresh.task_id,
                            fresh.context_id,
                        ),
                    )
                    task_ended(TaskState.FAILED.value)
            raise


def _field_violations(
    role: Any,
    message_id: Any,
    context_id: Any,
    task_id: Any,
    metadata: Any,
    bounded: Any = None,
    inline_push: Any = None,
) -> list[tuple[str, str]]:
    """The field checks every send gets beyond its schema: the sender's role, the sizes of the
    ids that become storage keys, the size of the request's metadata, the message's other
    bounded fields (`bounded`: its proto-JSON or the part of it that is bounded), an inline
    push config's bounds. A value of the wrong type is skipped (the schema names it)."""
    violations: list[tuple[str, str]] = []
    if isinstance(role, Role) and role is not Role.USER:
        violations.append(("message.role", "must be ROLE_USER for messages sent to an agent"))
    for name, value in (
        ("message.messageId", message_id),
        ("message.contextId", context_id),
        ("message.taskId", task_id),
    ):
        if isinstance(value, str):
            try:
                check_id_size(name, value)
            except InvalidParamsError as refused:
                violations.extend(refused.violations)
    # It travels in the turn's execution input (Step Functions: 256 KB at most).
    if (
        isinstance(metadata, dict)
        and metadata
        and utf8_size(json.dumps(metadata)) > MAX_METADATA_BYTES
    ):
        violations.append(("metadata", f"must be at most {MAX_METADATA_BYTES} bytes as JSON"))
    if isinstance(bounded, dict):
        violations.extend(_message_bounds(bounded))
    violations.extend(config_violations(inline_push, f"{INLINE_PUSH_FIELD}."))
    return violations


def _message_bounds(message: dict[str, Any]) -> list[tuple[str, str]]:
    """The bounds of a message's lists and of its parts' file fields (see models/limits.py)."""
    found: list[tuple[str, str]] = []
    for name, most, each in (
        ("referenceTaskIds", MAX_REFERENCE_TASK_IDS, MAX_ID_BYTES),
        ("extensions", MAX_MESSAGE_EXTENSIONS, MAX_EXTENSION_URI_BYTES),
    ):
        values = message.get(name)
        if not isinstance(values, list):
            continue
        if len(values) > most:
            found.append((f"message.{name}", f"must have at most {most} entries"))
        found.extend(
            (f"message.{name}[{index}]", f"must be at most {each} bytes in UTF-8")
            for index, value in enumerate(values[:most])
            if isinstance(value, str) and utf8_size(value) > each
        )
    parts = message.get("parts")
    parts = parts if isinstance(parts, list) else []
    if len(parts) > MAX_MESSAGE_PARTS:
        found.append(("message.parts", f"must have at most {MAX_MESSAGE_PARTS} entries"))
    frame = {**message, "parts": [_without_content(part) for part in parts]}
    if utf8_size(json.dumps(frame, separators=(",", ":"), ensure_ascii=False)) > (
        MAX_MESSAGE_FRAME_BYTES
    ):
        found.append(
            (
                "message",
                f"must be at most {MAX_MESSAGE_FRAME_BYTES} bytes as JSON, not counting its "
                "parts' text, raw and data",
            )
        )
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        url = part.get("url")
        if isinstance(url, str) and url.startswith(REF_SCHEME):
            found.append(
                (
                    f"message.parts[{index}].url",
                    f"uses the scheme {REF_SCHEME}, which names content this agent stores",
                )
            )
        for name, bound in (
            ("url", MAX_PART_URL_BYTES),
            ("filename", MAX_PART_FILENAME_BYTES),
            ("mediaType", MAX_PART_MEDIA_TYPE_BYTES),
        ):
            value = part.get(name)
            if isinstance(value, str) and utf8_size(value) > bound:
                found.append(
                    (f"message.parts[{index}].{name}", f"must be at most {bound} bytes in UTF-8")
                )
    return found


def _without_content(part: Any) -> Any:
    """A part as its item holds it however large its content: text, raw and data left out."""
    if not isinstance(part, dict):
        return part
    return {name: value for name, value in part.items() if name not in ("text", "raw", "data")}


@functools.cache
def _role_adapter() -> TypeAdapter[Role]:
    return TypeAdapter(RoleField)


def request_violations(payload: Any) -> list[tuple[str, str]]:
    """`_validate`'s field checks on a raw (proto-JSON) SendMessageRequest that its schema
    refused: a binding merges them into the schema's violations, so one refusal names every
    field, whichever check finds it."""
    if not isinstance(payload, dict):
        return []
    message = payload.get("message")
    if not isinstance(message, dict):
        message = {}
    try:
        role: Role | None = _role_adapter().validate_python(message.get("role"))
    except ValidationError:
        role = None  # missing or not a role: the schema says so
    configuration = payload.get("configuration")
    return _field_violations(
        role,
        message.get("messageId"),
        message.get("contextId"),
        message.get("taskId"),
        payload.get("metadata"),
        message,
        configuration.get("taskPushNotificationConfig")
        if isinstance(configuration, dict)
        else None,
    )


def _not_accepting(record: TaskRecord) -> UnsupportedOperationError:
    if record.state in TERMINAL_STATES:
        return UnsupportedOperationError(
            f"Task {record.task_id} is {record.state.value}, a terminal state; it cannot "
            "accept further messages. Send without taskId to start a new task.",
            taskId=record.task_id,
        )
    return UnsupportedOperationError(
        f"Task {record.task_id} is {record.state.value}; it accepts a message when it "
        "is TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED. Wait, or cancel it.",
        taskId=record.task_id,
    )
