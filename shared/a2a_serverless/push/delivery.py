"""One webhook POST to a vetted target, connected to the pinned address.

The connection goes to ``VettedTarget.address`` (no second DNS lookup, no rebinding window);
the hostname travels in the Host header and, for https, as TLS SNI and the name the
certificate is verified against. Redirects are never followed. httpx is imported by the
first POST, not with this module, to keep it off the webhook sender's cold start.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from a2a_serverless.core.egress import DEFAULT_PORTS, VettedTarget

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class DeliveryResult:
    """Outcome of one attempt; the sender decides on retries from ``retryable``."""

    status: int | None  # HTTP status, None if no response
    retryable: bool  # 5xx, 408, 429, timeouts and connection errors
    error: str | None  # short, secret-free description for logs
    # No answer within the timeouts: on the stream path the webhook is parked at once (a
    # second inline attempt would only hold the batch up as long again).
    timed_out: bool = field(default=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None


def post_pinned(
    target: VettedTarget,
    body: bytes,
    headers: Mapping[str, str],
    *,
    connect_timeout: float = 3.0,
    read_timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> DeliveryResult:
    """POST ``body`` to ``target`` at its pinned address and classify the outcome.

    ``transport`` is for tests or a custom SSL context; a caller-supplied transport is
    left open. Header values are sent as given and never appear in ``error``.
    """
    import httpx

    host = f"[{target.host}]" if ":" in target.host else target.host
    default_port = DEFAULT_PORTS.get(target.scheme)
    host_header = host if target.port == default_port else f"{host}:{target.port}"

    request_headers = dict(headers)
    # Ours win over any caller-supplied copies: Host must name the vetted host, and a
    # pooled connection (keyed by IP, not name) must never be reused for another host.
    for name in [k for k in request_headers if k.lower() in ("host", "connection")]:
        del request_headers[name]
    request_headers["Host"] = host_header
    request_headers["Connection"] = "close"

    extensions: dict[str, str] = {}
    if target.scheme == "https":
        extensions["sni_hostname"] = target.host

    timeout = httpx.Timeout(
        connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
    )
    own_transport = transport is None
    if transport is None:
        # trust_env=False: no proxy or CA overrides from the environment; retries are the
        # sender's business (with backoff), not the transport's.
        transport = httpx.HTTPTransport(verify=_ssl_context(), trust_env=False, retries=0)
    client = httpx.Client(
        transport=transport, follow_redirects=False, trust_env=False, timeout=timeout
    )
    try:
        url = httpx.URL(
            scheme=target.scheme,
            host=target.address,  # httpx brackets IPv6 itself
            port=target.port,
            raw_path=target.target.encode("ascii"),
        )
        request = client.build_request(
            "POST", url, content=body, headers=request_headers, extensions=extensions
        )
    except (httpx.HTTPError, ValueError, TypeError, UnicodeError) as exc:
        return DeliveryResult(None, False, f"invalid request ({type(exc).__name__})")

    try:
        # stream=True and no body read: a hostile endpoint cannot make us buffer megabytes.
        response = client.send(request, stream=True)
        response.close()
    except httpx.TimeoutException as exc:
        return DeliveryResult(None, True, f"timeout ({_timeout_phase(exc)})", timed_out=True)
    except httpx.ConnectError as exc:
        if _is_cert_error(exc):
            return DeliveryResult(None, True, "connect failed: TLS certificate verification")
        return DeliveryResult(None, True, "connect failed")
    except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
        return DeliveryResult(None, True, f"transport error ({type(exc).__name__})")
    except httpx.HTTPError as exc:
        return DeliveryResult(None, False, f"request failed ({type(exc).__name__})")
    finally:
        if own_transport:
            client.close()
    return _classify(response.status_code)


_context: ssl.SSLContext | None = None
_context_lock = threading.Lock()


def _ssl_context() -> ssl.SSLContext:
    """The process's one verifying context (building one loads the CA bundle); thread-safe,
    each connection still gets its own SNI and hostname check."""
    global _context
    import httpx

    with _context_lock:
        if _context is None:
            _context = httpx.create_ssl_context(trust_env=False)
        return _context


def _classify(status: int) -> DeliveryResult:
    if 200 <= status < 300:
        return DeliveryResult(status, False, None)
    if 300 <= status < 400:
        return DeliveryResult(status, False, f"redirect refused (HTTP {status})")
    retryable = status >= 500 or status in (408, 429)
    return DeliveryResult(status, retryable, f"HTTP {status}")


def _timeout_phase(exc: httpx.TimeoutException) -> str:
    import httpx

    return {
        httpx.ConnectTimeout: "connect",
        httpx.ReadTimeout: "read",
        httpx.WriteTimeout: "write",
        httpx.PoolTimeout: "pool",
    }.get(type(exc), "unknown")


def _is_cert_error(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
