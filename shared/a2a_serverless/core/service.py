"""The A2A operations. Bindings translate requests into these calls and errors back out."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field

from a2a_serverless.core.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    invalid_field,
)
from a2a_serverless.core.executor import Executor, execution_name
from a2a_serverless.core.push import PushService
from a2a_serverless.core.tail import LogTail, PollPolicy, SettleWait
from a2a_serverless.core.tasklog import StateMoved, status_event, transition
from a2a_serverless.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    ListTasksRequest,
    ListTasksResponse,
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
    utcnow,
)
from a2a_serverless.observability import annotate, task_ended
from a2a_serverless.store import (
    ConflictError,
    Dedupe,
    ListQuery,
    TaskRecord,
    TaskSnapshot,
    TaskStore,
)

MAX_ID_LENGTH = 256
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
_RETRY = -1  # seq marker: this send is a retry of an earlier one


@dataclass(frozen=True)
class WaitPolicy:
    """How blocking calls and streams tail the event log."""

    max_wait_seconds: float = 120.0
    poll: PollPolicy = field(default_factory=PollPolicy)
    stream_max_seconds: float = 840.0
    heartbeat_seconds: float = 15.0


@dataclass
class ModePolicy:
    """Media types the flow accepts and produces (from the flow / Agent Card)."""

    input_modes: list[str] = field(default_factory=lambda: ["text/plain"])
    output_modes: list[str] = field(default_factory=lambda: ["text/plain"])


def _media_match(offered: str, accepted: str) -> bool:
    offered_type, _, offered_sub = offered.lower().split(";")[0].strip().partition("/")
    accepted_type, _, accepted_sub = accepted.lower().split(";")[0].strip().partition("/")
    return (accepted_type in ("*", offered_type) or offered_type == "*") and (
        accepted_sub in ("*", offered_sub) or offered_sub == "*"
    )


def content_hash(message: Message) -> str:
    canonical = json.dumps(message.wire(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def encode_cursor(cursor: dict[str, str]) -> str:
    raw = json.dumps(cursor, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> dict[str, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        cursor = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise invalid_field("pageToken", "is not a token issued by this server") from None
    if (
        not isinstance(cursor, dict)
        or set(cursor) != {"k", "id"}
        or not all(isinstance(v, str) and 0 < len(v) <= 512 for v in cursor.values())
    ):
        raise invalid_field("pageToken", "is not a token issued by this server")
    return cursor


@dataclass(frozen=True)
class StreamStart:
    """Where a stream begins: its first event (a Task as of `after_seq`) and whether the log
    should be tailed after it (not when the task is already terminal or interrupted)."""

    first: StreamResponse
    task_id: str
    after_seq: int
    open: bool


@dataclass(frozen=True)
class AcceptedSend:
    """A message SendMessage accepted: where its wait starts (the status event at
    `after_seq`), whether the caller asked to wait, and the answer when it is already known."""

    owner: str
    task_id: str
    after_seq: int
    history_length: int | None
    blocking: bool
    answer: SendMessageResponse | None = None


@dataclass
class _Created:
    """A task this send created (or, with seq _RETRY, the task it is a retry of)."""

    record: TaskRecord
    message: Message
    seq: int

    def view(self, history_length: int | None) -> Task:
        return Task(
            id=self.record.task_id,
            context_id=self.record.context_id,
            status=self.record.status,
            history=[self.message] if history_length != 0 else None,
            metadata=self.record.metadata or None,
        )


class A2AService:
    """Send, get, list and cancel, scoped to the calling owner."""

    def __init__(
        self,
        store: TaskStore,
        executor: Executor,
        modes: ModePolicy | None = None,
        wait: WaitPolicy | None = None,
        push: PushService | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.modes = modes or ModePolicy()
        self.wait = wait or WaitPolicy()
        self.push = push

    # -- SendMessage -----------------------------------------------------------------------

    def send_message(self, owner: str, request: SendMessageRequest) -> SendMessageResponse:
        """Accept the message, wait (unless told not to) and answer with the task."""
        accepted = self.accept_message(owner, request)
        if accepted.blocking:
            wait = self.settle_wait(accepted)
            while not wait.step():
                time.sleep(wait.pause())
        return self.answer(accepted)

    def accept_message(self, owner: str, request: SendMessageRequest) -> AcceptedSend:
        """SendMessage up to its wait: validate, create or continue the task, start the turn.

        Every refusal is raised here, before any waiting; the caller then waits with
        `settle_wait` (as it likes: blocking, or awaiting between reads) and calls `answer`.
        """
        message = request.message
        config = request.configuration or SendMessageConfiguration()
        self._validate_send(message, config)
        dedupe = Dedupe(owner, message.message_id, content_hash(message))
        if message.task_id:
            task_id, seq = self._continue_task(owner, message, dedupe, config)
        else:
            created = self._create_task(owner, message, dedupe, request)
            task_id, seq = created.record.task_id, created.seq
            if config.return_immediately and seq != _RETRY:
                # Everything the answer holds was just written: no need to read it back.
                answer = SendMessageResponse(task=created.view(config.history_length))
                return AcceptedSend(
                    owner, task_id, seq, config.history_length, blocking=False, answer=answer
                )
        if not config.return_immediately and seq == _RETRY:
            original = self.store.get_record(task_id)
            seq = original.status_seq if original else 0
        return AcceptedSend(
            owner, task_id, seq, config.history_length, blocking=not config.return_immediately
        )

    def settle_wait(self, accepted: AcceptedSend) -> SettleWait:
        """The wait of a blocking send: its log from the accepted status on, up to the limit."""
        tail = LogTail(self.store, accepted.task_id, max(0, accepted.after_seq - 1), self.wait.poll)
        return SettleWait(tail, self.wait.max_wait_seconds)

    def answer(self, accepted: AcceptedSend) -> SendMessageResponse:
        """The SendMessage response once the wait is over (or was not asked for)."""
        if accepted.answer is not None:
            return accepted.answer
        return SendMessageResponse(
            task=self.get_task(accepted.owner, accepted.task_id, accepted.history_length)
        )

    def _validate_send(self, message: Message, config: SendMessageConfiguration) -> None:
        if message.role is not Role.USER:
            raise invalid_field("message.role", "must be ROLE_USER for messages sent to an agent")
        for name, value in (
            ("message.messageId", message.message_id),
            ("message.contextId", message.context_id),
            ("message.taskId", message.task_id),
        ):
            if value is not None and len(value) > MAX_ID_LENGTH:
                raise invalid_field(name, f"must be at most {MAX_ID_LENGTH} characters")
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

    def _retried(self, owner: str, message: Message, dedupe: Dedupe) -> str | None:
        """The task an identical earlier send created, if this send is a retry."""
        found = self.store.find_dedupe(owner, message.message_id)
        if found is not None and found[1] == dedupe.content_hash:
            return found[0]
        return None

    def _create_task(
        self, owner: str, message: Message, dedupe: Dedupe, request: SendMessageRequest
    ) -> _Created:
        task_id = str(uuid.uuid4())
        context_id = message.context_id or str(uuid.uuid4())
        push_config = self._inline_push(request.configuration, task_id)
        stored = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        status = TaskStatus(state=TaskState.SUBMITTED, timestamp=utcnow())
        record = TaskRecord(
            task_id=task_id,
            context_id=context_id,
            owner=owner,
            state=TaskState.SUBMITTED,
            status=status,
            status_seq=1,
            turn=1,
            execution=execution_name(task_id, 1),
            metadata=request.metadata or None,
        )
        annotate(task_id=task_id, context_id=context_id)
        try:
            self.store.create_task(
                record, stored, status_event(record, status), dedupe, push_config
            )
        except ConflictError as conflict:
            if "dedupe" not in conflict.failed:
                raise
            original = self._retried(owner, message, dedupe)
            if original is not None:
                record.task_id = original
                return _Created(record, stored, _RETRY)
            # Same messageId, different content: a new message, processed normally.
            self.store.create_task(record, stored, status_event(record, status), None, push_config)
        self._start(record, 1)
        return _Created(record, stored, 1)

    def _inline_push(
        self, config: SendMessageConfiguration | None, task_id: str
    ) -> TaskPushNotificationConfig | None:
        inline = config.task_push_notification_config if config else None
        if inline is None:
            return None
        return self._push().prepared(inline, task_id, "configuration.taskPushNotificationConfig")

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
        dedupe: Dedupe,
        config: SendMessageConfiguration | None = None,
    ) -> tuple[str, int]:
        record = self._load(owner, message.task_id or "")
        if message.context_id and message.context_id != record.context_id:
            raise invalid_field(
                "message.contextId",
                f"does not match the contextId of task {record.task_id}",
            )
        if record.state in TERMINAL_STATES:
            original = self._retried(owner, message, dedupe)
            if original is not None:
                return original, _RETRY
            raise UnsupportedOperationError(
                f"Task {record.task_id} is {record.state.value}, a terminal state; it cannot "
                "accept further messages. Send without taskId to start a new task.",
                taskId=record.task_id,
            )
        if record.state not in INTERRUPTED_STATES:
            original = self._retried(owner, message, dedupe)
            if original is not None:
                return original, _RETRY
            raise UnsupportedOperationError(
                f"Task {record.task_id} is {record.state.value}; it accepts a message when it "
                "is TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED. Wait, or cancel it.",
                taskId=record.task_id,
            )
        stored = message.model_copy(update={"context_id": record.context_id})
        # Written with the turn's first event (same transaction): a refused or retried message
        # leaves no webhook behind.
        push_config = self._inline_push(config, record.task_id)
        turn = record.turn + 1
        try:
            _, seq = transition(
                self.store,
                record,
                TaskState.SUBMITTED,
                turn=turn,
                execution=execution_name(record.task_id, turn),
                user_message=stored,
                dedupe=dedupe,
                push_config=push_config,
            )
        except StateMoved as moved:
            original = self._retried(owner, message, dedupe)
            if original is not None:
                return original, _RETRY
            if moved.record is not None and moved.record.state not in INTERRUPTED_STATES:
                raise UnsupportedOperationError(
                    f"Task {record.task_id} moved to {moved.record.state.value} while this "
                    "message was being accepted",
                    taskId=record.task_id,
                ) from None
            # Same messageId reused with other content: accept it without the retry record.
            fresh = moved.record or record
            _, seq = transition(
                self.store,
                fresh,
                TaskState.SUBMITTED,
                turn=fresh.turn + 1,
                execution=execution_name(fresh.task_id, fresh.turn + 1),
                user_message=stored,
                push_config=push_config,
            )
            turn = fresh.turn + 1
        record.turn = turn
        self._start(record, turn)
        return record.task_id, seq

    def _start(self, record: TaskRecord, turn: int) -> None:
        try:
            self.executor.start(record.task_id, turn)
        except Exception:
            # The turn cannot run: end the task failed rather than leave it submitted.
            fresh = self.store.get_record(record.task_id)
            if fresh is not None and fresh.state not in TERMINAL_STATES:
                from a2a_serverless.flows.base import agent_message

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

    # -- SendStreamingMessage / SubscribeToTask ----------------------------------------------

    def open_message_stream(self, owner: str, request: SendMessageRequest) -> StreamStart:
        """Accept a message like SendMessage (never blocking) and say where its stream starts.

        The first event is the task as of seq S; the stream continues with the log after S.
        """
        message = request.message
        config = request.configuration or SendMessageConfiguration()
        self._validate_send(message, config)
        dedupe = Dedupe(owner, message.message_id, content_hash(message))
        if not message.task_id:
            created = self._create_task(owner, message, dedupe, request)
            if created.seq != _RETRY:
                return StreamStart(
                    StreamResponse(task=created.view(config.history_length)),
                    created.record.task_id,
                    created.seq,
                    open=True,
                )
            task_id = created.record.task_id
        else:
            task_id, _ = self._continue_task(owner, message, dedupe, config)
        return self._snapshot_start(owner, task_id, config.history_length)

    def subscribe(self, owner: str, task_id: str) -> StreamStart:
        start = self._snapshot_start(owner, task_id, None)
        task = start.first.task
        if task is not None and task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(
                f"Task {task_id} is {task.status.state.value}, a terminal state; there is "
                "nothing to subscribe to. Use GetTask to read it.",
                taskId=task_id,
            )
        return start

    def _snapshot_start(self, owner: str, task_id: str, history_length: int | None) -> StreamStart:
        if not task_id or len(task_id) > MAX_ID_LENGTH:
            raise TaskNotFoundError(taskId=task_id[:MAX_ID_LENGTH] or None)
        snapshot = self.store.get_snapshot(task_id, history_length)
        if snapshot is None or snapshot.record.owner != owner:
            raise TaskNotFoundError(taskId=task_id)
        annotate(task_id=task_id, context_id=snapshot.record.context_id)
        task = self._task_from(snapshot)
        return StreamStart(
            StreamResponse(task=task),
            task_id,
            snapshot.seq,
            open=task.status.state not in (TERMINAL_STATES | INTERRUPTED_STATES),
        )

    def tail(self, start: StreamStart) -> LogTail:
        return LogTail(self.store, start.task_id, start.after_seq, self.wait.poll)

    # -- GetTask / ListTasks / CancelTask ----------------------------------------------------

    def _load(self, owner: str, task_id: str) -> TaskRecord:
        if not task_id or len(task_id) > MAX_ID_LENGTH:
            raise TaskNotFoundError(taskId=task_id[:MAX_ID_LENGTH] or None)
        record = self.store.get_record(task_id)
        if record is None or record.owner != owner:
            raise TaskNotFoundError(taskId=task_id)
        annotate(task_id=task_id, context_id=record.context_id)
        return record

    def get_task(self, owner: str, task_id: str, history_length: int | None = None) -> Task:
        if history_length is not None and history_length < 0:
            raise invalid_field("historyLength", "must be zero or positive")
        if not task_id or len(task_id) > MAX_ID_LENGTH:
            raise TaskNotFoundError(taskId=task_id[:MAX_ID_LENGTH] or None)
        snapshot = self.store.get_snapshot(task_id, history_length)
        if snapshot is None or snapshot.record.owner != owner:
            raise TaskNotFoundError(taskId=task_id)
        return self._task_from(snapshot)

    @staticmethod
    def _task_from(snapshot: TaskSnapshot) -> Task:
        record = snapshot.record
        return Task(
            id=record.task_id,
            context_id=record.context_id,
            status=snapshot.status,
            artifacts=snapshot.artifacts or None,
            history=snapshot.history or None,
            metadata=record.metadata or None,
        )

    def list_tasks(self, owner: str, params: ListTasksRequest) -> ListTasksResponse:
        page_size = DEFAULT_PAGE_SIZE if params.page_size is None else params.page_size
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise invalid_field("pageSize", f"must be between 1 and {MAX_PAGE_SIZE}")
        if params.history_length is not None and params.history_length < 0:
            raise invalid_field("historyLength", "must be zero or positive")
        if params.status is TaskState.UNSPECIFIED:
            raise invalid_field("status", "TASK_STATE_UNSPECIFIED is not a filter")
        if params.context_id is not None and len(params.context_id) > MAX_ID_LENGTH:
            raise invalid_field("contextId", f"must be at most {MAX_ID_LENGTH} characters")
        cursor = decode_cursor(params.page_token) if params.page_token else None
        query = ListQuery(
            owner=owner,
            context_id=params.context_id or None,
            state=params.status,
            status_after=params.status_timestamp_after,
            page_size=page_size,
            cursor=cursor,
        )
        records, next_cursor = self.store.list_tasks(query)
        total = self.store.count_tasks(query)
        tasks = []
        for record in records:
            history = (
                self.store.read_history(record.task_id, params.history_length)
                if params.history_length
                else []
            )
            artifacts = (
                self.store.read_artifacts(record.task_id) if params.include_artifacts else None
            )
            tasks.append(
                Task(
                    id=record.task_id,
                    context_id=record.context_id,
                    status=record.status,
                    artifacts=artifacts or None,
                    history=history or None,
                    metadata=record.metadata or None,
                )
            )
        return ListTasksResponse(
            tasks=tasks,
            next_page_token=encode_cursor(next_cursor) if next_cursor else "",
            page_size=page_size,
            total_size=total,
        )

    def cancel_task(self, owner: str, task_id: str) -> Task:
        record = self._load(owner, task_id)
        while True:
            if record.state in TERMINAL_STATES:
                raise TaskNotCancelableError(
                    f"Task {task_id} is already {record.state.value} and cannot be canceled",
                    taskId=task_id,
                    state=record.state.value,
                )
            try:
                transition(
                    self.store,
                    record,
                    TaskState.CANCELED,
                    seq=self.store.last_seq(task_id) + 1,
                )
                task_ended(TaskState.CANCELED.value)
                break
            except StateMoved as moved:
                if moved.record is None:
                    raise TaskNotFoundError(taskId=task_id) from None
                record = moved.record
        if record.execution:
            try:
                self.executor.stop(record.execution, "Canceled by the client")
            except Exception:  # the flow also sees the canceled state and stops by itself
                pass
        return self.get_task(owner, task_id)


def ensure_valid_int(name: str, value: str | None) -> int | None:
    """Parse an integer query parameter, naming it when it is not one."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidParamsError(violations=[(name, "must be an integer")]) from None
