"""The Web Adapter functions' HTTP server: serves `functions/<name>/app.py`'s ASGI app to the
Lambda Web Adapter over its loopback connection (run.sh:
`python -m a2a_serverless.handlers.loopback_server app:app`).

Why not uvicorn: its import (its CLI with click, its config with logging.config,
multiprocessing and supervisors) was ~20-30 ms of every cold start's CPU for features this
process never uses. The peer is a single well-behaved HTTP/1.1 client (the adapter, on
127.0.0.1), so this is h11 (the protocol: parsing, framing, keep-alive) driven by asyncio:

- HTTP/1.1 keep-alive, request bodies with Content-Length or chunked, `Expect: 100-continue`
  answered when the app first reads the body.
- ASGI 3 `http` scope, spec 2.3: after the body, `receive()` waits for the peer to hang up
  (`http.disconnect`), which ends Starlette's StreamingResponse (it listens for it under 2.3;
  under 2.4 it would only notice at its next write) and the blocking send's keep-alive wait.
- Each body chunk is written when the app sends it (SSE events reach the adapter at once);
  responses without Content-Length go chunked (h11 frames them).
- An app exception before the response starts: 500 (logged, nothing of it to the peer); after
  it: the connection is closed, the only way left to tell the peer the response is broken.
- No lifespan: the apps need none (Mangum runs them with lifespan="off" too).
- No idle timeout on kept-alive connections: the adapter pools them across invocations, and
  a server closing an idle one races the adapter reusing it after a freeze/thaw (a failed
  invocation); the adapter closes what it no longer wants.
- Logging: nothing is configured here. Errors go to `a2a_serverless.handlers.loopback_server`,
  a child of the package logger the function's Powertools Logger writes through (JSON lines,
  observability.function_logger); before the app is imported, Python's last-resort handler
  writes warnings and errors to stderr. No access log (the app logs each request itself).
- SIGTERM (and SIGINT): stop listening, cancel the connections' work, exit 0.

Imports nothing beyond the standard library and h11 before the app (the module `app`, imported
by that name: functions/__init__.py recognises a function's init by it).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import sys
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import h11

logger = logging.getLogger("a2a_serverless.handlers.loopback_server")

# Request heads carry API Gateway's request context and Lambda's context as JSON headers
# (x-amzn-request-context, x-amzn-lambda-context): more room than h11's 16 KiB default.
MAX_HEAD_BYTES = 256 * 1024
READ_SIZE = 64 * 1024
# Request bytes buffered ahead of the app (a body it has not read yet): reading stops there.
MAX_BUFFERED = 256 * 1024
# A body the app left unread is read and dropped (to keep the connection) up to this much.
MAX_DRAIN = 1024 * 1024

_DISCONNECT = {"type": "http.disconnect"}


class _Abort(Exception):
    """The connection cannot go on (a broken response, a peer that left): close it."""


class _Connection:
    """One client connection: its request/response cycles, one at a time (no pipelining
    beyond buffering what arrives early)."""

    def __init__(
        self, app: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.app = app
        self.reader = reader
        self.writer = writer
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.peer_gone = asyncio.Event()  # EOF or reset from the peer
        self.arrived = asyncio.Event()  # new bytes for h11 (or EOF)
        self.room = asyncio.Event()  # the reader may read more
        self.room.set()
        sockname = writer.get_extra_info("sockname")
        peername = writer.get_extra_info("peername")
        self.server = tuple(sockname[:2]) if isinstance(sockname, tuple) else None
        self.client = tuple(peername[:2]) if isinstance(peername, tuple) else None

    # -- reading: one task owns the socket's read side for the connection's life ------------

    async def read_loop(self) -> None:
        try:
            while True:
                await self.room.wait()
                try:
                    data = await self.reader.read(READ_SIZE)
                except OSError:  # reset by the peer
                    data = b""
                if self.conn.their_state is not h11.ERROR:
                    self.conn.receive_data(data)  # b"": end of stream
                if not data:
                    self.peer_gone.set()
                    return
                if len(self.conn.trailing_data[0]) >= MAX_BUFFERED:
                    self.room.clear()
                self.arrived.set()
        finally:
            self.peer_gone.set()
            self.arrived.set()

    async def next_event(self) -> Any:
        """h11's next event, waiting for bytes as it needs them."""
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.peer_gone.is_set():
                # The reader fed h11 the EOF unless h11 was in error: nothing more will come.
                raise _Abort
            self.arrived.clear()
            self.room.set()
            await self.arrived.wait()

    # -- writing ---------------------------------------------------------------------------

    async def write(self, event: Any) -> None:
        """Send `event` now (each body chunk as the app sends it: SSE events are not held)."""
        data = self.conn.send(event)
        if data and not self.writer.is_closing():
            self.writer.write(data)
            try:
                await self.writer.drain()
            except OSError:  # the peer left; the reader sees it too
                self.peer_gone.set()

    # -- the connection --------------------------------------------------------------------

    async def serve(self) -> None:
        reader = asyncio.ensure_future(self.read_loop())
        try:
            while True:
                try:
                    event = await self.next_event()
                except h11.RemoteProtocolError as exc:
                    await self.refuse(exc)
                    return
                if not isinstance(event, h11.Request):
                    return  # ConnectionClosed: the peer is done
                # Its own task: a copy of this connection's (clean) context, so context
                # variables one request sets never reach the next one on this connection.
                keep_alive = await asyncio.ensure_future(self.cycle(event))
                if not keep_alive or self.conn.our_state is not h11.DONE:
                    return
                if self.conn.their_state is not h11.DONE:
                    return
                self.conn.start_next_cycle()
        except _Abort:
            return
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            self.writer.close()

    async def refuse(self, exc: h11.RemoteProtocolError) -> None:
        """A request h11 cannot parse: 400 (when a response can still start), then close."""
        logger.warning("invalid HTTP request: %s", exc)
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = b"Invalid HTTP request\n"
        try:
            await self.write(
                h11.Response(
                    status_code=exc.error_status_hint,
                    headers=[
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                    ],
                    reason=_reason(exc.error_status_hint),
                )
            )
            await self.write(h11.Data(data=body))
            await self.write(h11.EndOfMessage())
        except h11.LocalProtocolError:
            pass

    async def cycle(self, request: h11.Request) -> bool:
        """One request: the app's response to it. True when the connection can serve the
        next request."""
        cycle = _Cycle(self, request)
        try:
            await self.app(cycle.scope, cycle.receive, cycle.send)
        except Exception:
            logger.exception("the ASGI app raised an exception")
            if cycle.started:
                return False  # a response half sent: closing is all that tells the peer
            await cycle.internal_error()
        else:
            if not cycle.started:
                logger.error("the ASGI app returned without starting a response")
                await cycle.internal_error()
            elif not cycle.complete:
                if not self.peer_gone.is_set():  # else it stopped because the peer left
                    logger.error("the ASGI app returned without completing its response")
                return False
        finally:
            cycle.finished.set()  # a receive() still waiting answers http.disconnect
        return await self.drain_request()

    async def drain_request(self) -> bool:
        """Read and drop what is left of the request body, so the connection can serve the
        next request. False when it cannot (too much, a client waiting for 100 Continue)."""
        if self.peer_gone.is_set() and self.conn.their_state is not h11.DONE:
            return False
        if self.conn.they_are_waiting_for_100_continue:
            return False  # it may never send the body it was not asked for
        dropped = 0
        while self.conn.their_state is h11.SEND_BODY:
            try:
                event = await self.next_event()
            except h11.RemoteProtocolError:
                return False
            if isinstance(event, h11.Data):
                dropped += len(event.data)
                if dropped > MAX_DRAIN:
                    return False
        return self.conn.their_state is h11.DONE


class _Cycle:
    """The ASGI side of one request: its scope, `receive` and `send`."""

    def __init__(self, connection: _Connection, request: h11.Request) -> None:
        self.connection = connection
        self.conn = connection.conn
        self.head = request.method == b"HEAD"
        self.started = False
        self.complete = False
        self.body_done = False
        self.finished = asyncio.Event()  # the app returned
        raw_path, _, query_string = request.target.partition(b"?")
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode("ascii"),
            "server": connection.server,
            "client": connection.client,
            "scheme": "http",
            "method": request.method.decode("ascii"),
            "root_path": "",
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query_string,
            # h11 lower-cases header names.
            "headers": [(name, value) for name, value in request.headers],
        }

    async def receive(self) -> dict[str, Any]:
        connection = self.connection
        if not self.body_done and not self.finished.is_set():
            if self.conn.they_are_waiting_for_100_continue and not self.started:
                await connection.write(
                    h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
                )
            try:
                return await self.read_body()
            except (_Abort, h11.RemoteProtocolError):
                self.body_done = True  # the peer left (or broke the framing) mid-body
                return _DISCONNECT
        # The body has been read: the next thing to tell the app is that the peer left.
        if not (connection.peer_gone.is_set() or self.finished.is_set()):
            gone = asyncio.ensure_future(connection.peer_gone.wait())
            finished = asyncio.ensure_future(self.finished.wait())
            try:
                await asyncio.wait({gone, finished}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                gone.cancel()
                finished.cancel()
        return _DISCONNECT

    async def read_body(self) -> dict[str, Any]:
        """The body bytes h11 has (at least one chunk, or the end), as one message."""
        chunks: list[bytes] = []
        while True:
            event = self.conn.next_event() if chunks else await self.connection.next_event()
            if event is h11.NEED_DATA:
                break  # what has arrived so far, more to come
            if isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
                continue
            if isinstance(event, h11.EndOfMessage):
                self.body_done = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            raise _Abort  # ConnectionClosed before the body ended
        return {"type": "http.request", "body": b"".join(chunks), "more_body": True}

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        connection = self.connection
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"expected http.response.start, got {kind!r}")
            self.started = True
            status = int(message["status"])
            headers = list(message.get("headers") or ())
            await connection.write(
                h11.Response(status_code=status, headers=headers, reason=_reason(status))
            )
            return
        if kind != "http.response.body":
            raise RuntimeError(f"expected http.response.body, got {kind!r}")
        if self.complete:
            raise RuntimeError("the response is complete")
        # A peer that has left: `write` drops what cannot be written (ASGI 2.3: no error to
        # the app, which hears of it from receive()). One that only half-closed still reads.
        body = message.get("body", b"")
        if body and not self.head:  # HEAD: headers only, whatever the app sends
            await connection.write(h11.Data(data=body))
        if not message.get("more_body", False):
            await connection.write(h11.EndOfMessage())
            self.complete = True

    async def internal_error(self) -> None:
        """500, nothing of the cause in it."""
        self.started = True
        body = b"Internal Server Error"
        await self.connection.write(
            h11.Response(
                status_code=500,
                headers=[
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
                reason=_reason(500),
            )
        )
        if not self.head:
            await self.connection.write(h11.Data(data=body))
        await self.connection.write(h11.EndOfMessage())
        self.complete = True


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


def load_app(spec: str) -> Any:
    """`module:attribute` (e.g. `app:app`), the module imported by its own name from the
    current directory (Lambda's task root), as the runtime and uvicorn import it."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"loopback_server: expected MODULE:ATTRIBUTE, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    app: Any = importlib.import_module(module_name)
    for name in attribute.split("."):
        app = getattr(app, name)
    return app


async def serve(app: Any, host: str, port: int) -> None:
    """Serve `app` until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    connections: set[asyncio.Task[Any]] = set()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await _Connection(app, reader, writer).serve()
        except Exception:
            logger.exception("connection failed")
            writer.close()
        finally:
            connections.discard(task)

    server = await asyncio.start_server(accept, host, port)
    try:
        await stop.wait()
    finally:
        server.close()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    """`loopback_server [--host HOST] [--port PORT] MODULE:ATTRIBUTE` (port default: $PORT,
    else 8080). Parsed by hand: argparse would be one more import on every cold start."""
    args = list(sys.argv[1:] if argv is None else argv)
    host, port, spec = "127.0.0.1", os.environ.get("PORT") or "8080", None
    usage = "usage: loopback_server [--host HOST] [--port PORT] MODULE:ATTRIBUTE"
    while args:
        arg = args.pop(0)
        if arg in ("--host", "--port") and args:
            value = args.pop(0)
            if arg == "--host":
                host = value
            else:
                port = value
        elif arg.startswith(("--host=", "--port=")):
            name, _, value = arg.partition("=")
            if name == "--host":
                host = value
            else:
                port = value
        elif not arg.startswith("-") and spec is None:
            spec = arg
        else:
            print(usage, file=sys.stderr)
            return 2
    if spec is None or not port.isdigit():
        print(usage, file=sys.stderr)
        return 2
    app = load_app(spec)
    asyncio.run(serve(app, host, int(port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
