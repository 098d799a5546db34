"""A credential header sent twice with different values is refused by the functions too (401
naming the scheme): the authorizer refuses it, but API Gateway's cache, keyed by one of the
values, may admit the request without asking the authorizer (deployed and locally alike)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from a2a_serverless.bindings.http import CHALLENGES
from a2a_serverless.bindings.rest import create_app, get_task_router
from a2a_serverless.local.gateway import REQUEST_CONTEXT_HEADER
from tests.unit.test_auth_bindings import JWT_CONTEXT, OwnerEcho, auth_mode

__all__ = ["auth_mode"]  # the fixture

HEADERS = {"ApiKey": "X-API-Key", "Jwt": "Authorization", "Iam": "Authorization"}


def get_task(headers: list[tuple[str, str]]) -> tuple[httpx.Response, OwnerEcho]:
    service = OwnerEcho()
    app = create_app(get_task_router(service))  # type: ignore[arg-type]
    context = json.dumps(JWT_CONTEXT)  # an admitted request: the cache's answer for one value
    sent = [("A2A-Version", "1.0"), (REQUEST_CONTEXT_HEADER.decode(), context), *headers]

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/tasks/t1", headers=sent)

    return asyncio.run(go()), service


@pytest.mark.parametrize("mode", ["ApiKey", "Jwt", "Iam"])
def test_different_values_of_the_credential_header_are_401(auth_mode: Any, mode: str) -> None:
    auth_mode(mode)
    name = HEADERS[mode]
    response, service = get_task([(name, "credential-a"), (name.lower(), "credential-b")])
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGES[mode]
    assert name in response.json()["error"]["message"]
    assert service.owners == []  # nothing was read


@pytest.mark.parametrize("mode", ["ApiKey", "Jwt"])
def test_one_value_sent_once_or_twice_is_the_caller(auth_mode: Any, mode: str) -> None:
    auth_mode(mode)
    name = HEADERS[mode]
    for headers in ([(name, "credential-a")], [(name, "credential-a"), (name, "credential-a")]):
        response, _ = get_task(headers)
        assert response.status_code == 200, response.text
