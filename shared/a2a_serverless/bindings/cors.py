"""CORS headers on the functions' actual responses, for browser-based A2A clients.

API Gateway answers preflights but adds nothing to a proxy integration's response. An
`Origin` in `CORS_ALLOW_ORIGINS` is echoed in `Access-Control-Allow-Origin`, with the A2A
response headers exposed; any other origin gets no CORS header; `Vary: Origin` is always set
while CORS is on. Pure ASGI, touching only `http.response.start` (streams pass unchanged).
"""

from __future__ import annotations

from functools import lru_cache

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_serverless.settings import get_settings

# Request headers a browser may send (the preflight's Access-Control-Allow-Headers).
ALLOW_HEADERS = (
    "Content-Type",
    "Authorization",
    "X-API-Key",
    "A2A-Version",
    "A2A-Extensions",
    "X-A2A-Extensions",
)
ALLOW_METHODS = ("GET", "POST", "DELETE", "OPTIONS")
# Response headers a browser script may read beyond the CORS-safelisted ones.
EXPOSE_HEADERS = ("A2A-Version", "A2A-Extensions", "X-A2A-Extensions")
MAX_AGE_SECONDS = 600


@lru_cache(maxsize=8)
def parse_origins(raw: str) -> frozenset[str]:
    """The allowed origins of a comma-separated setting (blanks ignored; empty = CORS off)."""
    return frozenset(o.strip().rstrip("/") for o in raw.split(",") if o.strip())


def allowed_origin(origin: str | None, raw: str) -> str | None:
    """`origin` if the setting allows it, else None (an exact match: scheme, host and port)."""
    if not origin:
        return None
    return origin if origin in parse_origins(raw) else None


def preflight_headers(origin: str | None) -> list[tuple[str, str]]:
    """The headers of a preflight's answer (the local gateway's; the template's OPTIONS
    methods answer the same): the origin only if allowed (None: no Allow-Origin)."""
    allow_origin = [("Access-Control-Allow-Origin", origin)] if origin else []
    return [
        *allow_origin,
        ("Access-Control-Allow-Methods", ",".join(ALLOW_METHODS)),
        ("Access-Control-Allow-Headers", ",".join(ALLOW_HEADERS)),
        ("Access-Control-Max-Age", str(MAX_AGE_SECONDS)),
        ("Vary", "Origin"),
    ]


class CorsHeaders:
    """ASGI middleware: the CORS headers of an actual (non-preflight) response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Read per request (the settings are cached): tests and the local stack set it late.
        raw = get_settings().cors_allow_origins
        if scope["type"] != "http" or not parse_origins(raw):
            await self.app(scope, receive, send)
            return
        origin = allowed_origin(_header(scope, b"origin"), raw)

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                # A copy: the list may be the response object's own raw_headers.
                message = {**message, "headers": list(message.get("headers", []))}
                headers = MutableHeaders(scope=message)
                headers.add_vary_header("Origin")
                if origin is not None:
                    headers["Access-Control-Allow-Origin"] = origin
                    headers["Access-Control-Expose-Headers"] = ",".join(EXPOSE_HEADERS)
            await send(message)

        await self.app(scope, receive, send_with_cors)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None
