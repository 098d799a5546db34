"""local/meter.py's per-task attribution: which tasks a Lambda event serves, where the units of
an invocation or request go (its tasks, split evenly; else the enclosing request's; else
unattributed; nothing counted twice or lost), and moto's item JSON read as a client reads it."""

from __future__ import annotations

import base64
import contextvars
import json
import threading
from collections import OrderedDict

import pytest

from a2a_serverless.local.meter import TaskMeter, Units, as_read, item_size, tasks_in_event


def _meter() -> TaskMeter:
    """A TaskMeter's attribution alone (no stack: nothing installed, nothing read)."""
    meter = TaskMeter.__new__(TaskMeter)
    meter._lock = threading.Lock()
    meter._tasks = OrderedDict()
    meter.unattributed = {}
    meter.total = {}
    return meter


def _conserved(meter: TaskMeter) -> None:
    summed: Units = dict(meter.unattributed)
    for task in meter.tasks():
        for key, value in meter.counts(task).items():
            summed[key] = summed.get(key, 0) + value
    assert summed.keys() == meter.total.keys()
    for key, value in meter.total.items():
        assert summed[key] == pytest.approx(value)


def test_a_batch_invocation_is_split_between_its_tasks() -> None:
    meter = _meter()
    with meter.scope({"a", "b"}):
        meter.invoked("WebhookSenderFunction", 0.0105)  # 11 ms billed
    for task in ("a", "b"):
        counts = meter.counts(task)
        assert counts[("lambda", "WebhookSenderFunction", "invocations")] == 0.5
        assert counts[("lambda", "WebhookSenderFunction", "billed_ms")] == 5.5
    _conserved(meter)


def test_a_request_is_the_task_its_items_name() -> None:
    """The authorizer's invocation (no task of its own) and the function's go to the task the
    request's writes name; units outside any request are unattributed."""
    meter = _meter()
    with meter.scope(set()):  # the gateway's request, its path naming no task (a send)
        with meter.scope(set()):  # the authorizer
            meter.invoked("AuthorizerFunction", 0.002)
        with meter.scope(set()):  # the function
            meter.api_request()
            meter._charge(None, {("dynamodb", "wru_table"): 1})  # a lease: no task in its key
            meter._charge("t1", {("dynamodb", "wru_table"): 4})  # the task's items
            meter.invoked("SendMessageFunction", 0.05)
    meter._charge(None, {("sqs", "SendMessage"): 1})
    counts = meter.counts("t1")
    assert counts[("lambda", "AuthorizerFunction", "invocations")] == 1
    assert counts[("lambda", "SendMessageFunction", "invocations")] == 1
    assert (counts[("api",)], counts[("dynamodb", "wru_table")]) == (1, 5)
    assert meter.unattributed == {("sqs", "SendMessage"): 1}
    _conserved(meter)


def test_units_charged_after_their_scope_ended_still_reach_its_task() -> None:
    meter = _meter()
    with meter.scope({"t1"}):
        left_running = contextvars.copy_context()  # a thread the invocation started
    left_running.run(meter._charge, None, {("s3", "PutObject"): 1})
    assert meter.counts("t1") == {("s3", "PutObject"): 1}
    _conserved(meter)


def test_the_flow_workers_event_names_its_task() -> None:
    assert tasks_in_event({"taskId": "t1", "turn": 1, "step": 0}) == {"t1"}


def test_a_stream_batch_names_the_tasks_of_its_records() -> None:
    def record(task: str, sk: str) -> dict:
        keys = {"pk": {"S": f"T#{task}"}, "sk": {"S": sk}}
        new = {**keys, "g1pk": {"S": "O#owner#x"}, "ev": {"S": "{}"}}
        return {"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": new}}

    batch = {"Records": [record("a", "E#3"), record("b", "E#3"), record("a", "H")]}
    assert tasks_in_event(batch) == {"a", "b"}


def test_a_retry_queue_message_names_its_task_in_its_body() -> None:
    body = json.dumps({"taskId": "t9", "configId": "c", "seq": 4})
    assert tasks_in_event({"Records": [{"messageId": "m", "body": body}]}) == {"t9"}


def test_an_authorizers_event_names_no_task() -> None:
    event = {"type": "REQUEST", "methodArn": "arn:aws:execute-api:x/prod/GET/tasks/t1"}
    assert tasks_in_event(event) == set()


def test_motos_binary_values_are_sized_as_a_clients_bytes() -> None:
    raw = b"\x00\x01" * 100
    encoded = base64.b64encode(raw).decode()
    moto_json = {
        "b": {"B": encoded},
        "m": {"M": {"inner": {"B": encoded}, "s": {"S": "x"}}},
        "l": {"L": [{"B": encoded}]},
        "bs": {"BS": [encoded]},
    }
    client = {
        "b": {"B": raw},
        "m": {"M": {"inner": {"B": raw}, "s": {"S": "x"}}},
        "l": {"L": [{"B": raw}]},
        "bs": {"BS": [raw]},
    }
    read = {name: as_read(value) for name, value in moto_json.items()}
    assert read == client
    assert item_size(read) == item_size(client)
