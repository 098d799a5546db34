"""DynamoDB single-table store.

Partition `T#{taskId}` holds the header (`H`), the event log (`E#{seq:010d}`) and the
history (`M#{n:06d}`). The event log is the source of status and artifacts: chunk
events are single conditional puts (no header write, no index write); state changes
are one transaction (header + event + counters [+ history]). `O#{owner}` holds the
exact ListTasks counters (`N#{shard}` per owner, `X#{contextId}` per context);
`D#{owner}#{messageId}` the send retry records. Three sparse GSIs order an owner's tasks
by status timestamp.
"""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime
from typing import Any

from a2a_serverless.models import (
    Artifact,
    Message,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    format_timestamp,
)
from a2a_serverless.store.base import (
    ConflictError,
    Dedupe,
    ListQuery,
    PushDelivery,
    StatusChange,
    TaskRecord,
    TaskSnapshot,
)
from a2a_serverless.store.fold import fold_events

HEADER = "H"
EVENT_PREFIX = "E#"
HISTORY_PREFIX = "M#"
PUSH_PREFIX = "P#"
INDEX_BY_OWNER = "byOwner"
INDEX_BY_CONTEXT = "byOwnerContext"
INDEX_BY_STATE = "byOwnerState"

OWNER_SHARD_PREFIX = "N#"
CONTEXT_COUNTER_PREFIX = "X#"
OWNER_COUNTER_SHARDS = 8
TRANSACTION_ATTEMPTS = 6

# Attributes the list indexes carry (the flow state stays out of them).
INDEX_PROJECTION = ["taskId", "contextId", "owner", "state", "status", "meta", "turn", "hcount"]


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _event_sk(seq: int) -> str:
    return f"{EVENT_PREFIX}{seq:010d}"


def _history_sk(n: int) -> str:
    return f"{HISTORY_PREFIX}{n:06d}"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _sort_key(status_ts: str, task_id: str) -> str:
    return f"{status_ts}#{task_id}"


def _state_counter(state: TaskState) -> str:
    return "st_" + state.name


class DynamoDBTaskStore:
    """The TaskStore on one DynamoDB table (see template.yaml `TasksTable`)."""

    def __init__(self, client: Any, table_name: str, retention_days: int = 30) -> None:
        self._db = client
        self._table = table_name
        self._ttl_seconds = retention_days * 86400

    # -- helpers ---------------------------------------------------------------------------

    def _expires(self) -> dict[str, str]:
        return _n(int(time.time()) + self._ttl_seconds)

    def _key(self, task_id: str, sk: str) -> dict[str, Any]:
        return {"pk": _s(f"T#{task_id}"), "sk": _s(sk)}

    def _event_item(self, task_id: str, seq: int, event: StreamResponse) -> dict[str, Any]:
        kind = "status" if event.status_update is not None else "artifact"
        return {
            **self._key(task_id, _event_sk(seq)),
            "seq": _n(seq),
            "kind": _s(kind),
            "ev": _s(_dumps(event.wire())),
            "expiresAt": self._expires(),
        }

    def _history_item(self, task_id: str, n: int, message: Message) -> dict[str, Any]:
        return {
            **self._key(task_id, _history_sk(n)),
            "msg": _s(_dumps(message.wire())),
            "expiresAt": self._expires(),
        }

    def _counter_updates(
        self, owner: str, context_id: str, add: dict[str, int]
    ) -> list[dict[str, Any]]:
        """ADD to one random shard of the owner's counters and to the context's counter.

        Shards spread the owner's hot item (every transition of every task of that owner
        touches it) so concurrent transactions rarely conflict; the TTL is refreshed so the
        counters outlive the owner's last task and then go too.
        """
        names = {f"#c{i}": name for i, name in enumerate(add)}
        names["#ttl"] = "expiresAt"
        values = {f":v{i}": _n(delta) for i, delta in enumerate(add.values())}
        values[":ttl"] = self._expires()
        expression = (
            "ADD " + ", ".join(f"#c{i} :v{i}" for i in range(len(add))) + " SET #ttl = :ttl"
        )
        shard = random.randrange(OWNER_COUNTER_SHARDS)
        return [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": {"pk": _s(f"O#{owner}"), "sk": _s(sk)},
                    "UpdateExpression": expression,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
            for sk in (f"{OWNER_SHARD_PREFIX}{shard}", f"{CONTEXT_COUNTER_PREFIX}{context_id}")
        ]

    def _transact(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Write (role, item) pairs atomically; a failed condition names the roles.

        A conflict with a concurrent transaction on a shared item (the counters) is not a
        lost race: it is retried with jittered backoff.
        """
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._db.transact_write_items(TransactItems=[item for _, item in items])
                return
            except self._db.exceptions.TransactionCanceledException as exc:
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                failed = tuple(
                    role
                    for (role, _), code in zip(items, reasons, strict=False)
                    if code == "ConditionalCheckFailed"
                )
                if failed:
                    raise ConflictError(f"condition failed on {', '.join(failed)}", failed) from exc
                if "TransactionConflict" not in reasons or attempt == TRANSACTION_ATTEMPTS - 1:
                    raise
            time.sleep(random.uniform(0, 0.02 * 2**attempt))

    @staticmethod
    def _record(item: dict[str, Any]) -> TaskRecord:
        status = TaskStatus.model_validate_json(item["status"]["S"])
        return TaskRecord(
            task_id=item["taskId"]["S"],
            context_id=item["contextId"]["S"],
            owner=item["owner"]["S"],
            state=TaskState(item["state"]["S"]),
            status=status,
            status_seq=int(item.get("statusSeq", {"N": "0"})["N"]),
            turn=int(item.get("turn", {"N": "0"})["N"]),
            execution=item.get("exec", {}).get("S", ""),
            flow_state=json.loads(item["flowState"]["S"]) if "flowState" in item else {},
            metadata=json.loads(item["meta"]["S"]) if "meta" in item else None,
            history_count=int(item.get("hcount", {"N": "0"})["N"]),
            created_at=item.get("createdAt", {}).get("S", ""),
        )

    # -- writes ----------------------------------------------------------------------------

    def create_task(
        self,
        record: TaskRecord,
        message: Message,
        event: StreamResponse,
        dedupe: Dedupe | None,
        push_config: TaskPushNotificationConfig | None = None,
    ) -> None:
        """Header, first history message, first event and counters in one transaction."""
        status_ts = format_timestamp(record.status.timestamp or datetime.now(UTC))
        gsk = _sort_key(status_ts, record.task_id)
        header: dict[str, Any] = {
            **self._key(record.task_id, HEADER),
            "taskId": _s(record.task_id),
            "contextId": _s(record.context_id),
            "owner": _s(record.owner),
            "state": _s(record.state.value),
            "status": _s(_dumps(record.status.wire())),
            "statusSeq": _n(record.status_seq),
            "turn": _n(record.turn),
            "exec": _s(record.execution),
            "flowState": _s(_dumps(record.flow_state)),
            "hcount": _n(1),
            "createdAt": _s(record.created_at or status_ts),
            "g1pk": _s(record.owner),
            "g2pk": _s(f"{record.owner}#{record.context_id}"),
            "g3pk": _s(f"{record.owner}#{record.state.value}"),
            "gsk": _s(gsk),
            "expiresAt": self._expires(),
        }
        if record.metadata:
            header["meta"] = _s(_dumps(record.metadata))
        items: list[tuple[str, dict[str, Any]]] = [
            (
                "header",
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": header,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ),
            (
                "history",
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": self._history_item(record.task_id, 1, message),
                    }
                },
            ),
            (
                "event",
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": self._event_item(record.task_id, record.status_seq, event),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ),
            *(
                ("counter", update)
                for update in self._counter_updates(
                    record.owner, record.context_id, {"all": 1, _state_counter(record.state): 1}
                )
            ),
        ]
        if dedupe is not None:
            items.append(("dedupe", self._dedupe_put(dedupe, record.task_id)))
        if push_config is not None:
            # In the same transaction: the webhook must exist before the first event does.
            items.append(("push", self._push_put(push_config)))
        self._transact(items)

    def _dedupe_put(self, dedupe: Dedupe, task_id: str) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._table,
                "Item": {
                    "pk": _s(f"D#{dedupe.owner}#{dedupe.message_id}"),
                    "sk": _s("D"),
                    "taskId": _s(task_id),
                    "hash": _s(dedupe.content_hash),
                    "expiresAt": self._expires(),
                },
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def apply_status(self, change: StatusChange) -> None:
        """A state transition: conditional on the state (and turn) it moves from."""
        status_ts = format_timestamp(change.to_status.timestamp or datetime.now(UTC))
        new_state = change.to_status.state
        names = {"#st": "state", "#turn": "turn"}
        values: dict[str, Any] = {
            ":from": _s(change.from_state.value),
            ":to": _s(new_state.value),
            ":status": _s(_dumps(change.to_status.wire())),
            ":seq": _n(change.seq),
            ":g3": _s(f"{change.owner}#{new_state.value}"),
            ":gsk": _s(_sort_key(status_ts, change.task_id)),
            ":turn": _n(change.turn),
        }
        sets = [
            "#st = :to",
            "#status = :status",
            "statusSeq = :seq",
            "g3pk = :g3",
            "gsk = :gsk",
            "#turn = :turn",
        ]
        names["#status"] = "status"
        if change.execution is not None:
            sets.append("#exec = :exec")
            names["#exec"] = "exec"
            values[":exec"] = _s(change.execution)
        if change.flow_state is not None:
            sets.append("flowState = :fs")
            values[":fs"] = _s(_dumps(change.flow_state))
        condition = "#st = :from"
        if change.expected_turn is not None:
            condition += " AND #turn = :eturn"
            values[":eturn"] = _n(change.expected_turn)
        items: list[tuple[str, dict[str, Any]]] = []
        if change.history_message is not None:
            # The history index comes from the header read that decided this change; the
            # condition on it makes a concurrent history append lose cleanly.
            n = change.history_index
            sets.append("hcount = :hc")
            values[":hc"] = _n(n)
            condition += " AND hcount = :hprev"
            values[":hprev"] = _n(n - 1)
            items.append(
                (
                    "history",
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": self._history_item(change.task_id, n, change.history_message),
                        }
                    },
                )
            )
        if change.dedupe is not None:
            items.append(("dedupe", self._dedupe_put(change.dedupe, change.task_id)))
        if change.push_config is not None:
            items.append(("push", self._push_put(change.push_config)))
        header_update = {
            "Update": {
                "TableName": self._table,
                "Key": self._key(change.task_id, HEADER),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }
        event_put = {
            "Put": {
                "TableName": self._table,
                "Item": self._event_item(change.task_id, change.seq, change.event),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        counters: list[tuple[str, dict[str, Any]]] = []
        if change.from_state != new_state:
            counters = [
                ("counter", update)
                for update in self._counter_updates(
                    change.owner,
                    change.context_id,
                    {_state_counter(change.from_state): -1, _state_counter(new_state): 1},
                )
            ]
        self._transact([("header", header_update), ("event", event_put), *items, *counters])

    def append_event(self, task_id: str, seq: int, event: StreamResponse) -> None:
        """One event with no state change (artifact chunk, progress status): one put."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item=self._event_item(task_id, seq, event),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            raise ConflictError(f"event {seq} of {task_id} exists", ("event",)) from exc

    def save_flow_state(self, task_id: str, turn: int, flow_state: dict[str, Any]) -> None:
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._key(task_id, HEADER),
                UpdateExpression="SET flowState = :fs",
                ConditionExpression="#turn = :turn AND #st = :working",
                ExpressionAttributeNames={"#turn": "turn", "#st": "state"},
                ExpressionAttributeValues={
                    ":fs": _s(_dumps(flow_state)),
                    ":turn": _n(turn),
                    ":working": _s(TaskState.WORKING.value),
                },
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            raise ConflictError("task moved on", ("header",)) from exc

    # -- push notification configs (items P#{configId} in the task partition) ------------------

    def _push_key(self, task_id: str, config_id: str) -> dict[str, Any]:
        return self._key(task_id, f"{PUSH_PREFIX}{config_id}")

    def _push_item(self, config: TaskPushNotificationConfig) -> dict[str, Any]:
        item = {
            **self._push_key(config.task_id or "", config.id or ""),
            "cfg": _s(_dumps(config.wire())),
            "expiresAt": self._expires(),
        }
        if config.payload_version != "1.0":
            item["fmt"] = _s(config.payload_version)
        return item

    def _push_put(self, config: TaskPushNotificationConfig) -> dict[str, Any]:
        """A transaction item writing the config (with the task or the turn it belongs to)."""
        return {"Put": {"TableName": self._table, "Item": self._push_item(config)}}

    @staticmethod
    def _push_config(item: dict[str, Any]) -> TaskPushNotificationConfig:
        config = TaskPushNotificationConfig.model_validate_json(item["cfg"]["S"])
        return config.for_payload_version(item["fmt"]["S"]) if "fmt" in item else config

    def _update_push(self, task_id: str, config_id: str, **update: Any) -> dict[str, Any] | None:
        """One conditional update of a config item: the response, or None when its condition
        failed (the config was deleted, or its queue state moved on)."""
        try:
            return self._db.update_item(
                TableName=self._table, Key=self._push_key(task_id, config_id), **update
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return None

    def put_push_config(self, config: TaskPushNotificationConfig) -> None:
        """Create or replace one config (its id is already assigned)."""
        self._db.put_item(TableName=self._table, Item=self._push_item(config))

    def get_push_config(self, task_id: str, config_id: str) -> TaskPushNotificationConfig | None:
        found = self.get_push_delivery(task_id, config_id)
        return found.config if found else None

    def get_push_delivery(self, task_id: str, config_id: str) -> PushDelivery | None:
        """A config with its queue state: failed attempts of the current queued delivery and
        the last event queued (one read)."""
        item = self._db.get_item(
            TableName=self._table, Key=self._push_key(task_id, config_id), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        queued = item.get("queuedThrough", {}).get("N")
        return PushDelivery(
            config=self._push_config(item),
            failures=int(item.get("failures", {}).get("N", "0")),
            queued_through=int(queued) if queued is not None else None,
        )

    def count_push_failure(self, task_id: str, config_id: str) -> int | None:
        """One more failed attempt of the config's current delivery; the new count, or None
        when the config was deleted meanwhile."""
        result = self._update_push(
            task_id,
            config_id,
            UpdateExpression="ADD failures :one",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )
        return int(result["Attributes"]["failures"]["N"]) if result else None

    def reset_push_failures(self, task_id: str, config_id: str) -> None:
        """The current delivery is done with: the next one starts with a clean count."""
        self._update_push(
            task_id,
            config_id,
            UpdateExpression="REMOVE failures",
            ConditionExpression="attribute_exists(pk)",
        )

    def list_push_configs(self, task_id: str) -> list[tuple[TaskPushNotificationConfig, bool]]:
        """Every config of a task, with whether its deliveries are parked on the retry queue."""
        items = self._query_all(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": _s(f"T#{task_id}"), ":p": _s(PUSH_PREFIX)},
            ConsistentRead=True,
        )
        return [(self._push_config(i), i.get("parked", {}).get("BOOL", False)) for i in items]

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        self._db.delete_item(TableName=self._table, Key=self._push_key(task_id, config_id))

    def park_push_config(self, task_id: str, config_id: str, seq: int) -> None:
        """From now on this config's deliveries go through the ordered retry queue; `seq` is
        the first event queued. (A deleted config stays deleted: nothing more to deliver.)"""
        self._update_push(
            task_id,
            config_id,
            UpdateExpression="SET parked = :t, queuedThrough = :seq",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":t": {"BOOL": True}, ":seq": {"N": str(seq)}},
        )

    def queue_behind(self, task_id: str, config_id: str, seq: int) -> bool:
        """Record that event `seq` goes through the queue too, if the config is still parked
        (True); False once the queue has drained and the config was unparked (deliver it
        directly) or deleted."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=self._push_key(task_id, config_id),
                UpdateExpression="SET queuedThrough = :seq",
                ConditionExpression="parked = :t AND queuedThrough < :seq",
                ExpressionAttributeValues={":t": {"BOOL": True}, ":seq": {"N": str(seq)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            old = exc.response.get("Item") or {}
            # Still parked with a later event queued (a retried batch): queue it again (the
            # queue drops the copy); unparked or deleted: not queued.
            return bool(old.get("parked", {}).get("BOOL", False))
        return True

    def unpark_if_drained(self, task_id: str, config_id: str, seq: int) -> bool:
        """Done with event `seq` on the queue: if it was the last one queued, later events
        go directly again."""
        result = self._update_push(
            task_id,
            config_id,
            UpdateExpression="REMOVE parked, queuedThrough, failures",
            ConditionExpression="parked = :t AND queuedThrough = :seq",
            ExpressionAttributeValues={":t": {"BOOL": True}, ":seq": {"N": str(seq)}},
        )
        return result is not None

    def task_as_of(self, task_id: str, seq: int) -> Task | None:
        """The task as a client that had seen events 1..seq would hold it (no history)."""
        items = self._query_all(
            KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
            ExpressionAttributeValues={
                ":pk": _s(f"T#{task_id}"),
                ":first": _s(_event_sk(0)),
                ":last": _s(_event_sk(seq)),
            },
            ConsistentRead=True,
        )
        events = [StreamResponse.model_validate_json(i["ev"]["S"]) for i in items]
        status, artifacts = fold_events(events)
        if status is None:
            return None
        context_id = next(
            (
                body.context_id
                for e in events
                for body in (e.task, e.status_update, e.artifact_update)
                if body is not None and body.context_id
            ),
            "",
        )
        return Task(id=task_id, context_id=context_id, status=status, artifacts=artifacts or None)

    def get_event_json(self, task_id: str, seq: int) -> bytes | None:
        """One event as stored: its `StreamResponse` wire JSON (what the stream carries)."""
        item = self._db.get_item(
            TableName=self._table, Key=self._key(task_id, _event_sk(seq)), ConsistentRead=True
        ).get("Item")
        return item["ev"]["S"].encode() if item else None

    # -- reads -----------------------------------------------------------------------------

    def get_record(self, task_id: str) -> TaskRecord | None:
        item = self._db.get_item(
            TableName=self._table, Key=self._key(task_id, HEADER), ConsistentRead=True
        ).get("Item")
        return self._record(item) if item else None

    def find_dedupe(self, owner: str, message_id: str) -> tuple[str, str] | None:
        item = self._db.get_item(
            TableName=self._table,
            Key={"pk": _s(f"D#{owner}#{message_id}"), "sk": _s("D")},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        return item["taskId"]["S"], item["hash"]["S"]

    def _query_all(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self._db.query(TableName=self._table, **kwargs)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get_snapshot(self, task_id: str, history_length: int | None) -> TaskSnapshot | None:
        """Header, events and (recent) history. One query when all history is wanted."""
        pk = _s(f"T#{task_id}")
        if history_length is None:
            items = self._query_all(
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": pk},
                ConsistentRead=True,
            )
            history_items = [i for i in items if i["sk"]["S"].startswith(HISTORY_PREFIX)]
        else:
            # Events sort before the header ("E#" < "H"); history after it.
            items = self._query_all(
                KeyConditionExpression="pk = :pk AND sk <= :h",
                ExpressionAttributeValues={":pk": pk, ":h": _s(HEADER)},
                ConsistentRead=True,
            )
            history_items = (
                self._recent_history_items(task_id, history_length) if history_length else []
            )
        header = next((i for i in items if i["sk"]["S"] == HEADER), None)
        if header is None:
            return None
        record = self._record(header)
        event_items = [i for i in items if i["sk"]["S"].startswith(EVENT_PREFIX)]
        events = [StreamResponse.model_validate_json(i["ev"]["S"]) for i in event_items]
        seq = int(event_items[-1]["seq"]["N"]) if event_items else 0
        status, artifacts = fold_events(events, record.status)
        history = [Message.model_validate_json(i["msg"]["S"]) for i in history_items]
        return TaskSnapshot(
            record=record,
            status=status or record.status,
            artifacts=artifacts,
            history=history,
            seq=seq,
        )

    def _recent_history_items(self, task_id: str, limit: int) -> list[dict[str, Any]]:
        page = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :m)",
            ExpressionAttributeValues={":pk": _s(f"T#{task_id}"), ":m": _s(HISTORY_PREFIX)},
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return list(reversed(page.get("Items", [])))

    def read_history(self, task_id: str, history_length: int | None) -> list[Message]:
        if history_length == 0:
            return []
        if history_length is None:
            items = self._query_all(
                KeyConditionExpression="pk = :pk AND begins_with(sk, :m)",
                ExpressionAttributeValues={":pk": _s(f"T#{task_id}"), ":m": _s(HISTORY_PREFIX)},
                ConsistentRead=True,
            )
        else:
            items = self._recent_history_items(task_id, history_length)
        return [Message.model_validate_json(i["msg"]["S"]) for i in items]

    def read_artifacts(self, task_id: str) -> list[Artifact]:
        items = self._query_all(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
            FilterExpression="kind = :a",
            ExpressionAttributeValues={
                ":pk": _s(f"T#{task_id}"),
                ":e": _s(EVENT_PREFIX),
                ":a": _s("artifact"),
            },
            ConsistentRead=True,
        )
        _, artifacts = fold_events(StreamResponse.model_validate_json(i["ev"]["S"]) for i in items)
        return artifacts

    def read_events(
        self, task_id: str, after_seq: int, limit: int = 100
    ) -> list[tuple[int, StreamResponse]]:
        page = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :to",
            ExpressionAttributeValues={
                ":pk": _s(f"T#{task_id}"),
                ":from": _s(_event_sk(after_seq + 1)),
                ":to": _s(_event_sk(9_999_999_999)),
            },
            Limit=limit,
            ConsistentRead=True,
        )
        return [
            (int(i["seq"]["N"]), StreamResponse.model_validate_json(i["ev"]["S"]))
            for i in page.get("Items", [])
        ]

    def last_seq(self, task_id: str) -> int:
        page = self._db.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
            ExpressionAttributeValues={":pk": _s(f"T#{task_id}"), ":e": _s(EVENT_PREFIX)},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
            ProjectionExpression="seq",
        )
        items = page.get("Items", [])
        return int(items[0]["seq"]["N"]) if items else 0

    # -- listing ---------------------------------------------------------------------------

    @staticmethod
    def _index_for(query: ListQuery) -> tuple[str, str, str | None]:
        """(index, partition value, extra state filter) for a list query."""
        if query.context_id is not None:
            return (
                INDEX_BY_CONTEXT,
                f"{query.owner}#{query.context_id}",
                query.state.value if query.state else None,
            )
        if query.state is not None:
            return INDEX_BY_STATE, f"{query.owner}#{query.state.value}", None
        return INDEX_BY_OWNER, query.owner, None

    def _list_kwargs(self, query: ListQuery) -> dict[str, Any]:
        index, partition, state_filter = self._index_for(query)
        pk_attr = {INDEX_BY_OWNER: "g1pk", INDEX_BY_CONTEXT: "g2pk", INDEX_BY_STATE: "g3pk"}[index]
        values: dict[str, Any] = {":p": _s(partition)}
        condition = f"{pk_attr} = :p"
        if query.status_after is not None:
            # "~" sorts after "#", so equal timestamps are excluded: strictly after.
            values[":after"] = _s(format_timestamp(query.status_after) + "~")
            condition += " AND gsk > :after"
        kwargs: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if state_filter is not None:
            kwargs["FilterExpression"] = "#st = :st"
            kwargs["ExpressionAttributeNames"] = {"#st": "state"}
            values[":st"] = _s(state_filter)
        return kwargs

    def list_tasks(self, query: ListQuery) -> tuple[list[TaskRecord], dict[str, str] | None]:
        """One page, newest status first; the cursor is the last task's index position."""
        kwargs = self._list_kwargs(query)
        index, partition, _ = self._index_for(query)
        pk_attr = {INDEX_BY_OWNER: "g1pk", INDEX_BY_CONTEXT: "g2pk", INDEX_BY_STATE: "g3pk"}[index]
        if query.cursor is not None:
            # Rebuilt from the caller's own partition: a cursor cannot reach other owners.
            kwargs["ExclusiveStartKey"] = {
                "pk": _s(f"T#{query.cursor['id']}"),
                "sk": _s(HEADER),
                pk_attr: _s(partition),
                "gsk": _s(query.cursor["k"]),
            }
        want = query.page_size + 1  # one more tells whether another page exists
        items: list[dict[str, Any]] = []
        while len(items) < want:
            page = self._db.query(
                TableName=self._table, ScanIndexForward=False, Limit=want - len(items), **kwargs
            )
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        page_items = items[: query.page_size]
        cursor = None
        if len(items) > query.page_size and page_items:
            last = page_items[-1]
            cursor = {"k": last["gsk"]["S"], "id": last["taskId"]["S"]}
        return [self._record(i) for i in page_items], cursor

    def count_tasks(self, query: ListQuery) -> int:
        """Exact count: maintained counters, or a COUNT query on the index range."""
        if query.status_after is None:
            name = "all" if query.state is None else _state_counter(query.state)
            if query.context_id is not None:
                item = self._db.get_item(
                    TableName=self._table,
                    Key={
                        "pk": _s(f"O#{query.owner}"),
                        "sk": _s(f"{CONTEXT_COUNTER_PREFIX}{query.context_id}"),
                    },
                    ConsistentRead=True,
                ).get("Item", {})
                shards = [item]
            else:
                shards = self._query_all(
                    KeyConditionExpression="pk = :pk AND begins_with(sk, :n)",
                    ExpressionAttributeValues={
                        ":pk": _s(f"O#{query.owner}"),
                        ":n": _s(OWNER_SHARD_PREFIX),
                    },
                    ConsistentRead=True,
                )
            return max(0, sum(int(i.get(name, {"N": "0"})["N"]) for i in shards))
        kwargs = self._list_kwargs(query)
        total = 0
        while True:
            page = self._db.query(TableName=self._table, Select="COUNT", **kwargs)
            total += page.get("Count", 0)
            if "LastEvaluatedKey" not in page:
                return total
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
