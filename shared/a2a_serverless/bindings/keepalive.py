"""Blocking sends under API Gateway's idle limit: whitespace before the JSON while waiting.

Once a blocking send has waited `BLOCKING_KEEPALIVE_SECONDS`, the response starts (200, the
binding's media type, no Content-Length) and a newline is written every interval until the
JSON body follows (JSON allows leading whitespace). An answer ready sooner is the plain
response. Both bindings' sends use `send_response`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from a2a_serverless.settings import get_settings

if TYPE_CHECKING:  # types only: the binding that calls this has imported them already
    from a2a_serverless.core.send import Accepted
    from a2a_serverless.core.service import A2AService
    from a2a_serverless.models import SendMessageResponse

KEEPALIVE = b"\n"

Render = Callable[["SendMessageResponse"], Response]
OnError = Callable[[Exception], Response]


class KeepAliveResponse(Response):
    """The response `answer()` produces (its whole body in `.body`), with keep-alive whitespace
    while it is awaited. A failure becomes `on_error(exc)`: its status before the first
    keep-alive; after it the status stays 200 and the body is the binding's error shape.
    A client that hangs up cancels `answer`."""

    def __init__(
        self,
        answer: Callable[[], Awaitable[Response]],
        on_error: OnError,
        *,
        media_type: str,
        interval: float,
    ) -> None:
        self.answer = answer
        self.on_error = on_error
        self.interval = interval
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        # Reverse proxies (nginx and the like) must not hold the keep-alive bytes back.
        self.init_headers({"X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answering = asyncio.ensure_future(self.answer())
        hung_up = asyncio.ensure_future(_disconnected(receive))
        started = False
        try:
            while True:
                done, _ = await asyncio.wait(
                    {answering, hung_up}, timeout=self.interval, return_when="FIRST_COMPLETED"
                )
                if hung_up in done:
                    return  # nobody to answer: `finally` stops the wait
                if answering in done:
                    break
                if not started:
                    await send(
                        {
                            "type": "http.response.start",
                            "status": self.status_code,
                            "headers": self.raw_headers,
                        }
                    )
                    started = True
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
            try:
                response = answering.result()
            except Exception as exc:
                response = self.on_error(exc)
            if started:
                await send({"type": "http.response.body", "body": response.body})
            else:
                # Headers set on this response (e.g. A2A-Extensions) go with the answer too.
                for name, value in self.headers.items():
                    if name not in _OWN_HEADERS and name not in response.headers:
                        response.headers[name] = value
                await response(scope, receive, send)
        finally:
            for task in (answering, hung_up):
                task.cancel()
            # A read in flight finishes in its thread; nothing is polled after it.
            await asyncio.gather(answering, hung_up, return_exceptions=True)


# Headers a KeepAliveResponse sets for itself, not for the answer it may send instead.
_OWN_HEADERS = frozenset({"content-type", "content-length", "x-accel-buffering"})


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (the request body has already been read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def send_response(
    service: A2AService,
    accepted: Accepted,
    render: Render,
    on_error: OnError,
    *,
    media_type: str,
) -> Response:
    """The response to an accepted SendMessage: the answer at once when the client did not
    ask to wait, else a KeepAliveResponse around the wait (core's SettleWait, awaited here
    between reads) and the answer after it."""
    if not accepted.blocking:
        try:
            return render(await run_in_threadpool(service.sender.answer, accepted))
        except Exception as exc:
            return on_error(exc)

    async def wait_then_answer() -> Response:
        await wait_settled(service, accepted)
        return render(await run_in_threadpool(service.sender.answer, accepted))

    return KeepAliveResponse(
        wait_then_answer,
        on_error,
        media_type=media_type,
        interval=get_settings().blocking_keepalive_seconds,
    )


async def wait_settled(service: A2AService, accepted: Accepted) -> None:
    """Core's SettleWait, one read per thread hop and asyncio sleeps between them, so a
    cancelled caller (a client gone) stops the reads."""
    if not accepted.blocking:
        return
    wait = service.sender.settle(accepted)
    while not await run_in_threadpool(wait.step):
        await asyncio.sleep(wait.pause())
