"""Delegations on DynamoDB: items `R#{turn}.{step}.{index}` in the task's partition (numbers
padded, keys.delegation_sk), seen notifications as tiny items `S#...` of their own, and the
header's `delegationRound` / `waiting`.

A round begins in one transaction (its records and the header, conditional as
`save_flow_state`); every later change is one conditional write of one item. A record's
values are JSON strings; what it holds when it begins leaves room for what its updates add
(DELEGATION_RESERVE), so an update never grows it past an item.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.models import TaskState, format_timestamp, limits
from a2a_serverless.store.base import (
    ConflictError,
    DelegationRecord,
    DelegationState,
    TooLarge,
    round_of_key,
)
from a2a_serverless.store.dynamodb.keys import n, s
from a2a_serverless.store.dynamodb.tasks import (
    FLOW_STEP,
    FLOW_TURN,
    HEADER_BUDGET,
    NEW_ITEM,
    DynamoDBTaskLog,
    _record_of,
)

# Bounds of what a delegation's updates store (the caller bounds remote values before; past
# these: TooLarge, nothing written). An error text is cut to MAX_ERROR_BYTES instead: a settle
# must not fail on its explanation.
MAX_REMOTE_MESSAGE_BYTES = limits.MAX_STATUS_MESSAGE_BYTES  # a remote status's message, JSON
MAX_REMOTE_ID_BYTES = limits.MAX_ID_BYTES  # remote task and context ids
MAX_SHORT_BYTES = 64  # a remote state, a status time, an outcome, a mode
MAX_ERROR_BYTES = 2048
# What updates may add to a record: the remote message, error and ids at their bounds, and a
# margin for the short values and every attribute name.
DELEGATION_RESERVE = (
    MAX_REMOTE_MESSAGE_BYTES + MAX_ERROR_BYTES + 2 * MAX_REMOTE_ID_BYTES + 8 * MAX_SHORT_BYTES
)
MAX_DELEGATION_BYTES = limits.MAX_ITEM_BYTES - DELEGATION_RESERVE
MAX_ROUND_RECORDS = 99  # a transaction's 100 items, the header one of them

_OPEN = "#ds IN (:sending, :waiting)"


def _now() -> str:
    return format_timestamp(datetime.now(UTC))


def _short(value: str, what: str) -> str:
    """`value` if within MAX_SHORT_BYTES; TooLarge otherwise."""
    size = keys.utf8_size(value)
    if size > MAX_SHORT_BYTES:
        raise TooLarge(what, size, MAX_SHORT_BYTES, "MAX_SHORT_BYTES")
    return value


def _remote_id(value: str, what: str) -> dict[str, str]:
    size = keys.utf8_size(value)
    if size > MAX_REMOTE_ID_BYTES:
        raise TooLarge(what, size, MAX_REMOTE_ID_BYTES, "MAX_ID_BYTES")
    return s(value)


def _message(message: dict[str, Any]) -> dict[str, str]:
    return s(
        keys.checked_json(
            message,
            "the remote status message",
            MAX_REMOTE_MESSAGE_BYTES,
            "MAX_STATUS_MESSAGE_BYTES",
        )
    )


def cut_error(error: str) -> str:
    """The error text within MAX_ERROR_BYTES (cut at a character)."""
    data = error.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_ERROR_BYTES:
        return error
    return data[:MAX_ERROR_BYTES].decode("utf-8", "ignore")


class DynamoDBDelegations(DynamoDBTaskLog):
    """The DelegationStore on the table (a task log: it saves the flow state as it does)."""

    def _delegation_put(self, task_id: str, record: DelegationRecord) -> dict[str, Any]:
        sk = keys.delegation_sk(record.key)
        if record.task_id != task_id or sk is None:
            raise ValueError(f"{record.key!r} of {record.task_id!r} is no delegation of {task_id}")
        item = {**keys.task_key(task_id, sk), **keys.delegation_values(record)}
        if not record.updated_at:
            item["updatedAt"] = s(_now())
        put = self._put(item, NEW_ITEM)
        size = keys.item_bytes(put["Put"]["Item"])
        if size > MAX_DELEGATION_BYTES:
            raise TooLarge(
                "a delegation (its message and turn context)",
                size,
                MAX_DELEGATION_BYTES,
                "MAX_ITEM_BYTES",
                "delegate a smaller message",
            )
        return put

    def begin_round(
        self,
        task_id: str,
        turn: int,
        step: int,
        records: list[DelegationRecord],
        flow_state: dict[str, Any],
    ) -> bool:
        round = f"{turn}.{step}"
        if not 0 < len(records) <= MAX_ROUND_RECORDS:
            raise ValueError(f"a round has 1 to {MAX_ROUND_RECORDS} delegations")
        if any(round_of_key(r.key) != round for r in records):
            raise ValueError(f"every delegation of round {round} has a key {round}.{{index}}")
        if len({r.key for r in records}) != len(records):
            raise ValueError("a round's delegations have distinct keys")
        puts = [("delegation", self._delegation_put(task_id, r)) for r in records]
        size = HEADER_BUDGET + sum(keys.item_bytes(p["Put"]["Item"]) for _, p in puts)
        if size > limits.DYNAMODB_TRANSACTION_BYTES:
            raise TooLarge(
                "a delegation round",
                size,
                limits.DYNAMODB_TRANSACTION_BYTES,
                "DYNAMODB_TRANSACTION_BYTES",
                "delegate to fewer agents or smaller messages",
            )
        kept, state_ref = self._flow_state(task_id, flow_state)
        update = "SET flowState = :fs, #ft = :turn, #fs = :step, #dr = :round, #wait = :true"
        values: dict[str, Any] = {
            ":fs": s(kept),
            ":turn": n(turn),
            ":step": n(step),
            ":round": s(round),
            ":true": {"BOOL": True},
            ":working": s(TaskState.WORKING.value),
        }
        if state_ref is not None:
            update += f", {keys.FLOW_STATE_REF} = :fsr"
            values[":fsr"] = s(state_ref)
        else:
            update += f" REMOVE {keys.FLOW_STATE_REF}"
        header = {
            "TableName": self._table,
            "Key": keys.task_key(task_id, keys.HEADER),
            "UpdateExpression": update,
            # As save_flow_state's: working at this turn, this step's outcome not saved yet.
            "ConditionExpression": "#turn = :turn AND #st = :working"
            " AND (attribute_not_exists(#ft) OR #ft <> :turn OR #fs < :step)",
            "ExpressionAttributeNames": {
                "#turn": "turn",
                "#st": "state",
                "#ft": FLOW_TURN,
                "#fs": FLOW_STEP,
                "#dr": keys.DELEGATION_ROUND,
                "#wait": keys.WAITING,
            },
            "ExpressionAttributeValues": values,
        }
        try:
            self._transact([("header", {"Update": header}), *puts])
        except ConflictError as conflict:
            if "header" not in conflict.failed:
                raise
            # Begun before (a re-run) while the turn is still live: kept as it is.
            item = self._get(keys.task_key(task_id, keys.HEADER))
            task = _record_of(item) if item else None
            if (
                task is not None
                and task.state is TaskState.WORKING
                and task.turn == turn
                and self.get_delegation(task_id, records[0].key) is not None
            ):
                return False
            raise ConflictError("task moved on", ("header",)) from conflict
        return True

    # -- reads -------------------------------------------------------------------------------

    def get_delegation(self, task_id: str, key: str) -> DelegationRecord | None:
        item_key = _delegation_key(task_id, key)
        item = self._get(item_key) if item_key is not None else None
        return keys.delegation_of(item) if item else None

    def _delegations(self, task_id: str, prefix: str | None) -> list[DelegationRecord]:
        if prefix is None or not keys.key_fits(keys.task_key(task_id, keys.HEADER)):
            return []
        items = self._query_all(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.task_pk(task_id), ":p": s(prefix)},
            ConsistentRead=True,
        )
        return [keys.delegation_of(item) for item in items]

    def round_delegations(self, task_id: str, round: str) -> list[DelegationRecord]:
        return self._delegations(task_id, keys.round_sk_prefix(round))

    def task_delegations(self, task_id: str) -> list[DelegationRecord]:
        return self._delegations(task_id, keys.DELEGATION_PREFIX)

    # -- one conditional write each ----------------------------------------------------------

    def _update_delegation(
        self,
        task_id: str,
        key: str,
        update: str,
        condition: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
    ) -> bool:
        """One conditional update of a delegation: False when its condition failed (or there
        is no such delegation)."""
        item_key = _delegation_key(task_id, key)
        if item_key is None:
            return False
        try:
            self._db.update_item(
                TableName=self._table,
                Key=item_key,
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#ds": "dstate", **(names or {})},
                ExpressionAttributeValues=values,
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def mark_sent(
        self,
        task_id: str,
        key: str,
        mode: str,
        deadline: float,
        remote_task_id: str | None,
        remote_context_id: str | None,
    ) -> bool:
        """SENDING → WAITING. A remote task bound before (a notification that came first)
        stays bound."""
        update = "SET #ds = :waiting, #mode = :mode, deadline = :deadline, updatedAt = :now"
        values: dict[str, Any] = {
            ":waiting": s(DelegationState.WAITING.value),
            ":sending": s(DelegationState.SENDING.value),
            ":mode": s(_short(mode, "the delegation's mode")),
            ":deadline": keys.number(deadline),
            ":now": s(_now()),
        }
        if remote_task_id is not None:
            update += ", rtask = if_not_exists(rtask, :rtask)"
            values[":rtask"] = _remote_id(remote_task_id, "the remote task id")
        if remote_context_id is not None:
            update += ", rctx = if_not_exists(rctx, :rctx)"
            values[":rctx"] = _remote_id(remote_context_id, "the remote context id")
        return self._update_delegation(
            task_id, key, update, "#ds = :sending", values, {"#mode": "mode"}
        )

    def record_status(
        self, task_id: str, key: str, state: str, at: str, message: dict[str, Any] | None
    ) -> bool:
        """Ordered by `at` as a time (keys.status_order: any RFC 3339 form, microseconds);
        ValueError when `at` is no time."""
        order = keys.status_order(_short(at, "the remote status time"))
        update = "SET rstate = :state, rat = :at, #order = :order, updatedAt = :now"
        values: dict[str, Any] = {
            ":sending": s(DelegationState.SENDING.value),
            ":waiting": s(DelegationState.WAITING.value),
            ":state": s(_short(state, "the remote state")),
            ":at": s(at),
            ":order": s(order),
            ":now": s(_now()),
        }
        if message is not None:
            update += ", rmsg = :msg"
            values[":msg"] = _message(message)
        else:
            update += " REMOVE rmsg"
        condition = f"{_OPEN} AND (attribute_not_exists(#order) OR #order < :order)"
        return self._update_delegation(
            task_id, key, update, condition, values, {"#order": keys.STATUS_ORDER}
        )

    def bind_remote_task(
        self, task_id: str, key: str, remote_task_id: str, context_id: str
    ) -> bool:
        """No write when the task is bound already."""
        item_key = _delegation_key(task_id, key)
        if item_key is None:
            return False
        try:
            self._db.update_item(
                TableName=self._table,
                Key=item_key,
                UpdateExpression="SET rtask = :rtask, rctx = if_not_exists(rctx, :rctx)",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(rtask)",
                ExpressionAttributeValues={
                    ":rtask": _remote_id(remote_task_id, "the remote task id"),
                    ":rctx": _remote_id(context_id, "the remote context id"),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            bound = (exc.response.get("Item") or {}).get("rtask", {}).get("S")
            return bool(bound == remote_task_id)
        return True

    def count_poll(self, task_id: str, key: str) -> None:
        self._update_delegation(
            task_id, key, "ADD polls :one", "attribute_exists(#ds)", {":one": n(1)}
        )

    def settle(
        self,
        task_id: str,
        key: str,
        outcome: str,
        error: str | None = None,
        state: str | None = None,
        message: dict[str, Any] | None = None,
    ) -> bool:
        """`error` is kept to its first MAX_ERROR_BYTES."""
        update = "SET #ds = :settled, outcome = :outcome, updatedAt = :now"
        values: dict[str, Any] = {
            ":settled": s(DelegationState.SETTLED.value),
            ":sending": s(DelegationState.SENDING.value),
            ":waiting": s(DelegationState.WAITING.value),
            ":outcome": s(_short(outcome, "the delegation's outcome")),
            ":now": s(_now()),
        }
        if error is not None:
            update += ", #error = :error"
            values[":error"] = s(cut_error(error))
        if state is not None:
            update += ", rstate = :state"
            values[":state"] = s(_short(state, "the remote state"))
        if message is not None:
            update += ", rmsg = :msg"
            values[":msg"] = _message(message)
        names = {"#error": "error"} if error is not None else None
        return self._update_delegation(task_id, key, update, _OPEN, values, names)

    def note_seen(self, task_id: str, key: str, digest: str) -> bool:
        sk = keys.seen_sk(key, digest)
        if sk is None or not keys.key_fits(keys.task_key(task_id, sk)):
            return False
        try:
            self._db.put_item(
                TableName=self._table,
                Item=self._expiring(keys.task_key(task_id, sk)),
                ConditionExpression=NEW_ITEM,
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def end_wait(self, task_id: str, round: str) -> bool:
        key = keys.task_key(task_id, keys.HEADER)
        if not keys.key_fits(key):
            return False
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="REMOVE #wait",
                ConditionExpression="#wait = :true AND #dr = :round",
                ExpressionAttributeNames={"#wait": keys.WAITING, "#dr": keys.DELEGATION_ROUND},
                ExpressionAttributeValues={":true": {"BOOL": True}, ":round": s(round)},
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def resume_wait(self, task_id: str, round: str) -> None:
        key = keys.task_key(task_id, keys.HEADER)
        if not keys.key_fits(key):
            return
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET #wait = :true",
                ConditionExpression="#st = :working AND #dr = :round",
                ExpressionAttributeNames={
                    "#wait": keys.WAITING,
                    "#dr": keys.DELEGATION_ROUND,
                    "#st": "state",
                },
                ExpressionAttributeValues={
                    ":true": {"BOOL": True},
                    ":round": s(round),
                    ":working": s(TaskState.WORKING.value),
                },
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            pass  # the task moved on (canceled, another round): nothing to wait on


def _delegation_key(task_id: str, key: str) -> dict[str, Any] | None:
    """The item key of a delegation; None for a key that names none (a caller's path)."""
    sk = keys.delegation_sk(key)
    if sk is None:
        return None
    item_key = keys.task_key(task_id, sk)
    return item_key if keys.key_fits(item_key) else None
