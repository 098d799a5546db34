"""API keys end to end on moto: `ApiKeyAdmin` with the DynamoDB store (the template's table)
and `ApiGatewayUsageKeys` (a usage plan in moto's API Gateway), checked by the real
authorizer handler built by the wiring for AUTH_MODE=ApiKey. Nothing of ours is mocked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import TypeDeserializer

from a2a_serverless import wiring
from a2a_serverless.auth import API_KEY_HEADER, ApiKeyAdmin, IssuedKey, hash_api_key
from a2a_serverless.aws.usage_plans import ApiGatewayUsageKeys
from a2a_serverless.local.resources import LambdaContext, load_module
from a2a_serverless.local.stack import REGION, LocalStack
from a2a_serverless.store import ListQuery
from a2a_serverless.store.dynamodb import DynamoDBTaskStore
from a2a_serverless.store.dynamodb.keys import stream_event
from tests.integration.harness import ddb

ROOT = Path(__file__).resolve().parents[2]
EVENT = json.loads((ROOT / "events" / "authorizer_request.json").read_text())
CONTEXT = LambdaContext("a2a-AuthorizerFunction")


@pytest.fixture
def apigateway(local_stack: LocalStack) -> Any:
    return boto3.client("apigateway", region_name=REGION)


@pytest.fixture
def plan_id(apigateway: Any) -> str:
    apigateway.create_rest_api(name="a2a-test")
    return str(apigateway.create_usage_plan(name="a2a-keys", apiStages=[])["id"])


@pytest.fixture
def store(local_stack: LocalStack) -> DynamoDBTaskStore:
    return DynamoDBTaskStore(ddb(), local_stack.env["TABLE_NAME"])


@pytest.fixture
def admin(store: DynamoDBTaskStore, apigateway: Any, plan_id: str) -> ApiKeyAdmin:
    return ApiKeyAdmin(store, ApiGatewayUsageKeys(apigateway, plan_id))


@pytest.fixture
def authorizer(local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The real handler, its authenticator built by the wiring from the environment."""
    monkeypatch.setenv("AUTH_MODE", "ApiKey")
    wiring.reset()
    module = load_module("_integration_authorizer", ROOT / "functions" / "authorizer" / "app.py")
    yield module.handler
    monkeypatch.undo()
    wiring.reset()


def authorize(handler: Any, key: str) -> dict[str, Any]:
    event = {**EVENT, "headers": {API_KEY_HEADER: key}, "multiValueHeaders": {}}
    return dict(handler(event, CONTEXT))


def refused(handler: Any, key: str) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$") as raised:
        authorize(handler, key)
    assert type(raised.value) is Exception


def usage_plan_key_ids(apigateway: Any, plan_id: str) -> set[str]:
    return {item["id"] for item in apigateway.get_usage_plan_keys(usagePlanId=plan_id)["items"]}


def table_items(local_stack: LocalStack) -> list[dict[str, Any]]:
    pages = ddb().get_paginator("scan").paginate(TableName=local_stack.env["TABLE_NAME"])
    return [item for page in pages for item in page["Items"]]


def test_issue_authorize_revoke(
    admin: ApiKeyAdmin, store: DynamoDBTaskStore, apigateway: Any, plan_id: str, authorizer: Any
) -> None:
    issued = admin.create("alice", "integration")
    record = store.get_api_key(issued.key_id)
    assert record is not None and record.principal == "alice"
    assert record.secret_hash == hash_api_key(issued.api_key)
    # The usage key is in the plan, enabled, with a value of its own.
    assert usage_plan_key_ids(apigateway, plan_id) == {record.usage_key_id}
    gateway_key = apigateway.get_api_key(apiKey=record.usage_key_id, includeValue=True)
    assert gateway_key["enabled"] is True and gateway_key["value"] == record.usage_key
    assert len(record.usage_key) == 40 and record.usage_key not in issued.api_key

    response = authorize(authorizer, issued.api_key)
    assert response["principalId"] == "alice"
    assert response["usageIdentifierKey"] == record.usage_key
    assert json.loads(response["context"]["claims"]) == {"keyId": issued.key_id}

    assert admin.revoke(issued.key_id) is True
    with pytest.raises(apigateway.exceptions.NotFoundException):
        apigateway.get_api_key(apiKey=record.usage_key_id)
    assert usage_plan_key_ids(apigateway, plan_id) == set()
    refused(authorizer, issued.api_key)
    assert admin.revoke(issued.key_id) is True  # again: nothing left to delete, no error
    assert [k.revoked for k in admin.list("alice") if k.key_id == issued.key_id] == [True]


def test_authorizer_refusals_on_dynamodb(admin: ApiKeyAdmin, authorizer: Any) -> None:
    good = admin.create("bob")
    other = admin.create("bob")
    # Right key id, another key's secret; unknown id; malformed.
    refused(authorizer, good.api_key[:17] + other.api_key[17:])
    refused(authorizer, "a2a_zzzzzzzzzzzz" + good.api_key[16:])
    refused(authorizer, good.api_key[:-1])
    assert authorize(authorizer, good.api_key)["principalId"] == "bob"


def test_the_table_never_holds_a_key(admin: ApiKeyAdmin, local_stack: LocalStack) -> None:
    issued: list[IssuedKey] = [admin.create(f"user-{i}") for i in range(3)]
    dump = json.dumps(table_items(local_stack))
    for key in issued:
        assert key.api_key not in dump and key.api_key[17:] not in dump
        assert hash_api_key(key.api_key) in dump


def test_key_items_are_invisible_to_tasks_listings_and_streams(
    admin: ApiKeyAdmin, store: DynamoDBTaskStore, local_stack: LocalStack
) -> None:
    # Principals shaped like the key layout's own partitions and prefixes.
    principals = ["APIKEYS", "APIKEY", "APIKEY#x", "T#", "carol"]
    issued = [admin.create(principal) for principal in principals]
    deserialize = TypeDeserializer().deserialize
    key_items = [
        item
        for item in table_items(local_stack)
        if item["pk"]["S"] == "APIKEYS" or item["pk"]["S"].startswith("APIKEY#")
    ]
    assert len(key_items) >= 2 * len(issued)
    for item in key_items:
        image = {name: deserialize(value) for name, value in item.items()}
        assert stream_event(image) is None  # the webhook sender's stream parsing skips it
        assert not item["sk"]["S"].startswith("E#")  # the stream mapping's filter too
        assert not {"g1pk", "g2pk", "g3pk", "gsk", "expiresAt"} & set(item)
    for principal in principals:
        query = ListQuery(owner=principal)
        assert store.list_tasks(query) == ([], None)
        assert store.count_tasks(query) == 0
    for key in issued:
        assert store.get_record(key.key_id) is None
        assert store.get_record(f"APIKEY#{key.key_id}") is None
        assert store.list_push_configs(key.key_id) == []
