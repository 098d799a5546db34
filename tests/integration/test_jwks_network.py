"""JWT verification when the issuer is unreachable over real sockets: a closed port, a server
that never answers, an issuer whose discovery document cannot be fetched. The other JWKS
failures run over an httpx MockTransport in tests/unit/test_auth_jwt.py."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from a2a_serverless.auth import JwksCache, JwtAuthenticator
from tests.unit.test_auth_jwt import AUDIENCE, ISSUER, Issuer, bearer, refused


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def test_real_connection_refused(issuer: Issuer, closed_port: int) -> None:
    cache = JwksCache(ISSUER, f"http://127.0.0.1:{closed_port}/jwks.json")
    reason = refused(JwtAuthenticator(ISSUER, AUDIENCE, cache), bearer(issuer.token()))
    assert "unreachable" in reason


def test_real_timeout(issuer: Issuer, silent_server: int) -> None:
    cache = JwksCache(ISSUER, f"http://127.0.0.1:{silent_server}/jwks.json", timeout_seconds=0.3)
    started = time.monotonic()
    reason = refused(JwtAuthenticator(ISSUER, AUDIENCE, cache), bearer(issuer.token()))
    assert "unreachable" in reason and time.monotonic() - started < 2


def test_real_discovery_of_an_unreachable_issuer(issuer: Issuer, closed_port: int) -> None:
    cache = JwksCache(f"http://127.0.0.1:{closed_port}")
    refused(JwtAuthenticator(ISSUER, AUDIENCE, cache), bearer(issuer.token()))
