"""No delegation write reaches the webhook sender: the template's stream filter passes none of
the records they make (delegation and seen-notification items, the header's round and wait
marks), and the sender's decoding finds no event in them."""

from __future__ import annotations

from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from a2a_serverless.local.events import passes
from a2a_serverless.store.dynamodb import keys
from tests.unit.test_event_patterns import _template_filters, stream_record

DELEGATION_SK = keys.delegation_sk("1.2.0") or ""
SEEN_SK = keys.seen_sk("1.2.0", "digest") or ""
TTL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def _header(**marks: Any) -> dict[str, Any]:
    """A WORKING header's attributes (`w1` when it stands for the first WORKING status)."""
    image = {
        "taskId": {"S": "task-1"},
        "contextId": {"S": "ctx"},
        "state": {"S": "TASK_STATE_WORKING"},
        "e1": {"BOOL": True},
        "createdAt": {"S": "2026-01-01T00:00:00.000Z"},
    }
    return {**image, **marks}


def _deserialized(image: dict[str, Any]) -> dict[str, Any]:
    """An image as the sender decodes it (`keys.stream_event` takes plain values)."""
    return {name: TypeDeserializer().deserialize(value) for name, value in image.items()}


W1 = {"w1": {"N": "2"}, "w1at": {"S": "2026-01-01T00:00:01.000Z"}}
ROUND = {"delegationRound": {"S": "1.2"}, "waiting": {"BOOL": True}}


@pytest.mark.parametrize("sk", [DELEGATION_SK, SEEN_SK])
@pytest.mark.parametrize("event_name", ["INSERT", "MODIFY", "REMOVE"])
@pytest.mark.parametrize("ttl", [False, True])
def test_delegation_items_never_pass(sk: str, event_name: str, ttl: bool) -> None:
    record = stream_record(event_name, sk, dstate={"S": "waiting"}, ev={"S": "{}"})
    if ttl:
        record["userIdentity"] = TTL
    assert sk.startswith((keys.DELEGATION_PREFIX, keys.SEEN_PREFIX))
    assert not passes(_template_filters(), record)
    image = record["dynamodb"].get("NewImage")
    if image is not None:
        assert keys.stream_event(_deserialized(image)) is None


@pytest.mark.parametrize("first_working_in_header", [False, True])
@pytest.mark.parametrize(
    ("before", "after"),
    [({}, ROUND), (ROUND, {**ROUND, "waiting": {"BOOL": False}}), (ROUND, {})],
    ids=["begin_round", "end_wait (false)", "end_wait (removed)"],
)
def test_the_header_writes_of_a_round_never_pass(
    first_working_in_header: bool, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """begin_round and end_wait change a WORKING header's round marks (and flow state), never
    its event marks: whether or not the header stands for the first WORKING status, the
    update is no event."""
    marks = W1 if first_working_in_header else {}
    record = stream_record("MODIFY", "H", **_header(**marks, **after, flowState={"S": "{}"}))
    record["dynamodb"]["OldImage"] = {**record["dynamodb"]["Keys"], **_header(**marks, **before)}
    assert not passes(_template_filters(), record)
    new, old = (_deserialized(record["dynamodb"][i]) for i in ("NewImage", "OldImage"))
    assert keys.stream_event(new, old) is None
    # The same header update that adds the first WORKING status is an event: the check can
    # tell them apart.
    record["dynamodb"]["NewImage"].update(W1)
    record["dynamodb"]["OldImage"] = {**record["dynamodb"]["Keys"], **_header(**before)}
    assert passes(_template_filters(), record)
