"""local/ttl.py: the local stack forgets what AWS forgets — expired items (DynamoDB TTL, with
the stream REMOVE record of the service principal), stream records every mapping has read,
finished executions beyond a bound."""

from __future__ import annotations

import datetime as dt
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


def test_the_local_setting_scales_a_margin_beyond_retention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ListTasks counters expire 14 days after the tasks they count: with only the shift,
    a soak's counters (one per context) stayed 14 days, a steady leak. Locally the
    margin shrinks as RetentionDays did (60 s for 30 days: 14 days -> 28 s, at least 60 s);
    so does a span shorter than RetentionDays (an expiry marker's 3 days), not gone at once."""
    monkeypatch.setenv(ttl.LOCAL_TTL_ENV, "60")
    stack = LocalStack(event_sources="manual").start()
    try:
        written = int(time.time())
        _put(stack, "T#task", {"N": str(written + 30 * 86400)})
        _put(stack, "O#counter", {"N": str(written + 44 * 86400)})  # 14 days more
        _put(stack, "T#marker", {"N": str(written + 3 * 86400)})  # 3 days: 6 s locally
        sweeper = stack.sweeper
        assert sweeper is not None
        sweeper.sweep(now=written)  # first sight of their TTLs
        assert _exists(stack, "T#task") and _exists(stack, "O#counter")
        sweeper.sweep(now=written + 5)
        assert _exists(stack, "T#marker")
        sweeper.sweep(now=written + 6)
        assert not _exists(stack, "T#marker")
        sweeper.sweep(now=written + 61)
        assert not _exists(stack, "T#task") and _exists(stack, "O#counter")
        sweeper.sweep(now=written + 60 + 59)  # the margin's floor: 60 s (28 s scaled)
        assert _exists(stack, "O#counter")
        # Refreshed (a new task of the context): its clock starts again from this sight.
        _put(stack, "O#counter", {"N": str(written + 119 + 44 * 86400)})
        sweeper.sweep(now=written + 119)
        sweeper.sweep(now=written + 119 + 60 + 59)
        assert _exists(stack, "O#counter")
        sweeper.sweep(now=written + 119 + 60 + 60)
        assert not _exists(stack, "O#counter")
        assert sweeper._clocks == {}  # clocks go with their items: bounded by the table
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


def test_finished_interpreter_threads_are_forgotten(stack: LocalStack) -> None:
    """moto's Step Functions interpreter appends the threads of every execution to a
    module-level list it never empties (scripts/soak: ~1,000 dead threads kept per 5 minutes):
    the sweep keeps only the ones still running or not yet started."""
    from moto.stepfunctions.parser.utils import TMP_THREADS

    sfn = stack._client("stepfunctions")
    arn = stack.env["STATE_MACHINE_ARN"]
    before = len(TMP_THREADS)
    executions = [
        sfn.start_execution(stateMachineArn=arn, input="{}")["executionArn"] for _ in range(5)
    ]
    deadline = time.monotonic() + 60
    while any(sfn.describe_execution(executionArn=e)["status"] == "RUNNING" for e in executions):
        assert time.monotonic() < deadline, "executions did not finish"
        time.sleep(0.1)
    assert len(TMP_THREADS) >= before + 5  # each execution left at least one thread there
    assert stack.sweeper is not None
    finished = [t for t in list(TMP_THREADS) if t.ident is not None and not t.is_alive()]
    stack.sweeper.sweep()
    assert stack.sweeper.forgotten_threads >= len(finished) > 0
    assert not [t for t in TMP_THREADS if t.ident is not None and not t.is_alive()]


def test_no_partition_outlives_its_items(stack: LocalStack) -> None:
    """moto keeps a partition emptied of its last item, and adds an empty one for every key
    read and not found (its items are a defaultdict): one per task ever written, a soak's
    steady leak. The local stack keeps only partitions that hold items."""
    db = stack._client("dynamodb")
    name = stack.env["TABLE_NAME"]
    now = int(time.time())
    for i in range(20):
        _put(stack, f"T#{i}", {"N": str(now - 1)})  # expired: TTL deletes them
        db.get_item(TableName=name, Key={"pk": {"S": f"T#missing{i}"}, "sk": {"S": "H"}})
    db.delete_item(TableName=name, Key={"pk": {"S": "T#0"}, "sk": {"S": "X"}})  # a caller's
    assert stack.sweeper is not None
    stack.sweeper.sweep()
    table = _table(stack)
    assert stack.sweeper.deleted == 19
    assert dict(table.items) == {}


def test_the_thread_reads_the_items_once_a_minute_unless_expiry_is_shifted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without A2A_LOCAL_TTL_SECONDS nothing a stack writes expires for days: the background
    sweeps trim streams and executions every interval but read the table's items once a
    minute (a whole-table read). With a shift, every sweep reads them; `sweep()` always does."""
    reads: list[int] = []
    trims: list[int] = []
    monkeypatch.setattr(ttl, "expire_items", lambda *args, **kwargs: reads.append(1) or 0)
    monkeypatch.setattr(ttl, "trim_stream", lambda *args, **kwargs: trims.append(1) or 0)
    monkeypatch.setattr(ttl, "drop_finished_executions", lambda: 0)
    monkeypatch.setattr(ttl, "forget_finished_threads", lambda: 0)
    for shift, expected in ((0.0, 1), (30.0, None)):
        reads.clear()
        trims.clear()
        sweeper = ttl.Sweeper(lambda: [object()], lambda: None, shift=shift, interval=0.01)
        sweeper.start()
        time.sleep(0.3)
        sweeper.stop()
        assert len(trims) >= 5, trims  # streams are trimmed at every sweep either way
        if expected is None:
            assert len(reads) >= 5, reads  # every sweep
        else:
            assert len(reads) == expected, reads  # the first sweep, then not within a minute
    reads.clear()
    ttl.Sweeper(lambda: [object()], lambda: None).sweep()
    assert reads == [1]


def test_content_objects_expire_after_the_retention_like_the_lifecycle_rule(
    stack: LocalStack,
) -> None:
    """The bucket's lifecycle deletes objects RetentionDays (30) after they were written: one
    written 31 days ago goes at the next sweep, one written now stays."""
    from moto.s3.models import s3_backends

    s3, bucket = stack._client("s3"), stack.env["CONTENT_BUCKET"]
    s3.put_object(Bucket=bucket, Key="tasks/t-1/raw.old", Body=b"old")
    s3.put_object(Bucket=bucket, Key="tasks/t-2/raw.new", Body=b"new")
    old = s3_backends[ACCOUNT]["aws"].buckets[bucket].keys["tasks/t-1/raw.old"]
    old.last_modified -= dt.timedelta(days=31)
    stack.sweeper.sweep(now=time.time() + 29 * 86400)  # the new one is 29 days old then
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["tasks/t-2/raw.new"] and stack.sweeper.deleted_objects == 1
