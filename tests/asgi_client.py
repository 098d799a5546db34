"""A synchronous HTTP client for an ASGI app run in-process, on httpx's ASGITransport (the
transport the integration tests use; Starlette's TestClient now asks for httpx2)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx


class AsgiClient:
    def __init__(self, app: Any, base_url: str = "http://testserver") -> None:
        self.app, self.base_url = app, base_url

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """The whole response (an SSE stream read to its end)."""

        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url=self.base_url) as client:
                return await client.request(method, url, **kwargs)

        return asyncio.run(call())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)
