"""What the inspector's pages show, read from a running local stack: plain functions over its
table, state machines and records (local/inspector/records.py).

Every function takes the started `LocalStack` first and reads through the stack's own store
and clients (this process's moto). Values are returned as they are stored: the pages escape.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from a2a_serverless.local.inspector.records import Delivery, FlowStateRecord
from a2a_serverless.models import Message, Part, StreamResponse, TaskState, format_timestamp
from a2a_serverless.store.base import InvalidPageToken, TaskRecord

EVENTS_PAGE = 100  # events read per call of the store


@dataclass(frozen=True)
class TaskRow:
    """One row of the tasks list."""

    task_id: str
    owner: str
    context_id: str
    state: str  # the TaskState value, e.g. TASK_STATE_COMPLETED
    updated: str  # the current status's timestamp


@dataclass(frozen=True)
class TaskPage:
    rows: list[TaskRow]
    next_page_token: str | None


@dataclass(frozen=True)
class EventView:
    """One event of the log (`seq`), or one history message (`seq` None, kind "message")."""

    seq: int | None
    kind: str  # status | artifact | message | task
    state: str | None  # status events: the TaskState value
    text: str  # the text parts joined
    raw: str  # the event's JSON as stored
    writer: str = ""  # the writer id ("{turn}.{step}.{position}" for a flow's events)
    role: str | None = None  # messages: ROLE_USER / ROLE_AGENT


@dataclass(frozen=True)
class ExecutionView:
    """A Step Functions execution of the task (either state machine)."""

    name: str
    machine: str  # the state machine's name
    status: str  # RUNNING | SUCCEEDED | FAILED | TIMED_OUT | ABORTED
    start: str
    stop: str | None
    arn: str
    turn: int | None  # from the name: {taskId}-{turn}[-{step}|-{action}]
    step: int | None


@dataclass
class StepView:
    step: int
    executions: list[str] = field(default_factory=list)  # execution names
    events: list[int] = field(default_factory=list)  # seqs the step wrote


@dataclass
class TurnView:
    turn: int
    steps: list[StepView] = field(default_factory=list)


@dataclass(frozen=True)
class PushConfigView:
    config_id: str
    url: str
    parked: bool
    payload_version: str


@dataclass(frozen=True)
class TaskView:
    """Everything the task page shows."""

    task_id: str
    owner: str
    context_id: str
    state: str
    updated: str
    turn: int
    flow_step: tuple[int, int] | None  # the last (turn, step) whose outcome was saved
    task: dict[str, Any]  # the snapshot's Task as wire JSON (status, artifacts, history)
    events: list[EventView]
    history: list[EventView]
    last_seq: int
    turns: list[TurnView]
    executions: list[ExecutionView]
    push_configs: list[PushConfigView]
    deliveries: list[Delivery]
    flow_states: list[FlowStateRecord]


# -- pure helpers -------------------------------------------------------------------------------


def parse_status(value: str | None) -> TaskState | None:
    """A status filter: a TaskState value (TASK_STATE_COMPLETED) or its short spelling
    (completed, input-required); None or "" for none. ValueError for anything else."""
    if not value:
        return None
    for state in TaskState:
        if value in (state.value, state.short):
            return state
    raise ValueError(f"unknown task state: {value!r}")


def encode_token(updated: str, task_id: str) -> str:
    """The opaque token of the page after the row (updated, task_id)."""
    return base64.urlsafe_b64encode(json.dumps([updated, task_id]).encode()).decode()


def decode_token(token: str) -> tuple[str, str]:
    """(updated, task_id) of a token from `encode_token`; InvalidPageToken otherwise."""
    try:
        value = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, ValueError, UnicodeError) as exc:
        raise InvalidPageToken("not a page token of the inspector") from exc
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise InvalidPageToken("not a page token of the inspector")
    return value[0], value[1]


def row_of(record: TaskRecord) -> TaskRow:
    at = record.status.timestamp
    updated = format_timestamp(at) if at is not None else record.created_at
    return TaskRow(record.task_id, record.owner, record.context_id, record.state.value, updated)


def page_of(
    rows: Iterable[TaskRow],
    owner: str | None = None,
    context_id: str | None = None,
    status: TaskState | None = None,
    page_token: str | None = None,
    page_size: int = 25,
) -> TaskPage:
    """Rows filtered, newest status first (then by task id, descending), one page of them
    after `page_token`'s row."""
    if page_size < 1:
        raise ValueError("page_size must be at least 1")
    kept = [
        row
        for row in rows
        if (owner is None or row.owner == owner)
        and (not context_id or row.context_id == context_id)
        and (status is None or row.state == status.value)
    ]
    kept.sort(key=lambda row: (row.updated, row.task_id), reverse=True)
    if page_token:
        after = decode_token(page_token)
        kept = [row for row in kept if (row.updated, row.task_id) < after]
    page = kept[:page_size]
    more = len(kept) > page_size
    token = encode_token(page[-1].updated, page[-1].task_id) if more else None
    return TaskPage(page, token)


def _text(parts: Iterable[Part] | None) -> str:
    return "".join(part.text for part in parts or () if part.text is not None)


def event_view(seq: int | None, event: StreamResponse, raw: str, writer: str = "") -> EventView:
    """What the timeline shows of one event."""
    if event.status_update is not None:
        status = event.status_update.status
        text = _text(status.message.parts) if status.message else ""
        return EventView(seq, "status", status.state.value, text, raw, writer)
    if event.artifact_update is not None:
        return EventView(
            seq, "artifact", None, _text(event.artifact_update.artifact.parts), raw, writer
        )
    if event.message is not None:
        return message_view(event.message, seq, raw, writer)
    task = event.task
    state = task.status.state.value if task is not None else None
    text = _text(task.status.message.parts) if task and task.status.message else ""
    return EventView(seq, "task", state, text, raw, writer)


def message_view(
    message: Message, seq: int | None = None, raw: str | None = None, writer: str = ""
) -> EventView:
    raw = raw if raw is not None else json.dumps(message.wire())
    role = message.wire().get("role")
    return EventView(seq, "message", None, _text(message.parts), raw, writer, role)


def execution_place(task_id: str, name: str) -> tuple[int | None, int | None]:
    """(turn, step) an execution's name says: `{taskId}-{turn}` is step 0,
    `{taskId}-{turn}-{step}` that step, `{taskId}-{turn}-{action}` the turn only; other
    names (a delegation's wait) neither."""
    parts = name.removeprefix(f"{task_id}-").split("-")
    if not parts or not parts[0].isdigit():
        return None, None
    turn = int(parts[0])
    if len(parts) == 1:
        return turn, 0
    return turn, int(parts[1]) if parts[1].isdigit() else None


def writer_place(writer: str) -> tuple[int, int] | None:
    """(turn, step) of a flow's event writer id `{turn}.{step}.{position}`."""
    parts = writer.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def turns_of(
    flow_step: tuple[int, int] | None,
    events: Iterable[EventView],
    executions: Iterable[ExecutionView],
) -> list[TurnView]:
    """The turns and steps a task went through, from the header's last saved step, the
    events' writer ids and the executions' names; in order."""
    steps: dict[tuple[int, int], StepView] = {}

    def step(turn: int, number: int) -> StepView:
        return steps.setdefault((turn, number), StepView(number))

    if flow_step is not None:
        for number in range(flow_step[1] + 1):
            step(flow_step[0], number)
    for event in events:
        place = writer_place(event.writer)
        if place is not None and event.seq is not None:
            step(*place).events.append(event.seq)
    for execution in executions:
        if execution.turn is not None and execution.step is not None:
            step(execution.turn, execution.step).executions.append(execution.name)
    turns: dict[int, TurnView] = {}
    for (turn, _), view in sorted(steps.items()):
        turns.setdefault(turn, TurnView(turn)).steps.append(view)
    return list(turns.values())


# -- reads of the stack -----------------------------------------------------------------------


def _store() -> Any:
    from a2a_serverless import wiring

    return wiring.get_store()


# (stack id, service) -> client: made once per stack (a client costs more than a call).
_CLIENTS: dict[tuple[str, str], Any] = {}


def _client(stack: Any, service: str) -> Any:
    from a2a_serverless.local import resources

    key = (str(getattr(stack, "stack_id", "")), service)
    found = _CLIENTS.get(key)
    if found is None:
        if any(k[0] != key[0] for k in _CLIENTS):  # another stack's: done with
            _CLIENTS.clear()
        found = _CLIENTS[key] = resources.client(service)
    return found


def _table() -> str:
    from a2a_serverless import wiring

    return wiring.get_settings().table_name


def _headers(stack: Any) -> Iterable[dict[str, Any]]:
    """Every task header item of the table (a scan: the local table is small)."""
    pages = (
        _client(stack, "dynamodb")
        .get_paginator("scan")
        .paginate(
            TableName=_table(),
            FilterExpression="sk = :h AND begins_with(pk, :t)",
            ExpressionAttributeValues={":h": {"S": "H"}, ":t": {"S": "T#"}},
        )
    )
    for page in pages:
        yield from page.get("Items", [])


def list_tasks(
    stack: Any,
    owner: str | None = None,
    context_id: str | None = None,
    status: str | None = None,
    page_token: str | None = None,
    page_size: int = 25,
) -> TaskPage:
    """Every task of the table, or only `owner`'s; newest status first, filtered by context
    and status (`parse_status`), one page after `page_token` (InvalidPageToken for another)."""
    from a2a_serverless.store.dynamodb import keys

    state = parse_status(status)
    rows = (row_of(keys.record_of(item)) for item in _headers(stack))
    return page_of(rows, owner, context_id, state, page_token, page_size)


def _raw_events(stack: Any, task_id: str, after_seq: int) -> dict[int, tuple[str, str]]:
    """seq -> (stored JSON, writer id) of the task's event items after `after_seq`."""
    from a2a_serverless.store.dynamodb import keys

    pages = (
        _client(stack, "dynamodb")
        .get_paginator("query")
        .paginate(
            TableName=_table(),
            KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :to",
            ExpressionAttributeValues={
                ":pk": keys.task_pk(task_id),
                ":from": {"S": keys.event_sk(after_seq + 1)},
                ":to": {"S": keys.event_sk(keys.LAST_SEQ)},
            },
            ConsistentRead=True,
        )
    )
    found: dict[int, tuple[str, str]] = {}
    for page in pages:
        for item in page.get("Items", []):
            found[keys.seq_of(item)] = (item[keys.EVENT_JSON]["S"], keys.event_id_of(item))
    return found


def events_after(stack: Any, task_id: str, seq: int = 0) -> list[EventView]:
    """The task's events after `seq`, in order, each with its stored JSON (the first events,
    which the task header may stand for, as the store reads them)."""
    store = _store()
    events: list[tuple[int, StreamResponse]] = []
    after = seq
    while True:
        page = store.read_events(task_id, after, EVENTS_PAGE)
        events += page
        if len(page) < EVENTS_PAGE:
            break
        after = page[-1][0]
    raw = _raw_events(stack, task_id, seq) if events else {}
    views = []
    for number, event in events:
        stored, writer = raw.get(number, (json.dumps(event.wire()), ""))
        views.append(event_view(number, event, stored, writer))
    return views


def executions_of(stack: Any, task_id: str) -> list[ExecutionView]:
    """The task's executions on every state machine of the stack (their names start with
    the task id), oldest first."""
    sfn = _client(stack, "stepfunctions")
    found: list[ExecutionView] = []
    for machine in sfn.list_state_machines()["stateMachines"]:
        pages = sfn.get_paginator("list_executions").paginate(
            stateMachineArn=machine["stateMachineArn"]
        )
        for page in pages:
            for execution in page["executions"]:
                name = execution["name"]
                if name != task_id and not name.startswith(f"{task_id}-"):
                    continue
                stop = execution.get("stopDate")
                found.append(
                    ExecutionView(
                        name=name,
                        machine=machine["name"],
                        status=execution["status"],
                        start=execution["startDate"].isoformat(),
                        stop=stop.isoformat() if stop is not None else None,
                        arn=execution["executionArn"],
                        turn=execution_place(task_id, name)[0],
                        step=execution_place(task_id, name)[1],
                    )
                )
    found.sort(key=lambda e: (e.start, e.name))
    return found


def task_ended(stack: Any, task_id: str) -> bool:
    """Whether the task is in a terminal state (its event log is complete), or gone."""
    from a2a_serverless.models import TERMINAL_STATES

    record = _store().get_record(task_id)
    return record is None or record.state in TERMINAL_STATES


def history_after(stack: Any, task_id: str, count: int) -> list[EventView]:
    """The task's history messages after its first `count`, in order."""
    store = _store()
    record = store.get_record(task_id)
    if record is None or record.history_count <= count:
        return []
    return [message_view(m) for m in store.read_history(task_id, record.history_count - count)]


def task_view(stack: Any, task_id: str, owner: str | None = None) -> TaskView | None:
    """The task page's content; None when there is no such task, or `owner` is given and the
    task is another owner's."""
    store = _store()
    snapshot = store.get_snapshot(task_id, None)
    if snapshot is None:
        return None
    record = snapshot.record
    if owner is not None and record.owner != owner:
        return None
    events = events_after(stack, task_id, 0)
    executions = executions_of(stack, task_id)
    task = {
        "id": task_id,
        "contextId": record.context_id,
        "status": snapshot.status.wire(),
        "artifacts": [a.wire() for a in snapshot.artifacts],
        "history": [m.wire() for m in snapshot.history],
    }
    configs = [
        PushConfigView(config.id or "", config.url, parked, config.payload_version)
        for config, parked in store.list_push_configs(task_id)
    ]
    records = getattr(stack, "records", None)
    row = row_of(record)
    return TaskView(
        task_id=task_id,
        owner=record.owner,
        context_id=record.context_id,
        state=row.state,
        updated=row.updated,
        turn=record.turn,
        flow_step=record.flow_step,
        task=task,
        events=events,
        history=[message_view(m) for m in snapshot.history],
        last_seq=max((e.seq or 0 for e in events), default=0),
        turns=turns_of(record.flow_step, events, executions),
        executions=executions,
        push_configs=configs,
        deliveries=records.deliveries(task_id) if records is not None else [],
        flow_states=records.flow_states(task_id) if records is not None else [],
    )
