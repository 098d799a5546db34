"""Storage invariants, read through boto3 straight from the table."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from a2a_serverless.local.stack import LocalStack
from tests.integration import flows_for_tests
from tests.integration.flows_for_tests import BIG_TEXT, GATED_CHUNKS, GATES, WIDE_DATA
from tests.integration.harness import (
    A2A,
    WORKER,
    CallCounter,
    assert_log_consistent,
    ddb,
    header,
    item_size,
    list_totals,
    one_header_deleted,
    partition,
    scan,
    stored_object,
    table,
    wait_for,
    wait_idle,
    wait_state,
)

DAY = 86400
MAX_ITEM = 350 * 1024


def _mixed_tasks(alice: A2A) -> list[str]:
    ids = [
        alice.send("plain").task["id"],
        alice.send("a b c d e f [steps=3]").task["id"],
        alice.send("nope [fail]").task["id"],
        alice.send("boom [crash]").task["id"],
    ]
    multi = alice.send("first [input]").task["id"]
    alice.send("second", task_id=multi)
    canceled = alice.send("later [auth]").task["id"]
    alice.cancel(canceled)
    return [*ids, multi, canceled]


def test_event_logs_are_contiguous_and_every_task_item_expires(
    local_stack: LocalStack, alice: A2A, dedupe_window: None
) -> None:
    task_ids = _mixed_tasks(alice)
    wait_idle(local_stack)
    for task_id in task_ids:
        assert_log_consistent(local_stack, task_id)

    items = scan(local_stack)
    now = time.time()
    kinds = set()
    for item in items:
        pk = item["pk"]["S"]
        kind = pk.split("#", 1)[0]
        if kind == "O":
            continue  # counters: TTL refreshed on every change (test_owner_counter_items_expire)
        kinds.add((kind, item["sk"]["S"][:2]))
        assert "expiresAt" in item, item
        expires = int(item["expiresAt"]["N"])
        assert 30 * DAY - 600 <= expires - now <= 30 * DAY + 60, (pk, item["sk"]["S"], expires)
    assert {("T", "H"), ("T", "E#"), ("T", "M#"), ("D", "D")} <= kinds


def test_a_tasks_header_stands_for_its_first_two_events(
    local_stack: LocalStack, alice: A2A
) -> None:
    """SendMessage's creation status and the first step's WORKING status have no items: the
    header is events 1 (marked `e1`) and 2 (`w1`/`w1at`), two transaction write units less
    each; every read puts them back (contract tests), and the header's stream records are
    their events for webhooks (test_push_delivery.py)."""
    task_id = alice.send("plain").task["id"]
    wait_idle(local_stack)
    stored = {item["sk"]["S"]: item for item in partition(local_stack, task_id)}
    header = stored["H"]
    assert header["e1"] == {"BOOL": True} and header["w1"] == {"N": "2"}
    assert "E#0000000001" not in stored and "E#0000000002" not in stored
    assert "E#0000000003" in stored
    log = assert_log_consistent(local_stack, task_id)

    def status(state: str, at: str) -> dict[str, Any]:
        body = {"state": state, "timestamp": at}
        return {"taskId": task_id, "contextId": header["contextId"]["S"], "status": body}

    assert log[0] == (1, {"statusUpdate": status("TASK_STATE_SUBMITTED", header["createdAt"]["S"])})
    assert log[1] == (2, {"statusUpdate": status("TASK_STATE_WORKING", header["w1at"]["S"])})


def test_a_small_first_message_is_the_headers(local_stack: LocalStack, alice: A2A) -> None:
    """The first message has no item of its own (two transaction write units less) when the
    header with it stays within keys.INLINE_HEADER_MAX_BYTES; a larger one is an `M#` item and
    leaves the header as small as before. Either way it is the task's history[0]."""
    big = "words " * 200
    small, large = alice.send("hi").task["id"], alice.send(big).task["id"]
    wait_idle(local_stack)
    for task_id, text, inline in [(small, "hi", True), (large, big, False)]:
        stored = {item["sk"]["S"]: item for item in partition(local_stack, task_id)}
        assert ("m1" in stored["H"], "M#000001" in stored) == (inline, not inline), task_id
        assert item_size(stored["H"]) < 1024  # after the turn too: later writes stay 1 KB
        assert alice.get(task_id).json["history"][0]["parts"][0]["text"] == text


def test_owner_counter_items_expire(local_stack: LocalStack, alice: A2A) -> None:
    alice.send("plain", context_id="ctx-one")
    counters = [i for i in scan(local_stack) if i["pk"]["S"].startswith("O#")]
    keys = {i["sk"]["S"] for i in counters}
    shards = {f"N#{n}" for n in range(8)}
    assert "X#ctx-one" in keys and keys - {"X#ctx-one"} <= shards and keys & shards, keys
    owner_total = sum(
        int(i.get("all", {"N": "0"})["N"]) for i in counters if i["sk"]["S"] in shards
    )
    assert owner_total == 1
    headers = [i for i in scan(local_stack) if i["sk"]["S"] == "H"]
    last_task_expires = max(int(i["expiresAt"]["N"]) for i in headers)
    for item in counters:
        # After the tasks they count, by a margin: TTL deletes late and in no order, and a
        # task's removal must still find its counters to decrement.
        assert int(item["expiresAt"]["N"]) >= last_task_expires + 13 * DAY, item


@pytest.fixture
def gated_stack(make_stack: Callable[..., LocalStack]) -> Any:
    flows_for_tests.GATES = GATES.__class__()
    stack = make_stack(Flow="tests.integration.flows_for_tests:gated")
    yield stack
    flows_for_tests.GATES.emit.set()
    flows_for_tests.GATES.finish.set()


def _index_view(stack: LocalStack, owner: str) -> list[Any]:
    """The owner's entries in the one index (byOwner)."""
    return ddb().query(
        TableName=table(stack),
        IndexName="byOwner",
        KeyConditionExpression="g1pk = :v",
        ExpressionAttributeValues={":v": {"S": owner}},
    )["Items"]


def test_artifact_chunks_write_only_event_items(gated_stack: LocalStack) -> None:
    """While a step emits chunks, the header (hence the index) is untouched and each chunk
    costs exactly one PutItem."""
    gates = flows_for_tests.GATES
    alice = A2A(gated_stack, "alice")
    counter = CallCounter()
    task = alice.send("go", blocking=False).task
    task_id = task["id"]
    assert gates.started.wait(10)
    wait_for(lambda: header(gated_stack, task_id)["state"]["S"] == "TASK_STATE_WORKING")
    before = header(gated_stack, task_id)
    view_before = _index_view(gated_stack, "alice")
    assert [i["state"]["S"] for i in view_before] == ["TASK_STATE_WORKING"]
    counter.reset_worker()

    gates.emit.set()
    assert gates.emitted.wait(10)
    chunk_calls = counter.of(WORKER)
    assert header(gated_stack, task_id) == before
    assert _index_view(gated_stack, "alice") == view_before
    assert dict(chunk_calls) == {"PutItem": GATED_CHUNKS}

    gates.finish.set()
    done = wait_state(alice, task_id, {"TASK_STATE_COMPLETED"})
    assert done["artifacts"][0]["parts"] == [{"text": f"chunk {i}; "} for i in range(GATED_CHUNKS)]
    log = assert_log_consistent(gated_stack, task_id)
    assert len(log) == 3 + GATED_CHUNKS  # submitted, working, chunks..., completed
    counter.close()


def test_a_one_megabyte_artifact_is_one_event_whose_text_the_bucket_holds(
    make_stack: Callable[..., LocalStack],
) -> None:
    stack = make_stack(Flow="tests.integration.flows_for_tests:big")
    alice = A2A(stack, "alice")
    sent = alice.send("make it big")
    assert sent.status == 200
    task_id = sent.task["id"]
    assert sent.task["status"]["state"] == "TASK_STATE_COMPLETED"
    wait_idle(stack)

    sizes = sorted((item_size(i), i["sk"]["S"]) for i in scan(stack))
    assert sizes[-1][0] <= 4096, sizes[-3:]  # the text is in no item
    log = assert_log_consistent(stack, task_id)
    assert sum(1 for _, ev in log if "artifactUpdate" in ev) == 1

    got = alice.get(task_id).json
    (artifact,) = got["artifacts"]
    assert artifact["artifactId"] == "big"
    (part,) = artifact["parts"]
    assert part["mediaType"] == "text/plain; charset=utf-8"
    assert stored_object(stack, part["url"]).decode() == BIG_TEXT


def test_a_wide_data_part_is_stored_and_read_back_as_json(
    make_stack: Callable[..., LocalStack],
) -> None:
    stack = make_stack(Flow="tests.integration.flows_for_tests:big")
    alice = A2A(stack, "alice")
    assert len(str(WIDE_DATA).encode()) > 400_000
    task = alice.send("wide [data]").task
    wait_idle(stack)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert max(item_size(i) for i in scan(stack)) <= MAX_ITEM
    (part,) = task["artifacts"][0]["parts"]
    assert part["mediaType"] == "application/json"
    assert json.loads(stored_object(stack, part["url"])) == WIDE_DATA


def test_without_a_content_bucket_a_wide_data_part_is_refused_before_writing(
    make_stack: Callable[..., LocalStack], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTENT_BUCKET", "")
    stack = make_stack(Flow="tests.integration.flows_for_tests:big")
    alice = A2A(stack, "alice")
    task = alice.send("wide [data]").task
    wait_idle(stack)
    assert max(item_size(i) for i in scan(stack)) <= MAX_ITEM
    assert task["status"]["state"] == "TASK_STATE_FAILED", task["status"]
    assert "(MAX_EVENT_BYTES)" in task["status"]["message"]["parts"][0]["text"], task["status"]


def test_a_ttl_removed_task_leaves_total_size(local_stack: LocalStack, alice: A2A) -> None:
    """The table's TTL deletes a task header; the stream's REMOVE record (old image, as
    Powertools deserializes it for the stream consumer) takes it off the counters: ListTasks'
    totalSize stays exact, by context and by state too, and a redelivered record counts
    nothing."""
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
        DynamoDBRecord,
    )

    from a2a_serverless import wiring

    kept, old = one_header_deleted(local_stack, alice, "ctx-ttl")
    record = DynamoDBRecord(
        {
            "eventName": "REMOVE",
            "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
            "dynamodb": {
                "Keys": {"pk": old["pk"], "sk": old["sk"]},
                "OldImage": old,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }
    )
    assert record.dynamodb is not None
    store = wiring.get_store()
    assert store.forget_expired(record.dynamodb.old_image) is True
    assert list_totals(alice, "ctx-ttl") == (1, 1, 1)
    assert store.forget_expired(record.dynamodb.old_image) is False  # delivered again
    assert list_totals(alice, "ctx-ttl") == (1, 1, 1)
    assert [t["id"] for t in alice.list().json["tasks"]] == [kept]
