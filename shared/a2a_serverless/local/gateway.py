"""API Gateway REST emulation for the local stack: one ASGI app with the template's routes.

It matches a request to a function's app as API Gateway matches resources (literal paths win
over `{parameter}` ones), answers an unknown route as the template's GatewayResponses do, and
adds the request context a function reads (`x-amzn-request-context`), with the principal a
local client names in `x-local-principal` standing in for a Lambda authorizer's.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from a2a_serverless.bindings.cors import allowed_origin, parse_origins, preflight_headers

LOCAL_PRINCIPAL_HEADER = "x-local-principal"


class Gateway:
    """An ASGI app that routes like an API Gateway REST API and adds its request context."""

    def __init__(
        self, routes: list[tuple[str, str, Any]], stage: str = "prod", cors_allow_origins: str = ""
    ) -> None:
        self.stage = stage
        # The template's CorsAllowOrigins: set, every path answers OPTIONS here (preflight).
        self.cors_allow_origins = cors_allow_origins
        self.routes = []
        for method, path, app in routes:
            pattern = re.escape(path)
            pattern = re.sub(r"\\\{[^/}]+\\\}", "[^/]+", pattern)
            self.routes.append((method, re.compile(f"^{pattern}/?$"), path, app))
        # Literal paths win over parameterised ones, as in API Gateway.
        self.routes.sort(key=lambda r: r[2].count("{"))

    def match(self, method: str, path: str) -> tuple[Any, str] | None:
        for route_method, pattern, resource, app in self.routes:
            if route_method == method and pattern.match(path):
                return app, resource
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
        if (
            scope["method"] == "OPTIONS"
            and parse_origins(self.cors_allow_origins)
            and any(pattern.match(scope["path"]) for _, pattern, _, _ in self.routes)
        ):
            await self._preflight(scope, send)
            return
        found = self.match(scope["method"], scope["path"])
        if found is None:
            # What API Gateway answers for a route it does not have (see template GatewayResponses).
            body = json.dumps(
                {
                    "error": {
                        "code": 404,
                        "status": "NOT_FOUND",
                        "message": f"No operation at {scope['method']} {scope['path']}",
                    }
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        app, resource = found
        headers = [
            (k, v)
            for k, v in scope["headers"]
            if k.lower() not in (b"x-amzn-request-context", LOCAL_PRINCIPAL_HEADER.encode())
        ]
        principal = next(
            (
                v.decode()
                for k, v in scope["headers"]
                if k.lower() == LOCAL_PRINCIPAL_HEADER.encode()
            ),
            None,
        )
        context: dict[str, Any] = {
            "resourcePath": resource,
            "httpMethod": scope["method"],
            "requestId": str(uuid.uuid4()),
            "stage": self.stage,
            "identity": {"sourceIp": (scope.get("client") or ("127.0.0.1",))[0]},
        }
        if principal:
            # Local stand-in for a Lambda authorizer's principalId.
            context["authorizer"] = {"principalId": principal}
        headers.append((b"x-amzn-request-context", json.dumps(context).encode()))
        await app({**scope, "headers": headers}, receive, send)

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
