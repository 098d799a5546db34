"""The local stack's admin endpoints under `/_local/` (dev process only, never deployed).

- ApiKey: `POST|GET /_local/keys`, `DELETE /_local/keys/{keyId}`.
- Jwt: `POST /_local/tokens`; the local issuer's discovery document and JWKS under `/_local/oidc/`.
- Iam: `POST /_local/iam/users`. Any mode: `POST /_local/invoke` (what `invoke --url` calls),
  and the inspector's pages under `/_local/inspector` (local/inspector/app.py).
Another mode's endpoint or an unknown path is a 404. Credential and invoke endpoints bypass
the API's authentication, so they answer only loopback requests (POST: JSON body only); else 403.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from a2a_serverless.local.authorizers import LocalUsagePlan
from a2a_serverless.local.issuer import ISSUER_PATH, LocalIssuer
from a2a_serverless.local.sigv4 import IamUsers

if TYPE_CHECKING:  # local.resources reads templates (PyYAML): `invoke --url` does without
    from a2a_serverless.local.resources import FunctionSpec, Handler

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
INVOKE_PATH = "/_local/invoke"
INSPECTOR_PATH = "/_local/inspector"
# An event may be as large as Lambda's synchronous invoke payload.
MAX_EVENT_BYTES = 6 * 1024 * 1024
# Headers a proxy adds: a request relayed from elsewhere (a tunnel to this port) is not local.
_FORWARDING_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-real-ip")


class FunctionHost(Protocol):
    """The stack whose functions `/_local/invoke` runs (local/stack.py's LocalStack)."""

    functions: dict[str, FunctionSpec]

    def handler_for(self, logical_id: str) -> Handler: ...

    def app_for(self, logical_id: str) -> Any: ...


class AdminError(Exception):
    """A refused admin request: its HTTP status and error body (`code` the status name)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"code": status, "status": code, "message": message}}


def _not_found(method: str, path: str) -> AdminError:
    return AdminError(404, "NOT_FOUND", f"No local admin operation at {method} {path}")


class LocalAdmin:
    """ASGI app of the `/_local/` endpoints for the stack's Auth mode."""

    def __init__(
        self,
        auth_mode: str,
        *,
        usage_plan: LocalUsagePlan | None = None,
        key_admin: Callable[[], Any] | None = None,
        issuer: LocalIssuer | None = None,
        iam_users: IamUsers | None = None,
        functions: FunctionHost | None = None,
        inspector: Callable[[], Any] | None = None,
    ) -> None:
        self.auth_mode = auth_mode
        self.functions = functions
        # The inspector's ASGI app (local/inspector/app.py), made by its first request.
        self._inspector_factory = inspector
        self._inspector: Any = None
        self.usage_plan = usage_plan
        # auth.ApiKeyAdmin over the stack's table, made on first use (the table's
        # client must be made after the stack has set its environment).
        self._key_admin_factory = key_admin
        self._key_admin: Any = None
        self.issuer = issuer
        self.iam_users = iam_users

    def key_admin(self) -> Any:
        if self._key_admin is None:
            if self._key_admin_factory is None:
                raise _not_found("", "/_local/keys")
            self._key_admin = self._key_admin_factory()
        return self._key_admin

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        if self._inspector_factory is not None and (
            path == INSPECTOR_PATH or path.startswith(INSPECTOR_PATH + "/")
        ):
            try:
                _check_local(scope, json_body=False)
            except AdminError as error:
                await _send_json(send, error.status, error.body)
                return
            if self._inspector is None:
                self._inspector = self._inspector_factory()
            await self._inspector(scope, receive, send)
            return
        try:
            if path == INVOKE_PATH and self.functions is not None:
                if method != "POST":
                    raise _not_found(method, path)
                _check_local(scope)
                body = await _read_json(receive, MAX_EVENT_BYTES)
                status, payload = await self._invoke(body)
            else:
                body = await _read_json(receive) if method in ("POST", "PUT") else {}
                status, payload = await self.dispatch(method, path, body, scope)
        except AdminError as error:
            status, payload = error.status, error.body
        except ValueError as error:  # what the key/token/user makers refuse
            status, payload = 400, AdminError(400, "INVALID_ARGUMENT", str(error)).body
        await _send_json(send, status, payload)

    async def dispatch(
        self, method: str, path: str, body: dict[str, Any], scope: dict[str, Any] | None = None
    ) -> tuple[int, Any]:
        """One admin request; `scope` (the ASGI scope) is checked to be local before any
        credential is made, listed or revoked (None: the caller has checked it)."""

        def local_only() -> None:
            if scope is not None:
                _check_local(scope, json_body=method in ("POST", "PUT"))

        if path == "/_local/keys" or path.startswith("/_local/keys/"):
            if self.auth_mode != "ApiKey" or self.usage_plan is None:
                raise _not_found(method, path)
            local_only()
            return await self._keys(method, path, body)
        if path == "/_local/tokens":
            if self.issuer is None:
                raise _not_found(method, path)
            if method != "POST":
                raise _not_found(method, path)
            local_only()
            return 200, {"token": self._token(body)}
        if path.startswith(ISSUER_PATH + "/") and self.issuer is not None and method == "GET":
            if path == f"{ISSUER_PATH}/.well-known/openid-configuration":
                return 200, self.issuer.discovery()
            if path == f"{ISSUER_PATH}/jwks.json":
                return 200, self.issuer.jwks()
        if path == "/_local/iam/users" and method == "POST" and self.iam_users is not None:
            local_only()
            user = body.get("user")
            if not isinstance(user, str):
                raise AdminError(400, "INVALID_ARGUMENT", "user must be a string")
            made = self.iam_users.create(user)
            return 201, {
                "accessKeyId": made.access_key_id,
                "secretAccessKey": made.secret_access_key,
                "arn": made.arn,
            }
        raise _not_found(method, path)

    async def _invoke(self, body: dict[str, Any]) -> tuple[int, Any]:
        assert self.functions is not None
        function, event = body.get("function"), body.get("event")
        if not isinstance(function, str) or not isinstance(event, dict):
            raise AdminError(
                400, "INVALID_ARGUMENT", "function must be a string and event an object"
            )
        if function not in self.functions.functions:
            known = ", ".join(sorted(self.functions.functions))
            raise AdminError(
                404, "NOT_FOUND", f"no function {function!r} in the stack (it has: {known})"
            )
        handled, result = await run_function(self.functions, function, event)
        return 200, {"handled": handled, "result": result}

    async def _keys(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        # ApiKeyAdmin calls DynamoDB (moto, in this process): off the event loop.
        admin = self.key_admin()
        if path == "/_local/keys" and method == "POST":
            principal = body.get("principal")
            description = body.get("description", "")
            if not isinstance(principal, str) or not isinstance(description, str):
                raise AdminError(
                    400, "INVALID_ARGUMENT", "principal (and description) must be strings"
                )
            issued = await asyncio.to_thread(admin.create, principal, description)
            return 201, {
                "keyId": issued.key_id,
                "apiKey": issued.api_key,
                "principal": issued.principal,
            }
        if path == "/_local/keys" and method == "GET":
            records = await asyncio.to_thread(admin.list)
            return 200, {"keys": [self._key_view(r) for r in records]}
        if method == "DELETE" and path.count("/") == 3:
            key_id = path.rsplit("/", 1)[1]
            if not await asyncio.to_thread(admin.revoke, key_id):
                raise AdminError(404, "NOT_FOUND", f"No API key {key_id}")
            return 204, None
        raise _not_found(method, path)

    def _key_view(self, record: Any) -> dict[str, Any]:
        view = {
            "keyId": record.key_id,
            "principal": record.principal,
            "createdAt": record.created_at,
            "revoked": bool(record.revoked_at),
        }
        if self.usage_plan is not None and record.usage_key_id:
            # Not in the contract's list: what the key used (the usage plan's counter).
            view["requests"] = self.usage_plan.requests(record.usage_key_id)
        return view

    def _token(self, body: dict[str, Any]) -> str:
        assert self.issuer is not None
        sub = body.get("sub")
        scopes = body.get("scopes") or []
        expires_in = body.get("expiresIn", 3600)
        claims = body.get("claims") or {}
        if not isinstance(sub, str):
            raise AdminError(400, "INVALID_ARGUMENT", "sub must be a string")
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise AdminError(400, "INVALID_ARGUMENT", "scopes must be a list of strings")
        if not isinstance(claims, dict):
            raise AdminError(400, "INVALID_ARGUMENT", "claims must be an object")
        if isinstance(expires_in, bool) or not isinstance(expires_in, int):
            raise AdminError(400, "INVALID_ARGUMENT", "expiresIn must be an integer")
        return self.issuer.token(sub, scopes, expires_in, claims)


async def _send_json(send: Any, status: int, payload: Any) -> None:
    body = b"" if payload is None else json.dumps(payload, default=str).encode()
    headers = [(b"cache-control", b"no-store")]
    if payload is not None:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def is_loopback(host: str | None) -> bool:
    """Whether `host` (a name or an address) is this machine's loopback."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def host_name(host: str) -> str:
    """The name of a Host header's value, without its port ("[::1]:8000" -> "::1")."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _check_local(scope: dict[str, Any], json_body: bool = True) -> None:
    """403 unless the request is this machine's, over loopback (and, with `json_body`, sent
    with a JSON body)."""
    headers = dict(scope.get("headers") or [])
    checks = [
        is_loopback((scope.get("client") or (None,))[0]),
        is_loopback((scope.get("server") or (None,))[0]),
        is_loopback(host_name(headers.get(b"host", b"").decode("latin-1"))),
        not any(name in headers for name in _FORWARDING_HEADERS),
        not json_body
        or headers.get(b"content-type", b"").split(b";")[0].strip() == b"application/json",
    ]
    if not all(checks):
        path = scope.get("path") or INVOKE_PATH
        what = "a JSON request" if json_body else "a request"
        raise AdminError(
            403,
            "PERMISSION_DENIED",
            f"{path} answers only {what} from this machine to a loopback address of the stack "
            "(e.g. http://127.0.0.1:PORT, whatever --host the stack listens on)",
        )


async def run_function(
    host: FunctionHost, logical_id: str, event: dict[str, Any]
) -> tuple[bool, Any]:
    """(handled, response or Lambda's error object) of one function of `host` on `event`: a
    Web Adapter function through its app on this event loop, a handler in a worker thread."""
    from a2a_serverless.local.resources import STACK, LambdaContext

    try:
        if host.functions[logical_id].is_web_adapter:
            return True, await web_adapter(host.app_for(logical_id), event)
        handler = host.handler_for(logical_id)
        context = LambdaContext(f"{STACK}-{logical_id}")
        return True, await asyncio.to_thread(_in_own_loop, handler, event, context)
    except Exception as exc:  # reported as the Lambda runtime reports an unhandled error
        logger.exception("%s raised", logical_id)
        return False, {"errorType": type(exc).__name__, "errorMessage": str(exc)}


def _in_own_loop(handler: Handler, event: dict[str, Any], context: Any) -> Any:
    """`handler` called in a worker thread with an event loop of its own, as Lambda's main
    thread has one (Mangum runs the app on the thread's current loop)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return handler(event, context)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def web_adapter(app: Any, event: dict[str, Any]) -> dict[str, Any]:
    """What the Lambda Web Adapter does with a REST proxy event, and the proxy result it
    makes of the app's answer."""
    import httpx

    if "httpMethod" not in event or "requestContext" not in event:
        raise ValueError("a Web Adapter function takes an API Gateway (REST) proxy event")
    headers: dict[str, str] = {k: v[-1] for k, v in (event.get("multiValueHeaders") or {}).items()}
    headers.update(event.get("headers") or {})
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    query = event.get("multiValueQueryStringParameters") or {
        k: [v] for k, v in (event.get("queryStringParameters") or {}).items()
    }
    params = [(k, v) for k, values in query.items() for v in values]
    body = event.get("body") or ""
    content = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        response = await c.request(
            event["httpMethod"],
            event["path"],
            params=params,
            headers=headers,
            content=content,
            timeout=900,  # the functions' Lambda timeout
        )
    multi: dict[str, list[str]] = {}
    for name, value in response.headers.multi_items():
        multi.setdefault(name, []).append(value)
    try:
        text, encoded = response.content.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(response.content).decode("ascii"), True
    return {
        "statusCode": response.status_code,
        "headers": {name: values[-1] for name, values in multi.items()},
        "multiValueHeaders": multi,
        "body": text,
        "isBase64Encoded": encoded,
    }


class BodyTooLarge(Exception):
    """A request body over the limit it was read with."""


async def read_body(receive: Any, limit: int | None = None) -> bytes:
    """An ASGI request's whole body; BodyTooLarge past `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise BodyTooLarge(size)
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _read_json(receive: Any, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    try:
        raw = await read_body(receive, limit)
    except BodyTooLarge:
        raise AdminError(413, "INVALID_ARGUMENT", "request body too large") from None
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise AdminError(400, "INVALID_ARGUMENT", "the body is not JSON") from exc
    if not isinstance(parsed, dict):
        raise AdminError(400, "INVALID_ARGUMENT", "the body must be a JSON object")
    return parsed
