"""Item sizes as DynamoDB counts them, and the bounds every write is held to before it is sent
(models/limits.py): the store refuses a value past its bound with TooLarge and calls nothing;
the flow worker ends such a step's turn FAILED naming the bound; the echo flow's state and the
emitter's text chunks stay within their bounds whatever they are given."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from a2a_serverless.core.tasklog import status_event
from a2a_serverless.flows import Outcome, StepContext
from a2a_serverless.flows.base import load_flow
from a2a_serverless.flows.echo import MAX_KEPT_CHARS, EchoFlow
from a2a_serverless.flows.emitter import MAX_PART_BYTES, _split_parts
from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.models import Message, Part, StreamResponse, TaskState, TaskStatus, limits
from a2a_serverless.store import StatusChange, TaskRecord, TooLarge
from a2a_serverless.store.dynamodb import keys, tasks
from a2a_serverless.store.dynamodb.tasks import DynamoDBTaskLog
from tests.fakes import InMemoryTaskStore
from tests.helpers import RecordingEmitter

# -- sizes --------------------------------------------------------------------------------------

# (item, its size by DynamoDB's rules: "DynamoDB item sizes and formats" in the developer guide)
KNOWN_SIZES: list[tuple[dict[str, Any], int]] = [
    ({"name": {"S": "café"}}, 4 + 5),  # UTF-8 bytes of name and value
    ({"n": {"N": "123"}}, 1 + 2 + 1),  # 1 byte per two digits, + 1
    ({"n": {"N": "1234"}}, 1 + 2 + 1),
    ({"b": {"B": b"\x00\x01\x02"}}, 1 + 3),  # the raw bytes, not their base64
    ({"t": {"BOOL": True}, "z": {"NULL": True}}, (1 + 1) + (1 + 1)),
    ({"e": {"M": {}}, "l": {"L": []}}, (1 + 3) + (1 + 3)),  # an empty map or list: 3
    # a map: 3 + per element 1 + its name and value; a list: 3 + per element 1 + its value
    (
        {"m": {"M": {"a": {"S": "xy"}, "b": {"L": [{"N": "1"}, {"BOOL": False}]}}}},
        1 + 3 + (1 + 1 + 2) + (1 + 1 + (3 + (1 + 2) + (1 + 1))),
    ),
    ({"ss": {"SS": ["ab", "é"]}}, 2 + 2 + 2),
    # A published example (the item of the ddbitemsizer README): 141 bytes.
    (
        {
            "itemType": {"S": "SLOT"},
            "id": {"S": "abc1231"},
            "hostName": {"S": "Harry Mason"},
            "timeSlot": {"S": "February 23, 1999"},
            "slotStatus": {"S": "OPEN"},
            "createdAt": {"S": "February 1, 1999"},
            "updatedAt": {"S": "February 1, 1999"},
            "expiresAt": {"N": "2099"},
        },
        141,
    ),
    # DynamoDB's limit, exactly: 400 KB of names and values.
    ({"pk": {"S": "T#x"}, "big": {"S": "🦊" * 102_398}}, limits.DYNAMODB_ITEM_BYTES),
]


@pytest.mark.parametrize(("item", "size"), KNOWN_SIZES)
def test_item_bytes_counts_as_dynamodb_does(item: dict[str, Any], size: int) -> None:
    assert keys.item_bytes(item) == size


def test_the_worst_header_and_transaction_fit_dynamodb() -> None:
    assert tasks.HEADER_BUDGET <= limits.MAX_ITEM_BYTES < limits.DYNAMODB_ITEM_BYTES
    assert tasks.TRANSACTION_BUDGET <= limits.DYNAMODB_TRANSACTION_BYTES
    assert max(tasks.SMALL_ITEMS.values()) <= 4096  # counters, retry records: fixed attributes
    assert limits.MAX_EVENT_BYTES + 2048 <= limits.MAX_ITEM_BYTES  # an event item's keys etc.


# -- the store, before it calls DynamoDB ----------------------------------------------------------


class Recorder:
    """A DynamoDB client that records every call (and answers nothing)."""

    class exceptions:  # botocore's spelling
        class ConditionalCheckFailedException(Exception):
            pass

        class TransactionCanceledException(Exception):
            pass

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> dict[str, Any]:
            self.calls.append((name, kwargs))
            return {}

        return call


def _record(**fields: Any) -> TaskRecord:
    status = TaskStatus(state=TaskState.SUBMITTED, timestamp="2026-01-01T00:00:00Z")
    values: dict[str, Any] = {
        "task_id": "t-1",
        "context_id": "c-1",
        "owner": "alice",
        "state": TaskState.SUBMITTED,
        "status": status,
        "status_seq": 1,
        "turn": 1,
        "execution": "t-1-1",
        **fields,
    }
    return TaskRecord(**values)


def _message(text: str, role: str = "ROLE_AGENT") -> Message:
    return Message.model_validate({"messageId": "m-1", "role": role, "parts": [{"text": text}]})


def _change(**fields: Any) -> StatusChange:
    record = _record(state=TaskState.WORKING)
    status = fields.pop("to_status", None) or TaskStatus(
        state=TaskState.COMPLETED, message=fields.pop("message", None)
    )
    values: dict[str, Any] = {
        "task_id": "t-1",
        "owner": "alice",
        "context_id": "c-1",
        "from_state": TaskState.WORKING,
        "to_status": status,
        "seq": 5,
        "turn": 1,
        "event": status_event(record, status),
        **fields,
    }
    return StatusChange(**values)


def _chunk(parts: list[Part], **fields: Any) -> StreamResponse:
    artifact = {"artifactId": "a", "parts": parts, **fields}
    update = {"taskId": "t-1", "contextId": "c-1", "artifact": artifact}
    return StreamResponse.model_validate({"artifactUpdate": update})


def test_a_flow_state_past_its_bound_is_refused_before_any_call() -> None:
    client = Recorder()
    store = DynamoDBTaskLog(client, "table")
    state = {"log": "x" * 70_000}
    with pytest.raises(TooLarge) as refused:
        store.save_flow_state("t-1", 1, state, 0)
    assert str(refused.value) == (
        "the flow state (ctx.state) as JSON is 70,010 bytes; "
        "the limit is 65,536 (MAX_FLOW_STATE_BYTES)"
    )
    with pytest.raises(TooLarge, match="MAX_FLOW_STATE_BYTES"):
        store.apply_status(_change(flow_state=state))
    store.save_flow_state("t-1", 1, {"log": "x" * (65_536 - 10)}, 0)  # at the bound: written
    assert [name for name, _ in client.calls] == ["update_item"]


def test_a_status_message_past_its_bound_is_refused_before_any_call() -> None:
    client = Recorder()
    with pytest.raises(TooLarge, match=r"the status message .* \(MAX_STATUS_MESSAGE_BYTES\)"):
        DynamoDBTaskLog(client, "table").apply_status(_change(message=_message("x" * 70_000)))
    assert client.calls == []


@pytest.mark.parametrize(
    "event",
    [
        _chunk([Part(text="x" * 400_000)]),
        _chunk([Part(text="x")], metadata={"blob": "m" * 400_000}),
    ],
)
def test_an_event_past_its_bound_is_refused_before_any_call(event: StreamResponse) -> None:
    client = Recorder()
    with pytest.raises(TooLarge, match=r"an artifact chunk as JSON .* \(MAX_EVENT_BYTES\)"):
        DynamoDBTaskLog(client, "table").append_event("t-1", 7, event, "1.0.3")
    assert client.calls == []


def test_every_header_attribute_is_in_the_header_budget() -> None:
    """The header a send creates and every attribute a later write sets are budgeted
    (`HEADER_FIELDS`): nothing unbudgeted accumulates in the header across turns."""
    client = Recorder()
    store = DynamoDBTaskLog(client, "table")
    record = _record(metadata={"k": "v"}, flow_state={"a": 1})
    store.create_task(
        record, _message("hi", "ROLE_USER"), status_event(record, record.status), None
    )
    store.apply_status(_change(flow_state={"a": 2}, history_message=_message("ok")))
    at = "2026-01-01T00:00:01.000Z"  # the first WORKING status: the header stands for it
    working = TaskStatus(state=TaskState.WORKING, timestamp=at)
    first_working = keys.working_event("t-1", "c-1", at)
    store.apply_status(
        _change(to_status=working, from_state=TaskState.SUBMITTED, seq=2, event=first_working)
    )
    store.apply_status(_change(execution="t-1-2"))
    store.save_flow_state("t-1", 1, {"a": 3}, 2)
    written: set[str] = set()
    for _, call in client.calls:
        items = call.get("TransactItems") or [{"Update": call}]
        for item in items:
            if "Put" in item and item["Put"]["Item"]["sk"]["S"] == keys.HEADER:
                written |= set(item["Put"]["Item"])
            update = item.get("Update", {})
            if update.get("Key", {}).get("sk", {}).get("S") == keys.HEADER:
                names = update.get("ExpressionAttributeNames", {})
                for target in re.findall(r"([#\w]+) = ", update["UpdateExpression"]):
                    written.add(names.get(target, target))
    assert {"flowState", "meta", keys.FIRST_MESSAGE, keys.WORKING_SEQ, tasks.FLOW_STEP} <= written
    assert written <= set(tasks.HEADER_FIELDS), written - set(tasks.HEADER_FIELDS)


# -- the flow worker ------------------------------------------------------------------------------


def too_much(ctx: StepContext) -> Outcome:
    ctx.artifact("before", artifact_id="a", last_chunk=True)
    raise TooLarge("an artifact chunk as JSON", 500_000, 389_120, "MAX_EVENT_BYTES")


def test_a_step_past_a_bound_ends_its_turn_failed_naming_it() -> None:
    store = InMemoryTaskStore()
    record = _record()
    store.create_task(
        record, _message("go", "ROLE_USER"), status_event(record, record.status), None
    )
    worker = FlowWorker(store, load_flow(f"{__name__}:too_much"))
    assert worker.handle({"taskId": "t-1", "turn": 1, "step": 0})["continue"] is False
    snapshot = store.get_snapshot("t-1", None)
    assert snapshot is not None and snapshot.status.state is TaskState.FAILED
    assert snapshot.status.message is not None
    assert snapshot.status.message.parts[0].text == (
        "Step 0 of turn 1 was stopped: an artifact chunk as JSON is 500,000 bytes; "
        "the limit is 389,120 (MAX_EVENT_BYTES)."
    )
    assert [a.artifact_id for a in snapshot.artifacts] == ["a"]


# -- the emitter and the echo flow ----------------------------------------------------------------


def test_text_that_escapes_long_is_split_within_the_part_bound() -> None:
    text = "\x01" * 70_000  # 6 bytes of JSON each
    groups = _split_parts([Part(text=text)])
    assert "".join(p.text or "" for g in groups for p in g) == text
    assert all(len(json.dumps(g[0].text, ensure_ascii=False)) <= MAX_PART_BYTES for g in groups)


def test_a_part_no_event_can_hold_is_refused_with_advice() -> None:
    with pytest.raises(TooLarge, match=r"MAX_EVENT_BYTES\); send large files as `url` parts"):
        _split_parts([Part(data={"d": "é" * 200_000})])


def _echo_step(state: dict[str, Any], text: str, step: int = 0) -> tuple[Outcome, RecordingEmitter]:
    emitted = RecordingEmitter()
    ctx = StepContext(
        task_id="t-1",
        context_id="c-1",
        turn=1,
        step=step,
        message=_message(text, "ROLE_USER"),
        history=[],
        state=state,
        emitter=emitted,
    )
    return EchoFlow().run_step(ctx), emitted


def test_echo_state_stays_bounded_over_a_long_conversation() -> None:
    state: dict[str, Any] = {}
    for turn in range(40):
        text = f"{turn}:" + "\x01🦊" * 50_000 + " [input]"
        outcome, _ = _echo_step(state, text)
        assert outcome.state is TaskState.INPUT_REQUIRED
        assert keys.utf8_size(keys.dumps(state)) <= limits.MAX_FLOW_STATE_BYTES
    assert len(state["original"]) == MAX_KEPT_CHARS and state["original"][0] == "…"
    outcome, emitted = _echo_step(state, "end")
    reply = "".join(p.text or "" for c in emitted.chunks for p in c.parts)
    assert outcome.state is TaskState.COMPLETED and reply.endswith("🦊 [input] + end")


def test_echo_steps_keep_a_count_not_the_reply() -> None:
    state: dict[str, Any] = {}
    text = "word " * 40_000 + "[steps=3]"
    replies = []
    for step in range(3):
        outcome, emitted = _echo_step(state, text, step)
        replies += [p.text or "" for c in emitted.chunks for p in c.parts]
        assert keys.utf8_size(keys.dumps(state)) < 100
    assert outcome.state is TaskState.COMPLETED
    assert "".join(replies) == f"Echo: {text}"
