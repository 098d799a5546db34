"""Task records and their event log on DynamoDB.

The event log is the source of status and artifacts: a chunk is one conditional put; a state
change is one transaction (header + event + counters [+ history]), which also keeps the
ListTasks counters. A task's first events live in its header (`keys.header_events`). Every
item is sized before it is written (`keys.checked`); past a bound, TooLarge and no write.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.models import (
    Artifact,
    Message,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    format_timestamp,
    limits,
)
from a2a_serverless.store.base import (
    ConflictError,
    Dedupe,
    StatusChange,
    TaskRecord,
    TaskSnapshot,
    TooLarge,
    status_update,
)
from a2a_serverless.store.content import event_with
from a2a_serverless.store.dynamodb.keys import n, s
from a2a_serverless.store.dynamodb.table import DynamoDBTable
from a2a_serverless.store.fold import fold_events, task_from_events

NEW_ITEM = "attribute_not_exists(pk)"
# The header attributes of TaskRecord.flow_step: the last (turn, step) whose outcome was saved.
FLOW_TURN = "flowTurn"
FLOW_STEP = "flowStep"

_NUMBER_BYTES = 21  # the largest number DynamoDB stores (38 digits)
_STATUS_ENVELOPE_BYTES = 128  # a status's JSON without its message (state, timestamp)
_SMALL_ITEM_BYTES = 4096  # a retry record or a counter item: keys and a few numbers at most


def _header_fields() -> dict[str, int]:
    """Every attribute a task header may have, with the most bytes its value can take (its
    keys at the key bounds; `meta` the send's metadata; `m1` only in a header under
    INLINE_HEADER_MAX_BYTES; numbers at 38 digits; flags 1)."""
    ids, owner = keys.MAX_ID_BYTES, keys.MAX_OWNER_BYTES
    numbers = ("statusSeq", "turn", "hcount", keys.WORKING_SEQ, FLOW_TURN, FLOW_STEP, keys.EXPIRES)
    return {
        "pk": len(keys.TASK_PREFIX) + ids,
        "sk": len(keys.HEADER),
        "taskId": ids,
        "contextId": ids,
        "owner": owner,
        "state": max(len(state.value) for state in TaskState),
        "status": _STATUS_ENVELOPE_BYTES + limits.MAX_STATUS_MESSAGE_BYTES,
        "exec": ids + 2 * _NUMBER_BYTES,  # core.executor.execution_name: `{taskId}-{turn}`
        "flowState": limits.MAX_FLOW_STATE_BYTES,
        "createdAt": keys.TIMESTAMP_BYTES,
        "meta": limits.MAX_REQUEST_METADATA_BYTES,
        keys.FIRST_MESSAGE: keys.INLINE_HEADER_MAX_BYTES,
        keys.WORKING_AT: keys.TIMESTAMP_BYTES,
        keys.INDEX_PARTITION: owner,
        keys.INDEX_SORT: keys.TIMESTAMP_BYTES + 1 + keys.ESCAPE_GROWTH * ids,
        **dict.fromkeys(numbers, _NUMBER_BYTES),
        keys.HOOKS: 1,
        keys.FIRST_EVENT: 1,
        keys.FLOW_STATE_REF: 128,  # store/content.py: a state object's name
        keys.DELEGATION_ROUND: 2 * _NUMBER_BYTES + 1,  # "{turn}.{step}"
        keys.WAITING: 1,
    }


def _small_items() -> dict[str, int]:
    """The worst case of the items updated in place besides the header: a counter item (its
    attributes fixed: one per state at most) and a send's retry record (a SHA-256 hex hash)."""
    ids, owner = keys.MAX_ID_BYTES, keys.MAX_OWNER_BYTES
    counts = ["all", keys.CONTEXT_SINCE_COUNT, keys.CONTEXT_GONE, keys.EXPIRES]
    counts += [keys.state_counter(state) for state in TaskState]
    counter = (
        len("pk" + keys.OWNER_PREFIX) + owner
        + len("sk" + keys.CONTEXT_COUNTER_PREFIX) + ids
        + sum(keys.utf8_size(name) + _NUMBER_BYTES for name in counts)
        + len(keys.CONTEXT_SINCE) + keys.TIMESTAMP_BYTES
    )  # fmt: skip
    dedupe = (
        len("pk" + keys.DEDUPE_PREFIX) + keys.ESCAPE_GROWTH * (owner + ids) + 1
        + len("sk" + keys.DEDUPE_SK)
        + len("taskId") + ids + len("hash") + 64
        + len("dedupeUntil" + keys.EXPIRES) + 2 * _NUMBER_BYTES
    )  # fmt: skip
    return {"counter": counter, "retry record": dedupe}


# The header is updated in place, never measured whole again: its worst case must fit an item,
# and the largest transaction DynamoDB's 4 MB. Checked at import.
HEADER_FIELDS = _header_fields()
HEADER_BUDGET = sum(keys.utf8_size(name) + size for name, size in HEADER_FIELDS.items())
SMALL_ITEMS = _small_items()
TRANSACTION_BUDGET = HEADER_BUDGET + 3 * limits.MAX_ITEM_BYTES + 3 * _SMALL_ITEM_BYTES
if (
    HEADER_BUDGET > limits.MAX_ITEM_BYTES
    or max(SMALL_ITEMS.values()) > _SMALL_ITEM_BYTES
    or TRANSACTION_BUDGET > limits.DYNAMODB_TRANSACTION_BYTES
):
    raise RuntimeError(f"storage bounds exceed DynamoDB's: {HEADER_BUDGET}, {SMALL_ITEMS}")


def _status_json(status: TaskStatus) -> str:
    """A status as the header stores it, its message within MAX_STATUS_MESSAGE_BYTES."""
    text = keys.dumps(status.wire())
    # The status holds its message: only a status past the bound needs the message measured.
    if status.message is not None and keys.utf8_size(text) > limits.MAX_STATUS_MESSAGE_BYTES:
        keys.checked_json(
            status.message.wire(),
            "the status message",
            limits.MAX_STATUS_MESSAGE_BYTES,
            "MAX_STATUS_MESSAGE_BYTES",
        )
    return text


# The most of a history item or event item that is the message or event's JSON (the rest: keys
# and a few attributes).
HISTORY_MESSAGE_BYTES = limits.MAX_EVENT_BYTES
# The most of an artifact event that is not its artifact (ids, flags).
_ARTIFACT_EVENT_FRAME_BYTES = 2 * keys.MAX_ID_BYTES + 256


def _event_item(
    task_id: str, seq: int, event: StreamResponse, event_id: str = ""
) -> dict[str, Any]:
    """An event's item, its JSON within MAX_EVENT_BYTES."""
    item = keys.event_item(task_id, seq, event, event_id)
    size = keys.utf8_size(item[keys.EVENT_JSON]["S"])
    if size > limits.MAX_EVENT_BYTES:
        what = "a status update" if event.status_update is not None else "an artifact chunk"
        raise TooLarge(f"{what} as JSON", size, limits.MAX_EVENT_BYTES, "MAX_EVENT_BYTES")
    return item


def _record_of(item: dict[str, Any]) -> TaskRecord:
    """A header item as the flow runtime needs it: with the saved-step marker."""
    record = keys.record_of(item)
    if FLOW_TURN in item and FLOW_STEP in item:
        record.flow_step = (int(item[FLOW_TURN]["N"]), int(item[FLOW_STEP]["N"]))
    return record


class DynamoDBTaskLog(DynamoDBTable):
    """The TaskLogStore on the table."""

    # -- what is stored inline, what in the content store (store/content.py) ----------------
    def _kept_status(self, task_id: str, status: TaskStatus) -> TaskStatus:
        """A status as written: its message within MAX_STATUS_MESSAGE_BYTES where storing
        parts can make it so (the header holds it)."""
        if status.message is None:
            return status
        message = self.content.message(task_id, status.message, limits.MAX_STATUS_MESSAGE_BYTES)
        return (
            status if message is status.message else status.model_copy(update={"message": message})
        )

    def _kept_event(self, task_id: str, event: StreamResponse) -> StreamResponse:
        limit = limits.MAX_EVENT_BYTES - _ARTIFACT_EVENT_FRAME_BYTES
        return event_with(
            event,
            lambda _, status: self._kept_status(task_id, status),
            lambda _, artifact: self.content.artifact(task_id, artifact, limit),
        )

    def _flow_state(self, task_id: str, flow_state: dict[str, Any]) -> tuple[str, str | None]:
        """(the header's flowState JSON, the stored state's object name or None): a state over
        INLINE_STATE_BYTES goes to the content store; without one, a state past
        MAX_FLOW_STATE_BYTES is TooLarge."""
        text = keys.dumps(flow_state)
        kept, ref = self.content.state(task_id, text, self._inline_state_bytes)
        if ref is None and keys.utf8_size(kept) > limits.MAX_FLOW_STATE_BYTES:
            raise TooLarge(
                "the flow state (ctx.state) as JSON",
                keys.utf8_size(kept),
                limits.MAX_FLOW_STATE_BYTES,
                "MAX_FLOW_STATE_BYTES",
            )
        return kept, ref

    # -- writes ----------------------------------------------------------------------------

    def _sized_put(
        self, item: dict[str, Any], what: str, condition: str | None = None
    ) -> dict[str, Any]:
        """A transaction Put of an expiring item, measured as written (`keys.checked`)."""
        put = self._put(item, condition)
        keys.checked(put["Put"]["Item"], what)
        return put

    def _counter_update(
        self, owner: str, sk: str, add: dict[str, int], since: str | None = None
    ) -> dict[str, Any]:
        """ADD to counters of one counter item, its TTL refreshed so the counters outlive the
        owner's last task (by a margin: TTL deletes late, and the task's removal must still
        find its counters to decrement) and then go too. `since`: set it, unless set."""
        names = {f"#c{i}": name for i, name in enumerate(add)}
        names["#ttl"] = keys.EXPIRES
        values = {f":v{i}": n(delta) for i, delta in enumerate(add.values())}
        values[":ttl"] = self._expires(keys.COUNTER_TTL_MARGIN_SECONDS)
        expression = (
            "ADD " + ", ".join(f"#c{i} :v{i}" for i in range(len(add))) + " SET #ttl = :ttl"
        )
        if since is not None:
            names["#since"] = keys.CONTEXT_SINCE
            values[":since"] = s(since)
            expression += ", #since = if_not_exists(#since, :since)"
        return {
            "TableName": self._table,
            "Key": {"pk": keys.owner_pk(owner), "sk": s(sk)},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def _counter_updates(
        self,
        owner: str,
        context_id: str | None,
        add: dict[str, int],
        created_at: str | None = None,
    ) -> list[tuple[str, dict[str, Any]]]:
        """ADD `add` to one random shard of the owner's counters and, when `context_id` is given (a
        task created or expired that joined an existing context), its `all` to the context's
        counter (`sinceN` and first `since` for a created task, `gone` for an expired one)."""
        shard = f"{keys.OWNER_SHARD_PREFIX}{random.randrange(keys.OWNER_COUNTER_SHARDS)}"
        updates = [("counter", {"Update": self._counter_update(owner, shard, add)})]
        if context_id is not None:
            context_add = {"all": add["all"]}
            if created_at is not None:
                context_add[keys.CONTEXT_SINCE_COUNT] = add["all"]
            else:
                context_add[keys.CONTEXT_GONE] = -add["all"]
            sk = keys.context_counter_sk(context_id)
            update = self._counter_update(owner, sk, context_add, since=created_at)
            updates.append(("counter", {"Update": update}))
        return updates

    def _optional_puts(
        self, task_id: str, dedupe: Dedupe | None, push_config: TaskPushNotificationConfig | None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The retry record and the inline webhook that go with a new task or turn."""
        items: list[tuple[str, dict[str, Any]]] = []
        if dedupe is not None:
            record = {
                **keys.dedupe_key(dedupe.owner, dedupe.message_id),
                "taskId": s(task_id),
                "hash": s(dedupe.content_hash),
            }
            put = self._put(record, NEW_ITEM)
            if dedupe.expires_at:
                # Live for the retry window only: an expired record is replaced.
                record["dedupeUntil"] = {"N": str(dedupe.expires_at)}
                put = self._put(record, f"{NEW_ITEM} OR dedupeUntil <= :now")
                put["Put"]["ExpressionAttributeValues"] = {":now": {"N": str(int(time.time()))}}
            keys.checked(put["Put"]["Item"], "the send's retry record")
            items.append(("dedupe", put))
        if push_config is not None:
            # In the same transaction: the webhook must exist before the turn's first event.
            push = self._sized_put(keys.push_item(push_config), "the push notification config")
            items.append(("push", push))
        return items

    def create_task(
        self,
        record: TaskRecord,
        message: Message,
        event: StreamResponse,
        dedupe: Dedupe | None,
        push_config: TaskPushNotificationConfig | None = None,
    ) -> Message:
        """Header, first history message and counters in one transaction; the first event
        too unless the header stands for it (the creation status, as SendMessage makes it);
        the message is the header's when both are small (`keys.with_first_message`). Returns
        the message as stored."""
        message = self.content.message(record.task_id, message, HISTORY_MESSAGE_BYTES)
        flow_state, state_ref = self._flow_state(record.task_id, record.flow_state)
        status_ts = format_timestamp(record.status.timestamp or datetime.now(UTC))
        header: dict[str, Any] = {
            **keys.task_key(record.task_id, keys.HEADER),
            "taskId": s(record.task_id),
            "contextId": s(record.context_id),
            "owner": s(record.owner),
            "state": s(record.state.value),
            "status": s(_status_json(record.status)),
            "statusSeq": n(record.status_seq),
            "turn": n(record.turn),
            "exec": s(record.execution),
            "flowState": s(flow_state),
            "hcount": n(1),
            keys.HOOKS: {"BOOL": push_config is not None},
            "createdAt": s(record.created_at or status_ts),
            keys.INDEX_PARTITION: s(record.owner),
            keys.INDEX_SORT: s(keys.index_sort_key(status_ts, record.task_id)),
        }
        if state_ref is not None:
            header[keys.FLOW_STATE_REF] = s(state_ref)
        if record.metadata:
            header["meta"] = s(
                keys.checked_json(
                    record.metadata,
                    "the task's metadata",
                    limits.MAX_REQUEST_METADATA_BYTES,
                    "MAX_REQUEST_METADATA_BYTES",
                )
            )
        first: list[tuple[str, dict[str, Any]]] = []
        created_at = header["createdAt"]["S"]
        if keys.stands_for_first_event(
            record.task_id, record.context_id, created_at, record.status_seq, event
        ):
            header[keys.FIRST_EVENT] = {"BOOL": True}  # the event is the header's creation
        else:
            item = _event_item(record.task_id, record.status_seq, event)
            first.append(("event", self._sized_put(item, "the first event", NEW_ITEM)))
        header = self._expiring(header)  # as stored: its size decides where the message goes
        if not keys.with_first_message(header, message):
            item = keys.history_item(record.task_id, 1, message)
            first.append(("history", self._sized_put(item, "the message")))
        keys.checked(header, "the task header")
        counts = {"all": 1, keys.state_counter(record.state): 1}
        self._transact(
            [
                ("header", self._put(header, NEW_ITEM)),  # measured above, as stored
                *first,
                *self._counter_updates(
                    record.owner, _joined(record.task_id, record.context_id), counts, created_at
                ),
                *self._optional_puts(record.task_id, dedupe, push_config),
            ]
        )
        return message

    def apply_status(self, change: StatusChange, in_header: bool = True) -> None:
        """A state transition: conditional on the state (and turn) it moves from.

        The task's first WORKING status goes in the header, with no event item, when the
        header stands for event 1 (a condition of the write; `in_header=False` writes the
        item, as for a task whose event 1 is an item)."""
        change = self._kept_change(change)
        status_ts = format_timestamp(change.to_status.timestamp or datetime.now(UTC))
        new_state = change.to_status.state
        names = {"#st": "state", "#turn": "turn", "#status": "status"}
        values: dict[str, Any] = {
            ":from": s(change.from_state.value),
            ":to": s(new_state.value),
            ":status": s(_status_json(change.to_status)),
            ":seq": n(change.seq),
            ":gsk": s(keys.index_sort_key(status_ts, change.task_id)),
            ":turn": n(change.turn),
        }
        sets = [
            "#st = :to",
            "#status = :status",
            "statusSeq = :seq",
            f"{keys.INDEX_SORT} = :gsk",
            "#turn = :turn",
        ]
        if change.execution is not None:
            sets.append("#exec = :exec")
            names["#exec"] = "exec"
            values[":exec"] = s(change.execution)
        removes: list[str] = []
        if change.flow_state is not None:
            flow_state, state_ref = self._flow_state(change.task_id, change.flow_state)
            sets.append("flowState = :fs")
            values[":fs"] = s(flow_state)
            if state_ref is not None:
                sets.append(f"{keys.FLOW_STATE_REF} = :fsr")
                values[":fsr"] = s(state_ref)
            else:
                removes.append(keys.FLOW_STATE_REF)
        if change.push_config is not None:  # the turn's inline webhook (with the header)
            sets.append(f"{keys.HOOKS} = :hooks")
            values[":hooks"] = {"BOOL": True}
        condition = "#st = :from"
        if change.expected_turn is not None:
            condition += " AND #turn = :eturn"
            values[":eturn"] = n(change.expected_turn)
        history: list[tuple[str, dict[str, Any]]] = []
        if change.history_message is not None:
            # The history index comes from the header read that decided this change; the
            # condition on it makes a concurrent history append lose cleanly.
            index = change.history_index
            sets.append("hcount = :hc")
            values[":hc"] = n(index)
            condition += " AND hcount = :hprev"
            values[":hprev"] = n(index - 1)
            item = keys.history_item(change.task_id, index, change.history_message)
            history.append(("history", self._sized_put(item, "the message")))
        header_event = in_header and keys.stands_for_working_event(
            change.task_id, change.context_id, status_ts, change.seq, change.event
        )
        events: list[tuple[str, dict[str, Any]]] = []
        if header_event:
            sets += [f"{keys.WORKING_SEQ} = :w1", f"{keys.WORKING_AT} = :w1at"]
            values[":w1"] = n(change.seq)
            values[":w1at"] = s(status_ts)
            condition += f" AND attribute_exists({keys.FIRST_EVENT})"
            condition += f" AND attribute_not_exists({keys.WORKING_SEQ})"
        else:
            item = _event_item(change.task_id, change.seq, change.event)
            events.append(("event", self._sized_put(item, "the status update", NEW_ITEM)))
        # An event item at a seq the header may stand for: not if it does.
        guarded = not header_event and change.seq <= keys.LAST_HEADER_EVENT_SEQ
        if guarded:
            condition += " AND " + _header_lacks_event(change.seq, values)
        header_update = {
            "Update": {
                "TableName": self._table,
                "Key": keys.task_key(change.task_id, keys.HEADER),
                "UpdateExpression": "SET "
                + ", ".join(sets)
                + (" REMOVE " + ", ".join(removes) if removes else ""),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
        counters: list[tuple[str, dict[str, Any]]] = []
        if change.from_state != new_state:
            counts = {keys.state_counter(change.from_state): -1, keys.state_counter(new_state): 1}
            counters = self._counter_updates(change.owner, None, counts)
        try:
            self._transact(
                [
                    ("header", header_update),
                    *events,
                    *history,
                    *self._optional_puts(change.task_id, change.dedupe, change.push_config),
                    *counters,
                ]
            )
        except ConflictError as conflict:
            if "header" not in conflict.failed:
                raise
            if header_event:
                # The header may not stand for event 1 (an older task's): write the event as
                # an item. A lost race (a cancel first) fails this one too, as it would have.
                self.apply_status(change, in_header=False)
                return
            if guarded and self._header_holds(change.task_id, change.seq):
                raise ConflictError(
                    f"event {change.seq} of {change.task_id} exists", ("event",)
                ) from conflict
            raise

    def _kept_change(self, change: StatusChange) -> StatusChange:
        """The change as written: its status message kept once (header, event and history hold
        the same), any other history message within its item."""
        status = self._kept_status(change.task_id, change.to_status)
        history = change.history_message
        if history is not None and history is change.to_status.message:
            history = status.message
        elif history is not None:
            history = self.content.message(change.task_id, history, HISTORY_MESSAGE_BYTES)
        event = change.event
        if event.status_update is not None and event.status_update.status is change.to_status:
            event = status_update(change.task_id, change.context_id, status)
        else:
            event = self._kept_event(change.task_id, event)
        return replace(change, to_status=status, history_message=history, event=event)

    def _header_holds(self, task_id: str, seq: int) -> bool:
        header = self._get(keys.task_key(task_id, keys.HEADER))
        return header is not None and seq in keys.header_seqs(header)

    def append_event(
        self, task_id: str, seq: int, event: StreamResponse, event_id: str = ""
    ) -> bool:
        """One event with no state change (artifact chunk, progress status): one put. False when
        this write (same `event_id`) was already done; ConflictError when the seq holds another.
        Seqs 1 and 2 are checked against the header in a transaction."""
        event = self._kept_event(task_id, event)
        if seq <= keys.LAST_HEADER_EVENT_SEQ:
            return self._append_early_event(task_id, seq, event, event_id)
        item = self._expiring(_event_item(task_id, seq, event, event_id))
        keys.checked(item, "the event")
        try:
            self._db.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=NEW_ITEM,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            existing = exc.response.get("Item") or {}
            if event_id and keys.event_id_of(existing) == event_id:
                return False  # this very write was done before (a re-run of the step)
            raise ConflictError(f"event {seq} of {task_id} exists", ("event",)) from exc
        return True

    def _append_early_event(
        self, task_id: str, seq: int, event: StreamResponse, event_id: str
    ) -> bool:
        values: dict[str, Any] = {}
        check: dict[str, Any] = {
            "TableName": self._table,
            "Key": keys.task_key(task_id, keys.HEADER),
            "ConditionExpression": _header_lacks_event(seq, values),
        }
        if values:
            check["ExpressionAttributeValues"] = values
        put = self._sized_put(_event_item(task_id, seq, event, event_id), "the event", NEW_ITEM)
        try:
            self._transact([("header", {"ConditionCheck": check}), ("event", put)])
        except ConflictError as conflict:
            if "event" in conflict.failed and event_id:
                existing = self._get(keys.task_key(task_id, keys.event_sk(seq))) or {}
                if keys.event_id_of(existing) == event_id:
                    return False  # this very write was done before (a re-run of the step)
            raise ConflictError(f"event {seq} of {task_id} exists", ("event",)) from conflict
        return True

    def save_flow_state(
        self, task_id: str, turn: int, flow_state: dict[str, Any], step: int | None = None
    ) -> None:
        kept, state_ref = self._flow_state(task_id, flow_state)
        update = "SET flowState = :fs"
        condition = "#turn = :turn AND #st = :working"
        names = {"#turn": "turn", "#st": "state"}
        values = {
            ":fs": s(kept),
            ":turn": n(turn),
            ":working": s(TaskState.WORKING.value),
        }
        if state_ref is not None:
            update += f", {keys.FLOW_STATE_REF} = :fsr"
            values[":fsr"] = s(state_ref)
        if step is not None:
            # Saved at most once per (turn, step): a re-run that finishes again finds it done.
            update += ", #ft = :turn, #fs = :step"
            condition += " AND (attribute_not_exists(#ft) OR #ft <> :turn OR #fs < :step)"
            names.update({"#ft": FLOW_TURN, "#fs": FLOW_STEP})
            values[":step"] = n(step)
        if state_ref is None:
            update += f" REMOVE {keys.FLOW_STATE_REF}"
        try:
            self._db.update_item(
                TableName=self._table,
                Key=keys.task_key(task_id, keys.HEADER),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            raise ConflictError("task moved on", ("header",)) from exc

    def forget_expired(self, image: Mapping[str, Any]) -> bool:
        """Take a task whose header TTL removed off the ListTasks counters. `image` is the removed
        item's deserialized old image; anything but a task header is ignored (False). Idempotent:
        the decrement is conditional on creating the task's `Z` marker, so a redelivery writes
        nothing (False). Needs `dynamodb:UpdateItem` only."""
        fields = keys.expired_header(image)
        if fields is None:
            return False
        task_id, owner, context_id, state = fields
        marker = {
            "TableName": self._table,
            "Key": keys.task_key(task_id, keys.EXPIRED_SK),
            "UpdateExpression": "SET #ttl = :ttl",
            "ConditionExpression": NEW_ITEM,
            "ExpressionAttributeNames": {"#ttl": keys.EXPIRES},
            "ExpressionAttributeValues": {
                ":ttl": n(int(time.time()) + keys.EXPIRED_MARKER_SECONDS)
            },
        }
        counts = {"all": -1, keys.state_counter(state): -1}
        try:
            self._transact(
                [
                    ("expired", {"Update": marker}),
                    *self._counter_updates(owner, _joined(task_id, context_id), counts),
                ]
            )
        except ConflictError:
            return False  # counted off before: this record came again
        return True

    # -- reads -----------------------------------------------------------------------------

    def get_record(self, task_id: str) -> TaskRecord | None:
        item = self._get(keys.task_key(task_id, keys.HEADER))
        return _record_of(item) if item else None

    def find_dedupe(self, owner: str, message_id: str) -> tuple[str, str] | None:
        item = self._get(keys.dedupe_key(owner, message_id))
        if item is None:
            return None
        until = item.get("dedupeUntil")
        if until is not None and int(until["N"]) <= time.time():
            return None
        return (item["taskId"]["S"], item["hash"]["S"])

    def _partition(
        self,
        task_id: str,
        condition: str = "",
        values: Mapping[str, Any] | None = None,
        filter: str = "",
    ) -> list[dict[str, Any]]:
        """Every item of a task's partition matching `pk = :pk{condition}` (and `filter`),
        with the expression `values` they name."""
        if not keys.key_fits(keys.task_key(task_id, keys.HEADER)):  # names no task
            return []
        extra = {"FilterExpression": filter} if filter else {}
        return self._query_all(
            KeyConditionExpression="pk = :pk" + condition,
            ExpressionAttributeValues={":pk": keys.task_pk(task_id), **(values or {})},
            ConsistentRead=True,
            **extra,
        )

    def _history(
        self, task_id: str, limit: int | None, header: dict[str, Any] | None = None
    ) -> list[Message]:
        """The last `limit` history messages (all: None), oldest first, including the first message
        when the header holds it (unless it is given): one Query reads the header with the items."""
        if not keys.key_fits(keys.task_key(task_id, keys.HEADER)):  # names no task
            return []
        first = keys.history_sk(1) if header is not None else keys.HEADER
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": keys.task_pk(task_id),
                ":from": s(first),
                ":to": s(keys.LAST_HISTORY_SK),
            },
            "ConsistentRead": True,
        }
        if limit is None:
            items = self._query_all(**kwargs)
        else:
            page = self._db.query(
                TableName=self._table, ScanIndexForward=False, Limit=limit, **kwargs
            )
            items = page.get("Items", [])
        if header is None:
            header = next((i for i in items if keys.is_header(i)), None)
        messages = keys.history_of(header, items)
        return messages if limit is None else messages[max(0, len(messages) - limit) :]

    def get_snapshot(self, task_id: str, history_length: int | None) -> TaskSnapshot | None:
        """Header, events and (recent) history. One query when all history is wanted."""
        if history_length is None:
            # Up to the history: the later items (configs, delegations) are not the task's.
            items = self._partition(task_id, " AND sk <= :m", {":m": s(keys.LAST_HISTORY_SK)})
        else:
            # Events sort before the header; history after it.
            items = self._partition(task_id, " AND sk <= :h", {":h": s(keys.HEADER)})
        header = next((i for i in items if keys.is_header(i)), None)
        if header is None:
            return None
        if history_length is None:
            history = keys.history_of(header, items)
        else:
            history = self._history(task_id, history_length, header) if history_length else []
        record = _record_of(header)
        event_items = [i for i in items if keys.is_event(i)]
        logged = [(keys.seq_of(i), keys.event_of(i)) for i in event_items]
        events = _with_header_events(header, logged)
        status, artifacts = fold_events((event for _, event in events), record.status)
        return TaskSnapshot(
            record=record,
            status=status or record.status,
            artifacts=artifacts,
            history=history,
            seq=events[-1][0] if events else 0,
            event_ids=frozenset(filter(None, map(keys.event_id_of, event_items))),
        )

    def read_history(self, task_id: str, history_length: int | None) -> list[Message]:
        return self._history(task_id, history_length) if history_length != 0 else []

    def read_artifacts(self, task_id: str) -> list[Artifact]:
        items = self._query_all(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
            FilterExpression="kind = :a",
            ExpressionAttributeValues={
                ":pk": keys.task_pk(task_id),
                ":e": s(keys.EVENT_PREFIX),
                ":a": s("artifact"),
            },
            ConsistentRead=True,
        )
        _, artifacts = fold_events(keys.event_of(i) for i in items)
        return artifacts

    def read_events(
        self, task_id: str, after_seq: int, limit: int = 100
    ) -> list[tuple[int, StreamResponse]]:
        # From before the header's last event: up to the header too, which may stand for some.
        with_header = after_seq < keys.LAST_HEADER_EVENT_SEQ
        page = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :to",
            ExpressionAttributeValues={
                ":pk": keys.task_pk(task_id),
                ":from": s(keys.event_sk(after_seq + 1)),
                ":to": s(keys.HEADER if with_header else keys.event_sk(keys.LAST_SEQ)),
            },
            Limit=limit + 1 if with_header else limit,
            ConsistentRead=True,
        )
        items = page.get("Items", [])
        found = [(keys.seq_of(i), keys.event_of(i)) for i in items if keys.is_event(i)]
        if with_header and not (found and found[0][0] == after_seq + 1):
            header = next((i for i in items if keys.is_header(i)), None)
            if header is None and found:  # a full page of later events: the header after it
                header = self._get(keys.task_key(task_id, keys.HEADER))
            if header is not None:
                found = [e for e in _with_header_events(header, found) if e[0] > after_seq]
        return found[:limit]

    def last_seq(self, task_id: str) -> int:
        # Backwards from the header: the header, then the last event item (one small read).
        page = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :e AND :h",
            ExpressionAttributeValues={
                ":pk": keys.task_pk(task_id),
                ":e": s(keys.event_sk(0)),
                ":h": s(keys.HEADER),
            },
            ScanIndexForward=False,
            Limit=2,
            ConsistentRead=True,
            ProjectionExpression=(
                f"sk, seq, {keys.FIRST_EVENT}, {keys.WORKING_SEQ}, {keys.WORKING_AT}"
            ),
        )
        items = page.get("Items", [])
        seqs = [keys.seq_of(i) for i in items if keys.is_event(i)]
        for header in (i for i in items if keys.is_header(i)):
            seqs += keys.header_seqs(header)
        return max(seqs, default=0)

    def task_as_of(self, task_id: str, seq: int) -> Task | None:
        """The task as a client that had seen events 1..seq would hold it (no history)."""
        # Events up to `seq` and the header (which may stand for the first events) in one
        # Query; later events are filtered out by DynamoDB, not sent and parsed here.
        items = self._partition(
            task_id,
            " AND sk BETWEEN :first AND :last",
            {":first": s(keys.event_sk(0)), ":last": s(keys.HEADER), ":seq": n(seq)},
            filter="attribute_not_exists(seq) OR seq <= :seq",
        )
        header = next((i for i in items if keys.is_header(i)), None)
        events = [(keys.seq_of(i), keys.event_of(i)) for i in items if keys.is_event(i)]
        events = _with_header_events(header, events) if header else events
        return task_from_events(task_id, [event for number, event in events if number <= seq])

    def get_event_json(self, task_id: str, seq: int) -> bytes | None:
        """One event as stored: its `StreamResponse` wire JSON (what the stream carries)."""
        if seq <= keys.LAST_HEADER_EVENT_SEQ:  # the header may stand for it
            header = self._get(keys.task_key(task_id, keys.HEADER))
            for number, event in keys.header_events(header) if header else []:
                if number == seq:
                    return keys.dumps(event.wire()).encode()
        item = self._get(keys.task_key(task_id, keys.event_sk(seq)))
        return item[keys.EVENT_JSON]["S"].encode() if item else None


def _joined(task_id: str, context_id: str) -> str | None:
    """The context whose counter counts this task: none when the task opened it (its header
    counts it, `keys.opens_context`)."""
    return None if keys.opens_context(task_id, context_id) else context_id


def _header_lacks_event(seq: int, values: dict[str, Any]) -> str:
    """A condition on the header: it does not stand for event `seq` (adds its value)."""
    if seq == keys.FIRST_SEQ:
        return f"attribute_not_exists({keys.FIRST_EVENT})"
    values[":heldseq"] = n(seq)
    return f"(attribute_not_exists({keys.WORKING_SEQ}) OR NOT ({keys.WORKING_SEQ} = :heldseq))"


def _with_header_events(
    header: Mapping[str, Any], events: list[tuple[int, StreamResponse]]
) -> list[tuple[int, StreamResponse]]:
    """`events` (seq, event) with the events the header stands for, in order (one both in
    the header and an item is taken once, from the item)."""
    logged = {seq for seq, _ in events}
    missing = [(seq, e) for seq, e in keys.header_events(header) if seq not in logged]
    return sorted([*missing, *events], key=lambda pair: pair[0]) if missing else events
