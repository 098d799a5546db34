"""Logs and EMF metrics (shared/a2a_serverless/observability.py): scopes that never leak
between concurrent requests, the EMF shapes, and no secrets in any log line. Tracing, in
fresh interpreters: tests/integration/test_tracing.py."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from a2a_serverless import observability, wiring
from a2a_serverless.bindings.lambda_adapter import web_adapter_app
from a2a_serverless.bindings.rest import create_app
from a2a_serverless.models import (
    TaskState,
)
from a2a_serverless.observability import Metric, annotate, emit, invocation, log_context

TOKEN = "tok-4f1b9c-NOTIFICATION"
CREDENTIALS = "cred-7d2e0a-WEBHOOK"
BEARER = "bearer-9a8b7c-CLIENT"


# -- capture helpers (also used by tests/integration/test_observability.py) -----------------


@contextlib.contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Every JSON line the function's log handler writes during the block (any thread)."""
    handler = observability.function_logger().registered_handler
    assert isinstance(handler, __import__("logging").StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    lines: list[dict[str, Any]] = []
    try:
        yield lines
    finally:
        handler.setStream(previous)
        lines.extend(json.loads(line) for line in buffer.getvalue().splitlines() if line)


def emf_blobs(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def metric_points(blobs: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, str], float]]:
    """(name, unit, dimensions, value) of every value in the blobs, checking EMF structure."""
    points = []
    for blob in blobs:
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        assert isinstance(blob["_aws"]["Timestamp"], int)
        (dimension_names,) = directive["Dimensions"]
        dimensions = {name: blob[name] for name in dimension_names}
        for metric in directive["Metrics"]:
            values = blob[metric["Name"]]
            for value in values if isinstance(values, list) else [values]:
                points.append((metric["Name"], metric["Unit"], dimensions, value))
    return points


# -- EMF -----------------------------------------------------------------------------------


def test_an_invocation_prints_its_metrics_as_emf_when_it_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with invocation(correlation_id="req-1", task_id="t-1"):
        observability.task_ended(TaskState.INPUT_REQUIRED)
        emit(Metric.STEP_DURATION, 12.5)
        assert emf_blobs(capsys.readouterr().out) == []  # nothing before the end
    blobs = emf_blobs(capsys.readouterr().out)
    # One blob per dimension set: the step duration must not carry the state dimension.
    assert len(blobs) == 2
    for blob in blobs:
        assert blob["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "A2AServerless"
        assert blob["correlation_id"] == "req-1" and blob["task_id"] == "t-1"
    points = metric_points(blobs)
    (tasks,) = [p for p in points if p[0] == "Tasks"]
    assert tasks[1] == "Count" and tasks[3] == 1.0
    assert tasks[2]["state"] == "INPUT_REQUIRED" and set(tasks[2]) <= {"state", "service"}
    (duration,) = [p for p in points if p[0] == "StepDuration"]
    assert duration[1] == "Milliseconds" and duration[3] == 12.5
    assert "state" not in duration[2]


def test_the_namespace_comes_from_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "MyAgent")
    wiring.reset()
    try:
        emit(Metric.WEBHOOK_DEAD_LETTERS)  # outside any invocation: printed at once
        (blob,) = emf_blobs(capsys.readouterr().out)
    finally:
        monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE")
        wiring.reset()
    assert blob["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "MyAgent"
    assert blob["WebhookDeadLetters"] == [1.0]


def test_a_metric_added_after_its_invocation_ended_is_printed_not_lost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    context: list[Any] = []
    with invocation(correlation_id="late"):
        context.append(__import__("contextvars").copy_context())
    capsys.readouterr()
    # A stream generator finalised after its response ran in the request's context.
    context[0].run(emit, Metric.STREAMS_CLOSED)
    (blob,) = emf_blobs(capsys.readouterr().out)
    assert blob["StreamsClosed"] == [1.0] and blob["correlation_id"] == "late"


def test_concurrent_invocations_never_mix_their_metrics(
    capsys: pytest.CaptureFixture[str],
) -> None:
    barrier = threading.Barrier(8)

    def work(index: int) -> None:
        with invocation(correlation_id=f"req-{index}"):
            barrier.wait()
            for _ in range(index + 1):
                emit(Metric.WEBHOOK_DELIVERIES)
            barrier.wait()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    blobs = emf_blobs(capsys.readouterr().out)
    assert sorted(b["correlation_id"] for b in blobs) == sorted(f"req-{i}" for i in range(8))
    for blob in blobs:
        index = int(blob["correlation_id"].removeprefix("req-"))
        assert blob["WebhookDeliveries"] == [1.0] * (index + 1)


# -- log keys ------------------------------------------------------------------------------


def test_log_keys_belong_to_their_scope() -> None:
    log = __import__("logging").getLogger("a2a_serverless.test")
    with captured_logs() as lines:
        with invocation(correlation_id="outer"):
            with log_context(task_id="t-9", seq=3):
                log.warning("inside")
            annotate(task_id="t-10")
            log.warning("annotated")
        log.warning("outside")
    inside, annotated, outside = lines
    assert (inside["correlation_id"], inside["task_id"], inside["seq"]) == ("outer", "t-9", 3)
    assert (annotated["correlation_id"], annotated["task_id"]) == ("outer", "t-10")
    assert "seq" not in annotated
    assert "correlation_id" not in outside and "task_id" not in outside


def test_task_ids_are_read_from_task_paths() -> None:
    read = observability._task_id_from_path
    assert read("/tasks/abc") == "abc"
    assert read("/tasks/abc:cancel") == "abc"
    assert read("/tasks/abc:subscribe") == "abc"
    assert read("/tasks/abc/pushNotificationConfigs/c1") == "abc"
    assert read("/acme/tasks/abc") == "abc"
    assert read("/tasks") is None and read("/message:send") is None and read("/") is None


def _probe_app() -> Any:
    """An app as the functions build it, with a route that learns its task id in a worker
    thread, then waits for every other request before logging (forcing interleaving)."""
    router = APIRouter()
    arrived: list[str] = []
    everyone = asyncio.Event()
    log = __import__("logging").getLogger("a2a_serverless.probe")

    @router.post("/probe/{name}")
    async def probe(name: str) -> JSONResponse:
        await run_in_threadpool(annotate, task_id=f"task-of-{name}")
        arrived.append(name)
        if len(arrived) == 10:
            everyone.set()
        await everyone.wait()
        await run_in_threadpool(log.warning, "probe done")
        return JSONResponse({"name": name})

    return web_adapter_app(create_app(router))


def test_concurrent_requests_never_see_each_others_keys() -> None:
    app = _probe_app()

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://a") as client:
            responses = await asyncio.gather(
                *(
                    client.post(
                        f"/probe/{i}",
                        headers={
                            "x-amzn-request-context": json.dumps({"requestId": f"req-{i}"}),
                            "x-amzn-lambda-context": json.dumps({"request_id": f"lam-{i}"}),
                        },
                    )
                    for i in range(10)
                )
            )
        assert all(r.status_code == 200 for r in responses)

    with captured_logs() as lines:
        asyncio.run(run())
    done = [line for line in lines if line["message"] == "probe done"]
    handled = [line for line in lines if line["message"] == "request handled"]
    assert len(done) == 10 and len(handled) == 10
    for line in done + handled:
        index = line["correlation_id"].removeprefix("req-")
        assert line["task_id"] == f"task-of-{index}"
        assert line["function_request_id"] == f"lam-{index}"
    assert {line["path"] for line in handled} == {f"/probe/{i}" for i in range(10)}
    assert all(line["status"] == 200 and line["duration_ms"] >= 0 for line in handled)
