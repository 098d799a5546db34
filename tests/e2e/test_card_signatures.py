"""A signed Agent Card (spec §8.4) on the local stack (`CARD_SIGNING_KEY=local scripts/dev`):
the official a2a-sdk client, verifying with a key provider that fetches our JWKS (the
signature's `jku`), accepts the card and works with it; a card whose name was changed on the
way is refused."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from jwt import PyJWK

from tests.e2e.conftest import DevServer, checked_async_client, checked_client, server_fixture

pytestmark = pytest.mark.e2e

# The card's provider, documentation and icon come from template parameters (signed with it).
CARD_PARAMETERS = {
    "AgentProviderOrganization": "Example Org",
    "AgentProviderUrl": "https://example.org",
    "AgentDocumentationUrl": "https://example.org/docs",
    "AgentIconUrl": "https://example.org/icon.png",
}
signed_server = server_fixture(
    "dev-signed-card",
    env={"CARD_SIGNING_KEY": "local"},
    args=tuple(
        arg for name, value in CARD_PARAMETERS.items() for arg in ("--param", f"{name}={value}")
    ),
)
CARD_PATH = "/.well-known/agent-card.json"


class KeysFromJku:
    """Key provider: the key `kid` from the JWKS at `jku`, which must be on the agent's own
    origin (a verifier never follows a `jku` the card's author could point anywhere)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.fetched: list[str] = []

    def __call__(self, kid: str | None, jku: str | None) -> PyJWK:
        assert jku == f"{self.base_url}/.well-known/jwks.json", jku
        self.fetched.append(jku)
        answer = httpx.get(jku, timeout=10.0)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("application/jwk-set+json")
        (key,) = [k for k in answer.json()["keys"] if k["kid"] == kid]
        assert set(key) == {"kty", "crv", "x", "y", "kid", "alg", "use"}  # no private part
        return PyJWK(key)


class RenamingTransport(httpx.AsyncBaseTransport):
    """Hands the client the card with another name (a man in the middle, a stale cache)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path != CARD_PATH:
            return response
        card: dict[str, Any] = json.loads(await response.aread())
        card["name"] = "Someone Else"
        return httpx.Response(200, json=card, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_sdk_client_accepts_the_signed_card(signed_server: DevServer) -> None:
    keys = KeysFromJku(signed_server.base_url)
    verifier = create_signature_verifier(keys, ["ES256"])
    http = checked_async_client(principal=f"sig-{uuid.uuid4().hex[:8]}", version=None)
    async with http:
        client = await create_client(
            signed_server.base_url,
            client_config=ClientConfig(
                httpx_client=http, streaming=False, supported_protocol_bindings=["HTTP+JSON"]
            ),
            signature_verifier=verifier,
        )
        assert keys.fetched, "the verifier never asked for the key"
        request = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="signed")]
            )
        )
        (response,) = [r async for r in client.send_message(request)]
        assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
        await client.close()


async def test_a_card_whose_name_was_changed_is_refused(signed_server: DevServer) -> None:
    verifier = create_signature_verifier(KeysFromJku(signed_server.base_url), ["ES256"])
    async with httpx.AsyncClient(transport=RenamingTransport(), timeout=30.0) as http:
        with pytest.raises(InvalidSignaturesError):
            await create_client(
                signed_server.base_url,
                client_config=ClientConfig(httpx_client=http),
                signature_verifier=verifier,
            )


def test_the_served_card_carries_one_es256_signature(signed_server: DevServer) -> None:
    with checked_client(signed_server.base_url, principal=None, version=None) as http:
        card = http.get(CARD_PATH).json()
    (signature,) = card["signatures"]
    assert set(signature) == {"protected", "signature"}
    header = json.loads(base64.urlsafe_b64decode(signature["protected"] + "=="))
    assert header["alg"] == "ES256" and header["typ"] == "JOSE"
    assert header["jku"] == f"{signed_server.base_url}/.well-known/jwks.json"


def test_provider_documentation_and_icon_come_from_the_template_parameters(
    signed_server: DevServer,
) -> None:
    with checked_client(signed_server.base_url, principal=None, version=None) as http:
        card = http.get(CARD_PATH).json()
    assert card["provider"] == {"organization": "Example Org", "url": "https://example.org"}
    assert card["documentationUrl"] == "https://example.org/docs"
    assert card["iconUrl"] == "https://example.org/icon.png"
