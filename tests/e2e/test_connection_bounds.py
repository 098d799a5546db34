"""Bounded long-lived connections per principal (core/connections.py) against a real
`scripts/dev` server started with a small bound (MaxConnectionsPerPrincipal=3), a
GetTaskFunction reservation of 4 (so GET subscriptions may hold 2, all callers together) and
the local stack's emulation of Lambda's concurrency on (an account quota of 12: the functions
without a reservation share 8 executions; a request past them is throttled, as on AWS).

A hostile principal opening far more streams than its share gets HTTP 429 with Retry-After for
every one past the bound, at once (while the admitted ones are still open), and another
principal's GetTask and ListTasks reads stay served and as fast as when the stack is quiet
(unbounded, the streams would take every unreserved execution and the reads be throttled);
several principals' GET subscriptions leave GetTask reads executions of their own. Closing
streams frees their places; a blocking send past the bound creates no task; tenants share their
principal's bound; JSON-RPC refusals are 429s with an error object. Raw HTTP, every response
strictly checked (conftest's clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests import wire
from tests.e2e.conftest import checked_async_client, new_principal, server_fixture
from tests.e2e.test_wire import message_body

pytestmark = pytest.mark.e2e

BOUND = 3
GET_SUBSCRIPTIONS = 2  # half of GetTaskReservedConcurrency=4
HOSTILE_STREAMS = 40
READS = 30
# Median GetTask latency while the hostile streams are held, over the quiet one (same test,
# same stack): within noise.
LATENCY_RATIO = 1.5
RESOURCE_EXHAUSTED_CODE = -31429

ACCOUNT_CONCURRENCY = 12

bounds_server = server_fixture(
    "connection-bounds",
    args=(
        "--param",
        f"MaxConnectionsPerPrincipal={BOUND}",
        "--param",
        f"GetTaskReservedConcurrency={2 * GET_SUBSCRIPTIONS}",
    ),
    env={"A2A_LOCAL_ACCOUNT_CONCURRENCY": str(ACCOUNT_CONCURRENCY)},
)


@pytest.fixture
def base(bounds_server: Any) -> str:
    return str(bounds_server.base_url)


@contextlib.asynccontextmanager
async def client_of(base_url: str, principal: str) -> AsyncIterator[httpx.AsyncClient]:
    async with checked_async_client(base_url, principal=principal) as client:
        yield client


async def waiting_task(client: httpx.AsyncClient, prefix: str = "") -> str:
    """A task waiting for input (TASK_STATE_INPUT_REQUIRED): a subscription to it stays open
    through the next turn, which never comes here (up to the stream's 840 s). Sent without
    waiting, then read until it waits: a blocking send holds one of the caller's connections
    until its answer is written, which may be a moment after the client has read it."""
    body = {**message_body("hold [input]"), "configuration": {"returnImmediately": True}}
    response = await client.post(f"{prefix}/message:send", json=body)
    assert response.status_code == 200, response.text
    task_id = str(response.json()["task"]["id"])
    deadline = time.monotonic() + 30
    while True:
        task = (await client.get(f"{prefix}/tasks/{task_id}")).json()
        if task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED":
            return task_id
        assert time.monotonic() < deadline, task
        await asyncio.sleep(0.05)


async def open_streams(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    count: int,
    wave: int | None = None,
    **kwargs: Any,
) -> tuple[list[httpx.Response], list[httpx.Response]]:
    """`count` stream requests, `wave` at a time (default: all at once): (the streams admitted,
    still open; the refusals). Waves keep a burst within the executions Lambda has for it (a
    burst past them is throttled, on AWS as here) while the admitted streams pile up."""
    responses: list[httpx.Response] = []
    for start in range(0, count, wave or count):
        requests = [
            client.build_request(method, path, **kwargs)
            for _ in range(min(wave or count, count - start))
        ]
        responses += await asyncio.gather(*(client.send(r, stream=True) for r in requests))
    admitted = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code != 200]
    for response in admitted:
        assert response.headers["content-type"].startswith(wire.EVENT_STREAM)
    return admitted, refused


async def close_all(responses: list[httpx.Response]) -> None:
    for response in responses:
        await response.aclose()


def assert_too_many(response: httpx.Response) -> dict[str, Any]:
    """A 429 refusal with Retry-After and the google.rpc.Status RESOURCE_EXHAUSTED body."""
    assert response.status_code == 429, response.content
    assert 1 <= int(response.headers["retry-after"]) <= 60, response.headers
    error: dict[str, Any] = response.json()["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED"), error
    assert error["details"][0]["reason"] == "RESOURCE_EXHAUSTED", error
    return error


async def median_read_seconds(client: httpx.AsyncClient, task_id: str) -> float:
    """The median of READS reads, GetTask (a reserved function) and ListTasks (one without a
    reservation) in turn, every one served."""
    times = []
    for n in range(READS):
        started = time.perf_counter()
        response = await client.get(f"/tasks/{task_id}" if n % 2 else "/tasks")
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return statistics.median(times)


async def admitted_again(client: httpx.AsyncClient, path: str) -> httpx.Response:
    """A stream admitted once the closed ones' places are free (released as they end)."""
    deadline = time.monotonic() + 10
    while True:
        admitted, refused = await open_streams(client, "POST", path, 1)
        if admitted:
            return admitted[0]
        assert_too_many(refused[0])
        assert time.monotonic() < deadline, "closed streams never freed their places"
        await asyncio.sleep(0.2)


async def test_a_hostile_principal_gets_429s_and_others_reads_stay_fast(base: str) -> None:
    async with (
        client_of(base, new_principal("hostile")) as hostile,
        client_of(base, new_principal("victim")) as victim,
    ):
        victim_task = await waiting_task(victim)
        await median_read_seconds(victim, victim_task)  # warm
        quiet = await median_read_seconds(victim, victim_task)

        task_id = await waiting_task(hostile)
        path = f"/tasks/{task_id}:subscribe"
        started = time.monotonic()
        admitted, refused = await open_streams(hostile, "POST", path, HOSTILE_STREAMS, wave=4)
        try:
            assert len(admitted) == BOUND, [r.status_code for r in refused]
            assert len(refused) == HOSTILE_STREAMS - BOUND
            for response in refused:
                assert_too_many(response)
            # At once: every refusal came while the admitted streams are open (they stay
            # open for up to 840 s). Unbounded, they would have taken every execution the
            # unreserved functions share, and the reads below would be throttled.
            assert all(not r.is_closed for r in admitted)
            refused_within = time.monotonic() - started
            loaded = await median_read_seconds(victim, victim_task)
        finally:
            await close_all(admitted)
        # Quiet again once they are closed: the baseline is the slower of the two quiet
        # medians, so that the machine's load drifting over the test is not charged to them.
        quiet = max(quiet, await median_read_seconds(victim, victim_task))
        ratio = loaded / quiet
        print(
            f"\nGetTask median: quiet {quiet * 1000:.1f} ms, with {BOUND} admitted and "
            f"{HOSTILE_STREAMS - BOUND} refused hostile streams {loaded * 1000:.1f} ms "
            f"(ratio {ratio:.2f}); {HOSTILE_STREAMS} stream requests answered in "
            f"{refused_within:.2f} s"
        )
        assert ratio <= LATENCY_RATIO, (quiet, loaded)

        # Closing the streams freed their places.
        again = await admitted_again(hostile, path)
        await again.aclose()


@contextlib.asynccontextmanager
async def at_the_bound(client: httpx.AsyncClient, prefix: str = "") -> AsyncIterator[None]:
    """While the client's principal holds BOUND open subscriptions (to a task of its own)."""
    task_id = await waiting_task(client, prefix)
    admitted, _ = await open_streams(client, "POST", f"{prefix}/tasks/{task_id}:subscribe", BOUND)
    try:
        assert len(admitted) == BOUND
        yield
    finally:
        await close_all(admitted)


async def test_a_blocking_send_past_the_bound_creates_no_task(base: str) -> None:
    async with client_of(base, new_principal("blocker")) as client, at_the_bound(client):
        before = (await client.get("/tasks")).json()["totalSize"]
        refused = await client.post("/message:send", json=message_body("blocked"))
        assert_too_many(refused)
        assert (await client.get("/tasks")).json()["totalSize"] == before
        # Not waiting, a send holds no connection: it is served.
        quick = await client.post(
            "/message:send",
            json={**message_body("quick"), "configuration": {"returnImmediately": True}},
        )
        assert quick.status_code == 200, quick.text


async def test_tenants_of_a_principal_share_its_bound(base: str) -> None:
    async with (
        client_of(base, new_principal("tenanted")) as client,
        at_the_bound(client, "/acme"),
    ):
        other_tenant = await client.post("/other/message:stream", json=message_body("x"))
        assert_too_many(other_tenant)
        no_tenant = await client.post("/message:stream", json=message_body("y"))
        assert_too_many(no_tenant)


async def test_a_jsonrpc_stream_past_the_bound_is_a_429_error_object(base: str) -> None:
    async with client_of(base, new_principal("rpc")) as client, at_the_bound(client):
        call = {
            "jsonrpc": "2.0",
            "id": "s1",
            "method": "SendStreamingMessage",
            "params": message_body("streamed"),
        }
        refused = await client.post("/", json=call)
        assert refused.status_code == 429, refused.content
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        body = refused.json()
        assert body["id"] == "s1" and body["error"]["code"] == RESOURCE_EXHAUSTED_CODE
        assert body["error"]["data"][0]["reason"] == "RESOURCE_EXHAUSTED"


async def test_several_principals_get_subscriptions_leave_get_task_reads_served(
    base: str,
) -> None:
    """GET subscriptions share GetTaskFunction's 4 executions with GetTask reads: three
    principals asking for 3 each (9, within each one's bound) get 2 between them, and another
    principal's reads are all served (without the GET pool the subscriptions would take all 4
    executions and every read be throttled)."""
    clients = [client_of(base, new_principal(f"getter-{n}")) for n in range(3)]
    async with (
        clients[0] as first,
        clients[1] as second,
        clients[2] as third,
        client_of(base, new_principal("reader")) as reader,
    ):
        reader_task = await waiting_task(reader)
        opened = [
            await open_streams(c, "GET", f"/tasks/{await waiting_task(c)}:subscribe", BOUND, 2)
            for c in (first, second, third)
        ]
        admitted = [r for held, _ in opened for r in held]
        try:
            assert len(admitted) == GET_SUBSCRIPTIONS, [len(h) for h, _ in opened]
            for _, refused in opened:
                for response in refused:
                    assert_too_many(response)
            for _ in range(READS):
                response = await reader.get(f"/tasks/{reader_task}")
                assert response.status_code == 200, response.text
        finally:
            await close_all(admitted)


async def test_get_subscriptions_hold_at_most_half_of_get_task_s_reservation(base: str) -> None:
    async with (
        client_of(base, new_principal("getter")) as getter,
        client_of(base, new_principal("late")) as late,
    ):
        task_id = await waiting_task(getter)
        admitted, refused = await open_streams(
            getter, "GET", f"/tasks/{task_id}:subscribe", GET_SUBSCRIPTIONS + 1
        )
        try:
            # Within the principal's bound (3), but the GET pool holds 2 for everyone.
            assert len(admitted) == GET_SUBSCRIPTIONS
            error = assert_too_many(refused[0])
            assert "POST /tasks/{id}:subscribe" in error["message"], error
            late_task = await waiting_task(late)
            not_by_get, (by_get,) = await open_streams(
                late, "GET", f"/tasks/{late_task}:subscribe", 1
            )
            assert not not_by_get
            assert "POST /tasks/{id}:subscribe" in assert_too_many(by_get)["message"]
            # The alternative it names is served, and GetTask reads are.
            by_post, _ = await open_streams(late, "POST", f"/tasks/{late_task}:subscribe", 1)
            assert len(by_post) == 1
            await close_all(by_post)
            assert (await late.get(f"/tasks/{late_task}")).status_code == 200
        finally:
            await close_all(admitted)
