"""Delegation on the local stack, through the template's parts: the relay flow's step sends
to a remote agent (an in-process stand-in for its HTTP client) and ends; the remote's push
notifications reach DelegationReceiverFunction through the gateway's open route and wake the
next step; an agent without push is polled from the timer state machine's Wait; a cancel
reaches the remote. Every AWS call is recorded for the session's observed-calls IAM check."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from a2a_serverless import wiring
from a2a_serverless.core.delegation import round_key
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_serverless.store import DelegationState
from tests.integration.harness import A2A, sfn, wait_for, wait_state

RELAY = "a2a_serverless.flows.relay:flow"
AGENT = "https://agent.example.com"
_ids = itertools.count(1)


class StandIn:
    """The remote agent as the worker's client sees it: the tasks it made, the calls."""

    def __init__(self, push: bool = True) -> None:
        self.name = "Weather"
        self.push_notifications = push
        self.tasks: dict[str, Task] = {}
        self.configs: list[TaskPushNotificationConfig | None] = []
        self.canceled: list[str] = []

    def send(self, message: Message, *, push: TaskPushNotificationConfig | None = None) -> Task:
        self.configs.append(push)
        task_id = message.task_id or f"remote-{next(_ids)}"
        task = Task(
            id=task_id,
            context_id="remote-ctx",
            status=TaskStatus(state=TaskState.WORKING, timestamp=datetime.now(UTC)),
        )
        self.tasks[task_id] = task
        return task

    def get_task(self, task_id: str, *, history_length: int | None = None) -> Task:
        return self.tasks[task_id]

    def cancel_task(self, task_id: str) -> Task:
        self.canceled.append(task_id)
        return self.tasks[task_id]

    def complete(self, task_id: str, text: str) -> Task:
        message = Message(message_id=f"m-{next(_ids)}", role=Role.AGENT, parts=[Part(text="ok")])
        task = self.tasks[task_id].model_copy(
            update={
                "status": TaskStatus(
                    state=TaskState.COMPLETED, message=message, timestamp=datetime.now(UTC)
                ),
                "artifacts": [Artifact(artifact_id="forecast", parts=[Part(text=text)])],
            }
        )
        self.tasks[task_id] = task
        return task


@pytest.fixture
def relay(
    make_stack: Callable[..., LocalStack], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LocalStack, StandIn]]:
    monkeypatch.setenv("RELAY_AGENT_URL", AGENT)
    stack = make_stack(Flow=RELAY)
    stand_in = StandIn()
    monkeypatch.setattr(wiring, "_connect_remote", lambda url, credentials: stand_in)
    yield stack, stand_in


def post(stack: LocalStack, path: str, body: dict[str, Any], token: str) -> httpx.Response:
    """A request through the stack's API Gateway emulation (its routes and their auth)."""

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=stack.gateway())
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            headers = {"X-A2A-Notification-Token": token} if token else {}
            return await client.post(path, json=body, headers=headers, timeout=60)

    return asyncio.run(call())


def delegation(task_id: str, state: DelegationState = DelegationState.WAITING) -> Any:
    def sent() -> Any:
        records = wiring.get_store().round_delegations(task_id, round_key(1, 0))
        return records[0] if records and records[0].state is state else None

    return wait_for(sent, timeout=20)


def timer_executions(stack: LocalStack) -> list[dict[str, Any]]:
    arn = stack.env["TIMER_STATE_MACHINE_ARN"]
    return sfn().list_executions(stateMachineArn=arn)["executions"]


def test_a_relayed_turn_waits_then_wakes_on_the_remote_push(
    relay: tuple[LocalStack, StandIn],
) -> None:
    stack, remote = relay
    client = A2A(stack)
    task_id = client.send("weather in Paris?", blocking=False).task["id"]
    record = delegation(task_id)
    (config,) = remote.configs
    assert config is not None and config.url.endswith(f"/delegations/{task_id}/1.0.0")
    remote_id = record.remote_task_id
    task = client.get(task_id).task
    assert task["status"]["state"] == TaskState.WORKING.value
    assert remote_id in task["status"]["message"]["parts"][0]["text"]
    (timer,) = wait_for(lambda: timer_executions(stack) or None)
    assert timer["status"] == "RUNNING"

    path = f"/delegations/{task_id}/1.0.0"
    assert post(stack, path, {}, "").status_code == 401  # the route is open: the token is checked
    chunk = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id=remote_id,
            context_id="remote-ctx",
            artifact=Artifact(artifact_id="forecast", parts=[Part(text="Sunny, 21 C")]),
            last_chunk=True,
        )
    ).wire()
    assert post(stack, path, chunk, record.token).status_code == 200
    remote.complete(remote_id, "Sunny, 21 C")
    done = StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=remote_id, context_id="remote-ctx", status=remote.tasks[remote_id].status
        )
    ).wire()
    assert post(stack, path, done, record.token).status_code == 200
    assert post(stack, path, done, record.token).status_code == 200  # redelivered: harmless

    task = wait_state(client, task_id, {TaskState.COMPLETED.value})
    texts = [p["text"] for a in task["artifacts"] for p in a["parts"]]
    assert texts == ["Sunny, 21 C"]
    # The round's wait was stopped: it bills no more transitions.
    wait_for(lambda: all(e["status"] != "RUNNING" for e in timer_executions(stack)) or None)


def test_an_agent_without_push_is_polled_from_the_timer(
    relay: tuple[LocalStack, StandIn],
) -> None:
    stack, remote = relay
    remote.push_notifications = False
    client = A2A(stack)
    task_id = client.send("weather in Oslo?", blocking=False).task["id"]
    record = delegation(task_id)
    assert record.mode == "poll" and remote.configs == [None]
    remote.complete(record.remote_task_id, "Snow")
    # The first poll is due 2 s after the send: the timer's Wait, then the worker's check.
    task = wait_state(client, task_id, {TaskState.COMPLETED.value}, timeout=30)
    assert [p["text"] for a in task["artifacts"] for p in a["parts"]] == ["Snow"]


def test_canceling_the_task_cancels_the_remote_task(relay: tuple[LocalStack, StandIn]) -> None:
    stack, remote = relay
    client = A2A(stack)
    task_id = client.send("long one", blocking=False).task["id"]
    record = delegation(task_id)
    assert client.cancel(task_id).status == 200
    wait_for(lambda: remote.canceled or None)
    assert remote.canceled == [record.remote_task_id]
    assert delegation(task_id, DelegationState.SETTLED).outcome == "canceled"


def test_a_delegation_to_a_metadata_address_is_refused_by_the_egress_guard(
    make_stack: Callable[..., LocalStack], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real client, through the webhooks' egress policy (which allows loopback locally).
    monkeypatch.setenv("RELAY_AGENT_URL", "http://169.254.169.254/latest/meta-data/")
    stack = make_stack(Flow=RELAY)
    client = A2A(stack)
    task_id = client.send("steal credentials", blocking=False).task["id"]
    task = wait_state(client, task_id, {TaskState.FAILED.value})
    text = task["status"]["message"]["parts"][0]["text"]
    assert "refused" in text
    (record,) = wiring.get_store().task_delegations(task_id)
    assert record.outcome == "refused" and record.remote_task_id is None
