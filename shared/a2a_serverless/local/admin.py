"""The local stack's admin endpoints under `/_local/` (dev process only, never deployed).

What a developer needs to get a credential for the mode the stack runs in (`scripts/auth`
calls these):
- ApiKey: `POST /_local/keys {"principal", "description"?}` -> 201 `{"keyId", "apiKey",
  "principal"}`; `GET /_local/keys` -> `{"keys": [...]}`; `DELETE /_local/keys/{keyId}` -> 204.
  Keys go through core.auth's ApiKeyAdmin into the stack's table (the authorizer reads them
  there) and into the local usage plan the gateway checks.
- Jwt with the local issuer: `POST /_local/tokens {"sub", "scopes"?, "expiresIn"?,
  "claims"?}` -> `{"token"}`; `GET /_local/oidc/.well-known/openid-configuration` and
  `GET /_local/oidc/jwks.json`.
- Iam: `POST /_local/iam/users {"user"}` -> `{"accessKeyId", "secretAccessKey", "arn"}`.
An endpoint of another mode answers 404, as does any unknown path.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from a2a_serverless.local.authorizers import LocalUsagePlan
from a2a_serverless.local.issuer import ISSUER_PATH, LocalIssuer
from a2a_serverless.local.sigv4 import IamUsers

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024


class AdminError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


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
    ) -> None:
        self.auth_mode = auth_mode
        self.usage_plan = usage_plan
        # core.auth.ApiKeyAdmin over the stack's table, made on first use (the table's
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
        try:
            body = await _read_json(receive) if method in ("POST", "PUT") else {}
            status, payload = await self.dispatch(method, path, body)
        except AdminError as error:
            status = error.status
            payload = {
                "error": {"code": error.status, "status": error.code, "message": error.message}
            }
        except ValueError as error:  # what the key/token/user makers refuse
            status = 400
            payload = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": str(error)}}
        body_bytes = b"" if payload is None else json.dumps(payload).encode()
        headers = [(b"cache-control", b"no-store")]
        if payload is not None:
            headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body_bytes})

    async def dispatch(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/_local/keys" or path.startswith("/_local/keys/"):
            if self.auth_mode != "ApiKey" or self.usage_plan is None:
                raise _not_found(method, path)
            return await self._keys(method, path, body)
        if path == "/_local/tokens":
            if self.issuer is None:
                raise _not_found(method, path)
            if method != "POST":
                raise _not_found(method, path)
            return 200, {"token": self._token(body)}
        if path.startswith(ISSUER_PATH + "/") and self.issuer is not None and method == "GET":
            if path == f"{ISSUER_PATH}/.well-known/openid-configuration":
                return 200, self.issuer.discovery()
            if path == f"{ISSUER_PATH}/jwks.json":
                return 200, self.issuer.jwks()
        if path == "/_local/iam/users" and method == "POST" and self.iam_users is not None:
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


async def _read_json(receive: Any) -> dict[str, Any]:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise AdminError(413, "INVALID_ARGUMENT", "request body too large")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise AdminError(400, "INVALID_ARGUMENT", "the body is not JSON") from exc
    if not isinstance(parsed, dict):
        raise AdminError(400, "INVALID_ARGUMENT", "the body must be a JSON object")
    return parsed
