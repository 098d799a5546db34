"""The inspector's records (local/inspector/records.py): bounds, attempt counts, marks, and
the wraps `install` puts on the sender and the store (undone with the stack's patches)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from a2a_serverless.local.inspector import records as inspector
from a2a_serverless.local.inspector.records import (
    DEAD_LETTERED,
    DELIVERED,
    FAILED,
    PARKED,
    InspectorRecords,
)
from a2a_serverless.local.patching import Patches
from a2a_serverless.models import TaskPushNotificationConfig
from a2a_serverless.observability import log_context
from a2a_serverless.push.delivery import DeliveryResult
from a2a_serverless.push.sender import WebhookSender
from a2a_serverless.store.dynamodb.delegations import DynamoDBDelegations
from a2a_serverless.store.dynamodb.tasks import DynamoDBTaskLog


def _attempt(records: InspectorRecords, task: str, seq: int, error: str | None = None) -> Any:
    status = 200 if error is None else 500
    return records.record_attempt(task, "c1", "http://h/x", seq, status, 1.25, error, b"{}")


def test_attempts_are_counted_per_task_config_and_event() -> None:
    records = InspectorRecords()
    _attempt(records, "t", 1, "HTTP 500")
    _attempt(records, "t", 1)
    _attempt(records, "t", 2)
    _attempt(records, "u", 1)
    found = [(d.seq, d.attempt, d.outcome) for d in records.deliveries("t")]
    assert found == [(1, 1, FAILED), (1, 2, DELIVERED), (2, 1, DELIVERED)]
    assert [d.attempt for d in records.deliveries("u")] == [1]
    assert records.deliveries("none") == []


def test_marks_turn_the_last_failed_attempt_or_add_an_entry_once() -> None:
    records = InspectorRecords()
    _attempt(records, "t", 1, "HTTP 500")
    _attempt(records, "t", 1, "HTTP 500")
    records.mark("t", "c1", 1, PARKED)
    records.mark("t", "c1", 1, PARKED)  # the batch's send and its single enqueue: once
    records.mark("t", "c1", 2, PARKED)  # queued behind, no POST
    found = [(d.seq, d.attempt, d.outcome, d.url) for d in records.deliveries("t")]
    assert found == [
        (1, 1, FAILED, "http://h/x"),
        (1, 2, PARKED, "http://h/x"),
        (2, 0, PARKED, "http://h/x"),
    ]
    _attempt(records, "t", 2, "HTTP 500")
    records.mark("t", "c1", 2, DEAD_LETTERED)
    assert records.deliveries("t")[-1].outcome == DEAD_LETTERED
    assert records.deliveries("t")[-1].attempt == 1


def test_memory_is_bounded_oldest_first() -> None:
    records = InspectorRecords(max_tasks=2, per_task=3)
    for seq in range(1, 6):
        _attempt(records, "a", seq)
        records.record_flow_state("a", 1, seq, {"n": seq}, "next-step")
    assert [d.seq for d in records.deliveries("a")] == [3, 4, 5]
    assert [r.step for r in records.flow_states("a")] == [3, 4, 5]
    _attempt(records, "b", 1)
    _attempt(records, "a", 6)  # a is the newest again
    _attempt(records, "c", 1)
    assert records.deliveries("b") == []
    assert [d.seq for d in records.deliveries("a")] == [4, 5, 6]


def test_texts_are_cut_and_the_oldest_dropped_past_the_budget() -> None:
    records = InspectorRecords(text_max_chars=10, text_budget_chars=60)
    cut = "x" * 10 + "\n[cut: 30 characters in all]"  # 38 characters
    records.record_attempt("t", "c1", "u", 1, 200, 1.0, None, b"x" * 30)
    assert [d.payload for d in records.deliveries("t")] == [cut]
    records.record_flow_state("t", 1, 0, "abcdefgh", "next-step")  # 10: 48 in all
    records.record_attempt("t", "c1", "u", 2, 200, 1.0, None, b"y" * 15)  # 38: 86, drop 38
    assert [d.payload is None for d in records.deliveries("t")] == [True, False]
    assert [r.state for r in records.flow_states("t")] == ['"abcdefgh"']
    records.record_flow_state("t", 1, 1, "z" * 20, "next-step")  # 38: 86, drop 10 and 38
    assert [r.state is None for r in records.flow_states("t")] == [True, False]
    assert [d.payload for d in records.deliveries("t")] == [None, None]


def test_reads_are_copies() -> None:
    records = InspectorRecords()
    _attempt(records, "t", 1, "HTTP 500")
    records.deliveries("t")[0].outcome = "changed"
    assert records.deliveries("t")[0].outcome == FAILED


class _Sender:
    """What the wraps call: the sender's methods, each answering without I/O."""

    def attempt(self, config: Any, body: bytes, **kwargs: Any) -> DeliveryResult:
        return DeliveryResult(503, True, "HTTP 503")

    def enqueue(self, task_id: str, config_id: str, seq: int) -> None:
        pass

    def _send(self, messages: list[tuple[str, str, int]]) -> None:
        pass

    def _dead_letter(
        self, task_id: str, config_id: str, seq: int, attempts: int, error: str
    ) -> None:
        pass


class _Store:
    def save_flow_state(self, *args: Any) -> None:
        pass

    def apply_status(self, change: Any, in_header: bool = True) -> None:
        pass

    def begin_round(self, *args: Any) -> bool:
        return args[-2] == ["new"]


def test_install_wraps_the_sender_and_store_until_undone(monkeypatch: Any) -> None:
    # The real classes' methods replaced by stand-ins first, so the wraps call no AWS.
    for name in ("attempt", "enqueue", "_send", "_dead_letter"):
        monkeypatch.setattr(WebhookSender, name, getattr(_Sender, name))
    for name in ("save_flow_state", "apply_status"):
        monkeypatch.setattr(DynamoDBTaskLog, name, getattr(_Store, name))
    monkeypatch.setattr(DynamoDBDelegations, "begin_round", _Store.begin_round)
    stand_in = WebhookSender.attempt
    stack = SimpleNamespace()
    patches = Patches()
    records = inspector.install(stack, patches)
    assert stack.records is records
    sender: Any = object.__new__(WebhookSender)
    config = TaskPushNotificationConfig(id="c1", url="http://h/x", task_id="t")
    with log_context(task_id="t", seq=3):
        result = sender.attempt(config, b'{"a":1}', read_timeout=1.0)
        sender._send([("t", "c1", 3), ("t", "c1", 4)])
    assert result.status == 503
    store: Any = object.__new__(DynamoDBDelegations)
    store.save_flow_state("t", 1, {"seen": 1}, 0)
    with log_context(step=1):
        store.apply_status(SimpleNamespace(task_id="t", turn=1, flow_state={"seen": 2}))
    store.apply_status(SimpleNamespace(task_id="t", turn=1, flow_state=None))
    store.begin_round("t", 2, 0, ["new"], {"r": 1})
    store.begin_round("t", 2, 0, ["again"], {"r": 1})  # begun before: nothing written
    sender._dead_letter("t", "c1", 4, 2, "HTTP 503")
    found = [(d.seq, d.attempt, d.outcome, d.status_code) for d in records.deliveries("t")]
    assert found == [(3, 1, PARKED, 503), (4, 0, PARKED, None), (4, 0, DEAD_LETTERED, None)]
    assert records.deliveries("t")[0].payload == '{"a":1}'
    states = [
        (r.turn, r.step, json.loads(r.state or "null"), r.saved_by)
        for r in records.flow_states("t")
    ]
    assert states == [
        (1, 0, {"seen": 1}, "next-step"),
        (1, 1, {"seen": 2}, "final"),
        (2, 0, {"r": 1}, "delegation"),
    ]
    patches.undo()
    assert WebhookSender.attempt is stand_in
