"""What the inspector sees of a running stack: a two-step flow's task sent with an inline
webhook to a local receiver; the stack's records (deliveries, flow states) and the task view
(events, executions, turns) read back.

The stream and retry-queue mappings are polled by hand; PushMaxAttempts=2 and no queued
backoff, so parking and dead-lettering take moments."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import pytest

from a2a_serverless import wiring
from a2a_serverless.core.context import RequestContext
from a2a_serverless.local import events
from a2a_serverless.local.events import QueueMapping, StreamMapping
from a2a_serverless.local.inspector import data
from a2a_serverless.local.inspector.records import (
    DEAD_LETTERED,
    DELIVERED,
    FAILED,
    PARKED,
    InspectorRecords,
)
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import SendMessageRequest
from tests.conftest import SHARED
from tests.integration.flows_for_tests import RERUN
from tests.integration.harness import A2A, event_log, wait_for, wait_idle
from tests.integration.webhooks import Webhooks, always, failing_first

FLOW = "tests.integration.flows_for_tests:two_steps"


@pytest.fixture
def webhooks() -> Iterator[Webhooks]:
    receivers = Webhooks()
    yield receivers
    receivers.close()


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    RERUN.__init__()  # type: ignore[misc]  # fresh controls: the flow runs straight through
    monkeypatch.setattr(events, "RETRY_PAUSE_SECONDS", 0.0)
    SHARED.set_aside()  # its resources have the names this stack's will have
    stack = LocalStack(
        parameters={"Flow": FLOW, "PushMaxAttempts": "2"},
        env_overrides={"PUSH_RETRY_BASE_SECONDS": "0"},
        event_sources="manual",
    ).start()
    try:
        yield stack
    finally:
        try:
            wait_idle(stack)
        finally:
            stack.stop()


def start_task(url: str, owner: str) -> str:
    request = SendMessageRequest.model_validate(
        {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "inspect me"}],
            },
            "configuration": {"taskPushNotificationConfig": {"url": url}},
        }
    )
    task = wiring.get_service().sender.send(RequestContext.of_owner(owner), request).task
    assert task is not None and task.id
    return task.id


def wait_completed(task_id: str) -> None:
    def done() -> bool:
        record = wiring.get_store().get_record(task_id)
        return record is not None and record.state.value == "TASK_STATE_COMPLETED"

    wait_for(done, timeout=20, interval=0.05)


def pump(stack: LocalStack) -> None:
    """The stream, then the retry queue, each until it finds no work."""
    assert stack.event_sources is not None
    for name, kind in (
        ("WebhookSenderFunction.TaskEvents", StreamMapping),
        ("WebhookSenderFunction.Retries", QueueMapping),
    ):
        mapping = stack.event_sources.by_name(name)
        assert isinstance(mapping, kind)
        for _ in range(500):
            if not mapping.poll_once():
                break


def records(stack: LocalStack) -> InspectorRecords:
    assert stack.records is not None
    return stack.records


def by_seq(stack: LocalStack, task_id: str) -> dict[int | None, list[tuple[int, str]]]:
    found: dict[int | None, list[tuple[int, str]]] = {}
    for delivery in records(stack).deliveries(task_id):
        found.setdefault(delivery.seq, []).append((delivery.attempt, delivery.outcome))
    return found


def test_deliveries_flow_states_and_executions_of_a_task(
    stack: LocalStack, webhooks: Webhooks
) -> None:
    url = webhooks.hook("ok", always(200))
    task_id = start_task(url, "alice")
    wait_completed(task_id)
    wait_idle(stack)
    pump(stack)
    log = event_log(stack, task_id)
    seqs = [seq for seq, _ in log]
    deliveries = records(stack).deliveries(task_id)
    assert [d.seq for d in deliveries] == seqs
    config_id = wiring.get_store().list_push_configs(task_id)[0][0].id
    for delivery, (_, event) in zip(deliveries, log, strict=True):
        assert (delivery.outcome, delivery.attempt, delivery.status_code, delivery.error) == (
            DELIVERED,
            1,
            200,
            None,
        )
        assert (delivery.config_id, delivery.url) == (config_id, url)
        assert delivery.latency_ms is not None and delivery.latency_ms >= 0
        assert delivery.payload is not None and json.loads(delivery.payload) == event
    assert [p.body for p in webhooks.posts_to("ok")] == [e for _, e in log]

    states = [
        (r.turn, r.step, json.loads(r.state or "null"), r.saved_by)
        for r in records(stack).flow_states(task_id)
    ]
    assert states == [(1, 0, {"seen": 1}, "next-step"), (1, 1, {"seen": 1}, "final")]

    view = data.task_view(stack, task_id)
    assert view is not None
    assert [e.seq for e in view.events] == seqs
    assert [json.loads(e.raw) for e in view.events] == [e for _, e in log]
    assert view.events[-1].state == "TASK_STATE_COMPLETED"
    assert [(e.name, e.status, e.turn, e.step) for e in view.executions] == [
        (f"{task_id}-1", "SUCCEEDED", 1, 0),
        (f"{task_id}-1-1", "SUCCEEDED", 1, 1),
    ]
    assert stack.resolver is not None
    flow_machine = stack.resolver.attributes["FlowStateMachine.Name"]
    assert [e.machine for e in view.executions] == [flow_machine, flow_machine]
    ((turn),) = view.turns
    assert [(s.step, s.executions) for s in turn.steps] == [
        (0, [f"{task_id}-1"]),
        (1, [f"{task_id}-1-1"]),
    ]
    assert all(s.events for s in turn.steps)  # each step wrote events
    assert [c.url for c in view.push_configs] == [url]
    assert view.deliveries == deliveries
    assert [h.role for h in view.history] == ["ROLE_USER", "ROLE_AGENT"]
    assert data.task_view(stack, task_id, owner="bob") is None
    assert data.task_view(stack, task_id, owner="alice") is not None
    assert [e.seq for e in data.events_after(stack, task_id, seqs[-3])] == seqs[-2:]

    page = data.list_tasks(stack, owner="alice", status="completed")
    assert [(r.task_id, r.state) for r in page.rows] == [(task_id, "TASK_STATE_COMPLETED")]
    assert data.list_tasks(stack, owner="bob").rows == []


def test_parked_retried_and_dead_lettered_attempts(stack: LocalStack, webhooks: Webhooks) -> None:
    # Separate owners: a parked webhook's owner is penalized (all its webhooks parked at once).
    late = start_task(webhooks.hook("late", failing_first(2)), "alice")
    down = start_task(webhooks.hook("down", always(500)), "bob")
    wait_completed(late)
    wait_completed(down)
    wait_idle(stack)
    pump(stack)
    count = len(event_log(stack, late))
    # The first event: two inline attempts fail, the webhook is parked with it; the queue's
    # attempt delivers it, and every later event (queued behind it) after it.
    found = by_seq(stack, late)
    assert found[1] == [(1, FAILED), (2, PARKED), (3, DELIVERED)]
    for seq in range(2, count + 1):
        assert found[seq] == [(0, PARKED), (1, DELIVERED)]
    # Never answered: the first event's two queued attempts fail and it is dead-lettered;
    # so is each later one, after its own two.
    found = by_seq(stack, down)
    assert found[1] == [(1, FAILED), (2, PARKED), (3, FAILED), (4, DEAD_LETTERED)]
    for seq in range(2, len(event_log(stack, down)) + 1):
        assert found[seq] == [(0, PARKED), (1, FAILED), (2, DEAD_LETTERED)]
    assert all(d.error == "HTTP 500" for d in records(stack).deliveries(down) if d.status_code)
    # Every owner's tasks without one, a page at a time.
    first = data.list_tasks(stack, page_size=1)
    assert first.next_page_token is not None
    second = data.list_tasks(stack, page_token=first.next_page_token, page_size=1)
    assert second.next_page_token is None
    assert {r.task_id for r in first.rows + second.rows} == {late, down}
    (row,) = data.list_tasks(stack, context_id=second.rows[0].context_id).rows
    assert row == second.rows[0]


def test_a_reset_forgets_the_records(make_stack: Callable[..., LocalStack]) -> None:
    """The shared stack is reset between tests: each sees what a fresh stack records."""
    RERUN.__init__()  # type: ignore[misc]
    stack = make_stack(Flow=FLOW)
    task_id = A2A(stack, "alice").send("inspect me").task["id"]
    wait_completed(task_id)
    assert len(records(stack).flow_states(task_id)) == 2
    stack.reset()
    assert records(stack).flow_states(task_id) == []
