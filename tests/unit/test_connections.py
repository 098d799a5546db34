"""Bounds on long-lived connections (core/connections.py) on the in-memory lease store: per
principal across its tenants, GET subscriptions all together, released when they end; and
the bindings' refusals (HTTP 429 with Retry-After, before anything is written)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from a2a_serverless.bindings.jsonrpc import jsonrpc_router
from a2a_serverless.bindings.rest import (
    create_app,
    get_task_router,
    send_router,
    stream_router,
    task_action_router,
)
from a2a_serverless.core import errors
from a2a_serverless.core.connections import (
    GET_SUBSCRIPTION_POOL,
    LEASE_MARGIN_SECONDS,
    PRINCIPAL_POOL,
    RETRY_AFTER_CAP_SECONDS,
    ConnectionKind,
    ConnectionLimiter,
    ConnectionLimits,
)
from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.core.push import PushService
from a2a_serverless.core.service import A2AService
from a2a_serverless.core.tail import WaitPolicy
from a2a_serverless.models import Caller
from tests.asgi_client import AsgiClient
from tests.fakes import InMemoryLeaseStore, InMemoryTaskStore
from tests.unit.test_send_path import RecordingExecutor

NOW = 1_900_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def limiter(
    leases: InMemoryLeaseStore, per_principal: int = 2, get_subscriptions: int | None = None
) -> tuple[ConnectionLimiter, Clock]:
    clock = Clock()
    limits = ConnectionLimits(
        per_principal=per_principal,
        get_subscriptions=get_subscriptions,
        stream_seconds=100.0,
        blocking_seconds=50.0,
    )
    return ConnectionLimiter(leases, limits, clock), clock


def held(leases: InMemoryLeaseStore, pool: str) -> int:
    return sum(1 for name, _ in leases.leases if name == pool)


# -- core --------------------------------------------------------------------------------------


def test_a_principal_holds_at_most_its_bound_and_a_release_frees_a_place() -> None:
    leases = InMemoryLeaseStore()
    connections, _ = limiter(leases, per_principal=2)
    first = connections.open("alice", ConnectionKind.STREAM)
    connections.open("alice", ConnectionKind.BLOCKING)
    with pytest.raises(errors.TooManyConnectionsError) as refused:
        connections.open("alice", ConnectionKind.STREAM)
    assert 1 <= refused.value.retry_after <= RETRY_AFTER_CAP_SECONDS
    assert "2 open connections" in refused.value.message
    connections.open("bob", ConnectionKind.STREAM)  # another principal's bound is its own
    first.release()
    first.release()  # idempotent
    connections.open("alice", ConnectionKind.STREAM)
    assert held(leases, PRINCIPAL_POOL + "alice") == 2


def test_tenants_of_a_principal_share_its_bound() -> None:
    leases = InMemoryLeaseStore()
    connections, _ = limiter(leases, per_principal=2)
    service = A2AService(InMemoryTaskStore(), RecordingExecutor(), connections=connections)
    service.connect(Caller("alice", tenant="one"), ConnectionKind.STREAM)
    service.connect(Caller("alice", tenant="two"), ConnectionKind.STREAM)
    with pytest.raises(errors.TooManyConnectionsError):
        service.connect(Caller("alice", tenant="three"), ConnectionKind.BLOCKING)
    with pytest.raises(errors.TooManyConnectionsError):
        service.connect(Caller("alice"), ConnectionKind.STREAM)


def test_a_lease_lasts_its_connection_s_longest_life_plus_a_margin() -> None:
    leases = InMemoryLeaseStore()
    connections, clock = limiter(leases, per_principal=1)
    connections.open("alice", ConnectionKind.BLOCKING)
    ((_, expiry),) = leases.leases.values()
    assert expiry == NOW + 50 + LEASE_MARGIN_SECONDS
    with pytest.raises(errors.TooManyConnectionsError):
        connections.open("alice", ConnectionKind.STREAM)
    # A lease its instance never released (a crash) frees itself when it expires.
    clock.now = NOW + 50 + LEASE_MARGIN_SECONDS + 1
    connections.open("alice", ConnectionKind.STREAM)


def test_retry_after_is_the_earliest_expiry_capped() -> None:
    leases = InMemoryLeaseStore()
    connections, clock = limiter(leases, per_principal=1)
    connections.open("alice", ConnectionKind.STREAM)  # expires at NOW + 160
    with pytest.raises(errors.TooManyConnectionsError) as far:
        connections.open("alice", ConnectionKind.STREAM)
    assert far.value.retry_after == RETRY_AFTER_CAP_SECONDS
    clock.now = NOW + 150
    with pytest.raises(errors.TooManyConnectionsError) as near:
        connections.open("alice", ConnectionKind.STREAM)
    assert near.value.retry_after == 10


def test_get_subscriptions_share_one_bound_across_principals() -> None:
    leases = InMemoryLeaseStore()
    connections, _ = limiter(leases, per_principal=5, get_subscriptions=2)
    connections.open("alice", ConnectionKind.GET_SUBSCRIPTION)
    connections.open("bob", ConnectionKind.GET_SUBSCRIPTION)
    with pytest.raises(errors.TooManyConnectionsError) as refused:
        connections.open("carol", ConnectionKind.GET_SUBSCRIPTION)
    assert "POST /tasks/{id}:subscribe" in refused.value.message
    # The refusal holds nothing: carol's own place was given back.
    assert held(leases, PRINCIPAL_POOL + "carol") == 0
    assert held(leases, GET_SUBSCRIPTION_POOL) == 2
    # Streams on StreamFunction are not GET subscriptions.
    connections.open("carol", ConnectionKind.STREAM)


def test_no_get_subscription_pool_without_a_reservation_and_none_with_zero() -> None:
    leases = InMemoryLeaseStore()
    unreserved, _ = limiter(leases, per_principal=0)
    for _ in range(5):
        assert unreserved.open("alice", ConnectionKind.GET_SUBSCRIPTION).leases == []
    assert leases.leases == {}
    tiny, _ = limiter(leases, per_principal=0, get_subscriptions=0)
    with pytest.raises(errors.TooManyConnectionsError):
        tiny.open("alice", ConnectionKind.GET_SUBSCRIPTION)


def test_a_failing_release_is_left_to_expiry() -> None:
    class Failing(InMemoryLeaseStore):
        def release_lease(self, pool: str, slot: int, lease_id: str) -> bool:
            raise RuntimeError("throttled")

    connections, _ = limiter(Failing(), per_principal=1)
    connections.open("alice", ConnectionKind.STREAM).release()  # no raise


def test_the_row_answers_429_resource_exhausted() -> None:
    row = errors.ERRORS[errors.TooManyConnectionsError]
    assert (row.http_status, row.grpc_status, row.reason) == (
        429,
        "RESOURCE_EXHAUSTED",
        "RESOURCE_EXHAUSTED",
    )


# -- bindings ----------------------------------------------------------------------------------


def caller_header(principal: str) -> dict[str, str]:
    context = {"authorizer": {"principalId": principal, "scheme": "local"}}
    return {"x-amzn-request-context": json.dumps(context), "A2A-Version": "1.0"}


def message(text: str = "hi", **configuration: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message": {"role": "ROLE_USER", "messageId": f"m-{text}", "parts": [{"text": text}]}
    }
    if configuration:
        body["configuration"] = configuration
    return body


@pytest.fixture
def stack() -> tuple[AsgiClient, InMemoryTaskStore, InMemoryLeaseStore, ConnectionLimiter]:
    store, leases = InMemoryTaskStore(), InMemoryLeaseStore()
    connections, _ = limiter(leases, per_principal=1, get_subscriptions=1)
    # Nothing runs the tasks: streams stay open until their (short) limit.
    wait = WaitPolicy(max_wait_seconds=0.2, stream_max_seconds=0.2)
    service = A2AService(store, RecordingExecutor(), wait=wait, connections=connections)
    push = PushService(store, True, EgressPolicy())
    app = create_app(
        send_router(service),
        stream_router(service),
        task_action_router(service),
        get_task_router(service),
        jsonrpc_router(service, push),
    )
    return AsgiClient(app), store, leases, connections


def assert_refused(response: Any) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    assert 1 <= int(response.headers["retry-after"]) <= RETRY_AFTER_CAP_SECONDS
    body: dict[str, Any] = response.json()
    return body


def test_rest_refusals_are_429_with_retry_after_and_write_nothing(stack: Any) -> None:
    client, store, _, connections = stack
    connections.open("alice", ConnectionKind.STREAM)  # alice's one place, held elsewhere
    blocking = client.request(
        "POST", "/message:send", json=message(), headers=caller_header("alice")
    )
    error = assert_refused(blocking)["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["details"][0]["reason"] == "RESOURCE_EXHAUSTED"
    assert store.tasks == {}  # a refused blocking send creates no task
    streamed = client.request(
        "POST", "/message:stream", json=message(), headers=caller_header("alice")
    )
    assert_refused(streamed)
    assert store.tasks == {}
    # A send that does not wait holds no connection.
    quick = client.request(
        "POST",
        "/message:send",
        json=message(returnImmediately=True),
        headers=caller_header("alice"),
    )
    assert quick.status_code == 200, quick.text
    task_id = quick.json()["task"]["id"]
    for method in ("GET", "POST"):
        refused = client.request(
            method, f"/tasks/{task_id}:subscribe", headers=caller_header("alice")
        )
        assert_refused(refused)


def test_a_stream_holds_its_place_until_it_ends(stack: Any) -> None:
    client, _, leases, _ = stack
    streamed = client.request(
        "POST", "/message:stream", json=message(), headers=caller_header("alice")
    )
    assert streamed.status_code == 200 and streamed.text.startswith("data: ")
    assert leases.leases == {}  # read to its end: released
    blocking = client.request(
        "POST", "/message:send", json=message("b"), headers=caller_header("alice")
    )
    assert blocking.status_code == 200, blocking.text
    assert leases.leases == {}


def test_the_get_subscription_pool_names_the_post_alternative(stack: Any) -> None:
    client, _, leases, connections = stack
    connections.open("bob", ConnectionKind.GET_SUBSCRIPTION)  # the one GET place, bob's
    quick = client.request(
        "POST",
        "/message:send",
        json=message(returnImmediately=True),
        headers=caller_header("alice"),
    )
    task_id = quick.json()["task"]["id"]
    refused = client.request("GET", f"/tasks/{task_id}:subscribe", headers=caller_header("alice"))
    assert "POST /tasks/{id}:subscribe" in assert_refused(refused)["error"]["message"]
    by_post = client.request("POST", f"/tasks/{task_id}:subscribe", headers=caller_header("alice"))
    assert by_post.status_code == 200, by_post.text
    assert held(leases, PRINCIPAL_POOL + "alice") == 0


@pytest.mark.parametrize(
    ("version", "method"),
    [("1.0", "SendStreamingMessage"), ("1.0", "SendMessage"), ("0.3", "message/stream")],
)
def test_jsonrpc_refusals_are_429_error_objects(stack: Any, version: str, method: str) -> None:
    client, store, _, connections = stack
    connections.open("alice", ConnectionKind.STREAM)
    params: dict[str, Any] = message()
    if version == "0.3":
        params = {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "m1",
                "parts": [{"kind": "text", "text": "hi"}],
            }
        }
    headers = {**caller_header("alice"), "A2A-Version": version}
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    payload = assert_refused(client.request("POST", "/", json=body, headers=headers))
    assert payload["id"] == 7
    assert payload["error"]["code"] == errors.ERRORS[errors.TooManyConnectionsError].jsonrpc_code
    assert payload["error"]["data"][0]["reason"] == "RESOURCE_EXHAUSTED"
    assert store.tasks == {}


def test_a_jsonrpc_stream_releases_when_it_ends(stack: Any) -> None:
    client, _, leases, _ = stack
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": message()}
    streamed = client.request("POST", "/", json=body, headers=caller_header("alice"))
    assert streamed.status_code == 200 and streamed.text.startswith("data: ")
    assert leases.leases == {}
