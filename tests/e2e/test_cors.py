"""CORS through the real local stack (`scripts/dev --param CorsAllowOrigins=...`): the gateway
answers the preflight, the functions name the allowed origin on actual responses."""

from __future__ import annotations

import uuid

import httpx

from tests.e2e.conftest import DevServer, server_fixture

APP_ORIGIN = "https://app.example"
OTHER_ORIGIN = "https://evil.example"
CARD_PATH = "/.well-known/agent-card.json"

cors_server = server_fixture("dev-cors", args=("--param", f"CorsAllowOrigins={APP_ORIGIN}"))


def _preflight(client: httpx.Client, path: str, origin: str) -> httpx.Response:
    return client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,a2a-version",
        },
    )


def test_the_gateway_answers_the_preflight_of_every_kind_of_path(cors_server: DevServer) -> None:
    with httpx.Client(base_url=cors_server.base_url) as client:
        for path in ("/", "/message:send", "/message:stream", f"/tasks/{uuid.uuid4()}", CARD_PATH):
            response = _preflight(client, path, APP_ORIGIN)
            assert response.status_code == 204, (path, response.text)
            assert response.headers["access-control-allow-origin"] == APP_ORIGIN
            allowed = response.headers["access-control-allow-headers"].lower().split(",")
            assert {"content-type", "a2a-version", "authorization"} <= set(allowed)
            assert "POST" in response.headers["access-control-allow-methods"].split(",")
            assert response.content == b""


def test_a_preflight_from_another_origin_is_not_allowed(cors_server: DevServer) -> None:
    with httpx.Client(base_url=cors_server.base_url) as client:
        response = _preflight(client, "/message:send", OTHER_ORIGIN)
    assert response.status_code == 204
    assert "access-control-allow-origin" not in response.headers


def test_an_actual_request_names_the_allowed_origin(cors_server: DevServer) -> None:
    with httpx.Client(base_url=cors_server.base_url) as client:
        card = client.get(CARD_PATH, headers={"Origin": APP_ORIGIN})
        other = client.get(CARD_PATH, headers={"Origin": OTHER_ORIGIN})
        sent = client.post(
            "/message:send",
            headers={"Origin": APP_ORIGIN, "A2A-Version": "1.0"},
            json={
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": "hello"}],
                }
            },
        )
    assert card.status_code == 200
    assert card.headers["access-control-allow-origin"] == APP_ORIGIN
    assert "A2A-Version" in card.headers["access-control-expose-headers"]
    assert "access-control-allow-origin" not in other.headers
    assert sent.status_code == 200, sent.text
    assert sent.headers["access-control-allow-origin"] == APP_ORIGIN


def test_without_the_parameter_there_is_no_preflight(dev_server: DevServer) -> None:
    with httpx.Client(base_url=dev_server.base_url) as client:
        response = _preflight(client, "/message:send", APP_ORIGIN)
        card = client.get(CARD_PATH, headers={"Origin": APP_ORIGIN})
    assert response.status_code == 404  # as API Gateway answers a method it does not have
    assert "access-control-allow-origin" not in card.headers
