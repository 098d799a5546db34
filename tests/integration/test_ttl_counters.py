"""TTL removals keep ListTasks' totalSize exact: the table's stream carries DynamoDB's removal
of an expired task header (userIdentity = the DynamoDB service), the WebhookSender's mapping
lets it through (template.yaml FilterCriteria), and the sender takes the task off the owner's
and context's counters once, however often the record is delivered."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from a2a_serverless.local.events import StreamMapping, passes
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.local.ttl import LOCAL_TTL_ENV
from tests.integration.harness import (
    A2A,
    REGION,
    ddb,
    list_totals,
    one_header_deleted,
    table,
    wait_idle,
)
from tests.integration.test_event_sources import Function, pump, stream_arn, template_filters

TTL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def _removal(image: dict[str, Any], identity: dict[str, str] | None, seq: str) -> dict[str, Any]:
    """A Lambda-shaped stream record of an item's removal."""
    record: dict[str, Any] = {
        "eventID": seq,
        "eventName": "REMOVE",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "Keys": {"pk": image["pk"], "sk": image["sk"]},
            "OldImage": image,
            "SequenceNumber": seq,
            "SizeBytes": 100,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }
    if identity is not None:
        record["userIdentity"] = identity
    return record


def test_the_mapping_passes_ttl_removals_of_task_headers_only() -> None:
    filters = template_filters()
    head = {"pk": {"S": "T#t-1"}, "sk": {"S": "H"}}
    event = {"pk": {"S": "T#t-1"}, "sk": {"S": "E#0000000001"}}
    assert passes(filters, _removal(head, TTL, "1"))
    assert not passes(filters, _removal(head, None, "2"))  # someone's DeleteItem, not TTL
    other = {"type": "Service", "principalId": "other.amazonaws.com"}
    assert not passes(filters, _removal(head, other, "3"))
    assert not passes(filters, _removal(event, TTL, "4"))  # an event item expiring: nothing


def test_the_sender_takes_an_expired_task_off_the_counters_once(
    local_stack: LocalStack, alice: A2A
) -> None:
    from a2a_serverless.handlers import webhook_sender

    handler = webhook_sender.create()
    kept, old = one_header_deleted(local_stack, alice, "ctx-exp")
    # Someone's own delete of the header is not an expiry: the counters stay.
    assert handler({"Records": [_removal(old, None, "10")]}, None) == {"batchItemFailures": []}
    assert list_totals(alice, "ctx-exp") == (2, 2, 2)
    assert handler({"Records": [_removal(old, TTL, "11")]}, None) == {"batchItemFailures": []}
    assert list_totals(alice, "ctx-exp") == (1, 1, 1)
    # The stream delivers it again (a retried batch): counted once.
    assert handler({"Records": [_removal(old, TTL, "11")]}, None) == {"batchItemFailures": []}
    assert list_totals(alice, "ctx-exp") == (1, 1, 1)
    assert [t["id"] for t in alice.list().json["tasks"]] == [kept]


def test_the_local_stream_mapping_gives_the_removers_identity_in_lambdas_shape(
    local_stack: LocalStack,
) -> None:
    """The Streams API spells it {"PrincipalId", "Type"}; Lambda's events (and the filter
    patterns written for them) {"principalId", "type"}."""
    function = Function()
    mapping = StreamMapping(
        name="test.ttl",
        invoke=function,
        streams=boto3.client("dynamodbstreams", region_name=REGION),
        sqs=boto3.client("sqs", region_name=REGION),
        stream_arn=stream_arn(local_stack),
        starting_position="LATEST",
        filters=template_filters(),
    )
    name = table(local_stack)
    key = {"pk": {"S": "T#expiring"}, "sk": {"S": "H"}}
    ddb().put_item(TableName=name, Item={**key, "x": {"S": "y"}})
    moto_table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(name)
    ddb().delete_item(TableName=name, Key=key)
    # What DynamoDB's TTL process writes on the record of its own delete.
    moto_table.stream_shard.items[-1].record["userIdentity"] = {
        "PrincipalId": "dynamodb.amazonaws.com",
        "Type": "Service",
    }
    pump(mapping)
    (batch,) = function.batches
    (record,) = batch  # the put (an INSERT of a header) is filtered out
    assert record["eventName"] == "REMOVE"
    assert record["userIdentity"] == TTL
    assert json.loads(json.dumps(record["dynamodb"]["OldImage"]))["x"] == {"S": "y"}


def test_expiry_on_the_local_stack_takes_tasks_off_totalsize(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole chain: the TTL sweeper deletes the expired items (REMOVE records by the
    service), the stream mapping's filter passes the headers' removals, the WebhookSender takes
    them off the counters: totalSize and the list agree again."""
    monkeypatch.setenv(LOCAL_TTL_ENV, "1")  # items expire a second after they were written
    stack = LocalStack(event_sources="manual").start()
    try:
        assert stack.event_sources is not None and stack.sweeper is not None
        task_events = stack.event_sources.by_name("WebhookSenderFunction.TaskEvents")
        alice = A2A(stack, "alice")
        for text in ("one", "two"):
            alice.send(text, context_id="ctx-chain")
        wait_idle(stack)
        while task_events.poll_once():
            pass
        assert alice.list().json["totalSize"] == 2
        time.sleep(2.1)
        stack.sweeper.sweep()
        invocations = task_events.invocations
        while task_events.poll_once():
            pass
        assert task_events.invocations > invocations  # the removals reached the sender
        assert alice.list().json.get("totalSize", 0) == 0
        assert alice.list(contextId="ctx-chain").json.get("totalSize", 0) == 0
        assert alice.list().json.get("tasks", []) == []
    finally:
        stack.stop()
