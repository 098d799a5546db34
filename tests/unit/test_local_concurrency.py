"""The local gateway's emulation of Lambda's concurrency: a function with a reservation runs
at most that many API requests at once, the others share what the account's quota leaves over
the reservations, and a request past it is throttled at once (API Gateway's
INTEGRATION_FAILURE), its execution freed when its response ends."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from a2a_serverless.local.gateway import FunctionApp, Gateway, LambdaConcurrency, Throttled


def test_a_reserved_function_runs_its_reservation_and_no_more() -> None:
    concurrency = LambdaConcurrency({"GetTask": 2}, account=10)
    with concurrency.running("GetTask"), concurrency.running("GetTask"):
        with pytest.raises(Throttled), concurrency.running("GetTask"):
            pass
        with concurrency.running("ListTasks"):  # the unreserved pool is another
            pass
    with concurrency.running("GetTask"):  # freed
        pass


def test_unreserved_functions_share_the_account_less_the_reservations() -> None:
    concurrency = LambdaConcurrency({"GetTask": 4}, account=6)
    with (
        concurrency.running("Stream"),
        concurrency.running("ListTasks"),
        pytest.raises(Throttled),
        concurrency.running("SendMessage"),
    ):
        pass
    without_quota = LambdaConcurrency({"GetTask": 1})
    with without_quota.running("Stream"), without_quota.running("Stream"):
        pass


async def test_a_request_past_the_concurrency_is_throttled_until_one_ends() -> None:
    release = asyncio.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await release.wait()
        await send({"type": "http.response.body", "body": b"done"})

    app = FunctionApp(slow, "GetTask", LambdaConcurrency({"GetTask": 1}))
    gateway = Gateway([("GET", "/tasks/{id}", app)])
    transport = httpx.ASGITransport(app=gateway)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        held = asyncio.create_task(client.get("/tasks/a"))
        await asyncio.sleep(0.05)
        throttled = await client.get("/tasks/b")
        release.set()
        assert (await held).status_code == 200
        release.clear()
        after = asyncio.create_task(client.get("/tasks/c"))
        await asyncio.sleep(0.05)
        release.set()
        assert (await after).status_code == 200
    assert throttled.status_code >= 500
