"""moto_patches.indexed_queries: a Query reads the partition its key condition names, with the
results moto itself gives (same items, order, pages), after puts, updates, deletes and
transactions. Counts, not times: how many items a query looks at."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from a2a_serverless.local import moto_patches

TABLE = "speed"


@pytest.fixture
def db() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "g1pk", "gsk")
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "byOwner",
                    "KeySchema": [
                        {"AttributeName": "g1pk", "KeyType": "HASH"},
                        {"AttributeName": "gsk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        yield client


def _fill(client: Any, rng: random.Random) -> None:
    """Items in 40 partitions, some in the index under 5 owners; then updates that move
    index entries, deletes, and a transaction."""
    for i in range(400):
        item = {"pk": {"S": f"T#{i % 40}"}, "sk": {"S": f"E#{i:04d}"}, "n": {"N": str(i)}}
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
    _fill(db, random.Random(7))
    expected = {
        (i, page): _all_pages(db, q, page) for i, q in enumerate(QUERIES) for page in (3, 50)
    }
    assert any(len(pages) > 2 for pages in expected.values())  # paging is exercised
    patches = moto_patches.Patches()
    moto_patches.indexed_queries(patches)
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


def test_a_query_looks_at_its_partition_only(db: Any) -> None:
    from moto.dynamodb.models.table import Table

    _fill(db, random.Random(3))
    patches = moto_patches.Patches()
    moto_patches.indexed_queries(patches)
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
