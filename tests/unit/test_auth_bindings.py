"""Who calls, as the bindings read it (bindings/http.py `caller`), the 401 they answer when
Auth is on and no identity arrived, the card's security schemes per Auth mode, and the
extended Agent Card on REST and JSON-RPC (1.0 and 0.3) — without AWS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from a2a.types import AgentCard as SdkAgentCard
from google.protobuf import json_format
from starlette.datastructures import Headers

from a2a_serverless.bindings.http import CHALLENGES, REQUEST_CONTEXT_HEADER
from a2a_serverless.bindings.jsonrpc import jsonrpc_router
from a2a_serverless.bindings.rest import card_router, create_app, get_task_router
from a2a_serverless.core.card import CardFactory
from a2a_serverless.core.errors import TaskNotFoundError
from a2a_serverless.flows.echo import EchoFlow
from a2a_serverless.models import Caller, Task, TaskState, TaskStatus
from a2a_serverless.settings import Settings, get_settings

ROOT = Path(__file__).resolve().parents[2]

SCHEMA_V03 = json.loads((ROOT / "tests" / "a2a-v0.3.0.schema.json").read_text())


class OwnerEcho:
    """GetTask that answers with a task whose id is the owner it was asked for."""

    def __init__(self) -> None:
        self.owners: list[str] = []

    def get_task(self, owner: str, task_id: str, history_length: int | None = None) -> Task:
        self.owners.append(owner)
        if task_id != "t1":
            raise TaskNotFoundError(taskId=task_id)
        return Task(id="t1", context_id=owner, status=TaskStatus(state=TaskState.WORKING))


@pytest.fixture
def auth_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def set_mode(mode: str, **env: str) -> Settings:
        monkeypatch.setenv("AUTH_MODE", mode)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        get_settings.cache_clear()
        return get_settings()

    yield set_mode
    get_settings.cache_clear()


def call(app: Any, method: str, path: str, context: dict[str, Any] | None, **kw: Any) -> Any:
    headers = {"A2A-Version": "1.0", **kw.pop("headers", {})}
    if context is not None:
        headers[REQUEST_CONTEXT_HEADER] = json.dumps(context)

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path, headers=headers, **kw)

    return asyncio.run(go())


JWT_CONTEXT = {
    "authorizer": {
        "principalId": "https://issuer.example|u-1",
        "principal": "https://issuer.example|u-1",
        "scheme": "jwt",
        "claims": json.dumps({"sub": "u-1", "email": "u@example.com"}),
        "scopes": "tasks.read tasks.write",
        "integrationLatency": 12,
    }
}
IAM_CONTEXT = {
    "identity": {
        "userArn": "arn:aws:sts::111122223333:assumed-role/agent/session",
        "caller": "AROAEXAMPLE:session",
        "accountId": "111122223333",
        "accessKey": "ASIAEXAMPLE",
        "sourceIp": "10.0.0.1",
    }
}


@pytest.mark.parametrize(
    ("mode", "context", "owner"),
    [
        ("Jwt", JWT_CONTEXT, "https://issuer.example|u-1"),
        ("ApiKey", {"authorizer": {"principalId": "alice", "scheme": "apiKey"}}, "alice"),
        ("Iam", IAM_CONTEXT, "arn:aws:sts::111122223333:assumed-role/agent/session"),
        ("None", None, "anonymous"),
        ("None", {"authorizer": {"principalId": "bob", "scheme": "local"}}, "bob"),
    ],
)
def test_the_owner_is_the_principal_api_gateway_names(
    auth_mode: Any, mode: str, context: dict[str, Any] | None, owner: str
) -> None:
    auth_mode(mode)
    service = OwnerEcho()
    app = create_app(get_task_router(service))  # type: ignore[arg-type]
    response = call(app, "GET", "/tasks/t1", context)
    assert response.status_code == 200, response.text
    assert service.owners == [owner]


@pytest.mark.parametrize("mode", ["ApiKey", "Jwt", "Iam"])
def test_with_auth_on_a_request_without_identity_is_401_naming_the_scheme(
    auth_mode: Any, mode: str
) -> None:
    auth_mode(mode)
    service = OwnerEcho()
    rest = create_app(get_task_router(service))  # type: ignore[arg-type]
    response = call(rest, "GET", "/tasks/t1", {"identity": {"sourceIp": "1.2.3.4"}})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGES[mode]
    error = response.json()["error"]
    assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
    assert error["details"][0]["reason"] == "UNAUTHENTICATED"
    assert service.owners == []  # nothing was read

    rpc = create_app(jsonrpc_router(service, object()))  # type: ignore[arg-type]
    body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "t1"}}
    response = call(rpc, "POST", "/", None, json=body)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGES[mode]
    reply = response.json()
    assert reply["id"] == 7 and reply["error"]["code"] == -31401
    assert service.owners == []


def test_claims_and_scopes_reach_the_caller(auth_mode: Any) -> None:
    from a2a_serverless.bindings.http import caller

    auth_mode("Jwt")

    class FakeRequest:
        scope: dict[str, Any] = {"aws.event": {"requestContext": JWT_CONTEXT}}
        headers = Headers()

    found = caller(FakeRequest())  # type: ignore[arg-type]
    assert found == Caller(
        "https://issuer.example|u-1",
        "jwt",
        {"sub": "u-1", "email": "u@example.com"},
        ("tasks.read", "tasks.write"),
    )
    assert found.authenticated


# -- the card --------------------------------------------------------------------------------


def _card(settings: Settings) -> dict[str, Any]:
    return CardFactory(settings, EchoFlow()).card_json("https://agent.example")


@pytest.mark.parametrize(
    ("mode", "scheme_name", "member"),
    [
        ("ApiKey", "apiKey", "apiKeySecurityScheme"),
        ("Jwt", "oidc", "openIdConnectSecurityScheme"),
        ("Iam", "sigv4", "httpAuthSecurityScheme"),
    ],
)
def test_the_card_declares_the_modes_scheme_and_the_extended_card(
    mode: str, scheme_name: str, member: str
) -> None:
    settings = Settings(auth_mode=mode, jwt_issuer="https://issuer.example/", jwt_audience="agent")
    card = _card(settings)
    assert list(card["securitySchemes"]) == [scheme_name]
    assert member in card["securitySchemes"][scheme_name]
    assert card["securityRequirements"] == [{"schemes": {scheme_name: {"list": []}}}]
    assert card["capabilities"]["extendedAgentCard"] is True
    # The official SDK reads it strictly (unknown fields or shapes raise).
    parsed = json_format.Parse(json.dumps(card), SdkAgentCard())
    assert parsed.security_requirements[0].schemes[scheme_name] is not None
    if mode == "ApiKey":
        assert parsed.security_schemes["apiKey"].api_key_security_scheme.name == "X-API-Key"
        assert parsed.security_schemes["apiKey"].api_key_security_scheme.location == "header"
    if mode == "Jwt":
        oidc = parsed.security_schemes["oidc"].open_id_connect_security_scheme
        assert oidc.open_id_connect_url == (
            "https://issuer.example/.well-known/openid-configuration"
        )


def test_an_open_stack_declares_no_scheme_and_no_extended_card() -> None:
    card = _card(Settings(auth_mode="None"))
    assert "securitySchemes" not in card and "securityRequirements" not in card
    assert card["capabilities"]["extendedAgentCard"] is False


def _card_app(mode: str) -> Any:
    settings = Settings(auth_mode=mode)
    factory = CardFactory(settings, EchoFlow())
    return create_app(card_router(factory), jsonrpc_router(object(), object(), factory))  # type: ignore[arg-type]


def test_the_extended_card_lists_the_extended_skills_for_a_signed_in_caller(
    auth_mode: Any,
) -> None:
    auth_mode("ApiKey")
    app = _card_app("ApiKey")
    signed_in = {"authorizer": {"principalId": "alice", "scheme": "apiKey"}}
    public = call(app, "GET", "/.well-known/agent-card.json", None).json()
    response = call(app, "GET", "/extendedAgentCard", signed_in)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "private, no-store"
    extended = response.json()
    json_format.Parse(json.dumps(extended), SdkAgentCard())
    assert [s["id"] for s in public["skills"]] == ["echo"]
    assert [s["id"] for s in extended["skills"]] == ["echo", "whoami"]

    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}
    rpc = call(app, "POST", "/", signed_in, json=body).json()
    assert [s["id"] for s in rpc["result"]["skills"]] == ["echo", "whoami"]

    body = {"jsonrpc": "2.0", "id": 2, "method": "agent/getAuthenticatedExtendedCard"}
    v03 = call(app, "POST", "/", signed_in, json=body, headers={"A2A-Version": "0.3"}).json()
    result = v03["result"]
    jsonschema.validate(
        result, {"$ref": "#/definitions/AgentCard", "definitions": SCHEMA_V03["definitions"]}
    )
    assert result["securitySchemes"] == {
        "apiKey": {
            "type": "apiKey",
            "in": "header",
            "name": "X-API-Key",
            "description": result["securitySchemes"]["apiKey"]["description"],
        }
    }
    assert result["security"] == [{"apiKey": []}]
    assert [s["id"] for s in result["skills"]] == ["echo", "whoami"]


def test_the_extended_card_refuses_an_anonymous_caller_and_is_unsupported_when_open(
    auth_mode: Any,
) -> None:
    auth_mode("ApiKey")
    response = call(_card_app("ApiKey"), "GET", "/extendedAgentCard", {"identity": {}})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGES["ApiKey"]

    auth_mode("None")
    app = _card_app("None")
    response = call(app, "GET", "/extendedAgentCard", None)
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}
    assert call(app, "POST", "/", None, json=body).json()["error"]["code"] == -32004
