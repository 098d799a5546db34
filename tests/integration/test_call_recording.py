"""local/calls.py over moto: the calls of each acting principal recorded once, as the input
of the IAM check in tests/iam_check.py."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from a2a_serverless.local.calls import CallRecorder, acting_as
from tests.unit.test_call_recording import ACCOUNT, REGION


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[CallRecorder, Any, Path]]:
    """A recorder attached to a boto3 session over moto, with one table and one queue."""
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        path = tmp_path / "calls.jsonl"
        recorder = CallRecorder(path, ACCOUNT)
        recorder.attach(session.events)
        recorder.armed = True  # as a stack does once it has started
        db = session.client("dynamodb")
        db.create_table(  # no principal acting: setup, not recorded
            TableName="tasks",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield recorder, session, path
        recorder.detach()


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_only_calls_of_an_acting_principal_are_recorded_once_each(
    recorded: tuple[CallRecorder, Any, Path],
) -> None:
    recorder, session, path = recorded
    db = session.client("dynamodb")
    db.get_item(TableName="tasks", Key={"pk": {"S": "a"}})  # nobody acting
    with acting_as("GetTaskFunction"):
        for _ in range(3):
            db.get_item(TableName="tasks", Key={"pk": {"S": "a"}})
    calls = lines(path)
    assert calls == [
        {
            "kind": "call",
            "principal": "GetTaskFunction",
            "action": "dynamodb:GetItem",
            "resource": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/tasks",
            "operation": "dynamodb:GetItem",
            "test": os.environ.get("PYTEST_CURRENT_TEST"),  # where it came from
            "thread": threading.current_thread().name,
            # The item's partition key (the table's, from moto): what LeadingKeys tests.
            "context": {"dynamodb:LeadingKeys": ["a"]},
            "stack": recorder.stack_id,
        }
    ]


def test_a_call_is_recorded_once_per_partition_key_kind(
    recorded: tuple[CallRecorder, Any, Path],
) -> None:
    _, session, path = recorded
    db = session.client("dynamodb")
    with acting_as("AuthorizerFunction"):
        for key in ("APIKEY#k1", "APIKEY#k2", "T#t1", "T#t2", "APIKEYS"):
            db.get_item(TableName="tasks", Key={"pk": {"S": key}})
    assert [c["context"] for c in lines(path)] == [
        {"dynamodb:LeadingKeys": ["APIKEY#k1"]},
        {"dynamodb:LeadingKeys": ["T#t1"]},
        {"dynamodb:LeadingKeys": ["APIKEYS"]},
    ]


def test_unmapped_calls_are_recorded_as_errors(recorded: tuple[CallRecorder, Any, Path]) -> None:
    _, session, path = recorded
    with acting_as("StreamFunction"):
        session.client("dynamodb").list_tables()
    (line,) = lines(path)
    assert line["kind"] == "error"
    assert line["principal"] == "StreamFunction"
    assert line["operation"] == "dynamodb:ListTables"


def test_pinned_clients_record_for_their_principal_in_any_context(
    recorded: tuple[CallRecorder, Any, Path],
) -> None:
    recorder, session, path = recorded
    client = session.client("dynamodb")
    recorder.pin(client, "FlowStateMachine")
    with acting_as("StreamFunction"):  # the pin wins over the context, not both
        client.get_item(TableName="tasks", Key={"pk": {"S": "a"}})
    assert [(c["principal"], c["action"]) for c in lines(path)] == [
        ("FlowStateMachine", "dynamodb:GetItem")
    ]


def test_a_detached_recorder_records_nothing(recorded: tuple[CallRecorder, Any, Path]) -> None:
    recorder, session, path = recorded
    recorder.detach()
    with acting_as("GetTaskFunction"):
        session.client("dynamodb").get_item(TableName="tasks", Key={"pk": {"S": "a"}})
    assert lines(path) == []


def test_nothing_is_recorded_before_the_stack_has_started(
    recorded: tuple[CallRecorder, Any, Path],
) -> None:
    recorder, session, path = recorded
    recorder.armed = False  # a stack still starting: an earlier stack's thread calling in
    with acting_as("FlowWorkerFunction"):
        session.client("dynamodb").get_item(TableName="tasks", Key={"pk": {"S": "a"}})
    assert lines(path) == []
