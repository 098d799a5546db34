"""HTTP plumbing: version negotiation, media types, principal extraction."""

from __future__ import annotations

import json

import pytest
from starlette.requests import Request

from a2a_serverless.bindings.http import (
    A2A_MEDIA_TYPE,
    JSON_MEDIA_TYPE,
    UnsupportedMediaType,
    negotiated_version,
    principal,
    require_json_content_type,
    response_media_type,
)
from a2a_serverless.core.errors import VersionNotSupportedError


def _request(headers: dict[str, str] | None = None, query: str = "", **scope: object) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request(
        {
            "type": "http",
            "method": "GET",
            "path": "/",
            "headers": raw,
            "query_string": query.encode(),
            **scope,
        }
    )


@pytest.mark.parametrize(
    ("headers", "query", "expected"),
    [
        ({"A2A-Version": "1.0"}, "", "1.0"),
        ({"a2a-version": "1.0.7"}, "", "1.0"),
        ({}, "A2A-Version=1.0", "1.0"),
        ({}, "a2a-version=1.0", "1.0"),
    ],
)
def test_version_accepted(headers: dict[str, str], query: str, expected: str) -> None:
    assert negotiated_version(_request(headers, query), ("1.0",), "HTTP+JSON") == expected


@pytest.mark.parametrize(
    "headers", [{}, {"A2A-Version": ""}, {"A2A-Version": "0.3"}, {"A2A-Version": "2.0"}]
)
def test_version_rejected_with_instructions(headers: dict[str, str]) -> None:
    with pytest.raises(VersionNotSupportedError) as info:
        negotiated_version(_request(headers), ("1.0",), "HTTP+JSON")
    assert "A2A-Version: 1.0" in info.value.message


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, A2A_MEDIA_TYPE),
        ("*/*", A2A_MEDIA_TYPE),
        ("application/a2a+json", A2A_MEDIA_TYPE),
        ("application/json", JSON_MEDIA_TYPE),
        ("application/json, application/a2a+json;q=0", JSON_MEDIA_TYPE),
        ("text/html, application/*;q=0.5", A2A_MEDIA_TYPE),
    ],
)
def test_response_media_type(accept: str | None, expected: str) -> None:
    headers = {"Accept": accept} if accept else {}
    assert response_media_type(_request(headers)) == expected


def test_principal_from_mangum_event_web_adapter_header_or_anonymous() -> None:
    event = {"requestContext": {"authorizer": {"principalId": "alice"}}}
    assert principal(_request(**{"aws.event": event})) == "alice"
    cognito = {"requestContext": {"authorizer": {"claims": {"sub": "sub-1"}}}}
    assert principal(_request(**{"aws.event": cognito})) == "sub-1"
    header = {"x-amzn-request-context": json.dumps({"authorizer": {"principalId": "bob"}})}
    assert principal(_request(header)) == "bob"
    assert principal(_request({"x-amzn-request-context": "not json"})) == "anonymous"
    assert principal(_request()) == "anonymous"


def test_version_advice_is_the_interfaces_own() -> None:
    request = _request({"A2A-Version": "2.0"})
    advice = "'A2A-Version: 1.0' (or 'A2A-Version: 0.3' for the 0.3 methods)"
    with pytest.raises(VersionNotSupportedError) as info:
        negotiated_version(request, ("1.0", "0.3"), "JSON-RPC", advice=advice)
    assert info.value.message == (
        f"A2A-Version 2.0 is not supported by the JSON-RPC interface; send the header {advice}"
    )
    assert info.value.metadata == {"requested": "2.0", "supported": "1.0,0.3"}


@pytest.mark.parametrize(
    ("content_type", "accepted"),
    [
        ("application/json", True),
        ("application/a2a+json; charset=utf-8", True),
        ("Application/JSON", True),
        ("text/plain", False),
        ("", False),
    ],
)
def test_one_content_type_check(content_type: str, accepted: bool) -> None:
    request = _request({"Content-Type": content_type} if content_type else {})
    if accepted:
        require_json_content_type(request)
    else:
        with pytest.raises(UnsupportedMediaType):
            require_json_content_type(request)
