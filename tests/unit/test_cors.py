"""CORS headers on actual responses (bindings/cors.py), through a function's app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from fastapi import APIRouter
from starlette.responses import JSONResponse

from a2a_serverless.bindings.cors import (
    ALLOW_HEADERS,
    allowed_origin,
    parse_origins,
    preflight_headers,
)
from a2a_serverless.bindings.keepalive import KeepAliveResponse
from a2a_serverless.bindings.rest import create_app
from a2a_serverless.bindings.sse import sse_response
from a2a_serverless.core.errors import TaskNotFoundError
from a2a_serverless.settings import get_settings
from tests.asgi_client import AsgiClient

APP_ORIGIN = "https://app.example"
OTHER_ORIGIN = "https://evil.example"


def _router() -> APIRouter:
    router = APIRouter()

    @router.get("/plain")
    async def plain() -> JSONResponse:
        return JSONResponse({"ok": True}, headers={"A2A-Version": "1.0"})

    @router.get("/missing")
    async def missing() -> JSONResponse:
        raise TaskNotFoundError(task_id="t-1")

    @router.get("/stream")
    async def stream() -> object:
        async def frames() -> AsyncIterator[bytes]:
            yield b"data: one\n\n"
            yield b"data: two\n\n"

        return sse_response(frames())

    @router.get("/blocking")
    async def blocking() -> object:
        async def answer() -> JSONResponse:
            await asyncio.sleep(0.15)  # longer than the keep-alive interval
            return JSONResponse({"done": True})

        return KeepAliveResponse(
            answer,
            lambda exc: JSONResponse({"error": str(exc)}, status_code=500),
            media_type="application/json",
            interval=0.05,
        )

    return router


@pytest.fixture
def cors_origins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CORS_ALLOW_ORIGINS", f" {APP_ORIGIN} , http://localhost:5173")
    get_settings.cache_clear()
    yield
    monkeypatch.delenv("CORS_ALLOW_ORIGINS")
    get_settings.cache_clear()


@pytest.fixture
def client() -> AsgiClient:
    return AsgiClient(create_app(_router()))


def test_origins_parse_from_a_comma_separated_setting() -> None:
    assert parse_origins("") == frozenset()
    assert parse_origins(" , ") == frozenset()
    assert parse_origins("https://a.example, https://b.example/") == {
        "https://a.example",
        "https://b.example",
    }
    assert allowed_origin("https://a.example", "https://a.example") == "https://a.example"
    # Exact match: another port, scheme or a suffix is another origin.
    for origin in ("https://a.example:8443", "http://a.example", "https://a.example.evil"):
        assert allowed_origin(origin, "https://a.example") is None
    assert allowed_origin(None, "https://a.example") is None


def test_preflight_headers_allow_the_a2a_request_headers() -> None:
    headers = dict(preflight_headers(APP_ORIGIN))
    assert headers["Access-Control-Allow-Origin"] == APP_ORIGIN
    allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "authorization", "x-api-key", "a2a-version"} <= allowed
    assert {"a2a-extensions", "x-a2a-extensions"} <= allowed
    assert len(ALLOW_HEADERS) == len(allowed)
    assert {"GET", "POST", "DELETE"} <= set(headers["Access-Control-Allow-Methods"].split(","))


@pytest.mark.usefixtures("cors_origins")
def test_an_allowed_origin_is_echoed_with_the_a2a_headers_exposed(client: AsgiClient) -> None:
    response = client.get("/plain", headers={"Origin": APP_ORIGIN})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == APP_ORIGIN
    exposed = {h.strip() for h in response.headers["access-control-expose-headers"].split(",")}
    assert {"A2A-Version", "A2A-Extensions"} <= exposed
    assert "Origin" in response.headers["vary"]
    assert "access-control-allow-credentials" not in response.headers


@pytest.mark.usefixtures("cors_origins")
def test_the_second_allowed_origin_too(client: AsgiClient) -> None:
    response = client.get("/plain", headers={"Origin": "http://localhost:5173"})
    assert response.headers["access-control-allow-origin"] == "http://localhost:5173"


@pytest.mark.usefixtures("cors_origins")
def test_another_origin_gets_no_cors_header(client: AsgiClient) -> None:
    response = client.get("/plain", headers={"Origin": OTHER_ORIGIN})
    assert response.status_code == 200  # the browser, not the server, withholds it
    assert "access-control-allow-origin" not in response.headers
    assert "access-control-expose-headers" not in response.headers
    assert "Origin" in response.headers["vary"]  # a cache must not reuse it for another


@pytest.mark.usefixtures("cors_origins")
def test_a2a_errors_carry_the_headers(client: AsgiClient) -> None:
    response = client.get("/missing", headers={"Origin": APP_ORIGIN})
    assert response.status_code == 404
    assert response.headers["access-control-allow-origin"] == APP_ORIGIN


@pytest.mark.usefixtures("cors_origins")
def test_an_sse_stream_keeps_its_headers_and_bytes(client: AsgiClient) -> None:
    response = client.get("/stream", headers={"Origin": APP_ORIGIN})
    body = response.content
    assert response.headers["access-control-allow-origin"] == APP_ORIGIN
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert body == b"data: one\n\ndata: two\n\n"


@pytest.mark.usefixtures("cors_origins")
def test_a_keepalive_response_keeps_its_headers_and_bytes(client: AsgiClient) -> None:
    response = client.get("/blocking", headers={"Origin": APP_ORIGIN})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == APP_ORIGIN
    assert response.headers["x-accel-buffering"] == "no"
    assert response.content.startswith(b"\n")  # keep-alive bytes were written first
    assert response.json() == {"done": True}


def test_without_the_setting_nothing_is_added(client: AsgiClient) -> None:
    get_settings.cache_clear()
    assert get_settings().cors_allow_origins == ""
    response = client.get("/plain", headers={"Origin": APP_ORIGIN})
    assert response.status_code == 200
    assert not [h for h in response.headers if h.startswith("access-control-")]
    assert "vary" not in response.headers
