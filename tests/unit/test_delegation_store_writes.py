"""The DynamoDB delegation store's writes, recorded (no table): one write per change, every
header attribute it sets within the header's budget, tiny seen-markers, and values past their
bounds refused before any call."""

from __future__ import annotations

import re
from typing import Any

import pytest

from a2a_serverless.store import DelegationRecord, TooLarge
from a2a_serverless.store.dynamodb import keys, tasks
from a2a_serverless.store.dynamodb.delegations import (
    MAX_DELEGATION_BYTES,
    MAX_REMOTE_MESSAGE_BYTES,
    DynamoDBDelegations,
)
from tests.unit.test_storage_bounds import Recorder

AT = "2026-01-01T00:00:00Z"


def _delegation(key: str, **fields: Any) -> DelegationRecord:
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    return DelegationRecord("t-1", key, "https://b.example/", "tok", message, **fields)


def _store() -> tuple[Recorder, DynamoDBDelegations]:
    client = Recorder()
    return client, DynamoDBDelegations(client, "table")


def _header_attributes(calls: list[tuple[str, dict[str, Any]]]) -> set[str]:
    """The header attributes the recorded calls set."""
    written: set[str] = set()
    for _, call in calls:
        for item in call.get("TransactItems") or [{"Update": call}]:
            update = item.get("Update", {})
            if update.get("Key", {}).get("sk", {}).get("S") == keys.HEADER:
                names = update.get("ExpressionAttributeNames", {})
                for target in re.findall(r"([#\w]+) = ", update["UpdateExpression"]):
                    written.add(names.get(target, target))
    return written


def test_the_header_attributes_of_a_round_are_budgeted() -> None:
    client, store = _store()
    store.begin_round("t-1", 1, 2, [_delegation("1.2.0")], {"a": 1})
    store.end_wait("t-1", "1.2")
    store.resume_wait("t-1", "1.2")
    written = _header_attributes(client.calls)
    assert {keys.DELEGATION_ROUND, keys.WAITING, tasks.FLOW_STEP, "flowState"} <= written
    assert written <= set(tasks.HEADER_FIELDS), written - set(tasks.HEADER_FIELDS)


def test_each_change_is_one_write_and_a_round_one_transaction() -> None:
    client, store = _store()
    records = [_delegation(f"1.2.{i}", count=3) for i in range(3)]
    store.begin_round("t-1", 1, 2, records, {})
    ((name, call),) = client.calls
    assert name == "transact_write_items" and len(call["TransactItems"]) == 4
    puts = [item["Put"]["Item"] for item in call["TransactItems"] if "Put" in item]
    assert [p["sk"]["S"] for p in puts] == [keys.delegation_sk(r.key) for r in records]
    assert all(keys.EXPIRES in p for p in puts)  # they go with the task
    for change in (
        lambda: store.mark_sent("t-1", "1.2.0", "push", 1.5, "rt", "rc"),
        lambda: store.record_status("t-1", "1.2.0", "TASK_STATE_WORKING", AT, {}),
        lambda: store.bind_remote_task("t-1", "1.2.0", "rt", "rc"),
        lambda: store.count_poll("t-1", "1.2.0"),
        lambda: store.settle("t-1", "1.2.0", "completed", "why", "TASK_STATE_COMPLETED", {}),
        lambda: store.note_seen("t-1", "1.2.0", "digest" * 100),
        lambda: store.end_wait("t-1", "1.2"),
        lambda: store.resume_wait("t-1", "1.2"),
    ):
        client.calls.clear()
        change()
        assert len(client.calls) == 1, client.calls
    client.calls.clear()
    store.note_seen("t-1", "1.2.0", "digest" * 1000)
    ((name, call),) = client.calls
    assert name == "put_item" and set(call["Item"]) == {"pk", "sk", keys.EXPIRES}
    assert keys.item_bytes(call["Item"]) < 128  # one write unit, whatever the digest


def test_values_past_their_bounds_are_refused_before_any_call() -> None:
    client, store = _store()
    huge = {"parts": [{"text": "x" * MAX_REMOTE_MESSAGE_BYTES}]}
    at = AT
    refused = [
        lambda: store.record_status("t-1", "1.2.0", "TASK_STATE_WORKING", at, huge),
        lambda: store.settle("t-1", "1.2.0", "completed", None, None, huge),
        lambda: store.bind_remote_task("t-1", "1.2.0", "r" * 300, "rc"),
        lambda: store.mark_sent("t-1", "1.2.0", "push", 1.0, None, "c" * 300),
        lambda: store.record_status("t-1", "1.2.0", "S" * 100, at, None),
        lambda: store.begin_round(
            "t-1", 1, 2, [_delegation("1.2.0", turn_context={"x": "y" * MAX_DELEGATION_BYTES})], {}
        ),
    ]
    for call in refused:
        with pytest.raises(TooLarge):
            call()
    with pytest.raises(ValueError):
        store.record_status("t-1", "1.2.0", "TASK_STATE_WORKING", "yesterday", None)
    with pytest.raises(ValueError):  # not this round's
        store.begin_round("t-1", 1, 2, [_delegation("1.3.0")], {})
    assert client.calls == []


@pytest.mark.parametrize(
    ("at", "order"),
    [
        ("2026-01-01T00:00:01Z", "2026-01-01T00:00:01.000000Z"),
        ("2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00.500000Z"),
        ("2026-01-01T01:00:00+01:00", "2026-01-01T00:00:00.000000Z"),
        ("2026-01-01T00:00:00.123456789Z", "2026-01-01T00:00:00.123456Z"),
        ("2026-01-01T00:00:00", "2026-01-01T00:00:00.000000Z"),  # no offset: UTC
        ("0999-01-01T00:00:00Z", "0999-01-01T00:00:00.000000Z"),
    ],
)
def test_status_times_order_as_text(at: str, order: str) -> None:
    assert keys.status_order(at) == order


def test_delegation_items_sort_after_everything_a_task_read_reads() -> None:
    """The header, events and history sort before every delegation and seen item, so the
    reads bounded by the history's last key (GetTask, history, events) never read them."""
    ends = [keys.HEADER, keys.event_sk(keys.LAST_SEQ), keys.LAST_HISTORY_SK]
    for sk in (keys.delegation_sk("0.0.0"), keys.seen_sk("0.0.0", "")):
        assert sk is not None and max(ends) < sk < keys.EXPIRED_SK
    assert keys.round_sk_prefix("1.1") == "R#000001.000001."
    assert keys.delegation_sk("1.10.2") == "R#000001.000010.02"


class _Queries(Recorder):
    """Records each Query's arguments (a paginator with no pages)."""

    def get_paginator(self, name: str) -> Any:
        calls = self.calls

        class Paginator:
            def paginate(self, **kwargs: Any) -> Any:
                calls.append((name, kwargs))
                return iter([{"Items": []}])

        return Paginator()


def test_a_whole_task_read_stops_before_its_delegations() -> None:
    client = _Queries()
    tasks.DynamoDBTaskLog(client, "table").get_snapshot("t-1", None)
    ((name, query),) = client.calls
    upper = re.fullmatch(r"pk = :pk AND sk <= (:\w+)", query["KeyConditionExpression"])
    assert name == "query" and upper is not None, query
    bound = query["ExpressionAttributeValues"][upper.group(1)]["S"]
    assert keys.LAST_HISTORY_SK <= bound < keys.DELEGATION_PREFIX
