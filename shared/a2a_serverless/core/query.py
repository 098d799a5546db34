"""The QUERY path of the A2A operations: GetTask, ListTasks, CancelTask and the snapshot a
stream (SubscribeToTask, or a streamed send) starts from. All scoped to the calling owner."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace

from a2a_serverless.core.content import ContentLinks, present, presenter
from a2a_serverless.core.errors import (
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    invalid_field,
)
from a2a_serverless.core.executor import Executor
from a2a_serverless.core.tail import SETTLED_STATES, LogTail, PollPolicy
from a2a_serverless.core.tasklog import StateMoved, transition
from a2a_serverless.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a_serverless.models.limits import MAX_PAGE_TOKEN_BYTES
from a2a_serverless.observability import annotate, task_ended
from a2a_serverless.settings import get_settings
from a2a_serverless.store import (
    MAX_ID_BYTES,
    MAX_OWNER_BYTES,
    InvalidPageToken,
    ListQuery,
    TaskRecord,
    TaskSnapshot,
    TaskStore,
    utf8_size,
)

logger = logging.getLogger(__name__)

# Ids become parts of storage keys, which DynamoDB bounds in bytes (store/dynamodb/keys.py).
# MAX_ID_LENGTH: an alias that tests import.
MAX_ID_LENGTH = MAX_ID_BYTES
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
# The rest of a ListTasks payload: nextPageToken, totalSize, pageSize, the Lambda proxy
# envelope (status, headers) around the body.
PAGE_ENVELOPE_BYTES = 4096


def require_task_id(task_id: str) -> None:
    """An empty or oversized id names no task: refuse it before any read."""
    if not task_id or utf8_size(task_id) > MAX_ID_BYTES:
        raise TaskNotFoundError(taskId=task_id[:MAX_ID_BYTES] or None)


def check_id_size(field: str, value: str | None) -> None:
    """A caller-chosen id that will be part of a storage key: refused before any write."""
    if value is not None and utf8_size(value) > MAX_ID_BYTES:
        raise invalid_field(field, f"must be at most {MAX_ID_BYTES} bytes in UTF-8")


def check_owner_size(owner: str) -> None:
    """Raise InvalidRequest (400, -32600) when the principal is past the key bound. Only operations
    that build keys from it (send, list) call this."""
    if utf8_size(owner) > MAX_OWNER_BYTES:
        raise InvalidRequestError(
            f"The authenticated principal is longer than {MAX_OWNER_BYTES} bytes in UTF-8: "
            "tasks cannot be scoped to it"
        )


def build_task(
    record: TaskRecord,
    status: TaskStatus | None = None,
    artifacts: list[Artifact] | None = None,
    history: list[Message] | None = None,
) -> Task:
    """The wire Task of a record (status from the record unless a later one is given)."""
    return Task(
        id=record.task_id,
        context_id=record.context_id,
        status=status or record.status,
        artifacts=artifacts or None,
        history=history or None,
        metadata=record.metadata or None,
    )


def task_from_snapshot(snapshot: TaskSnapshot) -> Task:
    return build_task(snapshot.record, snapshot.status, snapshot.artifacts, snapshot.history)


@dataclass(frozen=True)
class StreamStart:
    """Where a stream begins: its first event (a Task as of `after_seq`) and whether the log
    should be tailed after it (not when the task is already terminal or interrupted)."""

    first: StreamResponse
    task_id: str
    after_seq: int
    open: bool
    # Opened on an interrupted task (SubscribeToTask): stay open through the next turn.
    resume: bool = False


@dataclass(eq=False)
class TaskQueries:
    """Reads of the caller's tasks, and CancelTask (a read that may end the task).
    `max_response_bytes` is ListTasks' response budget (None: the setting
    LIST_MAX_RESPONSE_BYTES, read per call); `links` makes stored content's URLs
    (core/content.py; None: no content store)."""

    store: TaskStore
    executor: Executor
    poll: PollPolicy
    max_response_bytes: int | None = None
    links: ContentLinks | None = None

    def load(self, owner: str, task_id: str) -> TaskRecord:
        """The caller's task record; someone else's task does not exist for them."""
        require_task_id(task_id)
        record = self.store.get_record(task_id)
        if record is None or record.owner != owner:
            raise TaskNotFoundError(taskId=task_id)
        annotate(task_id=task_id, context_id=record.context_id)
        return record

    def _snapshot(self, owner: str, task_id: str, history_length: int | None) -> TaskSnapshot:
        require_task_id(task_id)
        snapshot = self.store.get_snapshot(task_id, history_length)
        if snapshot is None or snapshot.record.owner != owner:
            raise TaskNotFoundError(taskId=task_id)
        return snapshot

    def get_task(self, owner: str, task_id: str, history_length: int | None = None) -> Task:
        if history_length is not None and history_length < 0:
            raise invalid_field("historyLength", "must be zero or positive")
        return present(
            task_from_snapshot(self._snapshot(owner, task_id, history_length)), self.links
        )

    def snapshot_start(self, owner: str, task_id: str, history_length: int | None) -> StreamStart:
        """A stream's first event: the task folded at some seq, tailed after it if still live."""
        snapshot = self._snapshot(owner, task_id, history_length)
        annotate(task_id=task_id, context_id=snapshot.record.context_id)
        task = present(task_from_snapshot(snapshot), self.links)
        return StreamStart(
            StreamResponse(task=task),
            task_id,
            snapshot.seq,
            open=task.status.state not in SETTLED_STATES,
        )

    def subscribe(self, owner: str, task_id: str) -> StreamStart:
        start = self.snapshot_start(owner, task_id, None)
        task = start.first.task
        if task is not None and task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(
                f"Task {task_id} is {task.status.state.value}, a terminal state; there is "
                "nothing to subscribe to. Use GetTask to read it.",
                taskId=task_id,
            )
        if task is not None and task.status.state in INTERRUPTED_STATES:
            # Waiting for the client's reply: watch the turn that reply starts, too.
            return replace(start, open=True, resume=True)
        return start

    def tail(self, start: StreamStart) -> LogTail:
        return LogTail(self.store, start.task_id, start.after_seq, self.poll, presenter(self.links))

    def list_tasks(self, owner: str, params: ListTasksRequest) -> ListTasksResponse:
        page_size = DEFAULT_PAGE_SIZE if params.page_size is None else params.page_size
        check_owner_size(owner)
        _check_list_params(params, page_size)
        query = ListQuery(
            owner=owner,
            context_id=params.context_id or None,
            state=params.status,
            status_after=params.status_timestamp_after,
            page_size=page_size,
            page_token=params.page_token or None,
        )
        try:
            records, next_token = self.store.list_tasks(query)
        except InvalidPageToken:
            raise invalid_field("pageToken", "is not a token issued by this server") from None
        total = self.store.count_tasks(query)
        history_length = params.history_length or 0
        if params.include_artifacts or history_length:
            contents = self.store.read_listed(records, params.include_artifacts, history_length)
            tasks = [
                build_task(record, artifacts=c.artifacts, history=c.history)
                for record, c in zip(records, contents, strict=True)
            ]
        else:
            tasks = [build_task(record) for record in records]
        tasks = [present(task, self.links) for task in tasks]
        budget = (
            get_settings().list_max_response_bytes
            if self.max_response_bytes is None
            else self.max_response_bytes
        )
        kept = fit_page(tasks, budget)
        if len(kept) < len(tasks):  # ended early: the next page starts after the last kept
            next_token = records[len(kept) - 1].page_cursor
        return ListTasksResponse(
            tasks=kept,
            next_page_token=next_token or "",
            page_size=page_size,
            total_size=total,
        )

    def cancel_task(self, owner: str, task_id: str) -> Task:
        record = self.load(owner, task_id)
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
        # No StopExecution (EXPRESS has none): the running step sees the cancel on its next
        # write and stops, and no next step's execution starts (flows/runtime.py).
        if record.delegation_round is not None:
            self._cancel_delegations(record)
        return self.get_task(owner, task_id)

    def _cancel_delegations(self, record: TaskRecord) -> None:
        """The worker cancels the remote tasks this task delegated to (an execution of its
        own: the remote calls are the worker's). A failed start leaves them running: logged."""
        try:
            self.executor.start_action(record.task_id, record.turn, "cancel_delegations")
        except Exception as error:
            logger.warning(
                "the remote tasks of canceled task %s were not canceled: %s",
                record.task_id,
                type(error).__name__,
            )


def payload_size(task: Task) -> int:
    """The bytes a task adds to a buffered function's response: its JSON, which Lambda
    carries as a JSON string in the invoke payload (quotes and non-ASCII escaped again)."""
    body = json.dumps(task.wire(), separators=(",", ":"), ensure_ascii=False)
    return len(json.dumps(body))


def fit_page(tasks: list[Task], budget: int) -> list[Task]:
    """The longest head of the page whose payload stays within `budget` bytes, never empty (a
    buffered Lambda response over 6 MB fails). A first task too large alone is listed without
    its artifacts, then without its history."""
    kept: list[Task] = []
    used = PAGE_ENVELOPE_BYTES
    for task in tasks:
        size = payload_size(task)
        if used + size > budget:
            if not kept:
                slim = task.model_copy(update={"artifacts": None})
                if PAGE_ENVELOPE_BYTES + payload_size(slim) > budget:
                    slim = slim.model_copy(update={"history": None})
                kept.append(slim)
            break
        kept.append(task)
        used += size
    return kept


def _check_list_params(params: ListTasksRequest, page_size: int) -> None:
    """Refuse out-of-range ListTasks parameters (the page token is the store's to judge)."""
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise invalid_field("pageSize", f"must be between 1 and {MAX_PAGE_SIZE}")
    if params.history_length is not None and params.history_length < 0:
        raise invalid_field("historyLength", "must be zero or positive")
    if params.status is TaskState.UNSPECIFIED:
        raise invalid_field("status", "TASK_STATE_UNSPECIFIED is not a filter")
    check_id_size("contextId", params.context_id)
    # Decoded before it is judged: bounded first (the tokens issued are far smaller).
    if params.page_token and utf8_size(params.page_token) > MAX_PAGE_TOKEN_BYTES:
        raise invalid_field("pageToken", f"must be at most {MAX_PAGE_TOKEN_BYTES} bytes")
