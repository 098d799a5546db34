"""The local stack's own doors: the /_local/ endpoints that make, list or revoke credentials
answer this machine only, whatever address the stack listens on; and the functions see the
stack's public URL as the request's host, never a Host header a client chose."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from a2a_serverless.local.__main__ import listening_url
from a2a_serverless.local.admin import LocalAdmin
from a2a_serverless.local.authorizers import LocalUsagePlan
from a2a_serverless.local.gateway import Gateway
from a2a_serverless.local.issuer import LocalIssuer
from a2a_serverless.local.sigv4 import IamUsers


class RecordingKeyAdmin:
    """ApiKeyAdmin's surface, recording what it was asked to do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def create(self, principal: str, description: str = "") -> Any:
        self.calls.append(("create", principal))
        return type("Issued", (), {"key_id": "k1", "api_key": "a2a_x", "principal": principal})

    def list(self) -> list[Any]:
        self.calls.append(("list",))
        return []

    def revoke(self, key_id: str) -> bool:
        self.calls.append(("revoke", key_id))
        return True


async def host_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A function that answers the host and scheme it was given."""
    host = dict(scope["headers"]).get(b"host", b"").decode()
    body = json.dumps({"host": host, "scheme": scope.get("scheme")}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def stack_gateway(mode: str, **kwargs: Any) -> tuple[Gateway, dict[str, Any]]:
    parts: dict[str, Any] = {
        "keys": RecordingKeyAdmin(),
        "users": IamUsers("123456789012"),
        "issuer": LocalIssuer("http://127.0.0.1:8000/_local/oidc", "a2a-local"),
    }
    admin = LocalAdmin(
        mode,
        usage_plan=LocalUsagePlan() if mode == "ApiKey" else None,
        key_admin=(lambda: parts["keys"]) if mode == "ApiKey" else None,
        issuer=parts["issuer"] if mode == "Jwt" else None,
        iam_users=parts["users"] if mode == "Iam" else None,
    )
    return Gateway([("GET", "/card", host_app)], admin=admin, **kwargs), parts


def client(app: Gateway, base_url: str, peer: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(peer, 50_000))
    return httpx.AsyncClient(transport=transport, base_url=base_url)


DOORS = [
    ("ApiKey", "POST", "/_local/keys", {"principal": "mallory"}),
    ("ApiKey", "GET", "/_local/keys", None),
    ("ApiKey", "DELETE", "/_local/keys/k1", None),
    ("Jwt", "POST", "/_local/tokens", {"sub": "alice"}),
    ("Iam", "POST", "/_local/iam/users", {"user": "alice"}),
]
# What a stack listening on 0.0.0.0 receives from elsewhere: another machine's peer, the
# stack's outside address, a Host naming it from outside.
FROM_ELSEWHERE = [
    ("http://127.0.0.1:8000", "192.168.1.20"),
    ("http://192.168.1.5:8000", "192.168.1.20"),
    ("http://192.168.1.5:8000", "127.0.0.1"),
    ("http://devbox.example:8000", "127.0.0.1"),
]


@pytest.mark.parametrize(("mode", "method", "path", "body"), DOORS)
@pytest.mark.parametrize(("base_url", "peer"), FROM_ELSEWHERE)
async def test_credential_doors_refuse_requests_from_elsewhere(
    mode: str, method: str, path: str, body: Any, base_url: str, peer: str
) -> None:
    gateway, parts = stack_gateway(mode)
    async with client(gateway, base_url, peer) as http:
        response = await http.request(method, path, json=body)
    assert response.status_code == 403, response.text
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    assert path in response.json()["error"]["message"]
    # Nothing was made or revoked.
    assert parts["keys"].calls == []
    assert parts["users"]._by_key == {}


@pytest.mark.parametrize(("mode", "method", "path", "body"), DOORS)
async def test_credential_doors_answer_this_machine(
    mode: str, method: str, path: str, body: Any
) -> None:
    gateway, _ = stack_gateway(mode)
    async with client(gateway, "http://127.0.0.1:8000") as http:
        response = await http.request(method, path, json=body)
    assert response.status_code in (200, 201, 204), response.text


async def test_a_credential_post_needs_a_json_body_even_from_this_machine() -> None:
    gateway, parts = stack_gateway("ApiKey")
    async with client(gateway, "http://127.0.0.1:8000") as http:
        response = await http.post(
            "/_local/keys", content=b'{"principal": "a"}', headers={"Content-Type": "text/plain"}
        )
    assert response.status_code == 403 and parts["keys"].calls == []


async def test_the_issuers_public_documents_answer_anyone() -> None:
    gateway, _ = stack_gateway("Jwt")
    async with client(gateway, "http://192.168.1.5:8000", "192.168.1.20") as http:
        discovery = await http.get("/_local/oidc/.well-known/openid-configuration")
        jwks = await http.get("/_local/oidc/jwks.json")
    assert discovery.status_code == 200 and jwks.status_code == 200


@pytest.mark.parametrize(
    ("host", "seen"),
    [
        ("attacker.example", "127.0.0.1:8000"),
        ("127.0.0.1:8000", "127.0.0.1:8000"),
        ("localhost:8000", "localhost:8000"),  # loopback names: the same machine
    ],
)
async def test_a_loopback_stack_names_its_own_url_not_a_chosen_host(host: str, seen: str) -> None:
    gateway, _ = stack_gateway("None", public_url="http://127.0.0.1:8000", trust_loopback_host=True)
    async with client(gateway, "http://127.0.0.1:8000") as http:
        response = await http.get("/card", headers={"Host": host})
    assert response.json() == {"host": seen, "scheme": "http"}


@pytest.mark.parametrize("host", ["attacker.example", "localhost:8000", "192.168.1.5:8000"])
async def test_a_stack_listening_beyond_loopback_names_its_configured_url(host: str) -> None:
    gateway, _ = stack_gateway("None", public_url="https://agent.example:8443")
    async with client(gateway, "http://192.168.1.5:8000", "192.168.1.20") as http:
        response = await http.get("/card", headers={"Host": host})
    assert response.json() == {"host": "agent.example:8443", "scheme": "https"}


def test_the_listening_url_names_this_machine_for_every_interface(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "devbox")
    assert listening_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert listening_url("::1", 8000) == "http://[::1]:8000"
    assert listening_url("0.0.0.0", 8000) == "http://devbox:8000"
    assert listening_url("::", 9000) == "http://devbox:9000"
