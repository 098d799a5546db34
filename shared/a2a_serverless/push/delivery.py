"""Requests to a vetted target, connected to the pinned address: one webhook POST
(`post_pinned`), or a streamed GET of a flow's `url` part (`open_url`).

The connection goes to ``VettedTarget.address`` (no second DNS lookup, no rebinding window);
the hostname travels in the Host header and, for https, as TLS SNI and the name the
certificate is verified against. Redirects are never followed. httpx is imported by the
first request, not with this module, to keep it off the functions' cold start.
"""

from __future__ import annotations

import io
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from a2a_serverless.core.egress import DEFAULT_PORTS, EgressPolicy, VettedTarget, vet_url

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

    own_transport = transport is None
    client = _client(transport, connect_timeout, read_timeout)
    try:
        request = _pinned_request(client, "POST", target, headers, body)
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


def _client(
    transport: httpx.BaseTransport | None, connect_timeout: float, read_timeout: float
) -> httpx.Client:
    import httpx

    timeout = httpx.Timeout(
        connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
    )
    if transport is None:
        # trust_env=False: no proxy or CA overrides from the environment; retries are the
        # caller's business (with backoff), not the transport's.
        transport = httpx.HTTPTransport(verify=_ssl_context(), trust_env=False, retries=0)
    return httpx.Client(
        transport=transport, follow_redirects=False, trust_env=False, timeout=timeout
    )


def _pinned_request(
    client: httpx.Client,
    method: str,
    target: VettedTarget,
    headers: Mapping[str, str],
    body: bytes | None = None,
) -> httpx.Request:
    """The request to `target`'s pinned address, naming its host in Host and SNI."""
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
    url = httpx.URL(
        scheme=target.scheme,
        host=target.address,  # httpx brackets IPv6 itself
        port=target.port,
        raw_path=target.target.encode("ascii"),
    )
    return client.build_request(
        method, url, content=body, headers=request_headers, extensions=extensions
    )


class FetchFailed(OSError):
    """A GET of a url part got no usable answer (no connection, a timeout, a status other
    than 2xx: redirects are not followed). Its text never holds the URL."""


def open_url(
    url: str,
    policy: EgressPolicy,
    *,
    resolve: Callable[..., list[Any]] = socket.getaddrinfo,
    connect_timeout: float = 3.0,
    read_timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> tuple[IO[bytes], int | None]:
    """GET `url` through the egress guard (``vet_url``: raises ``UnsafeWebhookUrl`` for a
    URL the policy refuses) at its pinned address: the body as a stream read as it arrives
    (close it after), and its declared length (Content-Length) or None.

    Raises ``FetchFailed`` when there is no 2xx answer. ``transport`` is for tests; a
    caller-supplied transport is left open.
    """
    import httpx

    target = vet_url(url, policy, resolve)
    own_transport = transport is None
    client = _client(transport, connect_timeout, read_timeout)
    # The bytes as the server holds them: no transfer compression to undo.
    headers = {"Accept-Encoding": "identity"}
    try:
        response = client.send(_pinned_request(client, "GET", target, headers), stream=True)
    except httpx.TimeoutException as exc:
        _close(client, own_transport)
        raise FetchFailed(f"the url part's server did not answer ({_timeout_phase(exc)})") from None
    except (httpx.HTTPError, ValueError, TypeError, UnicodeError) as exc:
        _close(client, own_transport)
        raise FetchFailed(f"the url part could not be fetched ({type(exc).__name__})") from None
    if not 200 <= response.status_code < 300:
        response.close()
        _close(client, own_transport)
        raise FetchFailed(f"the url part's server answered HTTP {response.status_code}")
    length = response.headers.get("content-length")
    body = _ResponseBody(response, client if own_transport else None)
    return io.BufferedReader(body), int(length) if length and length.isdigit() else None


@dataclass(frozen=True)
class Answer:
    """A whole answer to `request_pinned`, whatever its status."""

    status: int
    content_type: str
    body: bytes


class RequestFailed(OSError):
    """`request_pinned` got no whole answer: no connection, a timeout, a broken or too large
    body. ``retryable`` when trying again later may help. Its text never holds the URL."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def request_pinned(
    target: VettedTarget,
    method: str,
    headers: Mapping[str, str],
    body: bytes | None = None,
    *,
    max_bytes: int,
    connect_timeout: float = 3.0,
    read_timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> Answer:
    """One request to ``target`` at its pinned address, its answer read whole up to
    ``max_bytes`` (any status; redirects are answers, never followed).

    Raises ``RequestFailed``. ``transport`` is for tests; a caller-supplied one is left open.
    """
    import httpx

    own_transport = transport is None
    client = _client(transport, connect_timeout, read_timeout)
    try:
        try:
            request = _pinned_request(client, method, target, headers, body)
        except (httpx.HTTPError, ValueError, TypeError, UnicodeError) as exc:
            raise RequestFailed(f"invalid request ({type(exc).__name__})", False) from None
        try:
            response = client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise RequestFailed(f"timeout ({_timeout_phase(exc)})", True) from None
        except httpx.ConnectError as exc:
            what = ": TLS certificate verification" if _is_cert_error(exc) else ""
            raise RequestFailed(f"connect failed{what}", True) from None
        except httpx.HTTPError as exc:
            raise RequestFailed(f"transport error ({type(exc).__name__})", True) from None
        try:
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise RequestFailed(f"answer larger than {max_bytes} bytes", False)
            read = bytearray()
            # Read as it arrives, so a body without (or lying about) its length stops at the cap.
            for piece in response.iter_bytes():
                read += piece
                if len(read) > max_bytes:
                    raise RequestFailed(f"answer larger than {max_bytes} bytes", False)
        except httpx.TimeoutException as exc:
            raise RequestFailed(f"timeout ({_timeout_phase(exc)})", True) from None
        except httpx.HTTPError as exc:
            raise RequestFailed(f"body broke off ({type(exc).__name__})", True) from None
        finally:
            response.close()
        return Answer(response.status_code, response.headers.get("content-type", ""), bytes(read))
    finally:
        _close(client, own_transport)


class _ResponseBody(io.RawIOBase):
    """A streamed response's bytes as they arrive; closing it closes the response (and the
    client it owns)."""

    def __init__(self, response: httpx.Response, client: httpx.Client | None) -> None:
        self._response = response
        self._client = client
        self._chunks: Iterator[bytes] = response.iter_bytes()
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        import httpx

        while not self._pending:  # an empty chunk is not the end
            try:
                piece = next(self._chunks, None)
            except httpx.TimeoutException as exc:
                raise FetchFailed(
                    f"the url part's server stopped ({_timeout_phase(exc)})"
                ) from None
            except httpx.HTTPError as exc:
                raise FetchFailed(f"the url part's body broke off ({type(exc).__name__})") from None
            if piece is None:
                return 0
            self._pending = piece
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        if not self.closed:
            self._response.close()
            if self._client is not None:
                self._client.close()
        super().close()


def _close(client: httpx.Client, owned: bool) -> None:
    if owned:
        client.close()


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
