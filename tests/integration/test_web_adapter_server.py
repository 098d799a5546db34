"""The Web Adapter functions' HTTP server: uvicorn as functions/<name>/run.sh starts it, its
own process on a free port, driven over real sockets as the Lambda Web Adapter drives it
(HTTP/1.1, kept-alive connections), with a test ASGI app and with a real function's app.py
against a moto server."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h11
import httpx
import pytest

from tests.ports import listen_port

ROOT = Path(__file__).resolve().parents[2]
# The three Web Adapter functions share one run.sh (tests/template/test_functions.py).
RUN_SH = ROOT / "functions" / "get_task" / "run.sh"

# Streams events 0.4 s apart, echoes what it was given, raises, hangs until the peer leaves:
# what a disconnect reached is appended to $DISCONNECT_LOG.
TEST_APP = r"""
import asyncio, hashlib, json, os, time

from starlette.responses import StreamingResponse

LOG = os.environ["DISCONNECT_LOG"]


def record(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")


async def read_body(receive, note=None):
    body, messages = b"", 0
    while True:
        message = await receive()
        messages += 1
        assert message["type"] == "http.request", message
        body += message.get("body", b"")
        if note:  # the test waits for it before it sends the rest of the body
            record(f"{note} body message {messages}")
        if not message.get("more_body"):
            return body, messages


async def respond(send, status, body, headers=()):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    path = scope["path"]
    if path == "/stream":
        await read_body(receive)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(4):
            if i:
                await asyncio.sleep(0.4)
            data = b"data: %d %f\n\n" % (i, time.time())  # when it was sent
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/hang":
        await read_body(receive)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        message = await receive()  # the body is read: blocks until the peer leaves
        record("hang " + message["type"])
    elif path == "/starlette":
        async def events():
            try:
                for i in range(1000):
                    yield f"data: {i}\n\n"
                    await asyncio.sleep(0.1)
            finally:
                record("starlette stream ended")
        await StreamingResponse(events(), media_type="text/event-stream")(scope, receive, send)
    elif path == "/boom":
        raise RuntimeError("secret detail of the failure")
    elif path == "/nothing":
        return  # no response at all
    elif path == "/headers":
        await read_body(receive)
        size = sum(len(k) + len(v) for k, v in scope["headers"])
        await respond(send, 200, str(size).encode())
    elif path == "/big":
        await read_body(receive)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        block = bytes(range(256)) * 256  # 64 KiB
        for _ in range(16):
            await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    else:
        body, messages = await read_body(receive, "chunked" if path == "/chunked" else None)
        seen = {
            key: scope[key]
            for key in ("type", "http_version", "method", "scheme", "path", "root_path")
        }
        seen.update(
            raw_path=scope["raw_path"].decode("latin-1"),
            query_string=scope["query_string"].decode("latin-1"),
            headers=[[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
            client=list(scope["client"]),
            server=list(scope["server"]),
            asgi=scope["asgi"],
            body=body.decode("latin-1"),
            body_messages=messages,
        )
        await respond(send, 200, json.dumps(seen).encode(),
                      [(b"content-type", b"application/json")])
"""


class Server:
    """run.sh in `cwd` (its app.py), on a free $PORT."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.port = listen_port()
        self.log = log
        # Where the test app records what a disconnect reached (the test app only).
        self.disconnects = Path(env.get("DISCONNECT_LOG", os.devnull))
        self.stderr = log.open("wb")
        self.process = subprocess.Popen(
            ["sh", str(RUN_SH)],
            cwd=cwd,
            env={
                # run.sh execs `python`: this interpreter.
                "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                "PYTHONPATH": str(ROOT / "shared"),
                **env,
                "PORT": str(self.port),  # a function's own env has the adapter's 8080
            },
            stdout=self.stderr,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.output()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"the server did not listen: {self.output()}"
                time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, as Lambda's shutdown sends it: the exit code (uvicorn shuts down, then
        ends by the signal it caught: -SIGTERM)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=15)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.stderr.close()


class Raw:
    """A raw client connection, its responses parsed by h11 (client side)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = h11.Connection(h11.CLIENT)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        """A request with Content-Length (through h11's client, which frames it)."""
        all_headers = [("host", "loopback"), *headers]
        if body or method == "POST":
            all_headers.append(("content-length", str(len(body))))
        data = self.conn.send(h11.Request(method=method, target=target, headers=all_headers))
        if body:
            data += self.conn.send(h11.Data(data=body))
        data += self.conn.send(h11.EndOfMessage())
        self.sock.sendall(data)

    def next_event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.conn.receive_data(self.sock.recv(65536))

    def response(self) -> tuple[h11.Response, bytes]:
        """The whole next response; the connection ready for the next request."""
        head = self.next_event()
        while isinstance(head, h11.InformationalResponse):
            head = self.next_event()
        assert isinstance(head, h11.Response), head
        body = b""
        while True:
            event = self.next_event()
            if isinstance(event, h11.EndOfMessage):
                break
            body += event.data
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        return head, body

    def exchange(self, method: str, target: str) -> tuple[h11.Response, bytes]:
        """A request without a body, and its whole response."""
        self.request(method, target, [], b"")
        return self.response()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve_test_app(folder: Path) -> Server:
    """TEST_APP as `folder`'s app.py, served by run.sh; its disconnects logged in `folder`."""
    (folder / "app.py").write_text(TEST_APP)
    log = folder / "disconnects.log"
    log.touch()
    return Server(folder, {"DISCONNECT_LOG": str(log)}, folder / "server.log")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = _serve_test_app(tmp_path_factory.mktemp("loopback"))
    try:
        yield server
    finally:
        # SIGTERM: a graceful exit, by the signal (what uvicorn does once it has shut down).
        assert server.stop() == -signal.SIGTERM, server.output()


def _disconnects(server: Server) -> list[str]:
    return server.disconnects.read_text().splitlines()


def _wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_two_requests_on_one_connection(served: Server) -> None:
    with Raw(served.port) as raw:
        first, body1 = raw.exchange("GET", "/first")
        second, body2 = raw.exchange("GET", "/second?n=2")
    assert first.status_code == second.status_code == 200
    one, two = json.loads(body1), json.loads(body2)
    assert (one["path"], two["path"], two["query_string"]) == ("/first", "/second", "n=2")
    assert one["client"] == two["client"]  # the same connection (same client port)
    assert one["client"][0] == "127.0.0.1" and one["server"] == ["127.0.0.1", served.port]


def test_a_client_that_half_closes_still_gets_its_response(served: Server) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(b"GET /half HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)  # done sending, still reading
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert json.loads(body)["path"] == "/half"


def test_the_scope_is_asgi_3_http(served: Server) -> None:
    response = httpx.get(f"{served.url}/scope", headers={"X-Custom-Header": "Value"})
    seen = response.json()
    assert seen["type"] == "http" and seen["asgi"]["version"] == "3.0"
    # 2.3: Starlette listens for http.disconnect (under 2.4 it would not).
    assert seen["asgi"]["spec_version"] == "2.3"
    assert (seen["http_version"], seen["method"], seen["scheme"]) == ("1.1", "GET", "http")
    assert seen["root_path"] == ""
    assert ["x-custom-header", "Value"] in seen["headers"]  # names lower-cased, values kept
    assert seen["body"] == "" and seen["body_messages"] == 1


def test_a_chunked_request_body_reaches_the_app(served: Server) -> None:
    with Raw(served.port) as raw:
        raw.send_raw(
            b"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
        )
        # The rest once the app has the first chunk: it reads the body as it comes.
        assert _wait_for(lambda: "chunked body message 1" in _disconnects(served))
        raw.send_raw(b"6\r\n world\r\n0\r\n\r\n")
        # h11's client state does not know of the hand-written request: parse the response
        # with a fresh client connection that sent an equivalent one.
        raw.conn.send(
            h11.Request(
                method="POST",
                target="/chunked",
                headers=[("host", "x"), ("transfer-encoding", "chunked")],
            )
        )
        raw.conn.send(h11.EndOfMessage())
        response, body = raw.response()
    assert response.status_code == 200
    seen = json.loads(body)
    assert seen["body"] == "hello world"
    assert seen["body_messages"] >= 2  # the first chunk was handed over before the rest came


def test_a_post_with_content_length(served: Server) -> None:
    payload = {"jsonrpc": "2.0", "id": 1, "params": {"text": "é" * 1000}}
    response = httpx.post(f"{served.url}/echo", json=payload)
    assert response.status_code == 200
    assert json.loads(response.json()["body"].encode("latin-1")) == payload


def test_expect_100_continue_is_answered_before_the_body(served: Server) -> None:
    with Raw(served.port) as raw:
        raw.send_raw(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
        )
        interim = raw.sock.recv(1024)  # the body is not sent until the server asks
        assert interim.startswith(b"HTTP/1.1 100 "), interim
        raw.send_raw(b"ping")
        rest = b""
        while b'"body": "ping"' not in rest:
            chunk = raw.sock.recv(65536)
            assert chunk, rest
            rest += chunk
        assert rest.startswith(b"HTTP/1.1 200 ")


def test_stream_events_reach_the_client_as_they_are_sent(served: Server) -> None:
    arrivals: list[tuple[float, bytes]] = []
    with httpx.stream("GET", f"{served.url}/stream", timeout=10) as response:
        assert response.headers.get("transfer-encoding") == "chunked"  # no Content-Length
        assert response.headers["content-type"] == "text/event-stream"
        for chunk in response.iter_raw():
            arrivals.append((time.time(), chunk))
    events = b"".join(chunk for _, chunk in arrivals).decode().split("\n\n")[:-1]
    assert [event.split()[1] for event in events] == ["0", "1", "2", "3"]
    # Sent 0.4 s apart: the first arrived before the last was even sent (~1.2 s later), not
    # with it at the end.
    assert arrivals[0][1].startswith(b"data: 0 ")
    last_sent = float(events[-1].split()[2])
    assert arrivals[0][0] < last_sent


def test_a_peer_that_leaves_mid_stream_ends_the_app_s_wait(served: Server) -> None:
    with Raw(served.port) as raw:
        raw.request("GET", "/hang", [], b"")
        head = raw.next_event()
        assert isinstance(head, h11.Response) and head.status_code == 200
        assert b"first" in raw.next_event().data
    assert _wait_for(lambda: "hang http.disconnect" in _disconnects(served)), _disconnects(served)


def test_a_peer_that_leaves_ends_a_starlette_streaming_response(served: Server) -> None:
    with Raw(served.port) as raw:
        raw.request("GET", "/starlette", [], b"")
        assert isinstance(raw.next_event(), h11.Response)
        assert raw.next_event().data.startswith(b"data: 0")
    # The generator was closed (Starlette cancels it on http.disconnect), well before its
    # 1000 events (~100 s).
    assert _wait_for(lambda: "starlette stream ended" in _disconnects(served), timeout=5)


def test_an_app_exception_is_a_500_without_details_and_the_server_goes_on(
    served: Server,
) -> None:
    with httpx.Client(base_url=served.url) as client:
        failed = client.get("/boom")
        assert failed.status_code == 500
        assert b"secret" not in failed.content and failed.text == "Internal Server Error"
        assert client.get("/after").json()["path"] == "/after"
    assert _wait_for(lambda: "secret detail of the failure" in served.output())  # logged
    assert "RuntimeError" in served.output()


def test_an_app_that_sends_no_response_is_a_500(served: Server) -> None:
    with Raw(served.port) as raw:
        response, _ = raw.exchange("GET", "/nothing")
        assert response.status_code == 500
        # uvicorn closes that connection (Connection: close); the next one is served.
        assert (b"connection", b"close") in response.headers
    assert httpx.get(f"{served.url}/still-open").json()["path"] == "/still-open"


def test_the_app_gets_the_raw_path_and_query_string(served: Server) -> None:
    with Raw(served.port) as raw:
        _, body = raw.exchange("GET", "/tasks/a%2Fb%20c:subscribe?x=1&y=%20%26&z")
    seen = json.loads(body)
    assert seen["raw_path"] == "/tasks/a%2Fb%20c:subscribe"
    assert seen["path"] == "/tasks/a/b c:subscribe"  # decoded, as ASGI says
    assert seen["query_string"] == "x=1&y=%20%26&z"


def test_a_large_response_arrives_intact(served: Server) -> None:
    response = httpx.get(f"{served.url}/big", timeout=10)
    expected = bytes(range(256)) * 256 * 16
    assert len(response.content) == 1024 * 1024
    assert hashlib.sha256(response.content).digest() == hashlib.sha256(expected).digest()


def test_head_has_the_headers_and_no_body(served: Server) -> None:
    with Raw(served.port) as raw:
        response, body = raw.exchange("HEAD", "/echo")
        # No body bytes on the wire: the next response parses right after the headers.
        after, after_body = raw.exchange("GET", "/next")
    assert response.status_code == 200 and body == b""
    assert int(dict(response.headers)[b"content-length"]) > 0  # what a GET would have
    assert after.status_code == 200 and json.loads(after_body)["path"] == "/next"


def test_a_malformed_request_is_a_400_and_the_connection_closes(served: Server) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 400 ")
    assert httpx.get(f"{served.url}/ok").status_code == 200


def test_a_request_head_of_200_kib_is_served(served: Server) -> None:
    # The adapter passes API Gateway's and Lambda's context as JSON headers.
    context = json.dumps({"authorizer": {"claims": "x" * 200 * 1024}})
    response = httpx.get(f"{served.url}/headers", headers={"x-amzn-request-context": context})
    assert response.status_code == 200 and int(response.text) > 200 * 1024


def test_answers_get_no_server_or_date_header(served: Server) -> None:
    response = httpx.get(f"{served.url}/scope")
    assert response.status_code == 200
    assert "server" not in response.headers and "date" not in response.headers


def test_an_idle_kept_alive_connection_is_not_closed_by_the_server(served: Server) -> None:
    # The adapter reuses its pooled connections after any pause (a thaw): uvicorn's default
    # idle timeout is 5 s.
    with Raw(served.port) as raw:
        assert raw.exchange("GET", "/before")[0].status_code == 200
        time.sleep(6)
        response, body = raw.exchange("GET", "/after-idle")
    assert response.status_code == 200 and json.loads(body)["path"] == "/after-idle"


def test_sigterm_ends_the_server_gracefully(tmp_path: Path) -> None:
    server = _serve_test_app(tmp_path)
    assert httpx.get(f"{server.url}/up").status_code == 200
    assert server.stop() == -signal.SIGTERM, server.output()
    assert "Traceback" not in server.output(), server.output()


# -- a real function --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def get_task_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """functions/get_task/app.py served as run.sh serves it, its AWS calls to a moto server
    holding the stack's table."""
    import boto3
    from moto.server import ThreadedMotoServer

    from a2a_serverless.local.stack import LocalStack, endpoint_env

    with LocalStack(event_sources=False) as stack:
        spec = stack.functions["GetTaskFunction"]
        env = {**stack.env, **spec.env}
        table = stack.table_request()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        aws = endpoint_env(endpoint)
        dynamodb: Any = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        ).client("dynamodb", endpoint_url=endpoint)
        dynamodb.create_table(**table)  # the stack's table, as template.yaml declares it
        folder = tmp_path_factory.mktemp("get_task")
        server = Server(spec.code_dir, {**env, **aws}, folder / "server.log")
        try:
            yield server
        finally:
            assert server.stop() == -signal.SIGTERM, server.output()
    finally:
        moto.stop()


def test_a_real_function_answers_through_the_server(get_task_served: Server) -> None:
    event = json.loads((ROOT / "events" / "get_task.json").read_text())
    headers = {k: v for k, v in event["headers"].items() if k.lower() != "host"}
    # What the Web Adapter adds: API Gateway's request context as a header.
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    with httpx.Client(base_url=get_task_served.url, timeout=30) as client:
        missing = client.get(event["path"], headers=headers)
        again = client.get(event["path"], headers=headers)  # the kept-alive connection
    assert missing.status_code == 404, (missing.text, get_task_served.output()[-3000:])
    assert again.status_code == 404
    assert missing.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
    assert missing.headers["content-type"].startswith("application/")
    # The function logs its requests (Powertools JSON lines on stdout), nothing of the server.
    lines = [line for line in get_task_served.output().splitlines() if line.startswith("{")]
    assert any(json.loads(line).get("status") == 404 for line in lines), lines[-5:]
