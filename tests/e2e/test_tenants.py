"""Tenants on the local stack started with `--param Tenant=acme`: the card declares the tenant,
the official a2a-sdk client (JSON-RPC 1.0 and HTTP+JSON) sends it and works end to end, and a
principal's tasks under one tenant are invisible under another and under none (get, list,
cancel, subscribe, push configs), over REST paths and JSON-RPC params alike.

Every response is strictly checked with tests/wire.py, as by the conftest clients; the checks
get the path without its tenant (`/acme/tasks/x` is GetTask, answered with the same types):
wire.py's route table knows only the paths without one."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.helpers import new_text_message
from a2a.types import GetTaskRequest, ListTasksRequest, Role, SendMessageRequest, TaskState

from tests import wire
from tests.e2e import conftest
from tests.e2e.conftest import DevServer, new_principal, server_fixture
from tests.e2e.test_push import Receiver, receiver, violations_of
from tests.wire import without_tenant

__all__ = ["receiver"]  # the fixture, imported to be used here

TENANT = "acme"
OTHER = "globex"
tenant_server = server_fixture("tenants", args=("--param", f"Tenant={TENANT}"))


# -- clients whose every response is checked, tenant paths included -------------------------


def _record(source: str, response: httpx.Response) -> str:
    return conftest._seen(source, response, without_tenant(response.request.url.path))


def _check(source: str, response: httpx.Response) -> None:
    conftest._check(source, response, without_tenant(response.request.url.path))


def _tee(source: str, response: httpx.Response) -> conftest._SseTee:
    _record(source, response)
    tee = conftest._SseTee(source, response)
    tee.path = without_tenant(tee.path)
    return tee


def _client(base_url: str, principal: str) -> httpx.Client:
    def hook(response: httpx.Response) -> None:
        if response.headers.get("content-type", "").startswith(wire.EVENT_STREAM):
            response.stream = conftest._TeeSyncStream(response.stream, _tee("raw", response))
            return
        response.read()
        _check("raw", response)

    return httpx.Client(
        base_url=base_url,
        headers={"A2A-Version": "1.0", conftest.LOCAL_PRINCIPAL_HEADER: principal},
        event_hooks={"response": [hook]},
        timeout=60.0,
    )


def _async_client(principal: str) -> httpx.AsyncClient:
    async def hook(response: httpx.Response) -> None:
        if response.headers.get("content-type", "").startswith(wire.EVENT_STREAM):
            response.stream = conftest._TeeAsyncStream(response.stream, _tee("sdk", response))
            return
        await response.aread()
        _check("sdk", response)

    return httpx.AsyncClient(
        headers={conftest.LOCAL_PRINCIPAL_HEADER: principal},
        event_hooks={"response": [hook]},
        timeout=60.0,
    )


@pytest.fixture
def as_principal(tenant_server: DevServer) -> Iterator[Callable[[str], httpx.Client]]:
    clients: list[httpx.Client] = []

    def make(principal: str) -> httpx.Client:
        clients.append(_client(tenant_server.base_url, principal))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def _message(text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def _send(client: httpx.Client, prefix: str, text: str = "hold [input]") -> str:
    # Blocking: answered once the task is interrupted (input-required), so it stays put.
    response = client.post(f"{prefix}/message:send", json={"message": _message(text)})
    assert response.status_code == 200, response.text
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return str(response.json()["task"]["id"])


def _task_of(event: dict[str, Any]) -> str:
    """The task id of a StreamResponse (`task` carries `id`, the updates `taskId`)."""
    (kind, body), *_ = event.items()
    return str(body["id"] if kind == "task" else body["taskId"])


def _rpc(client: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    return dict(client.post("/", json=body).json())


# -- the card -----------------------------------------------------------------------------------


def test_the_card_declares_the_tenant_on_the_1_0_interfaces(
    as_principal: Callable[[str], httpx.Client],
) -> None:
    card = as_principal("anyone").get("/.well-known/agent-card.json").json()
    declared = {
        f"{i['protocolBinding']} {i['protocolVersion']}": i.get("tenant")
        for i in card["supportedInterfaces"]
    }
    assert declared == {"JSONRPC 1.0": TENANT, "HTTP+JSON 1.0": TENANT, "JSONRPC 0.3": None}


# -- isolation ----------------------------------------------------------------------------------

SCOPES = {"": "no tenant", f"/{TENANT}": TENANT, f"/{OTHER}": OTHER}


def test_a_principals_tasks_are_seen_only_under_their_tenant(
    as_principal: Callable[[str], httpx.Client],
) -> None:
    alice = as_principal(new_principal("alice"))
    tasks = {prefix: _send(alice, prefix) for prefix in SCOPES}
    for prefix, task in tasks.items():
        assert alice.get(f"{prefix}/tasks/{task}").json()["status"]["state"] == (
            "TASK_STATE_INPUT_REQUIRED"
        )
        listed = [t["id"] for t in alice.get(f"{prefix}/tasks").json()["tasks"]]
        assert listed == [task], (prefix, listed)
        for wrong in set(SCOPES) - {prefix}:
            where = f"{wrong}/tasks/{task}"
            assert alice.get(where).status_code == 404, where
            assert alice.post(f"{where}:cancel").status_code == 404, where
            assert alice.post(f"{where}:subscribe").status_code == 404, where
            assert alice.get(f"{where}/pushNotificationConfigs").status_code == 404, where
            follow_up = {"message": {**_message("more"), "taskId": task}}
            assert alice.post(f"{wrong}/message:send", json=follow_up).status_code == 404
        # JSON-RPC 1.0: the same isolation through the `tenant` param.
        rpc_tenant = SCOPES[prefix] if prefix else None
        params: dict[str, Any] = {"id": task} | ({"tenant": rpc_tenant} if rpc_tenant else {})
        assert _rpc(alice, "GetTask", params)["result"]["id"] == task
        for wrong in set(SCOPES) - {prefix}:
            wrong_params = {"id": task} | ({"tenant": SCOPES[wrong]} if wrong else {})
            assert _rpc(alice, "GetTask", wrong_params)["error"]["code"] == -32001
            assert _rpc(alice, "CancelTask", wrong_params)["error"]["code"] == -32001
    # Still waiting for input everywhere: nothing above touched them.
    for prefix, task in tasks.items():
        state = alice.get(f"{prefix}/tasks/{task}").json()["status"]["state"]
        assert state == "TASK_STATE_INPUT_REQUIRED"
    # Another principal under the same tenant sees none of them.
    bob = as_principal(new_principal("bob"))
    for prefix, task in tasks.items():
        assert bob.get(f"{prefix}/tasks/{task}").status_code == 404
        assert bob.get(f"{prefix}/tasks").json()["tasks"] == []
    # Cancel under the right tenant works.
    canceled = alice.post(f"/{TENANT}/tasks/{tasks[f'/{TENANT}']}:cancel")
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"


def test_push_configs_keep_their_tenant_and_deliver(
    as_principal: Callable[[str], httpx.Client], receiver: Receiver
) -> None:
    alice = as_principal(new_principal("alice"))
    task = _send(alice, f"/{TENANT}")
    configs = f"/{TENANT}/tasks/{task}/pushNotificationConfigs"
    hook = {"url": receiver.url("tenant"), "id": "c1", "token": "t"}
    created = alice.post(configs, json=hook)
    assert created.status_code == 200, created.text
    assert created.json()["tenant"] == TENANT
    assert alice.get(f"{configs}/c1").json()["tenant"] == TENANT
    listed = alice.get(configs).json()["configs"]
    assert [(c["id"], c["tenant"]) for c in listed] == [("c1", TENANT)]
    # The body's tenant must be the path's.
    refused = alice.post(configs, json=hook | {"id": "c2", "tenant": OTHER})
    assert refused.status_code == 400 and "tenant" in refused.text
    # Not under another tenant, nor without one.
    assert alice.get(f"/{OTHER}/tasks/{task}/pushNotificationConfigs/c1").status_code == 404
    assert alice.delete(f"/tasks/{task}/pushNotificationConfigs/c1").status_code == 404
    # The webhook gets the task's next turn, to the end.
    follow_up = {"message": {**_message("done"), "taskId": task}}
    assert alice.post(f"/{TENANT}/message:send", json=follow_up).status_code == 200
    events = receiver.wait_terminal("tenant")
    assert events and {_task_of(event) for event in events} == {task}
    # Deleted under its own tenant.
    assert alice.delete(f"{configs}/c1").status_code == 200
    assert alice.get(f"{configs}/c1").status_code == 404


def test_the_flow_sees_the_caller_and_its_tenant(
    as_principal: Callable[[str], httpx.Client],
) -> None:
    principal = new_principal("alice")
    alice = as_principal(principal)
    answer = alice.post(f"/{TENANT}/message:send", json={"message": _message("[whoami]")})
    texts = [p["text"] for a in answer.json()["task"]["artifacts"] for p in a["parts"]]
    assert "".join(texts) == f"Echo: You are {principal} (local)"


def test_refusals_name_the_tenant(as_principal: Callable[[str], httpx.Client]) -> None:
    alice = as_principal(new_principal("alice"))
    body = {"message": _message("hi"), "tenant": OTHER}
    mismatch = alice.post(f"/{TENANT}/message:send", json=body)
    assert mismatch.status_code == 400
    assert [f for f, _ in violations_of(mismatch.json()["error"])] == ["tenant"]
    reserved = alice.get("/a%20b/tasks")  # not a tenant: a space
    assert reserved.status_code == 400
    assert [f for f, _ in violations_of(reserved.json()["error"])] == ["tenant"]
    error = _rpc(alice, "ListTasks", {"tenant": "a b"})["error"]
    assert error["code"] == -32602 and "tenant" in str(error["data"])


# -- the official client ------------------------------------------------------------------------


@pytest.fixture(
    params=[("JSONRPC", False), ("HTTP+JSON", False), ("JSONRPC", True), ("HTTP+JSON", True)],
    ids=lambda p: f"{p[0]}{'-streaming' if p[1] else ''}",
)
async def sdk(request: pytest.FixtureRequest, tenant_server: DevServer) -> AsyncIterator[Any]:
    principal = new_principal("sdk")
    http = _async_client(principal)
    binding, streaming = request.param
    config = ClientConfig(
        httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
    )
    card = await A2ACardResolver(http, tenant_server.base_url).get_agent_card()
    client = await create_client(card, client_config=config)
    try:
        yield client, principal, tenant_server.base_url
    finally:
        await client.close()
        await http.aclose()


async def test_the_sdk_client_sends_the_declared_tenant(sdk: Any) -> None:
    client, principal, base_url = sdk
    message = new_text_message("hello tenant [input]", role=Role.ROLE_USER)
    events = [event async for event in client.send_message(SendMessageRequest(message=message))]
    # Unary: one task; streamed: the task first, then its updates up to the interruption.
    task = events[0].task
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.id == task.id
    assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    listed = await client.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [task.id]
    # The task is the principal's under the tenant: not without it.
    with _client(base_url, principal) as raw:
        assert raw.get(f"/{TENANT}/tasks/{task.id}").status_code == 200
        assert raw.get(f"/tasks/{task.id}").status_code == 404
        assert raw.get("/tasks").json()["tasks"] == []
