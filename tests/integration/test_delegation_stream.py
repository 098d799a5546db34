"""Delegation writes on the template's table reach no webhook: the stream mapping with the
template's filter (local/events.py over moto's stream) passes none of the records they make."""

from __future__ import annotations

from typing import Any

from a2a_serverless.local.stack import LocalStack
from a2a_serverless.store.dynamodb import DynamoDBTaskStore, keys
from tests.contract.cases import begin, chunk, delegation, working
from tests.integration.harness import ddb
from tests.integration.test_event_sources import (
    Function,
    pump,
    sk_of,
    stream_mapping,
    template_filters,
)


def test_no_delegation_write_reaches_the_webhook_sender(local_stack: LocalStack) -> None:
    store = DynamoDBTaskStore(ddb(), local_stack.env["TABLE_NAME"])
    task_id = working(store).task_id
    everything, filtered = Function(), Function()
    unfiltered = stream_mapping(local_stack, everything)
    mapping = stream_mapping(local_stack, filtered, filters=template_filters())

    begin(store, task_id, 1, 1, count=2)
    assert store.begin_round(task_id, 1, 1, [delegation(task_id, "1.1.0")], {}) is False
    store.bind_remote_task(task_id, "1.1.0", "rt", "rc")
    store.mark_sent(task_id, "1.1.0", "push", 1.0, "rt", "rc")
    store.record_status(task_id, "1.1.0", "TASK_STATE_WORKING", "2026-01-01T00:00:00Z", None)
    store.note_seen(task_id, "1.1.0", "digest")
    store.count_poll(task_id, "1.1.1")
    store.settle(task_id, "1.1.0", "completed")
    store.settle(task_id, "1.1.1", "unreachable", error="refused")
    assert store.end_wait(task_id, "1.1") is True
    store.append_event(task_id, 3, chunk(task_id, "after", False))  # an event: it passes
    pump(unfiltered)
    pump(mapping)

    def mine(batches: list[list[dict[str, Any]]]) -> list[tuple[str, str]]:
        """(event name, sort key) of this task's records (the stack may write others)."""
        pk = keys.task_pk(task_id)
        records = [r for batch in batches for r in batch if r["dynamodb"]["Keys"]["pk"] == pk]
        return [(r["eventName"], sk_of(r)) for r in records]

    written = mine(everything.batches)
    delegation_sk, seen_sk = keys.delegation_sk("1.1.0"), keys.seen_sk("1.1.0", "digest")
    for made in [
        ("MODIFY", "H"),  # begin_round, end_wait
        ("INSERT", delegation_sk),
        ("MODIFY", delegation_sk),
        ("INSERT", seen_sk),
        ("INSERT", keys.event_sk(3)),
    ]:
        assert made in written, made  # the writes did make stream records
    assert mine(filtered.batches) == [("INSERT", keys.event_sk(3))]
