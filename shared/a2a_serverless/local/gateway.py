"""API Gateway REST emulation for the local stack: one ASGI app with the template's routes.

Matches resources as API Gateway does (literal paths win), answers unknown routes with the
template's GatewayResponses, runs each method's security (local/authorizers.py) and adds
`x-amzn-request-context`. With `Auth=None`, `x-local-principal` names the caller; other modes
drop it. Functions see the stack's public URL as the host (a loopback-only stack keeps a
loopback `Host`). Request sizes are refused where API Gateway (10 MB body) and Lambda (6 MB
event) refuse them. `/_local/...` is local/admin.py; `/_s3/...` (presigned URLs to stored
content, outside the API) is local/content_urls.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from a2a_serverless.bindings.cors import allowed_origin, parse_origins, preflight_headers
from a2a_serverless.local.admin import BodyTooLarge, host_name, is_loopback, read_body
from a2a_serverless.local.authorizers import (
    GatewayError,
    GatewayResponses,
    Guard,
    ReceivedRequest,
    RenderedResponse,
)

logger = logging.getLogger(__name__)

LOCAL_PRINCIPAL_HEADER = "x-local-principal"
ADMIN_PREFIX = "/_local/"
OBJECTS_PREFIX = "/_s3/"
REQUEST_CONTEXT_HEADER = b"x-amzn-request-context"
# API Gateway's REST API payload quota: a larger request body is refused (REQUEST_TOO_LARGE).
MAX_REQUEST_BYTES = 10 * 1024 * 1024
# Lambda's synchronous invocation payload: the API Gateway event, the body JSON-escaped in it.
MAX_INVOKE_BYTES = 6_291_456
# What API Gateway answers when Lambda refuses the event as too large: its own 413, not a
# gateway response of the template (as observed; AWS documents no answer for it).
INVOKE_TOO_LARGE = (
    413,
    [("content-type", "application/json"), ("x-amzn-errortype", "BadRequestException")],
    b'{"message": "Request Too Long"}',
)


class Throttled(Exception):
    """Lambda refused to run the function: its concurrency is all in use."""


class LambdaConcurrency:
    """Lambda's concurrency for API requests: a reserved function runs at most that many at
    once, the others share the account's limit left over (`account` None: no limit). A request
    past it is throttled at once (not queued). Mapping and state machine invocations don't count."""

    def __init__(self, reservations: dict[str, int], account: int | None = None) -> None:
        self.reservations = reservations
        self.unreserved = None if account is None else account - sum(reservations.values())
        self._running: dict[str, int] = {}
        self._unreserved_running = 0

    @contextlib.contextmanager
    def running(self, function: str) -> Iterator[None]:
        reserved = self.reservations.get(function)
        if reserved is not None:
            if self._running.get(function, 0) >= reserved:
                raise Throttled(function)
            self._running[function] = self._running.get(function, 0) + 1
        else:
            if self.unreserved is not None and self._unreserved_running >= self.unreserved:
                raise Throttled(function)
            self._unreserved_running += 1
        try:
            yield
        finally:
            if reserved is not None:
                self._running[function] -= 1
            else:
                self._unreserved_running -= 1


class FunctionApp:
    """A function's app as the gateway invokes it: one execution of its concurrency while
    the request lasts (a streamed response: until its last byte)."""

    def __init__(self, app: Any, function: str, concurrency: LambdaConcurrency) -> None:
        self.app = app
        self.function = function
        self.concurrency = concurrency

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        with self.concurrency.running(self.function):
            await self.app(scope, receive, send)


class Gateway:
    """An ASGI app that routes like an API Gateway REST API and adds its request context."""

    def __init__(
        self,
        routes: list[tuple[str, str, Any]],
        stage: str = "prod",
        cors_allow_origins: str = "",
        *,
        auth_mode: str = "None",
        guard: Guard | None = None,
        responses: GatewayResponses | None = None,
        admin: Any = None,
        objects: Any = None,
        public_url: str | None = None,
        trust_loopback_host: bool = False,
    ) -> None:
        """`public_url`: the origin the functions see as the request's (None: the client's
        `Host` is passed on, for in-process clients with no address); `trust_loopback_host`:
        keep a client's `Host` that names loopback (the server listens on loopback only);
        `objects`: the ASGI app serving presigned URLs under /_s3/."""
        self.stage = stage
        parsed = urlsplit(public_url) if public_url else None
        self.public_scheme = parsed.scheme if parsed else None
        self.public_host = parsed.netloc if parsed else None
        self.trust_loopback_host = trust_loopback_host
        # The template's CorsAllowOrigins: set, every path answers OPTIONS here (preflight).
        self.cors_allow_origins = cors_allow_origins
        self.auth_mode = auth_mode
        self.guard = guard
        self.responses = responses
        self.admin = admin  # an ASGI app for /_local/ (local/admin.py)
        self.objects = objects  # an ASGI app for /_s3/ (local/content_urls.py)
        self.routes = []
        for method, path, app in routes:
            pattern = re.escape(path)
            pattern = re.sub(r"\\\{([^/}]+)\\\}", r"(?P<\1>[^/]+)", pattern)
            self.routes.append((method, re.compile(f"^{pattern}/?$"), path, app))
        # Literal segments win over parameterised ones, segment by segment from the root, as
        # API Gateway walks its resource tree: /tasks/{id} before /{tenant}/tasks (both match
        # /tasks/tasks), /tasks before /{tenant}.
        self.routes.sort(key=lambda r: [seg.startswith("{") for seg in r[2].split("/")])

    def match(self, method: str, path: str) -> tuple[Any, str] | None:
        found = self._match(method, path)
        return (found[0], found[1]) if found else None

    def _match(self, method: str, path: str) -> tuple[Any, str, dict[str, str]] | None:
        for route_method, pattern, resource, app in self.routes:
            matched = pattern.match(path)
            if route_method == method and matched:
                return app, resource, matched.groupdict()
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if self.admin is not None and scope["path"].startswith(ADMIN_PREFIX):
            await self.admin(scope, receive, send)
            return
        if self.objects is not None and scope["path"].startswith(OBJECTS_PREFIX):
            # S3, not the API: a presigned URL is its own credential.
            await self.objects(scope, receive, send)
            return
        if (
            scope["method"] == "OPTIONS"
            and parse_origins(self.cors_allow_origins)
            and any(pattern.match(scope["path"]) for _, pattern, _, _ in self.routes)
        ):
            await self._preflight(scope, send)
            return
        request_id = str(uuid.uuid4())
        found = self._match(scope["method"], scope["path"])
        if found is None:
            # What API Gateway answers for a route it does not have (MISSING_AUTHENTICATION_
            # TOKEN: the template turns it into a 404, or a 401 in Iam mode).
            await self._gateway_error(
                scope,
                send,
                GatewayError("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token"),
                request_id,
                fallback=(404, f"No operation at {scope['method']} {scope['path']}"),
            )
            return
        app, resource, path_parameters = found
        # API Gateway holds the whole request before the integration runs.
        try:
            body, receive = await _buffered(receive, MAX_REQUEST_BYTES, _content_length(scope))
        except BodyTooLarge:
            too_large = GatewayError("REQUEST_TOO_LARGE", "Request Too Long")
            await self._gateway_error(
                scope, send, too_large, request_id, fallback=(413, too_large.message)
            )
            return
        received_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = [
            (k, v)
            for k, v in scope["headers"]
            if k.lower() not in (REQUEST_CONTEXT_HEADER, LOCAL_PRINCIPAL_HEADER.encode())
        ]
        source_ip = (scope.get("client") or ("127.0.0.1",))[0]
        context: dict[str, Any] = {
            "resourcePath": resource,
            "httpMethod": scope["method"],
            "requestId": request_id,
            "stage": self.stage,
            "identity": {"sourceIp": source_ip},
        }
        if self.auth_mode == "None":
            principal = next(
                (v for k, v in received_headers if k.lower() == LOCAL_PRINCIPAL_HEADER), None
            )
            if principal:
                # Local stand-in for a Lambda authorizer's principalId.
                context["authorizer"] = {"principalId": principal, "scheme": "local"}
        if self.guard is not None:
            security = self.guard.security(resource, scope["method"])
            if not security.open:
                request = ReceivedRequest(
                    method=scope["method"],
                    path=scope["path"],
                    raw_path=(scope.get("raw_path") or scope["path"].encode()).decode("latin-1"),
                    resource=resource,
                    query_string=(scope.get("query_string") or b"").decode("latin-1"),
                    headers=[
                        (k, v) for k, v in received_headers if k.lower() != LOCAL_PRINCIPAL_HEADER
                    ],
                    source_ip=source_ip,
                    stage=self.stage,
                    path_parameters=path_parameters,
                    body=body if security.sigv4 else b"",  # the signature covers the body
                    request_id=request_id,
                )
                try:
                    admitted = await self.guard.check(request)
                except GatewayError as error:
                    await self._gateway_error(scope, send, error, request_id)
                    return
                if admitted.authorizer is not None:
                    context["authorizer"] = admitted.authorizer
                context["identity"].update(admitted.identity)
        context_json = json.dumps(context).encode()
        headers.append((REQUEST_CONTEXT_HEADER, context_json))
        event = (
            invocation_bytes(scope, resource, path_parameters, context, body)
            if _may_pass_invoke_limit(scope, body, len(context_json))
            else 0
        )
        if event > MAX_INVOKE_BYTES:
            status, response_headers, response_body = INVOKE_TOO_LARGE
            logger.warning("%s: a %d-byte event is over Lambda's payload limit", resource, event)
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (k.encode(), v.encode())
                        for k, v in [*response_headers, ("x-amzn-requestid", request_id)]
                    ],
                }
            )
            await send({"type": "http.response.body", "body": response_body})
            return
        try:
            await app(self._public(scope, headers), receive, send)
        except Throttled:
            # Lambda's 429 reaches the client as API Gateway's INTEGRATION_FAILURE.
            throttled = GatewayError("INTEGRATION_FAILURE", "Internal server error")
            await self._gateway_error(
                scope, send, throttled, request_id, fallback=(500, throttled.message)
            )

    def _public(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
        """The scope the function gets: its `Host` the stack's public one (see the module)."""
        if self.public_host is None:
            return {**scope, "headers": headers}
        sent = next((v for k, v in headers if k.lower() == b"host"), b"").decode("latin-1")
        if self.trust_loopback_host and is_loopback(host_name(sent)):
            return {**scope, "headers": headers}
        kept = [(k, v) for k, v in headers if k.lower() != b"host"]
        kept.append((b"host", self.public_host.encode("latin-1")))
        return {**scope, "headers": kept, "scheme": self.public_scheme or scope.get("scheme")}

    async def _gateway_error(
        self,
        scope: dict[str, Any],
        send: Any,
        error: GatewayError,
        request_id: str,
        fallback: tuple[int, str] | None = None,
    ) -> None:
        """The template's gateway response for `error` (fallback: status and message when
        the template has no GatewayResponses)."""
        request_headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if self.responses is not None:
            rendered = self.responses.render(
                error.response_type,
                error.message,
                request_id=request_id,
                request_headers=request_headers,
            )
        else:
            status, message = fallback or (401, error.message)
            rendered = RenderedResponse(
                status,
                [("content-type", "application/json")],
                json.dumps({"message": message}).encode(),
            )
        await send(
            {
                "type": "http.response.start",
                "status": rendered.status,
                "headers": [
                    (k.lower().encode("latin-1"), v.encode("latin-1"))
                    for k, v in [*rendered.headers, ("x-amzn-requestid", request_id)]
                ],
            }
        )
        await send({"type": "http.response.body", "body": rendered.body})

    async def _preflight(self, scope: dict[str, Any], send: Any) -> None:
        """The template's OPTIONS mock integration: 204, the Origin echoed only if allowed."""
        origin = next((v.decode() for k, v in scope["headers"] if k.lower() == b"origin"), None)
        allowed = allowed_origin(origin, self.cors_allow_origins)
        headers = preflight_headers(allowed)
        await send(
            {
                "type": "http.response.start",
                "status": 204,
                "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _content_length(scope: dict[str, Any]) -> int | None:
    value = next((v for k, v in scope["headers"] if k.lower() == b"content-length"), None)
    return int(value) if value is not None and value.strip().isdigit() else None


def _may_pass_invoke_limit(scope: dict[str, Any], body: bytes, context_bytes: int) -> bool:
    """Whether the request's event could pass MAX_INVOKE_BYTES, so that it is worth measuring:
    a body byte escapes to at most 6 bytes of JSON, headers and query go in twice (escaped),
    the request context once, the rest is under 16 KiB."""
    head = sum(len(k) + len(v) for k, v in scope["headers"]) + len(scope.get("query_string", b""))
    return 6 * len(body) + 12 * head + 6 * context_bytes + 16 * 1024 > MAX_INVOKE_BYTES


def invocation_bytes(
    scope: dict[str, Any],
    resource: str,
    path_parameters: dict[str, str],
    context: dict[str, Any],
    body: bytes,
) -> int:
    """The size of the Lambda proxy event API Gateway makes of this request: the body as a
    JSON string in it, the headers and query twice (single and multi-valued), the path
    parameters and the request context (with the fields a deployed one carries)."""
    headers: dict[str, str] = {}
    multi_headers: dict[str, list[str]] = {}
    for key, value in scope["headers"]:
        name, text = key.decode("latin-1"), value.decode("latin-1")
        headers[name] = text
        multi_headers.setdefault(name, []).append(text)
    query: dict[str, str] = {}
    multi_query: dict[str, list[str]] = {}
    for name, text in parse_qsl((scope.get("query_string") or b"").decode("latin-1"), True):
        query[name] = text
        multi_query.setdefault(name, []).append(text)
    identity = dict.fromkeys(
        [
            *("cognitoIdentityPoolId", "accountId", "cognitoIdentityId", "caller"),
            *("principalOrgId", "accessKey", "cognitoAuthenticationType"),
            *("cognitoAuthenticationProvider", "userArn", "userAgent", "user"),
        ]
    )
    request_context = {
        "resourceId": "abc123",
        "extendedRequestId": "Bq7XkF3yIAMEbXw=",
        "requestTime": "25/Nov/2025:10:30:00 +0000",
        "path": f"/{context.get('stage', 'prod')}{scope['path']}",
        "accountId": "123456789012",
        "protocol": "HTTP/1.1",
        "domainPrefix": "abc123def4",
        "requestTimeEpoch": 1764066603012,
        "domainName": "abc123def4.execute-api.us-east-1.amazonaws.com",
        "apiId": "abc123def4",
        **context,
        "identity": {**identity, **context.get("identity", {})},
    }
    event = {
        "resource": resource,
        "path": scope["path"],
        "httpMethod": scope["method"],
        "headers": headers or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": path_parameters or None,
        "stageVariables": None,
        "requestContext": request_context,
        "body": body.decode("utf-8", "replace") if body else None,
        "isBase64Encoded": False,
    }
    return len(json.dumps(event, ensure_ascii=False).encode("utf-8", "surrogatepass"))


async def _buffered(
    receive: Any, limit: int | None = None, declared: int | None = None
) -> tuple[bytes, Any]:
    """The whole request body, and a `receive` that gives it again and then passes on the
    client's later messages (a disconnect, which a streaming function watches for). Raises
    BodyTooLarge past `limit` bytes, before reading when the declared length says so."""
    if limit is not None and declared is not None and declared > limit:
        raise BodyTooLarge(declared)
    body = await read_body(receive, limit)
    unread = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> dict[str, Any]:
        if unread:
            return unread.pop()
        message: dict[str, Any] = await receive()
        return message

    return body, replay
