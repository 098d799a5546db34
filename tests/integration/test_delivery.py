"""post_pinned against real local servers: pinning, classification, redirects, timeouts, TLS."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from a2a_serverless.core.egress import VettedTarget
from a2a_serverless.push.delivery import DeliveryResult, post_pinned

HOOK_HOST = "hooks.example"  # made up: reachable only because we connect to the pinned IP
TOKEN = "tok-6f1b2c-secret"
AUTH = "Bearer eyJ-very-secret"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    port: int
    requests: list[Seen] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        state = self.server.state
        state.requests.append(Seen("POST", self.path, dict(self.headers.items()), body))
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/slow":
            state.release.wait(5)  # released at teardown so the thread ends promptly
            self._reply(200)
        elif url.path == "/slow-body":
            # Headers now, body never (until teardown): the sender must not wait for it.
            self.send_response(200)
            self.send_header("Content-Length", str(10_000_000))
            self.end_headers()
            self.wfile.flush()
            state.release.wait(5)
        elif url.path.startswith("/status/"):
            status = int(url.path.rsplit("/", 1)[1])
            extra = {"Location": query["to"][0]} if "to" in query else {}
            self._reply(status, extra)
        else:
            self._reply(200)

    def _reply(self, status: int, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        if status in (204, 304):
            self.end_headers()
            return
        payload = b"ok"
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    state: Server


def _start(ssl_context: ssl.SSLContext | None = None) -> Iterator[Server]:
    httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
    state = Server(port=httpd.server_address[1])
    httpd.state = state
    if ssl_context is not None:

        def remember_sni(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
            state.sni.append(name)

        ssl_context.sni_callback = remember_sni
        httpd.socket = ssl_context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(2)


@pytest.fixture
def server() -> Iterator[Server]:
    yield from _start()


@pytest.fixture
def other_server() -> Iterator[Server]:
    yield from _start()


def target_for(port: int, path: str = "/hook", scheme: str = "http") -> VettedTarget:
    return VettedTarget(
        url=f"{scheme}://{HOOK_HOST}:{port}{path}",
        scheme=scheme,
        host=HOOK_HOST,
        port=port,
        target=path,
        address="127.0.0.1",
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


HEADERS = {
    "Content-Type": "application/json",
    "X-A2A-Notification-Token": TOKEN,
    "Authorization": AUTH,
}


def test_posts_to_pinned_address_with_host_header_and_unchanged_payload(server: Server) -> None:
    body = '{"statusUpdate":{"taskId":"t-1","note":"é ✓"}}'.encode() + b"\x00\xff"
    result = post_pinned(target_for(server.port, "/hook/a%20b?x=1&y=%2F"), body, HEADERS)

    assert result == DeliveryResult(status=200, retryable=False, error=None)
    assert result.ok
    [seen] = server.requests
    assert seen.method == "POST"
    assert seen.path == "/hook/a%20b?x=1&y=%2F"
    assert seen.body == body
    assert seen.headers["Host"] == f"{HOOK_HOST}:{server.port}"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["X-A2A-Notification-Token"] == TOKEN
    assert seen.headers["Authorization"] == AUTH
    assert seen.headers["Content-Length"] == str(len(body))


def test_caller_cannot_override_host(server: Server) -> None:
    headers = {**HEADERS, "host": "evil.example", "Connection": "keep-alive"}
    assert post_pinned(target_for(server.port), b"{}", headers).status == 200
    [seen] = server.requests
    assert seen.headers["Host"] == f"{HOOK_HOST}:{server.port}"
    assert seen.headers["Connection"] == "close"


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_2xx_is_success(server: Server, status: int) -> None:
    result = post_pinned(target_for(server.port, f"/status/{status}"), b"{}", HEADERS)
    assert result == DeliveryResult(status=status, retryable=False, error=None)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_retryable_statuses(server: Server, status: int) -> None:
    result = post_pinned(target_for(server.port, f"/status/{status}"), b"{}", HEADERS)
    assert (result.status, result.retryable) == (status, True)
    assert result.error == f"HTTP {status}"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 413])
def test_other_4xx_are_final(server: Server, status: int) -> None:
    result = post_pinned(target_for(server.port, f"/status/{status}"), b"{}", HEADERS)
    assert (result.status, result.retryable) == (status, False)
    assert result.error == f"HTTP {status}"


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_is_not_followed(server: Server, other_server: Server, status: int) -> None:
    to = f"http://127.0.0.1:{other_server.port}/stolen"
    result = post_pinned(target_for(server.port, f"/status/{status}?to={to}"), b"{}", HEADERS)
    assert (result.status, result.retryable) == (status, False)
    assert result.error is not None and "redirect" in result.error
    assert len(server.requests) == 1
    assert other_server.requests == []  # the token never reaches the redirect target


def test_slow_server_times_out_within_bound(server: Server) -> None:
    started = time.monotonic()
    result = post_pinned(target_for(server.port, "/slow"), b"{}", HEADERS, read_timeout=0.3)
    elapsed = time.monotonic() - started
    assert result == DeliveryResult(status=None, retryable=True, error="timeout (read)")
    assert elapsed < 1.5


def test_response_body_is_not_awaited(server: Server) -> None:
    # The endpoint announces 10 MB and sends nothing: the status is all we need.
    started = time.monotonic()
    result = post_pinned(target_for(server.port, "/slow-body"), b"{}", HEADERS, read_timeout=2)
    assert result.status == 200 and result.ok
    assert time.monotonic() - started < 1.5


def test_connection_refused_is_retryable() -> None:
    result = post_pinned(target_for(closed_port()), b"{}", HEADERS, connect_timeout=1)
    assert result == DeliveryResult(status=None, retryable=True, error="connect failed")


def test_errors_never_carry_header_values(server: Server) -> None:
    results = [
        post_pinned(target_for(closed_port()), b"{}", HEADERS),
        post_pinned(target_for(server.port, "/status/500"), b"{}", HEADERS),
        post_pinned(target_for(server.port, "/slow"), b"{}", HEADERS, read_timeout=0.1),
    ]
    for result in results:
        assert result.error
        assert TOKEN not in result.error and AUTH not in result.error


def test_environment_proxies_are_ignored(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert post_pinned(target_for(server.port), b"{}", HEADERS).status == 200
    assert len(server.requests) == 1


def test_caller_transport_is_left_open_for_reuse(server: Server) -> None:
    with httpx.HTTPTransport() as transport:
        for _ in range(2):
            result = post_pinned(target_for(server.port), b"{}", HEADERS, transport=transport)
            assert result.status == 200
    assert len(server.requests) == 2


def test_invalid_header_value_is_a_final_error(server: Server) -> None:
    result = post_pinned(target_for(server.port), b"{}", {"X-Bad": "line\nbreak"})
    assert result.status is None and not result.retryable
    assert result.error is not None and "line" not in result.error
    assert server.requests == []


# --- https: SNI and certificate verification use the hostname, the socket the pinned IP ---


def _self_signed(tmp: Path, hostname: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[Server, ssl.SSLContext]]:
    cert, key = _self_signed(tmp_path, HOOK_HOST)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(cert))  # trusts only this cert
    for state in _start(server_ctx):
        yield state, client_ctx


def test_https_verifies_hostname_while_connecting_to_pinned_ip(
    tls: tuple[Server, ssl.SSLContext],
) -> None:
    server, client_ctx = tls
    with httpx.HTTPTransport(verify=client_ctx) as transport:
        result = post_pinned(
            target_for(server.port, scheme="https"), b"{}", HEADERS, transport=transport
        )
    assert result == DeliveryResult(status=200, retryable=False, error=None)
    assert server.sni == [HOOK_HOST]  # SNI named the host, not 127.0.0.1
    [seen] = server.requests
    assert seen.headers["Host"] == f"{HOOK_HOST}:{server.port}"
    assert seen.headers["X-A2A-Notification-Token"] == TOKEN


def test_https_refuses_certificate_for_another_name(tls: tuple[Server, ssl.SSLContext]) -> None:
    server, client_ctx = tls
    wrong = VettedTarget(
        url=f"https://other.example:{server.port}/hook",
        scheme="https",
        host="other.example",
        port=server.port,
        target="/hook",
        address="127.0.0.1",
    )
    with httpx.HTTPTransport(verify=client_ctx) as transport:
        result = post_pinned(wrong, b"{}", HEADERS, transport=transport)
    assert result.status is None and result.retryable
    assert result.error == "connect failed: TLS certificate verification"
    assert server.requests == []  # nothing (no token) was sent over the unverified channel


def test_https_default_transport_does_not_trust_self_signed(
    tls: tuple[Server, ssl.SSLContext],
) -> None:
    server, _ = tls
    result = post_pinned(target_for(server.port, scheme="https"), b"{}", HEADERS)
    assert result.error == "connect failed: TLS certificate verification"
    assert server.requests == []
