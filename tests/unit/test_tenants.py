"""Tenants: the owner string a (principal, tenant) scopes tasks by, its checks, and the
bindings that carry the tenant (REST `/{tenant}/...` paths and the body's `tenant`, JSON-RPC
1.0's `tenant` param) into it — a real A2AService on the in-memory store, no AWS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a_serverless.bindings.jsonrpc import jsonrpc_router
from a2a_serverless.bindings.rest import (
    card_router,
    create_app,
    get_task_router,
    list_tasks_router,
    push_router,
    send_router,
    task_action_router,
)
from a2a_serverless.core.card import CardFactory
from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.core.errors import InvalidParamsError, InvalidRequestError
from a2a_serverless.core.push import PushService
from a2a_serverless.core.service import MAX_TENANT_CHARS, A2AService, scoped
from a2a_serverless.flows.echo import EchoFlow
from a2a_serverless.models import Caller
from a2a_serverless.models.caller import TENANT_MARK, scope_of, unscope
from a2a_serverless.observability import _task_id_from_path
from a2a_serverless.settings import Settings
from a2a_serverless.store import MAX_OWNER_BYTES
from tests.fakes import InMemoryTaskStore
from tests.unit.test_send_path import RecordingExecutor

# -- the owner string --------------------------------------------------------------------------

# Principals as they reach the bindings: any text but the mark (core refuses those), tenants
# as path segments.
principals = st.text(min_size=1, max_size=24).filter(lambda p: TENANT_MARK not in p)
tenants = st.one_of(st.just(""), st.from_regex(r"[A-Za-z0-9._~-]{1,12}", fullmatch=True))


@given(principals, tenants, principals, tenants)
def test_scope_of_is_injective(p1: str, t1: str, p2: str, t2: str) -> None:
    assert (scope_of(p1, t1) == scope_of(p2, t2)) == ((p1, t1) == (p2, t2))


@given(principals, tenants)
def test_scope_of_splits_back_and_no_tenant_is_the_principal_itself(p: str, t: str) -> None:
    assert unscope(scope_of(p, t)) == (p, t)
    assert scope_of(p, "") == p  # tasks stored before tenants keep their owner
    if t:
        # ...and a tenant's owner string is no plain principal (it holds the mark).
        assert TENANT_MARK in scope_of(p, t)


def test_the_examples_that_a_join_with_a_printable_separator_would_confuse() -> None:
    # `#` joins in the store; a principal may hold one (`alice#proj` is a real API key's).
    assert scope_of("alice#proj", "") != scope_of("alice", "proj")
    assert scope_of("alice", "b.c") != scope_of("alice.b", "c")
    assert Caller("alice", tenant="acme").owner == scope_of("alice", "acme")
    assert Caller.of_owner(scope_of("alice", "acme")) == Caller("alice", tenant="acme")


def test_the_caller_wire_carries_the_tenant_only_when_set() -> None:
    assert "tenant" not in Caller("alice", "apiKey").wire()
    with_tenant = Caller("alice", "apiKey", tenant="acme")
    assert with_tenant.wire()["tenant"] == "acme"
    assert Caller.from_wire(with_tenant.wire()) == with_tenant
    assert Caller.from_wire(Caller("alice").wire()).tenant == ""


@pytest.mark.parametrize(
    "tenant",
    ["a/b", "a b", "a:b", "é", "a" * (MAX_TENANT_CHARS + 1), "tasks", ".well-known", "..", "."],
)
def test_a_tenant_that_cannot_be_a_path_segment_is_refused_naming_it(tenant: str) -> None:
    with pytest.raises(InvalidParamsError) as raised:
        scoped(Caller("alice"), tenant)
    assert [field for field, _ in raised.value.violations] == ["tenant"]


def test_principal_and_tenant_must_fit_the_owner_key_budget() -> None:
    tenant = "t" * MAX_TENANT_CHARS
    fits = "p" * (MAX_OWNER_BYTES - 1 - MAX_TENANT_CHARS)
    assert len(scoped(Caller(fits), tenant).owner.encode()) == MAX_OWNER_BYTES
    with pytest.raises(InvalidParamsError, match="too long for this principal"):
        scoped(Caller(fits + "p"), tenant)
    assert scoped(Caller(fits + "p"), None).owner == fits + "p"  # no tenant: as before


def test_a_principal_holding_the_mark_is_refused_with_or_without_tenant() -> None:
    for tenant in ("", "acme"):
        with pytest.raises(InvalidRequestError):
            scoped(Caller(f"alice{TENANT_MARK}acme"), tenant)


# -- the bindings ------------------------------------------------------------------------------

WEBHOOK = "https://127.0.0.1/hook"


class Agent:
    def __init__(self) -> None:
        self.store = InMemoryTaskStore()
        self.executor = RecordingExecutor()
        push = PushService(self.store, True, EgressPolicy(allow_hosts=frozenset({"127.0.0.1"})))
        self.service = A2AService(self.store, self.executor, push=push)
        settings = Settings(auth_mode="ApiKey", tenant="acme")
        self.cards = CardFactory(settings, EchoFlow())
        self.app = create_app(
            card_router(self.cards),
            send_router(self.service),
            get_task_router(self.service),
            list_tasks_router(self.service),
            task_action_router(self.service),
            push_router(push),
            jsonrpc_router(self.service, push, self.cards),
        )

    def call(
        self, method: str, path: str, principal: str = "alice", body: Any = None
    ) -> httpx.Response:
        context = {"authorizer": {"principalId": principal, "scheme": "apiKey"}}
        headers = {"A2A-Version": "1.0", "x-amzn-request-context": json.dumps(context)}

        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
                return await client.request(method, path, headers=headers, json=body)

        return asyncio.run(go())

    def send(self, prefix: str = "", principal: str = "alice", **body: Any) -> str:
        message = {"messageId": f"m-{prefix}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        payload = {"message": message, "configuration": {"returnImmediately": True}, **body}
        response = self.call("POST", f"{prefix}/message:send", principal, payload)
        assert response.status_code == 200, response.text
        return str(response.json()["task"]["id"])

    def rpc(self, method: str, params: dict[str, Any], principal: str = "alice") -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self.call("POST", "/", principal, body).json()


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[Agent]:
    monkeypatch.setenv("AUTH_MODE", "ApiKey")
    from a2a_serverless.settings import get_settings

    get_settings.cache_clear()
    yield Agent()
    get_settings.cache_clear()


def _status(agent: Agent, method: str, path: str, principal: str = "alice") -> int:
    return agent.call(method, path, principal).status_code


def test_rest_tasks_are_seen_only_under_their_own_tenant(agent: Agent) -> None:
    plain, acme = agent.send(""), agent.send("/acme")
    other = agent.send("/globex")
    assert agent.store.tasks[acme].record.owner == scope_of("alice", "acme")
    assert agent.store.tasks[plain].record.owner == "alice"
    for task, prefix in ((plain, ""), (acme, "/acme"), (other, "/globex")):
        assert _status(agent, "GET", f"{prefix}/tasks/{task}") == 200
        for wrong in {"", "/acme", "/globex"} - {prefix}:
            assert _status(agent, "GET", f"{wrong}/tasks/{task}") == 404
            assert _status(agent, "POST", f"{wrong}/tasks/{task}:cancel") == 404
            assert _status(agent, "POST", f"{wrong}/tasks/{task}:subscribe") == 404
            assert _status(agent, "GET", f"{wrong}/tasks/{task}:subscribe") == 404
            assert _status(agent, "GET", f"{wrong}/tasks/{task}/pushNotificationConfigs") == 404
        # Another principal under the same tenant sees nothing either.
        assert _status(agent, "GET", f"{prefix}/tasks/{task}", principal="bob") == 404
    listed = {
        prefix: [t["id"] for t in agent.call("GET", f"{prefix}/tasks").json()["tasks"]]
        for prefix in ("", "/acme", "/globex")
    }
    assert listed == {"": [plain], "/acme": [acme], "/globex": [other]}


def test_the_flow_is_told_the_tenant(agent: Agent) -> None:
    agent.send("/acme")
    agent.send("")
    assert [c.tenant if c else None for c in agent.executor.callers] == ["acme", ""]
    assert agent.executor.callers[0] == Caller("alice", "apiKey", tenant="acme")


def test_rest_body_tenant_must_match_the_path(agent: Agent) -> None:
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    response = agent.call("POST", "/acme/message:send", body={"message": message, "tenant": "x"})
    assert response.status_code == 400
    assert "tenant" in response.text and "does not match" in response.text
    # The same tenant in both (what the a2a-sdk sends), or only in the body: accepted.
    acme = agent.send("/acme", tenant="acme")
    body_only = agent.send("", tenant="acme")
    assert agent.store.tasks[acme].record.owner == agent.store.tasks[body_only].record.owner
    cancel = agent.call("POST", f"/acme/tasks/{acme}:cancel", body={"tenant": "x"})
    assert cancel.status_code == 400 and "tenant" in cancel.text


def test_an_invalid_tenant_in_the_path_is_invalid_params_naming_it(agent: Agent) -> None:
    response = agent.call("GET", "/t%20x/tasks")
    assert response.status_code == 400
    violations = response.json()["error"]["details"]
    assert any(
        v.get("fieldViolations", [{}])[0].get("field") == "tenant"
        for v in violations
        if "fieldViolations" in v
    ), violations


def test_push_configs_keep_their_tenant_and_stay_in_it(agent: Agent) -> None:
    task = agent.send("/acme")
    base = f"/acme/tasks/{task}/pushNotificationConfigs"
    created = agent.call("POST", base, body={"url": WEBHOOK, "id": "c1"})
    assert created.status_code == 200, created.text
    assert created.json()["tenant"] == "acme"
    assert agent.call("GET", base + "/c1").json()["tenant"] == "acme"
    assert agent.call("GET", f"/tasks/{task}/pushNotificationConfigs/c1").status_code == 404
    mismatch = agent.call("POST", base, body={"url": WEBHOOK, "tenant": "globex"})
    assert mismatch.status_code == 400 and "tenant" in mismatch.text
    # JSON-RPC: the config's `tenant` is the request's tenant, and is returned as given.
    rpc = agent.rpc(
        "CreateTaskPushNotificationConfig",
        {"taskId": task, "tenant": "acme", "url": WEBHOOK, "id": "c2"},
    )
    assert rpc["result"]["tenant"] == "acme"
    assert "error" in agent.rpc("GetTaskPushNotificationConfig", {"taskId": task, "id": "c2"})


def test_jsonrpc_1_0_honours_the_tenant_param(agent: Agent) -> None:
    acme = agent.send("/acme")
    found = agent.rpc("GetTask", {"id": acme, "tenant": "acme"})
    assert found["result"]["id"] == acme
    assert agent.rpc("GetTask", {"id": acme})["error"]["code"] == -32001
    assert agent.rpc("GetTask", {"id": acme, "tenant": "globex"})["error"]["code"] == -32001
    listed = agent.rpc("ListTasks", {"tenant": "acme"})["result"]["tasks"]
    assert [t["id"] for t in listed] == [acme]
    assert agent.rpc("ListTasks", {})["result"]["tasks"] == []
    bad = agent.rpc("GetTask", {"id": acme, "tenant": "a/b"})["error"]
    assert bad["code"] == -32602 and "tenant" in json.dumps(bad)
    sent = agent.rpc(
        "SendMessage",
        {
            "tenant": "acme",
            "message": {"messageId": "r1", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"returnImmediately": True},
        },
    )
    assert agent.store.tasks[sent["result"]["task"]["id"]].record.owner == scope_of("alice", "acme")


def test_the_card_declares_the_tenant_on_the_1_0_interfaces(agent: Agent) -> None:
    card = agent.call("GET", "/.well-known/agent-card.json").json()
    interfaces = {
        (i["protocolBinding"], i["protocolVersion"]): i.get("tenant")
        for i in card["supportedInterfaces"]
    }
    assert interfaces == {
        ("JSONRPC", "1.0"): "acme",
        ("HTTP+JSON", "1.0"): "acme",
        ("JSONRPC", "0.3"): None,
    }
    plain = CardFactory(Settings(), EchoFlow()).card_json("https://a")
    assert all("tenant" not in i for i in plain["supportedInterfaces"])


@pytest.mark.parametrize(
    ("path", "task_id"),
    [
        ("/tasks/t1", "t1"),
        ("/acme/tasks/t1:cancel", "t1"),
        ("/acme/tasks/t1/pushNotificationConfigs/c1", "t1"),
        ("/acme/tasks", None),
    ],
)
def test_the_log_line_names_the_task_under_a_tenant(path: str, task_id: str | None) -> None:
    assert _task_id_from_path(path) == task_id
