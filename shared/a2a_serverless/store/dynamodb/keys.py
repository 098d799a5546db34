"""The table's item layout: keys, attribute names and item <-> model conversions.

Items of the single table (template.yaml `TasksTable`), partition / sort key:

- `T#{taskId}`: header `H`, events `E#{seq:010d}`, history `M#{n:06d}`, push configs
  `P#{configId}`; the header stands for the first events and a small first message
  (`header_events`, `with_first_message`). `T#{taskId}` / `Z`: expiry marker.
  Delegations `R#{turn:06d}.{step:06d}.{index:02d}` and their seen notifications
  `S#{turn:06d}.{step:06d}.{index:02d}#{sha256 of the digest}` (after the history, so reads
  of the header, events and history never read them).
- `O#{owner}`: ListTasks counters, `N#{shard}` per owner and `X#{contextId}` per context.
- `D#{owner}#{messageId}` / `D`: SendMessage retry record.
- `APIKEY#{keyId}` / `APIKEY` and `APIKEYS` / `{keyId}`: an API key and its listing copy.
- `L#{pool}` / `slot#{i:04d}`: a connection lease (store/dynamodb/leases.py).
- GSI `byOwner` (`g1pk` owner, `gsk` status time#taskId): an owner's tasks by status time.

Keys that join several parts escape each (`%` -> `%25`, `#` -> `%23`), so they never collide.
Every key fits DynamoDB's bounds under the `MAX_*_BYTES` limits (`KEY_BUDGETS`, checked at
import); `key_fits` lets a read with an oversized id answer "not found" without a call.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from a2a_serverless.models import (
    Message,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    format_timestamp,
    limits,
)
from a2a_serverless.models.limits import utf8_size
from a2a_serverless.store.base import (
    ApiKeyRecord,
    DelegationRecord,
    DelegationState,
    InvalidPageToken,
    ListQuery,
    TaskRecord,
    TooLarge,
    status_update,
)

TASK_PREFIX = "T#"
HEADER = "H"
EVENT_PREFIX = "E#"
HISTORY_PREFIX = "M#"
PUSH_PREFIX = "P#"
OWNER_PREFIX = "O#"
OWNER_SHARD_PREFIX = "N#"
CONTEXT_COUNTER_PREFIX = "X#"
DEDUPE_PREFIX = "D#"
DEDUPE_SK = "D"
API_KEY_PREFIX = "APIKEY#"
API_KEY_SK = "APIKEY"
API_KEY_LIST_PK = "APIKEYS"
DELEGATION_PREFIX = "R#"  # a delegation of a step to a remote agent (store/base.py)
SEEN_PREFIX = "S#"  # a remote notification a delegation applied
LEASE_PREFIX = "L#"  # a pool of connection leases (IAM: dynamodb:LeadingKeys "L#*")
LEASE_SLOT_PREFIX = "slot#"
LEASE_ID = "leaseId"
EXPIRED_SK = "Z"  # in a task partition whose header expired: its counters were decremented
EXPIRED_MARKER_SECONDS = 3 * 86400  # outlives the stream's 24 h retention (redeliveries)
# Counters expire this long after the tasks they count: TTL deletes items days late, in no
# order, and a task's removal must find its counters (a recreated one would start at -1).
COUNTER_TTL_MARGIN_SECONDS = 14 * 86400
OWNER_COUNTER_SHARDS = 8
# A context counter's floor (`context_since`): `since`, the first counted task's creation time;
# `sinceN`, tasks counted since; `gone`, tasks taken off (TTL); `all`, the count now.
CONTEXT_SINCE = "since"
CONTEXT_SINCE_COUNT = "sinceN"
CONTEXT_GONE = "gone"
LAST_SEQ = 9_999_999_999  # the largest seq an event sort key holds

INDEX_BY_OWNER = "byOwner"
INDEX_PARTITION = "g1pk"
INDEX_SORT = "gsk"

EVENT_JSON = "ev"  # an event item's StreamResponse wire JSON (what streams and webhooks carry)
# An event item's writer identity, `{turn}.{step}.{position}` for a flow step's events: a re-run
# of the step (Lambda retry, EXPRESS redelivery) recognises its own earlier writes by it.
EVENT_ID = "eid"
EXPIRES = "expiresAt"  # the table's TTL attribute
# On a task header: the content store's object holding the flow state, when it is stored there.
FLOW_STATE_REF = "flowStateRef"
# Events the header stands for (no item of their own). Only a task's first events: a Query
# reads the header last, so a header event must never follow an item event.
FIRST_EVENT = "e1"  # event 1 is the creation status: SUBMITTED at `createdAt`
WORKING_SEQ = "w1"  # event 2 is the first WORKING status ...
WORKING_AT = "w1at"  # ... at this time
FIRST_SEQ = 1
WORKING_EVENT_SEQ = 2
# On a task header: whether webhook configs may exist (set before the first config is written);
# the webhook sender queries configs only where it is not false (or absent).
HOOKS = "hooks"
# On a task header: its latest delegation round ("{turn}.{step}") and whether it waits on it.
DELEGATION_ROUND = "delegationRound"
WAITING = "waiting"
LAST_HEADER_EVENT_SEQ = WORKING_EVENT_SEQ  # a read from before this may need the header
# A small first history message lives in its header (no item, fewer write units), only while
# the header stays well under 1 KB, since every later header write is billed per KB of it.
FIRST_MESSAGE = "m1"
INLINE_HEADER_MAX_BYTES = 1024 - 256

PARTITION_KEY_MAX_BYTES = 2048  # DynamoDB's limits, table and GSI keys alike
SORT_KEY_MAX_BYTES = 1024
SEPARATOR = "#"
ESCAPE_GROWTH = 3  # escaping turns one byte (`#` or `%`) into three; other bytes stay
# Caller-chosen parts, in UTF-8 bytes (the core refuses longer ones before any write):
MAX_ID_BYTES = limits.MAX_ID_BYTES  # taskId, contextId, messageId
MAX_OWNER_BYTES = limits.MAX_OWNER_BYTES  # the authenticated principal
MAX_CONFIG_ID_BYTES = 4 * limits.MAX_PUSH_CONFIG_ID_CHARS  # characters: at most 4 bytes each
TIMESTAMP_BYTES = len("2026-01-01T00:00:00.000Z")  # models.format_timestamp


def escape(part: str) -> str:
    """The part with no `#` left: `%` first, so an escape in the input stays distinct."""
    return part.replace("%", "%25").replace("#", "%23")


def unescape(part: str) -> str:
    return part.replace("%23", "#").replace("%25", "%")


def join(*parts: str) -> str:
    """Several parts as one key: injective (see the module docstring)."""
    return SEPARATOR.join(escape(part) for part in parts)


def split(key: str) -> list[str]:
    """The parts `join` made `key` of."""
    return [unescape(part) for part in key.split(SEPARATOR)]


def _escaped(raw_bytes: int) -> int:
    return ESCAPE_GROWTH * raw_bytes


# Worst-case size of each key with every part at its bound (escaped parts tripled), against
# DynamoDB's limit; checked below and by tests/unit/test_keys.py.
KEY_BUDGETS: dict[str, tuple[int, int]] = {
    "T# task partition": (len(TASK_PREFIX) + MAX_ID_BYTES, PARTITION_KEY_MAX_BYTES),
    "P# push config sort key": (len(PUSH_PREFIX) + MAX_CONFIG_ID_BYTES, SORT_KEY_MAX_BYTES),
    "O# owner partition": (len(OWNER_PREFIX) + MAX_OWNER_BYTES, PARTITION_KEY_MAX_BYTES),
    "X# context counter sort key": (
        len(CONTEXT_COUNTER_PREFIX) + MAX_ID_BYTES,
        SORT_KEY_MAX_BYTES,
    ),
    "D# retry record partition": (
        len(DEDUPE_PREFIX) + _escaped(MAX_OWNER_BYTES) + 1 + _escaped(MAX_ID_BYTES),
        PARTITION_KEY_MAX_BYTES,
    ),
    "g1pk owner": (MAX_OWNER_BYTES, PARTITION_KEY_MAX_BYTES),
    "L#P# principal's lease pool": (
        len(LEASE_PREFIX) + 2 + MAX_OWNER_BYTES,
        PARTITION_KEY_MAX_BYTES,
    ),
    "gsk timestamp#taskId": (TIMESTAMP_BYTES + 1 + _escaped(MAX_ID_BYTES), SORT_KEY_MAX_BYTES),
}
_OVER = {name: sizes for name, sizes in KEY_BUDGETS.items() if sizes[0] > sizes[1]}
if _OVER:  # a bound raised past what the keys can hold: fail at import, not on a write
    raise RuntimeError(f"key bounds exceed DynamoDB's key limits: {_OVER}")

# A page token's parts: the index sort key and a task id (whose partition key must fit).
MAX_TOKEN_PART_BYTES = SORT_KEY_MAX_BYTES


def key_fits(key: Mapping[str, Any]) -> bool:
    """Whether DynamoDB accepts this table key (`pk`, `sk`): a longer one names no item."""
    return (
        utf8_size(key["pk"]["S"]) <= PARTITION_KEY_MAX_BYTES
        and utf8_size(key["sk"]["S"]) <= SORT_KEY_MAX_BYTES
    )


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def task_pk(task_id: str) -> dict[str, str]:
    return s(f"{TASK_PREFIX}{task_id}")


def event_sk(seq: int) -> str:
    return f"{EVENT_PREFIX}{seq:010d}"


def history_sk(index: int) -> str:
    return f"{HISTORY_PREFIX}{index:06d}"


LAST_HISTORY_SK = history_sk(999_999)


def task_key(task_id: str, sk: str) -> dict[str, Any]:
    return {"pk": task_pk(task_id), "sk": s(sk)}


def push_key(task_id: str, config_id: str) -> dict[str, Any]:
    return task_key(task_id, f"{PUSH_PREFIX}{config_id}")


def dedupe_key(owner: str, message_id: str) -> dict[str, Any]:
    return {"pk": s(DEDUPE_PREFIX + join(owner, message_id)), "sk": s(DEDUPE_SK)}


def owner_pk(owner: str) -> dict[str, str]:
    return s(f"{OWNER_PREFIX}{owner}")


def context_counter_sk(context_id: str) -> str:
    return f"{CONTEXT_COUNTER_PREFIX}{context_id}"


def context_since(counter: dict[str, Any]) -> str | None:
    """The creation time no task a context counter counts is older than (clocks aside), or None
    when it cannot say (`sinceN != all + gone`: it counted tasks from before `since`)."""
    since = counter.get(CONTEXT_SINCE, {}).get("S")
    if since is None:
        return None

    def number(name: str) -> int:
        return int(counter.get(name, {"N": "0"})["N"])

    if number(CONTEXT_SINCE_COUNT) != number("all") + number(CONTEXT_GONE):
        return None
    return str(since)


def opens_context(task_id: str, context_id: str) -> bool:
    """Whether the task opened its context (its contextId is its own id). Such a task counts itself
    in its context, so the context's counter item counts only the tasks that joined later."""
    return task_id == context_id


def state_counter(state: TaskState) -> str:
    """The counter attribute of the tasks in `state`."""
    return "st_" + state.name


def status_at_or_after(value: datetime) -> str:
    """The lowest stored status time (millisecond precision, `format_timestamp`) at or after
    `value`, so that ListTasks' `statusTimestampAfter` keeps exactly the times >= it."""
    if value.microsecond % 1000:
        try:
            value += timedelta(microseconds=1000 - value.microsecond % 1000)
        except OverflowError:  # within the last millisecond of year 9999: after every time
            return format_timestamp(value) + "~"
    return format_timestamp(value)


def index_sort_key(status_ts: str, task_id: str) -> str:
    # The timestamp holds no `#` and sorts first: ordering by status time is unchanged.
    return join(status_ts, task_id)


def list_filter(query: ListQuery) -> tuple[str, dict[str, str], dict[str, Any]] | None:
    """(FilterExpression, names, values) of a list query's context and state filters on the
    owner index (both attributes are projected into it); None when it has neither."""
    state = query.state.value if query.state is not None else None
    wanted = {"contextId": query.context_id, "state": state}
    given = {name: value for name, value in wanted.items() if value is not None}
    if not given:
        return None
    condition = " AND ".join(f"#{name} = :{name}" for name in given)
    values = {f":{name}": s(value) for name, value in given.items()}
    return condition, {f"#{name}": name for name in given}, values


# -- items -----------------------------------------------------------------------------------


def event_item(task_id: str, seq: int, event: StreamResponse, event_id: str = "") -> dict[str, Any]:
    kind = "status" if event.status_update is not None else "artifact"
    item = {
        **task_key(task_id, event_sk(seq)),
        "seq": n(seq),
        "kind": s(kind),
        EVENT_JSON: s(dumps(event.wire())),
    }
    if event_id:
        item[EVENT_ID] = s(event_id)
    return item


def history_item(task_id: str, index: int, message: Message) -> dict[str, Any]:
    return {**task_key(task_id, history_sk(index)), "msg": s(dumps(message.wire()))}


def item_bytes(item: Mapping[str, Any]) -> int:
    """An item's size as DynamoDB counts it against its 400 KB limit, never less: attribute
    names plus values. A string its UTF-8 bytes; a number 1 byte per two digits (sign and
    zeros counted, rounded up) + 1; binary its raw bytes; a boolean or null 1; a map or list
    3 + 1 per element + its elements (a map's names too); a set the sum of its members."""
    return sum(utf8_size(name) + value_bytes(value) for name, value in item.items())


def value_bytes(value: Mapping[str, Any]) -> int:
    """The size of one attribute value (low-level form, e.g. `{"S": "x"}`), as `item_bytes`."""
    ((kind, data),) = value.items()
    if kind == "S":
        return utf8_size(data)
    if kind == "N":
        return (len(data) + 1) // 2 + 1
    if kind == "B":
        return len(data)
    if kind == "M":
        return 3 + sum(utf8_size(name) + value_bytes(v) + 1 for name, v in data.items())
    if kind == "L":
        return 3 + sum(value_bytes(v) + 1 for v in data)
    if kind == "SS":
        return sum(map(utf8_size, data))
    if kind == "NS":
        return sum((len(number) + 1) // 2 + 1 for number in data)
    if kind == "BS":
        return sum(map(len, data))
    return 1  # BOOL, NULL


def checked(item: dict[str, Any], what: str) -> dict[str, Any]:
    """The item, as it will be written, if it is within `limits.MAX_ITEM_BYTES`; TooLarge
    naming `what` otherwise (before any write)."""
    size = item_bytes(item)
    if size > limits.MAX_ITEM_BYTES:
        raise TooLarge(what, size, limits.MAX_ITEM_BYTES, "MAX_ITEM_BYTES")
    return item


def checked_json(value: Any, what: str, limit: int, bound: str) -> str:
    """`value` as stored JSON (`dumps`) if it is within `limit` bytes (`bound` names it);
    TooLarge otherwise."""
    text = dumps(value)
    size = utf8_size(text)
    if size > limit:
        raise TooLarge(f"{what} as JSON", size, limit, bound)
    return text


def with_first_message(header: dict[str, Any], message: Message) -> bool:
    """Put the task's first message in its header when the header stays small enough
    (INLINE_HEADER_MAX_BYTES); False: it needs an item of its own."""
    inlined = {**header, FIRST_MESSAGE: s(dumps(message.wire()))}
    if item_bytes(inlined) > INLINE_HEADER_MAX_BYTES:
        return False
    header[FIRST_MESSAGE] = inlined[FIRST_MESSAGE]
    return True


def history_of(header: Mapping[str, Any] | None, items: list[dict[str, Any]]) -> list[Message]:
    """A task's history messages, in order, from its header (which may hold the first) and
    its history items (any order; other items are ignored)."""
    found = sorted((i for i in items if is_history(i)), key=lambda i: str(i["sk"]["S"]))
    messages = [message_of(i) for i in found]
    if header is not None and FIRST_MESSAGE in header:
        messages.insert(0, Message.model_validate_json(header[FIRST_MESSAGE]["S"]))
    return messages


def push_item(config: TaskPushNotificationConfig) -> dict[str, Any]:
    item = {**push_key(config.task_id or "", config.id or ""), "cfg": s(dumps(config.wire()))}
    if config.payload_version != "1.0":
        item["fmt"] = s(config.payload_version)
    if config.after_seq:
        item["aft"] = n(config.after_seq)
    return item


def _status_event(
    task_id: str, context_id: str, state: TaskState, timestamp: str
) -> StreamResponse:
    status = TaskStatus.model_validate({"state": state, "timestamp": timestamp})
    return status_update(task_id, context_id, status)


def creation_event(task_id: str, context_id: str, created_at: str) -> StreamResponse:
    """The status event a task is created with: SUBMITTED at its creation time."""
    return _status_event(task_id, context_id, TaskState.SUBMITTED, created_at)


def working_event(task_id: str, context_id: str, at: str) -> StreamResponse:
    """A bare WORKING status event (no message, no metadata)."""
    return _status_event(task_id, context_id, TaskState.WORKING, at)


def _stands_for(
    seq: int, wanted_seq: int, event: StreamResponse, derived: tuple[str, str, TaskState, str]
) -> bool:
    """Whether `event` at `seq` is exactly the bare status event `derived` (task id, context
    id, state, timestamp) at `wanted_seq`, on the wire: then a header can stand for it."""
    return seq == wanted_seq and dumps(event.wire()) == dumps(_status_event(*derived).wire())


def stands_for_first_event(
    task_id: str, context_id: str, created_at: str, seq: int, event: StreamResponse
) -> bool:
    """Whether a header with these fields can stand for the task's first event (which then
    needs no item): the event is event 1 and exactly its creation status, on the wire."""
    derived = (task_id, context_id, TaskState.SUBMITTED, created_at)
    return _stands_for(seq, FIRST_SEQ, event, derived)


def stands_for_working_event(
    task_id: str, context_id: str, at: str, seq: int, event: StreamResponse
) -> bool:
    """Whether a header can stand for this event: event 2, a bare WORKING status at `at`
    (the header must stand for event 1 too, which the write's condition checks)."""
    return _stands_for(seq, WORKING_EVENT_SEQ, event, (task_id, context_id, TaskState.WORKING, at))


def header_seqs(header: Mapping[str, Any]) -> list[int]:
    """The seqs of the events a header stands for, in order (its marks alone: `e1`, `w1` with
    `w1at`)."""
    seqs = [FIRST_SEQ] if FIRST_EVENT in header else []
    if WORKING_SEQ in header and WORKING_AT in header:
        seqs.append(int(header[WORKING_SEQ]["N"]))
    return seqs


def header_events(header: Mapping[str, Any]) -> list[tuple[int, StreamResponse]]:
    """(seq, event) of the events a header stands for (they have no items), in order."""
    task_id, context_id = header["taskId"]["S"], header["contextId"]["S"]
    events = []
    for seq in header_seqs(header):  # `w1` is only ever 2
        if seq == FIRST_SEQ:
            events.append((seq, creation_event(task_id, context_id, header["createdAt"]["S"])))
        else:
            events.append((seq, working_event(task_id, context_id, header[WORKING_AT]["S"])))
    return events


def is_header(item: Mapping[str, Any]) -> bool:
    return bool(item["sk"]["S"] == HEADER)


def is_event(item: Mapping[str, Any]) -> bool:
    return bool(item["sk"]["S"].startswith(EVENT_PREFIX))


def is_history(item: Mapping[str, Any]) -> bool:
    return bool(item["sk"]["S"].startswith(HISTORY_PREFIX))


def event_of(item: Mapping[str, Any]) -> StreamResponse:
    return StreamResponse.model_validate_json(item[EVENT_JSON]["S"])


def event_id_of(item: Mapping[str, Any]) -> str:
    """The writer identity of an event item ("" for events written without one)."""
    return str(item.get(EVENT_ID, {}).get("S", ""))


def seq_of(item: Mapping[str, Any]) -> int:
    return int(item["seq"]["N"])


def message_of(item: Mapping[str, Any]) -> Message:
    return Message.model_validate_json(item["msg"]["S"])


def push_config_of(item: Mapping[str, Any]) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig.model_validate_json(item["cfg"]["S"])
    if "fmt" in item:
        config = config.for_payload_version(item["fmt"]["S"])
    return config.for_events_after(int(item["aft"]["N"])) if "aft" in item else config


def record_of(item: Mapping[str, Any]) -> TaskRecord:
    """A header item (or its index projection) as a TaskRecord."""
    return TaskRecord(
        task_id=item["taskId"]["S"],
        context_id=item["contextId"]["S"],
        owner=item["owner"]["S"],
        state=TaskState(item["state"]["S"]),
        status=TaskStatus.model_validate_json(item["status"]["S"]),
        status_seq=int(item.get("statusSeq", {"N": "0"})["N"]),
        turn=int(item.get("turn", {"N": "0"})["N"]),
        execution=item.get("exec", {}).get("S", ""),
        flow_state=json.loads(item["flowState"]["S"]) if "flowState" in item else {},
        metadata=json.loads(item["meta"]["S"]) if "meta" in item else None,
        history_count=int(item.get("hcount", {"N": "0"})["N"]),
        created_at=item.get("createdAt", {}).get("S", ""),
        flow_state_ref=item[FLOW_STATE_REF]["S"] if FLOW_STATE_REF in item else None,
        delegation_round=item[DELEGATION_ROUND]["S"] if DELEGATION_ROUND in item else None,
        waiting=bool(item.get(WAITING, {}).get("BOOL", False)),
    )


def stream_event(
    image: Mapping[str, Any], previous: Mapping[str, Any] | None = None
) -> tuple[str, int, bytes] | None:
    """(task id, seq, event wire JSON) of a stream record, or None when it is no event. An event is
    an inserted `E#` item, a new header marked `e1`, or a header update that added `w1`. `image`
    and `previous` are the deserialized NewImage and OldImage (None for an insert)."""
    pk, sk, body = image.get("pk"), image.get("sk"), image.get(EVENT_JSON)
    if isinstance(pk, str) and pk.startswith(TASK_PREFIX) and sk == HEADER:
        return _stream_header_event(pk.removeprefix(TASK_PREFIX), image, previous)
    if previous is not None:
        return None  # an event item is written once: only its insert is the event
    if not (isinstance(pk, str) and isinstance(sk, str) and isinstance(body, str)):
        return None
    if not (pk.startswith(TASK_PREFIX) and sk.startswith(EVENT_PREFIX)):
        return None
    return pk.removeprefix(TASK_PREFIX), int(sk.removeprefix(EVENT_PREFIX)), body.encode()


def _stream_header_event(
    task_id: str, image: Mapping[str, Any], previous: Mapping[str, Any] | None
) -> tuple[str, int, bytes] | None:
    if previous is None:  # the task's creation
        if image.get(FIRST_EVENT) is not True:
            return None  # its first event is an item of its own
        seq, at, state = FIRST_SEQ, image.get("createdAt"), TaskState.SUBMITTED
    else:  # an update: the event when it added the first WORKING status
        added = image.get(WORKING_SEQ)
        if WORKING_SEQ in previous or not isinstance(added, int | Decimal):
            return None
        seq, at, state = int(added), image.get(WORKING_AT), TaskState.WORKING
    context_id = image.get("contextId")
    if not (isinstance(context_id, str) and isinstance(at, str)):
        return None
    try:
        event = _status_event(task_id, context_id, state, at)
    except ValueError:  # not a timestamp: no event to pass on
        return None
    return task_id, seq, dumps(event.wire()).encode()


def expired_header(image: Mapping[str, Any]) -> tuple[str, str, str, TaskState] | None:
    """(task id, owner, context id, state) of a removed item's old image (deserialized, as
    Powertools' `DynamoDBRecord.dynamodb.old_image` gives it) when it is a task header; None
    for any other item."""
    pk, sk = image.get("pk"), image.get("sk")
    owner, context_id, state = image.get("owner"), image.get("contextId"), image.get("state")
    if not (isinstance(pk, str) and pk.startswith(TASK_PREFIX) and sk == HEADER):
        return None
    if not (isinstance(owner, str) and isinstance(context_id, str) and isinstance(state, str)):
        return None
    try:
        return pk.removeprefix(TASK_PREFIX), owner, context_id, TaskState(state)
    except ValueError:
        return None


# -- delegations (store/dynamodb/delegations.py) ---------------------------------------------

# The widths of a delegation key's numbers in its sort key: sort keys order as the numbers do.
DELEGATION_WIDTHS = (6, 6, 2)  # turn, step, index
_NUMBER = re.compile(r"0|[1-9][0-9]*")
# A delegation item's attributes (low-level names; the record's JSON values as strings).
DELEGATION_ATTRIBUTES = {
    "agent_url": "url",
    "token": "token",
    "state": "dstate",
    "wait": "wait",
    "count": "count",
    "forward": "fwd",
    "timeout_seconds": "timeout",
    "credentials": "cred",
    "turn_context": "ctx",
    "message": "msg",
    "mode": "mode",
    "deadline": "deadline",
    "remote_task_id": "rtask",
    "remote_context_id": "rctx",
    "remote_state": "rstate",
    "remote_status_at": "rat",
    "remote_message": "rmsg",
    "outcome": "outcome",
    "error": "error",
    "polls": "polls",
    "updated_at": "updatedAt",
}
# The newest applied remote status's time in a fixed format (`status_order`): conditions
# compare it as a string.
STATUS_ORDER = "ratOrder"
_JSON_FIELDS = ("message", "turn_context", "remote_message")
_NUMBER_FIELDS = ("count", "timeout_seconds", "polls")


def _numbers(text: str, count: int) -> list[int] | None:
    """The `count` dot-separated decimal numbers of `text` (canonical: no sign, no leading
    zero), each within its DELEGATION_WIDTHS; None when it is not such a text."""
    parts = text.split(".")
    if len(parts) != count or not all(_NUMBER.fullmatch(part) for part in parts):
        return None
    numbers = [int(part) for part in parts]
    if any(len(part) > width for part, width in zip(parts, DELEGATION_WIDTHS, strict=False)):
        return None
    return numbers


def _padded(numbers: list[int]) -> str:
    return ".".join(f"{v:0{w}d}" for v, w in zip(numbers, DELEGATION_WIDTHS, strict=False))


def delegation_sk(key: str) -> str | None:
    """The sort key of delegation `key` ("{turn}.{step}.{index}"), None when `key` is not one
    (a read of it finds nothing)."""
    numbers = _numbers(key, 3)
    return None if numbers is None else DELEGATION_PREFIX + _padded(numbers)


def round_sk_prefix(round: str) -> str | None:
    """The sort key prefix of every delegation of `round` ("{turn}.{step}"), None when
    `round` is not one."""
    numbers = _numbers(round, 2)
    return None if numbers is None else DELEGATION_PREFIX + _padded(numbers) + "."


def seen_sk(key: str, digest: str) -> str | None:
    """The sort key of a delegation's seen notification: the digest hashed, so any digest
    makes a small key."""
    sk = delegation_sk(key)
    if sk is None:
        return None
    hashed = hashlib.sha256(digest.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{SEEN_PREFIX}{sk.removeprefix(DELEGATION_PREFIX)}#{hashed}"


def key_of_delegation_sk(sk: str) -> str:
    """The delegation key a sort key (`delegation_sk`) stands for."""
    return ".".join(str(int(part)) for part in sk.removeprefix(DELEGATION_PREFIX).split("."))


def status_order(at: str) -> str:
    """A remote status time (RFC 3339; a time without offset is UTC) in a fixed format, UTC
    to the microsecond, whose string order is the times' order. ValueError when `at` is no
    time."""
    value = datetime.fromisoformat(at)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        value = value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{at!r} is out of range once converted to UTC") from None
    return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def number(value: float) -> dict[str, str]:
    """A finite float as a DynamoDB number (its shortest exact decimal)."""
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{value} is not a finite number")
    return {"N": repr(float(value))}


def delegation_values(record: DelegationRecord) -> dict[str, Any]:
    """A delegation's attributes (its table key aside); unset optional ones left out."""
    item: dict[str, Any] = {}
    for name, attribute in DELEGATION_ATTRIBUTES.items():
        value = getattr(record, name)
        if value is None:
            continue
        if name in _JSON_FIELDS:
            item[attribute] = s(dumps(value))
        elif name == "forward":
            item[attribute] = {"BOOL": bool(value)}
        elif name == "deadline":
            item[attribute] = number(value)
        elif name in _NUMBER_FIELDS:
            item[attribute] = n(int(value))
        else:
            item[attribute] = s(str(value))
    if record.remote_status_at is not None:
        item[STATUS_ORDER] = s(status_order(record.remote_status_at))
    return item


def delegation_of(item: Mapping[str, Any]) -> DelegationRecord:
    """A delegation item as its record."""
    fields: dict[str, Any] = {}
    for name, attribute in DELEGATION_ATTRIBUTES.items():
        if attribute not in item:
            continue
        ((kind, data),) = item[attribute].items()
        if name in _JSON_FIELDS:
            fields[name] = json.loads(data)
        elif name == "deadline":
            fields[name] = float(data)
        elif kind == "N":
            fields[name] = int(data)
        else:
            fields[name] = data
    fields["state"] = DelegationState(fields.get("state", DelegationState.SENDING))
    task_id = item["pk"]["S"].removeprefix(TASK_PREFIX)
    return DelegationRecord(task_id=task_id, key=key_of_delegation_sk(item["sk"]["S"]), **fields)


# -- API keys ------------------------------------------------------------------------------


def lease_pk(pool: str) -> dict[str, str]:
    """The partition of a lease pool (a pool name is one part after a fixed prefix: raw)."""
    return s(LEASE_PREFIX + pool)


def lease_key(pool: str, slot: int) -> dict[str, Any]:
    return {"pk": lease_pk(pool), "sk": s(f"{LEASE_SLOT_PREFIX}{slot:04d}")}


def lease_slot(item: Mapping[str, Any]) -> int | None:
    """The slot number of a lease item (None for another item of the partition)."""
    sk = item["sk"]["S"]
    if not sk.startswith(LEASE_SLOT_PREFIX):
        return None
    try:
        return int(sk[len(LEASE_SLOT_PREFIX) :])
    except ValueError:
        return None


def api_key_key(key_id: str) -> dict[str, Any]:
    """The key's own item (what the authorizer reads)."""
    return {"pk": s(API_KEY_PREFIX + key_id), "sk": s(API_KEY_SK)}


def api_key_list_key(key_id: str) -> dict[str, Any]:
    """The key's entry in the listing partition."""
    return {"pk": s(API_KEY_LIST_PK), "sk": s(key_id)}


def api_key_attributes(record: ApiKeyRecord) -> dict[str, Any]:
    """Every attribute of an API key item but its table key (no TTL: keys never expire)."""
    item = {
        "keyId": s(record.key_id),
        "principal": s(record.principal),
        "secretHash": s(record.secret_hash),
        "usageKeyId": s(record.usage_key_id),
        "usageKey": s(record.usage_key),
        "description": s(record.description),
        "createdAt": s(record.created_at),
    }
    if record.revoked_at is not None:
        item["revokedAt"] = s(record.revoked_at)
    return item


def api_key_of(item: Mapping[str, Any]) -> ApiKeyRecord:
    def text(name: str) -> str:
        return str(item.get(name, {}).get("S", ""))

    revoked = item.get("revokedAt", {}).get("S")
    return ApiKeyRecord(
        key_id=text("keyId"),
        principal=text("principal"),
        secret_hash=text("secretHash"),
        usage_key_id=text("usageKeyId"),
        usage_key=text("usageKey"),
        description=text("description"),
        created_at=text("createdAt"),
        revoked_at=str(revoked) if revoked is not None else None,
    )


# -- page tokens -----------------------------------------------------------------------------


def cursor_of(item: Mapping[str, Any]) -> dict[str, str]:
    """The index position of a listed header (what a page token carries)."""
    return {"k": item[INDEX_SORT]["S"], "id": item["taskId"]["S"]}


def cursor_of_key(key: Mapping[str, Any]) -> dict[str, str]:
    """The index position of an owner-index Query's LastEvaluatedKey (the table's and the
    index's key attributes of the last entry it examined)."""
    return {"k": key[INDEX_SORT]["S"], "id": key["pk"]["S"].removeprefix(TASK_PREFIX)}


def encode_page_token(cursor: Mapping[str, str]) -> str:
    raw = json.dumps(dict(cursor), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str) -> dict[str, str]:
    """The index position in a token; InvalidPageToken when it is not one we issued."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        cursor = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidPageToken("is not a token issued by this server") from None
    if (
        not isinstance(cursor, dict)
        or set(cursor) != {"k", "id"}
        or not all(
            isinstance(v, str) and 0 < utf8_size(v) <= MAX_TOKEN_PART_BYTES for v in cursor.values()
        )
    ):
        raise InvalidPageToken("is not a token issued by this server")
    return cursor


def start_key(query: ListQuery, cursor: Mapping[str, str]) -> dict[str, Any]:
    """The ExclusiveStartKey of a page: rebuilt inside the caller's own index partition, so a
    token (forged or another owner's) cannot reach other owners' tasks."""
    return {
        **task_key(cursor["id"], HEADER),
        INDEX_PARTITION: s(query.owner),
        INDEX_SORT: s(cursor["k"]),
    }


# -- webhook delivery state (attributes of a push config item) -----------------------------


def is_parked(item: Mapping[str, Any]) -> bool:
    """Whether the config's deliveries go through the ordered retry queue."""
    return bool(item.get("parked", {}).get("BOOL", False))


def failures_of(item: Mapping[str, Any]) -> int:
    return int(item.get("failures", {}).get("N", "0"))


def queued_through_of(item: Mapping[str, Any]) -> int | None:
    queued = item.get("queuedThrough", {}).get("N")
    return int(queued) if queued is not None else None
