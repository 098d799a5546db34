"""E2E fixtures: one real `scripts/dev` process for the whole session, and HTTP clients whose
every response body is strictly checked with `tests.wire.check_response` (JSON bodies) or
`tests.wire.check_sse_frames` (`text/event-stream` bodies).

The server is started exactly as a user starts it (`scripts/dev --port N`) and stopped with
SIGINT (Ctrl-C) at the end of the session; a non-zero exit or a hang fails the session.
Modules that need other settings start their own server with `dev_server_running(...)`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client

from tests import wire
from tests.conftest import hand_over
from tests.e2e.coverage import (
    CARD_PATH,
    CHECK_FAILURES,
    SEEN,
    Seen,
    operation,
    session_record,
)
from tests.ports import listen_port

# Names the e2e modules import from here.
__all__ = ["CARD_PATH", "CHECK_FAILURES", "SEEN", "Seen", "operation"]

ROOT = Path(__file__).resolve().parents[2]
DEV_SCRIPT = ROOT / "scripts" / "dev"
STARTUP_TIMEOUT_SECONDS = 60.0
SHUTDOWN_TIMEOUT_SECONDS = 10.0
LOCAL_PRINCIPAL_HEADER = "X-Local-Principal"


def rpc_request_of(request: httpx.Request) -> wire.RpcRequest | None:
    """The JSON-RPC request an httpx request carried to `POST /`, or None for other routes."""
    if not wire.is_jsonrpc_call(request.method, request.url.path):
        return None
    query = next(
        (v for k, v in request.url.params.multi_items() if k.lower() == "a2a-version"), None
    )
    version = wire.rpc_version(request.headers.get("a2a-version"), query)
    return wire.rpc_request(request.content, version)


def _check(source: str, response: httpx.Response, path: str | None = None) -> None:
    """Record and strictly check one read response, routed by `path` (the request's by default)."""
    request = response.request
    path = _seen(source, response, path)
    try:
        rpc = rpc_request_of(request)
        if rpc is not None:
            wire.check_jsonrpc_response(rpc, response.status_code, response.content)
        else:
            wire.check_response(request.method, path, response.status_code, response.content)
    except Exception as exc:
        CHECK_FAILURES.append(
            f"{source} {request.method} {request.url} -> {response.status_code}: {exc!r} "
            f"body={response.content[:500]!r}"
        )
        raise


# -- SSE bodies ------------------------------------------------------------------------------
#
# An event-stream body cannot be read in the response hook: the hook runs when the headers
# arrive, and reading there would wait for the whole stream (minutes for a long task, and the
# caller, e.g. the a2a-sdk client, would see every event only at the end; subscribe-then-cancel
# tests would deadlock). So for `text/event-stream` responses the hook replaces the response's
# byte stream with a tee: the caller reads the live stream exactly as before (same chunks, same
# timing), the tee keeps a copy, and when the response is closed the copy is checked frame by
# frame with `wire.check_sse_frames`. A stream read to its end must be complete; a stream the
# caller dropped mid-way (a killed client) is checked up to its last complete frame. Failures
# raise from the close (so the test fails) and are recorded in CHECK_FAILURES.


class _SseTee:
    def __init__(self, source: str, response: httpx.Response) -> None:
        self.source = source
        self.method = response.request.method
        self.url = str(response.request.url)
        self.path = response.request.url.path
        self.rpc = rpc_request_of(response.request)
        self.buffer = bytearray()
        self.complete = False
        self.checked = False

    def check(self) -> None:
        if self.checked:
            return
        self.checked = True
        try:
            if self.rpc is not None:
                wire.check_jsonrpc_sse(bytes(self.buffer), complete=self.complete, request=self.rpc)
            else:
                wire.check_sse_frames(
                    bytes(self.buffer), complete=self.complete, method=self.method, path=self.path
                )
        except Exception as exc:
            CHECK_FAILURES.append(
                f"{self.source} {self.method} {self.url} (SSE, complete={self.complete}): "
                f"{exc!r} body={bytes(self.buffer)[:500]!r}"
            )
            raise


class _TeeSyncStream(httpx.SyncByteStream):
    def __init__(self, inner: Any, tee: _SseTee) -> None:
        self.inner = inner
        self.tee = tee

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.tee.buffer.extend(chunk)
            yield chunk
        self.tee.complete = True

    def close(self) -> None:
        self.inner.close()
        self.tee.check()


class _TeeAsyncStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, tee: _SseTee) -> None:
        self.inner = inner
        self.tee = tee

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.tee.buffer.extend(chunk)
            yield chunk
        self.tee.complete = True

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.tee.check()


def _is_event_stream(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith(wire.EVENT_STREAM)


def _seen(source: str, response: httpx.Response, path: str | None = None) -> str:
    """Record the exchange under `path` (the request's by default) and return that path."""
    request = response.request
    rpc = rpc_request_of(request)
    path = request.url.path if path is None else path
    SEEN.append(
        Seen(
            source,
            request.method,
            path,
            response.status_code,
            f"{rpc.version} {rpc.method}" if rpc is not None else None,
        )
    )
    return path


def _headers(principal: str | None, version: str | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if version is not None:
        headers["A2A-Version"] = version
    if principal is not None:
        headers[LOCAL_PRINCIPAL_HEADER] = principal
    return headers


def checked_client(
    base_url: str,
    *,
    principal: str | None = None,
    version: str | None = "1.0",
    source: str = "raw",
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    """A sync httpx client whose every response is read and strictly checked."""

    def hook(response: httpx.Response) -> None:
        if _is_event_stream(response):
            _seen(source, response)
            response.stream = _TeeSyncStream(response.stream, _SseTee(source, response))
            return
        response.read()
        _check(source, response)

    return httpx.Client(
        base_url=base_url,
        headers=_headers(principal, version),
        event_hooks={"response": [hook]},
        timeout=60.0,
        transport=transport,
    )


def checked_async_client(
    base_url: str | None = None,
    *,
    principal: str | None = None,
    version: str | None = "1.0",
    source: str = "raw",
) -> httpx.AsyncClient:
    """An async httpx client whose every response is read and strictly checked."""

    async def hook(response: httpx.Response) -> None:
        if _is_event_stream(response):
            _seen(source, response)
            response.stream = _TeeAsyncStream(response.stream, _SseTee(source, response))
            return
        await response.aread()
        _check(source, response)

    kwargs: dict[str, Any] = {"base_url": base_url} if base_url else {}
    return httpx.AsyncClient(
        headers=_headers(principal, version),
        event_hooks={"response": [hook]},
        timeout=60.0,
        **kwargs,
    )


# -- the dev server --------------------------------------------------------------------------


@dataclass
class DevServer:
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def dev_server_running(
    log_dir: Path, *, args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[DevServer]:
    """`scripts/dev --port N [args]` with extra environment, until SIGINT (which must stop it
    cleanly and promptly)."""
    port = listen_port()
    log_path = log_dir / "dev.log"
    base_url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(DEV_SCRIPT), "--port", str(port), *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
        )
    server = DevServer(base_url, process, log_path)
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    # A plain probe: a server may be started with a card that is not strict 1.0 on purpose.
    with httpx.Client(base_url=base_url) as probe:
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"scripts/dev exited with {process.returncode} before serving:\n"
                    + server.output()
                )
            try:
                if probe.get(CARD_PATH, timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                process.kill()
                process.wait()
                pytest.fail(
                    f"scripts/dev did not answer GET {CARD_PATH} within "
                    f"{STARTUP_TIMEOUT_SECONDS:.0f} s:\n" + server.output()
                )
            time.sleep(0.2)
    try:
        yield server
    finally:
        # Ctrl-C: the process must stop by itself, cleanly, promptly.
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        try:
            code = process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(
                f"scripts/dev did not exit within {SHUTDOWN_TIMEOUT_SECONDS:.0f} s of SIGINT:\n"
                + server.output()
            )
        stopped_in = time.monotonic() - started
        assert code == 0, f"scripts/dev exited {code} on SIGINT:\n{server.output()}"
        command = " ".join(("scripts/dev --port N", *args))
        print(f"\n{command} stopped on SIGINT in {stopped_in:.1f} s")
        assert "local stack stopped" in server.output(), server.output()


@dataclass(frozen=True)
class ServerConfig:
    """What a `scripts/dev` server is started with; servers of equal configuration are one."""

    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


class ServerPool:
    """`scripts/dev` servers by configuration, shared by every module that asks for one: a
    server starts when a test first needs its configuration and stops (SIGINT, checked as
    `dev_server_running` checks it) after the last test of the run that needs it."""

    def __init__(self) -> None:
        self.running: dict[ServerConfig, tuple[DevServer, contextlib.ExitStack]] = {}
        self.last_user: dict[ServerConfig, str] = {}  # config -> nodeid of its last test

    def get(
        self, config: ServerConfig, name: str, tmp_path_factory: pytest.TempPathFactory
    ) -> DevServer:
        if config not in self.running:
            stack = contextlib.ExitStack()
            server = stack.enter_context(
                dev_server_running(
                    tmp_path_factory.mktemp(name), args=config.args, env=dict(config.env)
                )
            )
            self.running[config] = (server, stack)
        return self.running[config][0]

    def plan(self, items: list[pytest.Item]) -> None:
        """Each configuration's last test: one whose fixtures hold its server, or any test of
        a module that defines a fixture for it (`request.getfixturevalue` is not seen ahead).
        The default server runs for the whole session."""
        self.last_user = {}
        for item in items:
            module = getattr(getattr(item, "module", None), "__name__", "")
            configs = set(SERVER_MODULES.get(module, ()))
            fixtureinfo = getattr(item, "_fixtureinfo", None)
            for defs in fixtureinfo.name2fixturedefs.values() if fixtureinfo else ():
                configs.update(getattr(d.func, SERVER_CONFIG, None) for d in defs)
            for config in configs - {None, ServerConfig()}:
                self.last_user[config] = item.nodeid

    def done(self, item: pytest.Item) -> None:
        """Stop the servers no test after `item` needs."""
        for config, nodeid in self.last_user.items():
            if nodeid == item.nodeid:
                self.stop(config)

    def stop(self, config: ServerConfig) -> None:
        if config in self.running:
            _, stack = self.running.pop(config)
            stack.close()

    def stop_all(self) -> None:
        errors = []
        for config in reversed(list(self.running)):
            try:
                self.stop(config)
            except BaseException as exc:  # stop the others; report the first
                errors.append(exc)
        if errors:
            raise errors[0]


POOL = ServerPool()
SERVER_CONFIG = "_a2a_server_config"
SERVER_MODULES: dict[str, set[ServerConfig]] = {}  # module -> configurations it defines


def server_fixture(
    name: str, *, args: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Any:
    """A fixture giving the `scripts/dev` server of these settings from the pool (one process
    per configuration for the whole run); its log goes to a temporary folder called `name`."""
    config = ServerConfig(tuple(args), tuple(sorted((env or {}).items())))
    SERVER_MODULES.setdefault(sys._getframe(1).f_globals["__name__"], set()).add(config)

    def server(tmp_path_factory: pytest.TempPathFactory) -> DevServer:
        return POOL.get(config, name, tmp_path_factory)

    setattr(server, SERVER_CONFIG, config)
    return pytest.fixture(scope="module")(server)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    POOL.plan(items)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    POOL.done(item)


@pytest.fixture(scope="session", autouse=True)
def _servers_stopped() -> Iterator[None]:
    """Whatever the pool still runs (a run cut short) stops before the session's checks."""
    yield
    POOL.stop_all()


dev_server = server_fixture("dev-server")


@pytest.fixture
def base_url(dev_server: DevServer) -> str:
    return dev_server.base_url


def new_principal(prefix: str = "user") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class ClientPool:
    """Checked sync clients a fixture opens, closed together when it ends."""

    def __init__(self) -> None:
        self.clients: list[httpx.Client] = []

    def open(self, base_url: str, principal: str | None, version: str | None) -> httpx.Client:
        client = checked_client(base_url, principal=principal, version=version)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()


@pytest.fixture
def raw(base_url: str) -> Iterator[Callable[..., httpx.Client]]:
    """Factory of checked sync clients: raw(principal=..., version=...)."""
    pool = ClientPool()

    def make(principal: str | None = None, version: str | None = "1.0") -> httpx.Client:
        return pool.open(base_url, principal, version)

    yield make
    pool.close()


@pytest.fixture
def http(raw: Callable[..., httpx.Client]) -> httpx.Client:
    """A checked sync client with A2A-Version: 1.0 and a principal of its own."""
    return raw(principal=new_principal())


@dataclass
class Agent:
    """An a2a-sdk client (HTTP+JSON) for one fresh principal, plus a raw client for it."""

    client: Client
    principal: str
    raw: httpx.AsyncClient
    base_url: str


@contextlib.asynccontextmanager
async def sdk_agent(
    base_url: str, *, streaming: bool, principal: str | None = None
) -> AsyncIterator[Agent]:
    """An a2a-sdk client (HTTP+JSON) whose every response is strictly checked."""
    principal = principal or new_principal("sdk")
    # No A2A-Version header of ours: the SDK adds its own.
    sdk_http = checked_async_client(principal=principal, version=None, source="sdk")
    client = await create_client(
        base_url,
        client_config=ClientConfig(
            httpx_client=sdk_http,
            streaming=streaming,
            supported_protocol_bindings=["HTTP+JSON"],
        ),
    )
    raw_http = checked_async_client(base_url, principal=principal)
    try:
        yield Agent(client, principal, raw_http, base_url)
    finally:
        await client.close()
        await sdk_http.aclose()
        await raw_http.aclose()


@pytest.fixture
async def agent(base_url: str) -> AsyncIterator[Agent]:
    """Non-streaming a2a-sdk client (send_message is one request, one response)."""
    async with sdk_agent(base_url, streaming=False) as made:
        yield made


@pytest.fixture
async def streaming_agent(base_url: str) -> AsyncIterator[Agent]:
    """Streaming a2a-sdk client: send_message uses /message:stream, subscribe works."""
    async with sdk_agent(base_url, streaming=True) as made:
        yield made


# -- the closing coverage check -------------------------------------------------------------
#
# What this process saw and checked is handed to the session's closing check (tests/conftest.py
# runs `closing_problems` where the session ends), after every test wherever it was ordered.

_E2E = Path(__file__).parent
_E2E_DESELECTED = pytest.StashKey[bool]()
_RUN_NODEIDS: set[str] = set()


def _is_e2e(item: pytest.Item) -> bool:
    return Path(str(item.path)).parent == _E2E


def pytest_deselected(items: list[pytest.Item]) -> None:
    if any(_is_e2e(item) for item in items):
        items[0].config.stash[_E2E_DESELECTED] = True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":  # the test ran to its end, whatever its outcome
        _RUN_NODEIDS.add(report.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    collected = [item.nodeid for item in session.items if _is_e2e(item)]
    deselected = session.config.stash.get(_E2E_DESELECTED, False)
    hand_over(session.config, "e2e", session_record(collected, _RUN_NODEIDS, deselected))
