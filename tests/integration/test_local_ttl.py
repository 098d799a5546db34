"""local/ttl.py: the local stack forgets what AWS forgets — expired items (DynamoDB TTL, with
the stream REMOVE record of the service principal), stream records every mapping has read,
finished executions beyond a bound."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from moto.dynamodb.models import dynamodb_backends

from a2a_serverless.local import ttl
from a2a_serverless.local.stack import ACCOUNT, REGION, LocalStack


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    stack = LocalStack(event_sources="manual").start()
    try:
        yield stack
    finally:
        stack.stop()


def _table(stack: LocalStack) -> Any:
    return dynamodb_backends[ACCOUNT][REGION].get_table(stack.env["TABLE_NAME"])


def _put(stack: LocalStack, pk: str, expires: Any) -> None:
    item: dict[str, Any] = {"pk": {"S": pk}, "sk": {"S": "X"}}
    if expires is not None:
        item["expiresAt"] = expires
    stack._client("dynamodb").put_item(TableName=stack.env["TABLE_NAME"], Item=item)


def _exists(stack: LocalStack, pk: str) -> bool:
    got = stack._client("dynamodb").get_item(
        TableName=stack.env["TABLE_NAME"], Key={"pk": {"S": pk}, "sk": {"S": "X"}}
    )
    return "Item" in got


def _records(stack: LocalStack) -> list[dict[str, Any]]:
    streams = stack._client("dynamodbstreams")
    arn = stack.resolver.attributes["TasksTable.StreamArn"]  # type: ignore[union-attr]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    return list(streams.get_records(ShardIterator=iterator, Limit=1000)["Records"])


def test_expired_items_are_deleted_by_the_service_principal(stack: LocalStack) -> None:
    now = int(time.time())
    _put(stack, "T#past", {"N": str(now - 10)})
    _put(stack, "T#future", {"N": str(now + 3600)})
    _put(stack, "T#string", {"S": str(now - 10)})  # not a Number: TTL ignores it
    _put(stack, "T#ancient", {"N": str(now - 6 * 365 * 86400)})  # > 5 years past: ignored
    _put(stack, "T#none", None)
    assert stack.sweeper is not None
    stack.sweeper.sweep()
    assert not _exists(stack, "T#past")
    assert all(_exists(stack, pk) for pk in ("T#future", "T#string", "T#ancient", "T#none"))
    assert stack.sweeper.deleted == 1
    removes = [r for r in _records(stack) if r["eventName"] == "REMOVE"]
    assert len(removes) == 1
    assert removes[0]["dynamodb"]["Keys"]["pk"] == {"S": "T#past"}
    assert removes[0]["userIdentity"] == {
        "PrincipalId": "dynamodb.amazonaws.com",
        "Type": "Service",
    }
    # A delete made by a caller is no TTL delete.
    stack._client("dynamodb").delete_item(
        TableName=stack.env["TABLE_NAME"], Key={"pk": {"S": "T#none"}, "sk": {"S": "X"}}
    )
    last = _records(stack)[-1]
    assert last["eventName"] == "REMOVE" and "userIdentity" not in last


def test_the_local_setting_moves_expiry_earlier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ttl.LOCAL_TTL_ENV, raising=False)
    assert ttl.local_ttl_shift(30) == 0
    monkeypatch.setenv(ttl.LOCAL_TTL_ENV, "60")
    assert ttl.local_ttl_shift(30) == 30 * 86400 - 60
    stack = LocalStack(event_sources="manual").start()
    try:
        written = int(time.time())
        _put(stack, "T#young", {"N": str(written + 30 * 86400)})  # written now
        _put(stack, "T#old", {"N": str(written - 61 + 30 * 86400)})  # written 61 s ago
        assert stack.sweeper is not None
        stack.sweeper.sweep()
        assert _exists(stack, "T#young") and not _exists(stack, "T#old")
    finally:
        stack.stop()


def test_stream_records_every_mapping_read_are_trimmed(stack: LocalStack) -> None:
    assert stack.event_sources is not None and stack.sweeper is not None
    (mapping,) = [m for m in stack.event_sources.mappings if hasattr(m, "stream_arn")]
    for i in range(5):
        _put(stack, f"T#{i}", None)
    stack.sweeper.sweep()
    assert len(_records(stack)) == 5  # nothing read yet: nothing trimmed
    while mapping.poll_once():
        pass
    stack.sweeper.sweep()
    assert len(_records(stack)) == 5  # read, but recent: a reader of its own still finds them
    stack.sweeper.sweep(now=time.time() + ttl.READ_RECORDS_KEPT_SECONDS + 1)
    assert _records(stack) == []
    assert stack.sweeper.trimmed == 5
    # Numbering goes on, and the mapping reads what comes next.
    _put(stack, "T#after", None)
    (record,) = _records(stack)
    assert int(record["dynamodb"]["SequenceNumber"]) == mapping.position
    assert mapping._read(mapping.position, 10)[0]["dynamodb"]["Keys"]["pk"] == {"S": "T#after"}


def test_records_older_than_a_day_are_trimmed_unread(stack: LocalStack) -> None:
    for i in range(3):
        _put(stack, f"T#{i}", None)
    table = _table(stack)
    assert ttl.trim_stream(table, None) == 0
    assert ttl.trim_stream(table, None, now=time.time() + 24 * 3600 + 60) == 3
    assert _records(stack) == []
