"""The official a2a-sdk client against the local stack run as deployed (`scripts/dev --param
Auth=ApiKey|Jwt|Iam`): on every binding the card declares (HTTP+JSON 1.0, JSON-RPC 1.0, and
JSON-RPC 0.3 through the SDK's compat transport), streaming and not.

ApiKey and Jwt credentials reach the requests through the SDK's own `AuthInterceptor` (it
reads the card's security scheme and puts the credential where the scheme says); Iam callers
sign with SigV4 as AWS callers do (an httpx auth using botocore's signer). The flow's
`[whoami]` shows the principal the authorizer named reached the flow's steps.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.client import ClientCallContext
from a2a.types import (
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from tests.e2e.conftest import DevServer, checked_async_client, server_fixture
from tests.e2e.rpc import v03_only
from tests.e2e.sigv4 import SigV4

pytestmark = pytest.mark.e2e

INTERFACES = ("HTTP+JSON 1.0", "JSONRPC 1.0", "JSONRPC 0.3")


class Credential(CredentialService):
    """One credential for whatever scheme the card names (what most callers need)."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.asked: list[str] = []

    async def get_credentials(
        self, security_scheme_name: str, context: ClientCallContext | None
    ) -> str | None:
        self.asked.append(security_scheme_name)
        return self.value


NO_CACHE = ("--param", "AuthCacheTtlSeconds=0")
apikey_server = server_fixture("dev-auth-ApiKey", args=("--param", "Auth=ApiKey", *NO_CACHE))
jwt_server = server_fixture("dev-auth-Jwt", args=("--param", "Auth=Jwt", *NO_CACHE))
# Iam has no authorizer, so no cache to turn off: the auth modes' Iam server.
iam_server = server_fixture("dev-auth-Iam", args=("--param", "Auth=Iam"))


@pytest.fixture(scope="module", params=["ApiKey", "Jwt", "Iam"])
def auth_server(request: pytest.FixtureRequest) -> Any:
    mode = request.param
    return mode, request.getfixturevalue(f"{mode.lower()}_server")


def make_credential(mode: str, server: DevServer, name: str) -> tuple[str, Any]:
    """(principal the flow should see, credential) made through the local admin endpoints."""
    with httpx.Client(base_url=server.base_url, timeout=10) as admin:
        if mode == "ApiKey":
            made = admin.post("/_local/keys", json={"principal": name})
            assert made.status_code == 201, made.text
            return name, made.json()["apiKey"]
        if mode == "Jwt":
            made = admin.post("/_local/tokens", json={"sub": name, "scopes": ["tasks"]})
            assert made.status_code == 200, made.text
            issuer = f"{server.base_url}/_local/oidc"
            return f"{issuer}|{name}", made.json()["token"]
        made = admin.post("/_local/iam/users", json={"user": name})
        assert made.status_code in (200, 201), made.text
        body = made.json()
        return body["arn"], (body["accessKeyId"], body["secretAccessKey"])


@contextlib.asynccontextmanager
async def authed_client(
    mode: str, server: DevServer, interface: str, credential: Any, *, streaming: bool
) -> AsyncIterator[tuple[Any, Credential | None]]:
    # Refusals are the gateway's (a REST-shaped body even on `POST /`, as on API Gateway):
    # only answers of authenticated calls go through the strict wire checks.
    http = (
        checked_async_client(version=None, source="sdk")
        if credential is not None
        else httpx.AsyncClient()
    )
    http.timeout = httpx.Timeout(60)
    interceptors = []
    service: Credential | None = None
    if credential is None:
        pass
    elif mode == "Iam":
        http.auth = SigV4(*credential)
    else:
        service = Credential(credential)
        interceptors.append(AuthInterceptor(service))
    binding, version = interface.split()
    config = ClientConfig(
        httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
    )
    card = await A2ACardResolver(http, server.base_url).get_agent_card()
    if version == "0.3":
        client = await create_client(
            v03_only(card), client_config=config, interceptors=interceptors
        )
    else:
        client = await create_client(
            server.base_url, client_config=config, interceptors=interceptors
        )
    try:
        yield client, service
    finally:
        await client.close()
        await http.aclose()


def whoami() -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="[whoami]")]
        )
    )


def final_text(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "streaming"])
@pytest.mark.parametrize("interface", INTERFACES)
async def test_the_sdk_client_authenticates_on_every_binding(
    auth_server: tuple[str, DevServer], interface: str, streaming: bool
) -> None:
    mode, server = auth_server
    principal, credential = make_credential(mode, server, f"sdk-{uuid.uuid4().hex[:8]}")
    async with authed_client(mode, server, interface, credential, streaming=streaming) as (
        client,
        service,
    ):
        events = [e async for e in client.send_message(whoami())]
        assert events, "no response"
        task_id = next(
            (e.task.id for e in events if e.WhichOneof("payload") == "task"),
            None,
        ) or next(e.status_update.task_id for e in events if e.HasField("status_update"))
        task = await client.get_task(GetTaskRequest(id=task_id))
        for _ in range(100):
            if task.status.state == TaskState.TASK_STATE_COMPLETED:
                break
            task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        scheme = {"ApiKey": "apiKey", "Jwt": "jwt", "Iam": "iam"}[mode]
        assert final_text(task).startswith(f"Echo: You are {principal} ({scheme}")
        if not interface.endswith("0.3"):
            listed = await client.list_tasks(ListTasksRequest())
            assert [t.id for t in listed.tasks] == [task_id]  # a fresh principal: only its task
            extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
            assert [s.id for s in extended.skills] == ["echo", "whoami"]
        if service is not None:
            # The interceptor found the card's scheme and asked for its credential.
            assert service.asked and set(service.asked) == {
                {"ApiKey": "apiKey", "Jwt": "oidc"}[mode]
            }


@pytest.mark.parametrize("interface", INTERFACES)
async def test_without_a_credential_the_sdk_client_is_refused(
    auth_server: tuple[str, DevServer], interface: str
) -> None:
    mode, server = auth_server
    async with authed_client(mode, server, interface, None, streaming=False) as (client, _):
        with pytest.raises(Exception) as refused:
            _ = [e async for e in client.send_message(whoami())]
        assert "401" in str(refused.value) or "Unauthorized" in str(refused.value), refused.value
