"""Logs and EMF metrics of the real handlers on the in-process stack: the Web Adapter
functions' JSON log lines, tasks by final state, webhook deliveries, streams, and no mixing
between concurrent requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from a2a_serverless.local.stack import LocalStack
from tests.integration import test_push_delivery as push
from tests.integration.harness import (
    A2A,
    invoke_web_adapter,
    load_event,
    user_message,
    wait_idle,
    wait_state,
)
from tests.unit.test_observability import captured_logs, emf_blobs, metric_points

Point = tuple[str, str, dict[str, str], float]


def task_points(points: list[Point]) -> list[str]:
    """The `state` of every Tasks value."""
    assert all(unit == "Count" for name, unit, _, _ in points if name == "Tasks")
    return [dims["state"] for name, _, dims, _ in points if name == "Tasks"]


def test_a_web_adapter_request_logs_a_json_line_with_its_request_and_task_ids(
    local_stack: LocalStack,
) -> None:
    body = {"message": user_message("hello logs"), "configuration": {"returnImmediately": True}}
    event = load_event("send_message.json", body=body)
    with captured_logs() as lines:
        response = invoke_web_adapter(local_stack.app_for("SendMessageFunction"), event)
    assert response.status == 200
    task_id = response.task["id"]
    (line,) = [
        line
        for line in lines
        if line.get("correlation_id") == event["requestContext"]["requestId"]
        and line["message"] == "request handled"
    ]
    assert line["task_id"] == task_id and line["turn"] == 1
    assert line["level"] == "INFO"
    assert (line["http_method"], line["path"], line["status"]) == ("POST", "/message:send", 200)


def test_tasks_are_counted_by_the_state_their_turn_ends_in(
    alice: A2A, local_stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert alice.send("fine").task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert alice.send("bad [fail]").task["status"]["state"] == "TASK_STATE_FAILED"
    assert alice.send("no [reject]").task["status"]["state"] == "TASK_STATE_REJECTED"
    asked = alice.send("more [input]").task
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    wait_idle(local_stack)
    blobs = emf_blobs(capsys.readouterr().out)
    points = metric_points(blobs)
    assert sorted(task_points(points)) == ["COMPLETED", "FAILED", "INPUT_REQUIRED", "REJECTED"]
    durations = [p for p in points if p[0] == "StepDuration"]
    assert len(durations) == 4 and all(unit == "Milliseconds" for _, unit, _, _ in durations)
    # Each blob names the task it is about (the FlowWorker invocation's task).
    assert all(blob.get("task_id") for blob in blobs)


def test_a_crashed_step_counts_once_as_failed(
    alice: A2A, local_stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    task = alice.send("boom [crash]").task
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    wait_idle(local_stack)
    points = metric_points(emf_blobs(capsys.readouterr().out))
    assert task_points(points) == ["FAILED"]


def test_a_winning_cancel_counts_as_canceled_and_the_flow_does_not_count(
    alice: A2A, local_stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = alice.send("slowly [slow=5]", blocking=False).task["id"]
    wait_state(alice, task_id, {"TASK_STATE_WORKING"})
    capsys.readouterr()
    event = load_event("cancel_task.json", task_id=task_id)
    canceled = invoke_web_adapter(local_stack.app_for("StreamFunction"), event)
    assert canceled.status == 200
    wait_idle(local_stack)
    blobs = emf_blobs(capsys.readouterr().out)
    assert task_points(metric_points(blobs)) == ["CANCELED"]
    (blob,) = [b for b in blobs if "Tasks" in b]
    assert blob["correlation_id"] == event["requestContext"]["requestId"]
    assert blob["task_id"] == task_id


def _stream_request(app: Any, text: str, request_id: str) -> list[str]:
    async def call() -> list[str]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://a") as client:
            response = await client.post(
                "/message:stream",
                json={"message": user_message(text)},
                headers={
                    "A2A-Version": "1.0",
                    "x-amzn-request-context": json.dumps(
                        {"requestId": request_id, "authorizer": {"principalId": "alice"}}
                    ),
                },
                timeout=60,
            )
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [line for line in response.text.splitlines() if line.startswith("data: ")]

    return asyncio.run(call())


def test_a_stream_is_counted_when_it_opens_and_when_it_closes(
    local_stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    frames = _stream_request(local_stack.app_for("StreamFunction"), "watch me", "req-stream")
    assert len(frames) >= 3  # task, working, chunks, completed
    wait_idle(local_stack)
    blobs = [b for b in emf_blobs(capsys.readouterr().out) if b.get("correlation_id")]
    stream_blobs = [b for b in blobs if b["correlation_id"] == "req-stream"]
    points = metric_points(stream_blobs)
    assert sorted(name for name, *_ in points) == ["StreamsClosed", "StreamsOpened"]
    assert all(unit == "Count" and value == 1.0 for _, unit, _, value in points)
    task_id = json.loads(frames[0].removeprefix("data: "))["task"]["id"]
    assert all(b["task_id"] == task_id for b in stream_blobs)


def test_concurrent_streams_and_sends_keep_their_own_keys_and_metrics(
    local_stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stream_app = local_stack.app_for("StreamFunction")
    send_app = local_stack.app_for("SendMessageFunction")

    async def post(client: httpx.AsyncClient, path: str, text: str, request: str) -> Any:
        message = {"message": user_message(text)}
        return await client.post(path, json=message, headers=_headers(request), timeout=60)

    async def stream(client: httpx.AsyncClient, index: int) -> str:
        text = f"stream {index} [slow=0.3]"
        response = await post(client, "/message:stream", text, f"req-stream-{index}")
        first = next(line for line in response.text.splitlines() if line.startswith("data: "))
        return str(json.loads(first.removeprefix("data: "))["task"]["id"])

    async def send(client: httpx.AsyncClient, index: int) -> str:
        response = await post(client, "/message:send", f"send {index}", f"req-send-{index}")
        return str(response.json()["task"]["id"])

    async def run() -> tuple[list[str], list[str]]:
        streams = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=stream_app), base_url="http://a"
        )
        sends = httpx.AsyncClient(transport=httpx.ASGITransport(app=send_app), base_url="http://a")
        async with streams, sends:
            results = await asyncio.gather(
                *(stream(streams, i) for i in range(4)), *(send(sends, i) for i in range(4))
            )
        return list(results[:4]), list(results[4:])

    capsys.readouterr()
    with captured_logs() as lines:
        stream_tasks, send_tasks = asyncio.run(run())
    wait_idle(local_stack)
    expected = {f"req-stream-{i}": t for i, t in enumerate(stream_tasks)} | {
        f"req-send-{i}": t for i, t in enumerate(send_tasks)
    }
    handled = [line for line in lines if line["message"] == "request handled"]
    assert {line["correlation_id"]: line["task_id"] for line in handled} == expected
    assert len(handled) == 8
    # Each stream request's blob holds its own one open and one close, under its own ids.
    blobs = [b for b in emf_blobs(capsys.readouterr().out) if "StreamsClosed" in b]
    assert sorted(b["correlation_id"] for b in blobs) == sorted(f"req-stream-{i}" for i in range(4))
    for blob in blobs:
        assert blob["StreamsClosed"] == [1.0]
        assert blob["task_id"] == expected[blob["correlation_id"]]


def _headers(request_id: str) -> dict[str, str]:
    return {
        "A2A-Version": "1.0",
        "x-amzn-request-context": json.dumps(
            {"requestId": request_id, "authorizer": {"principalId": "alice"}}
        ),
    }


# -- webhooks --------------------------------------------------------------------------------


@pytest.fixture
def webhooks() -> Iterator[push.Webhooks]:
    receivers = push.Webhooks()
    yield receivers
    receivers.close()


@pytest.fixture
def push_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    monkeypatch.setattr(push.events, "RETRY_PAUSE_SECONDS", 0.0)
    with push.push_stack() as stack:
        yield stack


def test_webhook_deliveries_failures_and_dead_letters_are_counted(
    push_stack: LocalStack, webhooks: push.Webhooks, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy = push.start_task(webhooks.hook("up", push.always(200)), "one")
    failing = push.start_task(webhooks.hook("down", push.always(500)), "two")
    wait_idle(push_stack)
    capsys.readouterr()
    push.pump_stream(push_stack)
    for _ in range(push.MAX_ATTEMPTS + 1):
        push.pump_queue(push_stack)
    points = metric_points(emf_blobs(capsys.readouterr().out))
    count = {name: 0.0 for name in ("WebhookDeliveries", "WebhookFailures", "WebhookDeadLetters")}
    for name, unit, _, value in points:
        assert unit == "Count"
        count[name] += value
    delivered = len(webhooks.delivered("up"))
    attempts_down = len(webhooks.posts_to("down"))
    dead = push.dead_letters(push_stack)
    assert delivered == len(push.events_of(push_stack, healthy)) > 0
    assert dead and all(d["taskId"] == failing for d in dead)
    assert count == {
        "WebhookDeliveries": delivered,
        "WebhookFailures": attempts_down,
        "WebhookDeadLetters": len(dead),
    }
