"""HTTP concerns shared by the bindings: principal, version, media types, body limits."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from a2a_serverless.core.errors import InvalidRequestError, VersionNotSupportedError
from a2a_serverless.settings import get_settings

A2A_MEDIA_TYPE = "application/a2a+json"
JSON_MEDIA_TYPE = "application/json"
ACCEPTED_BODY_TYPES = (A2A_MEDIA_TYPE, JSON_MEDIA_TYPE)
REQUEST_CONTEXT_HEADER = "x-amzn-request-context"


class UnsupportedMediaType(Exception):
    """The request body is not JSON (HTTP 415)."""

    def __init__(self, content_type: str) -> None:
        super().__init__(
            f"Content-Type {content_type or '(none)'} is not supported; send "
            f"{A2A_MEDIA_TYPE} or {JSON_MEDIA_TYPE}"
        )


class PayloadTooLarge(Exception):
    """The request body exceeds the configured limit (HTTP 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body exceeds {limit} bytes")


def request_context(request: Request) -> dict[str, Any]:
    """API Gateway's requestContext: from Mangum's event, or the Web Adapter's header."""
    event = request.scope.get("aws.event")
    if isinstance(event, dict) and isinstance(event.get("requestContext"), dict):
        return event["requestContext"]
    raw = request.headers.get(REQUEST_CONTEXT_HEADER)
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def principal(request: Request) -> str:
    """The authenticated principal that owns tasks; a fixed anonymous one when auth is off."""
    authorizer = request_context(request).get("authorizer") or {}
    if isinstance(authorizer, dict):
        claims = authorizer.get("claims") or {}
        for candidate in (
            authorizer.get("principalId"),
            claims.get("sub") if isinstance(claims, dict) else None,
        ):
            if isinstance(candidate, str) and candidate:
                return candidate
    return get_settings().anonymous_principal


def base_url(request: Request) -> str:
    """The public base URL the client used (API Gateway stage included)."""
    context = request_context(request)
    domain = context.get("domainName")
    if domain:
        stage = context.get("stage") or ""
        prefix = f"/{stage}" if stage and ".execute-api." in domain else ""
        return f"https://{domain}{prefix}"
    return str(request.base_url).rstrip("/")


def negotiated_version(
    request: Request, supported: tuple[str, ...], interface: str, advice: str | None = None
) -> str:
    """The A2A-Version (header or query) as Major.Minor; empty means 0.3 (spec §3.6).
    `advice` tells the client which header to send (default: the supported versions)."""
    raw = request.headers.get("a2a-version")
    if raw is None:
        for key, value in request.query_params.items():
            if key.lower() == "a2a-version":
                raw = value
                break
    raw = (raw or "").strip()
    version = "0.3" if not raw else ".".join(raw.split(".")[:2])
    if version not in supported:
        wanted = advice or " or ".join(f"'A2A-Version: {v}'" for v in supported)
        raise VersionNotSupportedError(
            f"A2A-Version {raw or '(empty, meaning 0.3)'} is not supported by the {interface} "
            f"interface; send the header {wanted}",
            requested=raw or "0.3",
            supported=",".join(supported),
        )
    return version


def response_media_type(request: Request) -> str:
    """application/a2a+json unless the client's Accept rules it out."""
    accept = request.headers.get("accept")
    if not accept:
        return A2A_MEDIA_TYPE
    for item in accept.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        q = 1.0
        for param in params:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        if q > 0 and media.lower() in (A2A_MEDIA_TYPE, "application/*", "*/*"):
            return A2A_MEDIA_TYPE
    return JSON_MEDIA_TYPE


async def read_body(request: Request) -> bytes:
    """The raw request body, refused past the configured size (declared or streamed)."""
    limit = get_settings().max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(limit)
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            raise PayloadTooLarge(limit)
    return bytes(body)


def require_json_content_type(request: Request) -> None:
    """Refuse a body that is not declared as JSON (HTTP 415 / JSON-RPC -32005)."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() not in ACCEPTED_BODY_TYPES:
        raise UnsupportedMediaType(content_type)


async def read_json_body(request: Request, *, required: bool = True) -> dict[str, Any] | None:
    """The request's JSON object body, with media type, size and syntax checked."""
    body = await read_body(request)
    if not body.strip():
        if required:
            raise InvalidRequestError("The request body is empty; send a JSON object")
        return None
    require_json_content_type(request)
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"The request body is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidRequestError("The request body must be a JSON object")
    return payload
