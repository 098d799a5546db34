"""A recording HTTP forwarder for the e2e tests: every request it gets goes on to `upstream`
(the response streamed back as it comes, event streams included), and every POST under
/delegations/ is kept with its headers and body, to be replayed later.

Served by uvicorn in a thread of the test process (`forwarding`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

# Hop-by-hop headers, and the ones the forwarding client sets itself.
_NOT_FORWARDED = frozenset({"host", "content-length", "connection", "transfer-encoding"})
_NOT_RETURNED = frozenset({"connection", "transfer-encoding", "keep-alive"})
RECORDED_PREFIX = "/delegations/"


@dataclass(frozen=True)
class Recorded:
    """One request the forwarder kept: its path, headers (lower-case names) and body."""

    path: str
    headers: dict[str, str]
    body: bytes


class Forwarder:
    """An ASGI app forwarding to `upstream` (set before the first request)."""

    def __init__(self) -> None:
        self.upstream = ""
        self.recorded: list[Recorded] = []
        self._client: httpx.AsyncClient | None = None

    def recorded_for(self, task_id: str) -> list[Recorded]:
        """The notifications kept for the local task `task_id`, in arrival order."""
        prefix = f"{RECORDED_PREFIX}{task_id}/"
        return [r for r in list(self.recorded) if r.path.startswith(prefix)]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            body.extend(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in _NOT_FORWARDED
        ]
        path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope["method"] == "POST" and scope["path"].startswith(RECORDED_PREFIX):
            self.recorded.append(
                Recorded(scope["path"], {k.lower(): v for k, v in headers}, bytes(body))
            )
        query = scope.get("query_string", b"").decode("latin-1")
        url = self.upstream + path + (f"?{query}" if query else "")
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=None))
        request = self._client.build_request(
            scope["method"], url, headers=headers, content=bytes(body)
        )
        response = await self._client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (k.encode("latin-1"), v.encode("latin-1"))
                        for k, v in response.headers.multi_items()
                        if k.lower() not in _NOT_RETURNED
                    ],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except OSError:  # the client hung up: so does the forwarder
            pass
        finally:
            await response.aclose()


@contextlib.contextmanager
def forwarding(port: int) -> Iterator[Forwarder]:
    """A Forwarder served on 127.0.0.1:`port` until the block ends."""
    import uvicorn

    forwarder = Forwarder()
    config = uvicorn.Config(
        forwarder,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http="h11",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="forwarder", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the forwarder did not start")
        time.sleep(0.02)
    try:
        yield forwarder
    finally:
        server.should_exit = True
        thread.join(timeout=10)
