"""Long-lived responses hold their connection's leases (core/connections.py) until they end:
streamed to the end, timed out, failed, or cut short by the client going away."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from a2a_serverless.core.connections import Connection


async def release(connection: Connection) -> None:
    """Release in a worker thread; a cancelled caller (a client gone) stops waiting, the
    release still completes in its thread."""
    if connection.leases:
        await asyncio.shield(run_in_threadpool(connection.release))


class Holding(Response):
    """`response`, sent as it is, with `connection` released once it is over (whatever way).

    Wrap the final response (headers set afterwards on this wrapper are not sent)."""

    def __init__(self, response: Response, connection: Connection) -> None:
        self.response = response
        self.connection = connection
        self.status_code = response.status_code
        self.background = None
        self.raw_headers = response.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            await release(self.connection)


def holding(response: Response, connection: Connection) -> Response:
    """`response` holding `connection` until it ends (as it is when nothing is held)."""
    return Holding(response, connection) if connection.leases else response


async def held(connection: Connection, respond: Callable[[], Awaitable[Response]]) -> Response:
    """The response `respond()` makes, holding `connection` until it ends; released at once
    when making it fails."""
    try:
        response = await respond()
    except BaseException:
        await release(connection)
        raise
    return holding(response, connection)
