"""moto_speedups.indexed_queries (and index_projections_direct): a Query reads the partition
its key condition names, with the results moto itself gives (same items, order, pages), after
puts, updates, deletes and transactions, whatever the index projects. Counts, not times: how
many items a query looks at."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from a2a_serverless.local import moto_speedups
from a2a_serverless.local.patching import Patches
from tests.helpers import create_indexed_table

TABLE = "speed"


PROJECTIONS = [
    {"ProjectionType": "ALL"},
    {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["n"]},
    {"ProjectionType": "KEYS_ONLY"},
]


@pytest.fixture(params=[p["ProjectionType"] for p in PROJECTIONS])
def projection(request: pytest.FixtureRequest) -> dict[str, Any]:
    return next(p for p in PROJECTIONS if p["ProjectionType"] == request.param)


@pytest.fixture
def db(projection: dict[str, Any]) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_indexed_table(client, TABLE, "byOwner", "g1pk", projection)
        yield client


def _fill(client: Any, rng: random.Random) -> None:
    """Items in 40 partitions, some in the index under 5 owners; then updates that move
    index entries, deletes, and a transaction."""
    for i in range(400):
        item = {"pk": {"S": f"T#{i % 40}"}, "sk": {"S": f"E#{i:04d}"}, "n": {"N": str(i)}}
        item["x"] = {"M": {"kept": {"BOOL": i % 2 == 0}}}  # not in the INCLUDE projection
        if rng.random() < 0.6:
            item["g1pk"] = {"S": f"O#{rng.randrange(5)}"}
            item["gsk"] = {"S": f"{rng.randrange(1000):04d}"}
        client.put_item(TableName=TABLE, Item=item)
    for i in range(0, 400, 7):  # move into / between owners' index entries
        client.update_item(
            TableName=TABLE,
            Key={"pk": {"S": f"T#{i % 40}"}, "sk": {"S": f"E#{i:04d}"}},
            UpdateExpression="SET g1pk = :o, gsk = :g",
            ExpressionAttributeValues={":o": {"S": f"O#{i % 3}"}, ":g": {"S": f"{i:04d}"}},
        )
    for i in range(0, 400, 11):  # out of the index (attribute removed), and deleted items
        key = {"pk": {"S": f"T#{i % 40}"}, "sk": {"S": f"E#{i:04d}"}}
        if i % 2:
            client.update_item(TableName=TABLE, Key=key, UpdateExpression="REMOVE g1pk")
        else:
            client.delete_item(TableName=TABLE, Key=key)
    client.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": TABLE,
                    "Item": {
                        "pk": {"S": "T#new"},
                        "sk": {"S": "H"},
                        "g1pk": {"S": "O#1"},
                        "gsk": {"S": "9999"},
                    },
                }
            },
            {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "T#1"}, "sk": {"S": "E#0001"}}}},
        ]
    )


QUERIES: list[dict[str, Any]] = [
    *(
        {
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": f"T#{p}"}},
        }
        for p in (0, 1, 7, 39, "new", "none")
    ),
    {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
        "ExpressionAttributeValues": {":p": {"S": "T#3"}, ":s": {"S": "E#01"}},
        "ScanIndexForward": False,
    },
    *(
        {
            "IndexName": "byOwner",
            "KeyConditionExpression": "g1pk = :o",
            "ExpressionAttributeValues": {":o": {"S": f"O#{o}"}},
            "ScanIndexForward": forward,
        }
        for o in range(6)
        for forward in (True, False)
    ),
    {
        "IndexName": "byOwner",
        "KeyConditionExpression": "g1pk = :o AND gsk > :g",
        "ExpressionAttributeValues": {":o": {"S": "O#2"}, ":g": {"S": "0500"}},
        "FilterExpression": "n < :n",
        "ExpressionAttributeValues_extra": {":n": {"N": "300"}},
    },
    # Every range operator (`_after_start` judges them on plain values), both directions.
    *(
        {
            "IndexName": "byOwner",
            "KeyConditionExpression": f"g1pk = :o AND {condition}",
            "ExpressionAttributeValues": {":o": {"S": f"O#{o}"}, **values},
            "ScanIndexForward": forward,
        }
        for condition, values in (
            ("gsk < :g", {":g": {"S": "0400"}}),
            ("gsk <= :g", {":g": {"S": "0400"}}),
            ("gsk >= :g", {":g": {"S": "0400"}}),
            ("gsk = :g", {":g": {"S": "0400"}}),
            ("gsk BETWEEN :a AND :b", {":a": {"S": "0200"}, ":b": {"S": "0700"}}),
            ("begins_with(gsk, :g)", {":g": {"S": "03"}}),
        )
        for o in (1, 3)
        for forward in (True, False)
    ),
]


def _all_pages(client: Any, query: dict[str, Any], page: int) -> list[list[dict[str, Any]]]:
    query = dict(query)
    extra = query.pop("ExpressionAttributeValues_extra", {})
    query["ExpressionAttributeValues"] = {**query["ExpressionAttributeValues"], **extra}
    pages = []
    kwargs: dict[str, Any] = {"TableName": TABLE, "Limit": page, **query}
    while True:
        response = client.query(**kwargs)
        pages.append(response["Items"])
        if "LastEvaluatedKey" not in response:
            return pages
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def test_indexed_queries_answer_as_moto_does(db: Any) -> None:
    """Also with the entries after a page's start key handed over alone (`_after_start`) and
    index projections taken directly (`index_projections_direct`), for every projection."""
    _fill(db, random.Random(7))
    expected = {
        (i, page): _all_pages(db, q, page) for i, q in enumerate(QUERIES) for page in (3, 50)
    }
    assert any(len(pages) > 2 for pages in expected.values())  # paging is exercised
    patches = Patches()
    moto_speedups.indexed_queries(patches)
    moto_speedups.index_projections_direct(patches)
    try:
        got = {
            (i, page): _all_pages(db, q, page) for i, q in enumerate(QUERIES) for page in (3, 50)
        }
        assert got == expected
        # And the maps follow later writes (built on the first index query above).
        db.put_item(
            TableName=TABLE,
            Item={"pk": {"S": "T#5"}, "sk": {"S": "late"}, "g1pk": {"S": "O#4"}, "gsk": {"S": "0"}},
        )
        db.delete_item(TableName=TABLE, Key={"pk": {"S": "T#new"}, "sk": {"S": "H"}})
        after = [_all_pages(db, q, 50) for q in QUERIES]
    finally:
        patches.undo()
    assert [_all_pages(db, q, 50) for q in QUERIES] == after
    assert after != [expected[(i, 50)] for i in range(len(QUERIES))]


def test_query_results_are_passed_on_as_stored(db: Any) -> None:
    """query_results_read_in_place: the items a query returns are not copied (moto copied each
    one), the answers are moto's, and queries that project, filter and page leave the stored
    items as they were (what the copy guarded)."""
    from moto.dynamodb.models.dynamo_type import Item

    _fill(db, random.Random(5))
    projected = {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "T#3"}},
        "ProjectionExpression": "pk, x.kept, n",
        "FilterExpression": "n > :n",
        "ExpressionAttributeValues_extra": {":n": {"N": "100"}},
    }
    queries = [*QUERIES, projected]
    expected = [_all_pages(db, q, page) for q in queries for page in (3, 50)]
    stored = sorted(db.scan(TableName=TABLE)["Items"], key=repr)
    patches = Patches()
    moto_speedups.indexed_queries(patches)
    moto_speedups.index_projections_direct(patches)
    moto_speedups.query_results_read_in_place(patches)
    copies: list[Any] = []
    original_copy = Item.__deepcopy__

    def counted(item: Any, memo: Any) -> Any:
        copies.append(item)
        return original_copy(item, memo)

    patches.replace(Item, "__deepcopy__", counted)
    try:
        got = [_all_pages(db, q, page) for q in queries for page in (3, 50)]
    finally:
        patches.undo()
    assert got == expected
    assert any(pages[0] and "x" in pages[0][0] for pages in got)  # maps came back
    assert copies == []
    assert sorted(db.scan(TableName=TABLE)["Items"], key=repr) == stored


def test_a_query_looks_at_its_partition_only(db: Any) -> None:
    from moto.dynamodb.models.table import Table

    _fill(db, random.Random(3))
    patches = Patches()
    moto_speedups.indexed_queries(patches)
    looked_at: list[int] = []
    patched = Table.all_items

    def counting(table: Any) -> list[Any]:
        items = patched(table)
        looked_at.append(len(items))
        return items

    patches.replace(Table, "all_items", counting)
    try:
        table_size = len(db.scan(TableName=TABLE)["Items"])
        looked_at.clear()
        db.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "T#7"}},
        )
        owner = db.query(
            TableName=TABLE,
            IndexName="byOwner",
            KeyConditionExpression="g1pk = :o",
            ExpressionAttributeValues={":o": {"S": "O#0"}},
        )["Items"]
    finally:
        patches.undo()
    assert table_size > 300
    # Without the patch each query would look at every item of the table.
    assert looked_at == [10, len(owner)], (looked_at, table_size)


# -- moto_speedups.attribute_values_written_directly: the same response bytes --------------

EVERY_TYPE = {
    "pk": {"S": "T#1"},
    "sk": {"S": "H"},
    "n": {"N": "12.5"},
    "b": {"B": b"\x00\x01binary"},
    "yes": {"BOOL": True},
    "no": {"BOOL": False},
    "nothing": {"NULL": True},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2"]},
    "bs": {"BS": [b"x", b"y"]},
    "l": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"deep": {"L": [{"BOOL": True}]}}}]},
    "m": {"M": {"S": {"S": "a key named like a type"}, "Item": {"N": "3"}}},
}


def _raw_bodies(calls: Any) -> list[bytes]:
    """The response bodies moto gives for `calls(clients)`, as the wire carries them."""
    bodies: list[bytes] = []

    def keep(response_dict: dict[str, Any], **_: Any) -> None:
        bodies.append(response_dict["body"])

    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        for client in (db, streams, sqs):
            client.meta.events.register("before-parse", keep)
        calls(db, streams, sqs)
    return bodies


def _every_shape(db: Any, streams: Any, sqs: Any) -> None:
    arn = db.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk")],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    db.put_item(TableName=TABLE, Item=EVERY_TYPE)
    db.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "T#1"}, "sk": {"S": "H"}},
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "13"}},
        ReturnValues="ALL_NEW",
    )
    db.get_item(TableName=TABLE, Key={"pk": {"S": "T#1"}, "sk": {"S": "H"}})
    db.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "T#1"}},
        ReturnConsumedCapacity="TOTAL",
    )
    db.batch_get_item(RequestItems={TABLE: {"Keys": [{"pk": {"S": "T#1"}, "sk": {"S": "H"}}]}})
    db.scan(TableName=TABLE)
    try:  # refused, with the item as it was (an attribute map inside an error)
        db.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": {"pk": {"S": "T#1"}, "sk": {"S": "H"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            ]
        )
    except db.exceptions.TransactionCanceledException:
        pass
    else:
        raise AssertionError("the transaction should have been refused")
    db.describe_table(TableName=TABLE)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    streams.get_records(ShardIterator=iterator)
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.send_message(
        QueueUrl=url,
        MessageBody="body",
        MessageGroupId="g",
        MessageDeduplicationId="d",
        MessageAttributes={"a": {"DataType": "String", "StringValue": "v"}},
    )
    sqs.receive_message(QueueUrl=url, AttributeNames=["All"], MessageAttributeNames=["All"])
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])


def _normalised(body: bytes) -> bytes:
    """Without what differs from run to run (ids, times, sequence numbers)."""
    text = body.decode()
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", text)
    text = re.sub(r"[0-9a-f]{32}", "<md5>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+", "<time>", text)  # stream labels
    text = re.sub(r'"(\w*ShardIterator|ReceiptHandle)": "[^"]*"', r'"\1": "<random>"', text)
    text = re.sub(r'"SizeBytes": \d+', '"SizeBytes": <n>', text)  # counts the time's digits
    text = re.sub(r"\d{10,}(\.\d+)?", "<n>", text)
    return text.encode()


def test_attribute_values_written_directly_give_moto_s_own_responses(monkeypatch: Any) -> None:
    """Every attribute type, nested, in items, images, pages and a refused transaction."""
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    written: list[str] = []
    write = moto_speedups._attribute_value

    def counted(serializer: Any, value: dict[str, Any]) -> Any:
        result = write(serializer, value)
        written.extend(result or ())
        return result

    monkeypatch.setattr(moto_speedups, "_attribute_value", counted)
    patches = Patches()
    try:
        plain = _raw_bodies(_every_shape)
        moto_speedups.attribute_values_written_directly(patches)
        direct = _raw_bodies(_every_shape)
    finally:
        patches.undo()
    assert len(plain) == len(direct) > 10
    assert [_normalised(b) for b in direct] == [_normalised(b) for b in plain]
    assert sum(b'"AAFiaW5hcnk="' in b for b in direct) >= 6  # the blob, in base64, each time
    # Written directly, not by moto's walk: every type, at the top and nested.
    assert {"S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "L", "M"} <= set(written)
