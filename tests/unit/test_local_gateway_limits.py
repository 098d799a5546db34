"""The local gateway refuses request sizes where the deployed path does, before the function
runs: a body over API Gateway's 10 MB (its REQUEST_TOO_LARGE gateway response), and an event
over Lambda's 6,291,456-byte payload (API Gateway's own 413), the body JSON-escaped in it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from a2a_serverless.local.authorizers import GatewayResponses
from a2a_serverless.local.gateway import Gateway

MAX_REQUEST_BYTES = 10 * 1024 * 1024  # API Gateway's REST payload quota
MAX_INVOKE_BYTES = 6_291_456  # Lambda's synchronous invocation payload
TOO_LARGE = {
    "REQUEST_TOO_LARGE": {
        "StatusCode": 413,
        "ResponseTemplates": {
            "application/json": '{"error":{"code":413,"status":"INVALID_ARGUMENT",'
            '"message":$context.error.messageString}}'
        },
    }
}


class Function:
    """A stand-in function: counts its invocations, answers with the body's length."""

    def __init__(self) -> None:
        self.invocations = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.invocations += 1
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps({"size": size}).encode()})


def _gateway(function: Function) -> Gateway:
    return Gateway([("POST", "/message:send", function)], responses=GatewayResponses(TOO_LARGE))


def _client(app: Gateway) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def _chunks(size: int, piece: int = 1 << 20) -> AsyncIterator[bytes]:
    while size > 0:
        yield b"a" * min(piece, size)
        size -= piece


async def test_a_body_over_10_mb_is_refused_by_the_gateway_response() -> None:
    function = Function()
    async with _client(_gateway(function)) as http:
        declared = await http.post("/message:send", content=b"a" * (MAX_REQUEST_BYTES + 1))
        chunked = await http.post("/message:send", content=_chunks(MAX_REQUEST_BYTES + 1))
    for response in (declared, chunked):
        assert response.status_code == 413
        assert response.json() == {
            "error": {"code": 413, "status": "INVALID_ARGUMENT", "message": "Request Too Long"}
        }
    assert function.invocations == 0


async def test_an_event_over_lambda_s_payload_limit_is_refused_before_the_function() -> None:
    """3.2 MB of quotes is a 6.4 MB event: each is escaped (\\") in the event's JSON."""
    function = Function()
    async with _client(_gateway(function)) as http:
        quoted = await http.post("/message:send", content=b'"' * 3_200_000)
        plain = await http.post("/message:send", content=b"a" * MAX_INVOKE_BYTES)
    for response in (quoted, plain):
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/json"
        assert response.headers["x-amzn-errortype"] == "BadRequestException"
        assert response.json() == {"message": "Request Too Long"}
    assert function.invocations == 0


async def test_bodies_within_both_limits_reach_the_function_whole() -> None:
    function = Function()
    async with _client(_gateway(function)) as http:
        largest = await http.post("/message:send", content=_chunks(6_000_000))
        escaped = await http.post("/message:send", content=b'"' * 3_000_000)
    assert largest.status_code == 200 and largest.json() == {"size": 6_000_000}
    assert escaped.status_code == 200 and escaped.json() == {"size": 3_000_000}
    assert function.invocations == 2
