"""The store contract (tests/contract/cases.py) on DynamoDBTaskStore and the template's table
in moto (the suite's shared stack, reset between tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from a2a_serverless.local.stack import LocalStack
from a2a_serverless.store.dynamodb import DynamoDBTaskStore
from tests.contract.cases import *  # noqa: F403 (the contract's test functions)
from tests.contract.lease_cases import *  # noqa: F403 (the LeaseStore's)
from tests.integration.harness import ddb


@pytest.fixture
def store(local_stack: LocalStack) -> DynamoDBTaskStore:
    return DynamoDBTaskStore(ddb(), local_stack.env["TABLE_NAME"])


@pytest.fixture
def expire(local_stack: LocalStack) -> Callable[[str], dict[str, Any]]:
    """What the table's TTL does to a task: every item of its partition deleted; returns the
    header's old image as the stream carries it (deserialized, as Powertools gives it)."""
    table = local_stack.env["TABLE_NAME"]
    deserialize = TypeDeserializer().deserialize

    def expire(task_id: str) -> dict[str, Any]:
        items = ddb().query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"T#{task_id}"}},
        )["Items"]
        for item in items:
            ddb().delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
        (header,) = [i for i in items if i["sk"]["S"] == "H"]
        return {name: deserialize(value) for name, value in header.items()}

    return expire


@pytest.fixture
def api_key_store(store: DynamoDBTaskStore) -> DynamoDBTaskStore:
    """The task store is the ApiKeyStore too (one table, see store/dynamodb/api_keys.py)."""
    return store


@pytest.fixture
def lease_store(store: DynamoDBTaskStore) -> DynamoDBTaskStore:
    """The task store is the LeaseStore too (one table, see store/dynamodb/leases.py)."""
    return store


# -- DynamoDB only: the layout's own guarantees ------------------------------------------------


def test_a_header_written_before_the_webhook_mark_has_its_configs_read(
    store: DynamoDBTaskStore,
) -> None:
    """Headers written before `hooks` existed say nothing about webhooks: a batch's read
    queries their configs (a header marked false, the only one skipped, is asserted false
    here first, so this fails if the mark's name or value changes)."""
    from a2a_serverless.store.dynamodb import keys
    from tests.contract.cases import config, create, uid

    task_id = create(store, uid("owner")).task_id
    key = keys.task_key(task_id, keys.HEADER)
    header = ddb().get_item(TableName=store._table, Key=key)["Item"]
    assert header[keys.HOOKS] == {"BOOL": False}
    ddb().update_item(TableName=store._table, Key=key, UpdateExpression=f"REMOVE {keys.HOOKS}")
    ddb().put_item(TableName=store._table, Item=keys.push_item(config(task_id, "older")))
    assert store.push_configs_of([task_id]) == {task_id: [(config(task_id, "older"), False)]}
