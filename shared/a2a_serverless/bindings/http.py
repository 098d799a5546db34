"""HTTP concerns shared by the bindings: principal, version, media types, and the one input
gate every body passes (size, JSON syntax, nesting depth, finite numbers, valid Unicode)."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_serverless.core.errors import (
    AuthenticationRequiredError,
    InvalidParamsError,
    InvalidRequestError,
    VersionNotSupportedError,
)
from a2a_serverless.models import Caller
from a2a_serverless.settings import get_settings

A2A_MEDIA_TYPE = "application/a2a+json"
JSON_MEDIA_TYPE = "application/json"
ACCEPTED_BODY_TYPES = (A2A_MEDIA_TYPE, JSON_MEDIA_TYPE)
REQUEST_CONTEXT_HEADER = "x-amzn-request-context"
# Free-form values (any JSON the client likes) get the tighter `max_value_depth` bound.
FREE_FORM_KEYS = frozenset({"metadata", "data"})
PATH_SEGMENT_CHARS = 64  # keys in an error's field path are cut to this (they are client text)
SANITIZED_DEPTH = 64  # a stored value nested deeper than this renders as null

logger = logging.getLogger(__name__)


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


# What a 401 names (WWW-Authenticate), per Auth mode; the template's UNAUTHORIZED gateway
# response sends the same value (tests/template compares them).
CHALLENGES = {
    "ApiKey": 'ApiKey realm="a2a", header="X-API-Key"',
    "Jwt": 'Bearer realm="a2a"',
    "Iam": "AWS4-HMAC-SHA256",
}
CLAIMS_MAX_CHARS = 8192  # authorizer context values are strings; a bigger one is dropped


def caller(request: Request, *, now: float | None = None) -> Caller:
    """Who calls: the authorizer's principal (ApiKey, Jwt), the SigV4 caller (Iam), the local
    stack's named principal, or the anonymous one of an open stack. With Auth on, a request
    without an identity, or whose `expiresAt` (epoch seconds) is at or before `now`, is refused."""
    settings = get_settings()
    _refuse_ambiguous(request, settings.auth_mode)
    context = request_context(request)
    authorizer = context.get("authorizer")
    if isinstance(authorizer, dict):
        _refuse_expired(authorizer, time.time() if now is None else now)
        found = _authorizer_caller(authorizer)
        if found is not None:
            return found
    identity = context.get("identity")
    if isinstance(identity, dict):
        arn = identity.get("userArn")
        if isinstance(arn, str) and arn:
            claims = {
                key: identity[key]
                for key in ("accountId", "caller", "accessKey")
                if isinstance(identity.get(key), str) and identity[key]
            }
            return Caller(arn, "iam", claims)
    if settings.auth_mode != "None":
        raise AuthenticationRequiredError()
    return Caller(settings.anonymous_principal, "none")


# The header that carries the credential, per Auth mode.
CREDENTIAL_HEADERS = {"ApiKey": "X-API-Key", "Jwt": "Authorization", "Iam": "Authorization"}


def _refuse_ambiguous(request: Request, auth_mode: str) -> None:
    """AuthenticationRequiredError when the credential header comes with different values:
    the authorizer refuses that, but API Gateway's cache (keyed by one of the values) may
    admit the request without asking it."""
    name = CREDENTIAL_HEADERS.get(auth_mode)
    if name and len(set(request.headers.getlist(name))) > 1:
        raise AuthenticationRequiredError(f"Several {name} headers with different values")


def _refuse_expired(authorizer: dict[str, Any], now: float) -> None:
    """AuthenticationRequiredError when the authorizer's `expiresAt` has come (or cannot be
    read: only our authorizer writes it, so an unreadable one is refused, not ignored)."""
    if "expiresAt" not in authorizer:
        return  # a credential that does not expire by itself (an API key)
    value = authorizer["expiresAt"]
    try:
        expires_at = int(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        expires_at = None
    # The same instant the authorizer starts refusing the credential: no leeway of our own.
    if expires_at is None or now >= expires_at:
        raise AuthenticationRequiredError("The credential has expired")


def _authorizer_caller(authorizer: dict[str, Any]) -> Caller | None:
    principal = authorizer.get("principalId") or authorizer.get("principal")
    if not isinstance(principal, str) or not principal:
        claims = authorizer.get("claims")
        sub = claims.get("sub") if isinstance(claims, dict) else None
        if not isinstance(sub, str) or not sub:
            return None
        principal = sub
    scheme = authorizer.get("scheme")
    claims = authorizer.get("claims")
    if isinstance(claims, str):
        try:
            claims = json.loads(claims) if len(claims) <= CLAIMS_MAX_CHARS else {}
        except ValueError:
            claims = {}
    scopes = authorizer.get("scopes")
    return Caller(
        principal,
        scheme if scheme in ("apiKey", "jwt", "iam", "local") else "apiKey",
        claims if isinstance(claims, dict) else {},
        tuple(scopes.split()) if isinstance(scopes, str) else (),
    )


def principal(request: Request) -> str:
    """The principal that owns the tasks a request reads or writes (see `caller`)."""
    return caller(request).principal


def challenge_headers(exc: Exception) -> dict[str, str]:
    """WWW-Authenticate for a 401, naming the scheme the stack's Auth mode expects."""
    if isinstance(exc, AuthenticationRequiredError):
        value = CHALLENGES.get(get_settings().auth_mode)
        if value:
            return {"WWW-Authenticate": value}
    return {}


EXTENSIONS_HEADER = "A2A-Extensions"
EXTENSIONS_HEADER_V03 = "X-A2A-Extensions"


def requested_extensions(request: Request) -> list[str]:
    """The extension URIs the client opts into (spec §4.6; 0.3 clients send X-A2A-Extensions;
    either header, repeated or comma-separated)."""
    values = [
        *request.headers.getlist(EXTENSIONS_HEADER),
        *request.headers.getlist(EXTENSIONS_HEADER_V03),
    ]
    return [uri.strip() for value in values for uri in value.split(",") if uri.strip()]


def echo_extensions(response: Response, activated: Sequence[str], version: str = "1.0") -> Response:
    """Name the extensions a response used, in the header the caller's version reads."""
    if activated:
        header = EXTENSIONS_HEADER_V03 if version == "0.3" else EXTENSIONS_HEADER
        response.headers[header] = ",".join(activated)
    return response


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


class NotJsonError(ValueError):
    """The body is not JSON at all: bad syntax or encoding, `NaN`/`Infinity`, a number
    out of range (HTTP+JSON InvalidRequestError, JSON-RPC -32700)."""


def _reject_constant(name: str) -> Any:
    raise NotJsonError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses as inf: refused like `Infinity`
        raise NotJsonError(f"the number {text[:32]} is out of range")
    return value


def loads(body: bytes | str) -> Any:
    """The JSON value of `body`, or NotJsonError; a document too deep even to parse is
    InvalidParamsError on `(body)` (the parser's recursion runs out near 1,000 levels)."""
    try:
        return json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        depth = get_settings().max_json_depth
        raise InvalidParamsError(
            violations=[("(body)", f"is nested deeper than {depth} levels")]
        ) from None
    except NotJsonError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, int digit limit
        raise NotJsonError(str(exc)) from None


# A field path as a linked list (parent, key), rendered only for an error: building a string
# for every value of a 256 KiB body would cost more than the whole check.
_Path = tuple[Any, str | int] | None


def _field(path: _Path) -> str:
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    text = ""
    for key in reversed(keys):
        if isinstance(key, int):
            text += f"[{key}]"
            continue
        segment = key[:PATH_SEGMENT_CHARS].encode("utf-8", "backslashreplace").decode("utf-8")
        if len(key) > PATH_SEGMENT_CHARS:
            segment += "..."
        text += f".{segment}" if text else segment
    return text or "(body)"


def _is_text(value: str) -> bool:
    """Whether `value` encodes as UTF-8 (a lone surrogate, e.g. from `"\\ud800"`, does not)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _violation(path: _Path, description: str) -> InvalidParamsError:
    return InvalidParamsError(violations=[(_field(path), description)])


def check_json(value: Any, *, base_depth: int = 0) -> None:
    """InvalidParamsError naming the first field of `value` past a limit: nesting deeper than
    `max_json_depth` (counted from the document's root, `base_depth` levels above `value`),
    a `metadata`/`data` value nested deeper than `max_value_depth`, or text that is not
    valid Unicode. Anything accepted here can be stored, revalidated and rendered."""
    settings = get_settings()
    max_depth, max_value_depth = settings.max_json_depth, settings.max_value_depth
    if isinstance(value, str) and not _is_text(value):
        raise _violation(None, "is not valid Unicode text (lone surrogate)")
    # Containers only: (node, its path, depth of its parent, (free-form root, its parent's
    # depth) when inside a `metadata`/`data` value).
    stack: list[tuple[Any, _Path, int, tuple[_Path, int] | None]] = [
        (value, None, base_depth, None)
    ]
    while stack:
        node, path, parent_depth, free = stack.pop()
        items: Iterable[tuple[str | int, Any]]
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        depth = parent_depth + 1
        if depth > max_depth:
            raise _violation(path, f"is nested deeper than {max_depth} levels")
        if free is not None and depth - free[1] > max_value_depth:
            raise _violation(free[0], f"is nested deeper than {max_value_depth} levels")
        for key, child in items:
            if isinstance(key, str) and not _is_text(key):
                raise _violation(path, "has a key that is not valid Unicode text")
            if isinstance(child, str):
                if not _is_text(child):
                    raise _violation((path, key), "is not valid Unicode text (lone surrogate)")
            elif isinstance(child, dict | list):
                child_free = free
                if free is None and key in FREE_FORM_KEYS:
                    child_free = ((path, key), depth)
                stack.append((child, (path, key), depth, child_free))


async def read_json_body(request: Request, *, required: bool = True) -> dict[str, Any] | None:
    """The request's JSON object body, through the input gate: media type, size, syntax
    (no NaN/Infinity), then `check_json`'s depth and Unicode limits."""
    body = await read_body(request)
    if not body.strip():
        if required:
            raise InvalidRequestError("The request body is empty; send a JSON object")
        return None
    require_json_content_type(request)
    try:
        payload = loads(body)
    except NotJsonError as exc:
        raise InvalidRequestError(f"The request body is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidRequestError("The request body must be a JSON object")
    check_json(payload)
    return payload


# -- rendering ---------------------------------------------------------------------------------


def _safe_text(value: str) -> str:
    if _is_text(value):
        return value
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)


def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` with what strict JSON cannot carry replaced: non-finite numbers by null, lone
    surrogates by U+FFFD, nesting past SANITIZED_DEPTH by null. For stored values only: input
    that passed the gate never contains these."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _safe_text(value)
    if depth >= SANITIZED_DEPTH and isinstance(value, dict | list):
        return None
    if isinstance(value, dict):
        return {_safe_text(str(k)): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, depth + 1) for v in value]
    return value


class SafeJSONResponse(JSONResponse):
    """A JSON response that never fails to render: strict JSON first (no NaN, UTF-8 only);
    if the content cannot be, it is sanitized by `json_safe` and a warning is logged."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
            logger.warning("a response carried values strict JSON cannot; rendered sanitized")
            return super().render(json_safe(content))
