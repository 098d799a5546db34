"""Egress policy for webhook URLs (spec §13.2 SSRF guard): vet a URL, pin the address to call.

Pure validation plus a DNS lookup through an injectable resolver; used when a push config is
created and again before every delivery. The caller connects to ``VettedTarget.address``
(never re-resolving), which closes the DNS-rebinding window.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class EgressPolicy:
    """Which webhook targets are acceptable. The default is the production policy."""

    allow_http: bool = False  # http:// only when explicitly allowed
    # Hostnames, IPs or CIDRs exempt from the address checks (local development).
    allow_hosts: frozenset[str] = frozenset()
    _names: frozenset[str] = field(init=False, repr=False, compare=False)
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Accept any iterable of strings (e.g. a list from settings) but stay hashable.
        hosts = frozenset(str(h).strip() for h in self.allow_hosts if str(h).strip())
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in hosts:
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                names.add(_normalize_name(entry))
        object.__setattr__(self, "allow_hosts", hosts)
        object.__setattr__(self, "_names", frozenset(names))
        object.__setattr__(self, "_networks", tuple(networks))

    def name_allowed(self, host: str) -> bool:
        return _normalize_name(host) in self._names

    def address_allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self._networks)


class UnsafeWebhookUrl(ValueError):
    """A webhook URL the agent refuses to call.

    ``reason`` is a short machine code; ``str(exc)`` is safe to return to the client: it
    never echoes the URL (userinfo, query tokens) nor resolved addresses (an oracle for
    internal DNS).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class VettedTarget:
    """A URL that passed the guard, with the address to connect to."""

    url: str  # the original URL
    scheme: str  # "https" | "http"
    host: str  # lower-cased, no trailing dot; for the Host header and TLS SNI/verification
    port: int
    target: str  # path + query to request
    address: str  # the vetted IP to connect to (pinned)


DEFAULT_PORTS = {"https": 443, "http": 80}
# After IDNA encoding a hostname is plain LDH (underscore tolerated: seen in real DNS).
_NAME_RE = re.compile(
    r"^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$"
)
_TARGET_SAFE = "!$%&'()*+,/:;=?@[]~"
_FORBIDDEN_CHARS = re.compile(r"[\x00-\x20\x7f\\]")

_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS/GCP/Azure/OpenStack instance metadata
        "169.254.170.2",  # ECS task metadata / credentials
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer (a public address, so listed explicitly)
        "fd00:ec2::254",  # AWS IMDS over IPv6
    )
)


def _nets(*cidrs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# Explicit tables rather than ipaddress.is_global/is_private alone: those changed across
# Python patch releases and miss some ranges (e.g. IPv4 multicast counts as "global").
_V4_RULES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    ("unspecified", _nets("0.0.0.0/8")),
    ("loopback", _nets("127.0.0.0/8")),
    ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
    ("link_local", _nets("169.254.0.0/16")),
    ("cgnat", _nets("100.64.0.0/10")),
    ("multicast", _nets("224.0.0.0/4")),
    ("documentation", _nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")),
    ("reserved", _nets("192.0.0.0/24", "192.88.99.0/24", "198.18.0.0/15", "240.0.0.0/4")),
)
_V6_RULES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    ("unspecified", _nets("::/128")),
    ("loopback", _nets("::1/128")),
    ("private", _nets("fc00::/7", "fec0::/10")),
    ("link_local", _nets("fe80::/10")),
    ("multicast", _nets("ff00::/8")),
    ("documentation", _nets("2001:db8::/32", "3fff::/20")),
    # IETF protocol assignments (Teredo, ORCHID, benchmarking...), local-use NAT64.
    ("reserved", _nets("2001::/23", "64:ff9b:1::/48")),
)
_V6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_V6_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V6_COMPAT = ipaddress.ip_network("::/96")

_MESSAGES = {
    "unspecified": "an unspecified address",
    "loopback": "a loopback address",
    "private": "a private address",
    "link_local": "a link-local address",
    "cgnat": "a shared (carrier-grade NAT) address",
    "multicast": "a multicast address",
    "documentation": "a documentation address",
    "reserved": "a reserved or non-global address",
    "metadata": "a cloud metadata address",
}


def _normalize_name(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _classify_v4(ip: ipaddress.IPv4Address) -> str | None:
    if ip in _METADATA:
        return "metadata"
    for reason, nets in _V4_RULES:
        if any(ip in net for net in nets):
            return reason
    return None if ip.is_global else "reserved"  # catch-all for anything the table missed


def address_block_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` must not be called, or None when it is a public unicast address."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _classify_v4(ip)
    if ip.scope_id:
        return "link_local"
    ip = ipaddress.IPv6Address(int(ip))
    if ip in _METADATA:
        return "metadata"
    # Forms that embed an IPv4 address are judged by the IPv4 they reach.
    if ip.ipv4_mapped is not None:
        return _classify_v4(ip.ipv4_mapped)
    if ip in _V6_NAT64:
        return _classify_v4(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        return _classify_v4(ip.sixtofour)
    for reason, nets in _V6_RULES:
        if any(ip in net for net in nets):
            return reason
    if ip in _V6_COMPAT:  # deprecated IPv4-compatible ::a.b.c.d: never a valid target
        return _classify_v4(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)) or "reserved"
    # Only 2000::/3 is allocated global unicast; everything else is reserved.
    return None if ip in _V6_GLOBAL_UNICAST else "reserved"


def _parse_ip_literal(host: str) -> IPAddress | None:
    """The address when ``host`` is an IP literal in any form the OS accepts, else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    # inet_aton takes the legacy forms browsers and libc accept (2130706433, 0177.0.0.1,
    # 0x7f.1, 127.1); only try it on hosts that look numeric so names never match.
    if re.fullmatch(r"[0-9a-fx.]+", host) and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _refuse_address(reason: str) -> UnsafeWebhookUrl:
    return UnsafeWebhookUrl(reason, f"webhook URL host resolves to {_MESSAGES[reason]}")


@dataclass(frozen=True)
class ParsedUrl:
    """A webhook URL taken apart and normalized, before any address is looked at."""

    url: str
    scheme: str
    host: str  # IDNA-encoded name, or the canonical form of an IP literal
    ip: IPAddress | None  # set when the host is an IP literal
    port: int
    target: str  # path + query to request


def vet_url(
    url: str,
    policy: EgressPolicy,
    resolve: Callable[..., list] = socket.getaddrinfo,
) -> VettedTarget:
    """Check ``url`` against ``policy`` and return it with the address to connect to.

    Raises ``UnsafeWebhookUrl`` when the URL is malformed, uses a refused scheme, carries
    userinfo, or any address its host resolves to is not public (unless allow-listed).
    ``resolve`` has ``socket.getaddrinfo``'s signature; tests inject a fake.
    """
    parsed = parse_url(url, policy)
    addresses = resolve_host(parsed, resolve)
    check_addresses(parsed.host, addresses, policy)
    return VettedTarget(
        url=parsed.url,
        scheme=parsed.scheme,
        host=parsed.host,
        port=parsed.port,
        target=parsed.target,
        address=str(_pick(addresses)),
    )


def parse_url(url: str, policy: EgressPolicy) -> ParsedUrl:
    """Take ``url`` apart: scheme allowed by ``policy``, no userinfo, a valid port and host."""
    if not isinstance(url, str) or _FORBIDDEN_CHARS.search(url):
        raise UnsafeWebhookUrl("malformed", "webhook URL is malformed")
    try:
        parts = urlsplit(url)  # raises on e.g. an unclosed "[" IPv6 bracket
    except ValueError:
        raise UnsafeWebhookUrl("malformed", "webhook URL is malformed") from None
    try:
        explicit_port = parts.port
    except ValueError:
        raise UnsafeWebhookUrl("bad_port", "webhook URL has an invalid port") from None
    scheme = _scheme(parts.scheme, policy)
    if "@" in parts.netloc:
        raise UnsafeWebhookUrl("userinfo", "webhook URL must not contain credentials (user@)")
    if not parts.hostname:
        raise UnsafeWebhookUrl("missing_host", "webhook URL has no host")
    port = _port(explicit_port, parts.netloc, scheme)
    host, ip = _host(parts.hostname)
    return ParsedUrl(
        url=url,
        scheme=scheme,
        host=host,
        ip=ip,
        port=port,
        # Non-ASCII is percent-encoded; existing escapes and reserved characters are kept.
        target=quote(
            (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), safe=_TARGET_SAFE
        ),
    )


def _scheme(raw: str, policy: EgressPolicy) -> str:
    scheme = raw.lower()
    if scheme not in DEFAULT_PORTS or (scheme == "http" and not policy.allow_http):
        allowed = "https or http" if policy.allow_http else "https"
        raise UnsafeWebhookUrl("scheme", f"webhook URL scheme must be {allowed}")
    return scheme


def _port(explicit: int | None, netloc: str, scheme: str) -> int:
    if explicit is None:
        if netloc.endswith(":"):  # "https://host:/" - an empty port is not a port
            raise UnsafeWebhookUrl("bad_port", "webhook URL has an invalid port")
        return DEFAULT_PORTS[scheme]
    if not 0 < explicit < 65536:
        raise UnsafeWebhookUrl("bad_port", "webhook URL has an invalid port")
    return explicit


def _host(raw_host: str) -> tuple[str, IPAddress | None]:
    """The host as sent in Host/SNI (ASCII, no trailing dot) and its address if a literal."""
    host = raw_host[:-1] if raw_host.endswith(".") else raw_host
    ip = _parse_ip_literal(host)
    if ip is not None:
        # Canonical form (0x7f.1 -> 127.0.0.1, ::ffff:a.b.c.d -> a.b.c.d): sane SNI/Host.
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return str(ip), ip
    try:
        host = host.encode("idna").decode("ascii")  # Host header and SNI are ASCII
    except UnicodeError:
        raise UnsafeWebhookUrl("bad_host", "webhook URL host is not a valid name") from None
    if not _NAME_RE.match(host):
        raise UnsafeWebhookUrl("bad_host", "webhook URL host is not a valid name")
    return host, None


def resolve_host(parsed: ParsedUrl, resolve: Callable[..., list]) -> list[IPAddress]:
    """Every address the URL's host stands for (an IP literal stands for itself)."""
    if parsed.ip is not None:
        return [parsed.ip]
    if parsed.host == "localhost" or parsed.host.endswith(".localhost"):
        # RFC 6761: localhost names are loopback whatever DNS says; never ask DNS for them.
        return [ipaddress.IPv4Address("127.0.0.1")]
    return _resolve(parsed.host, parsed.port, resolve)


def check_addresses(host: str, addresses: list[IPAddress], policy: EgressPolicy) -> None:
    """Refuse when any address is not public, unless ``policy`` allow-lists it or the host."""
    name_exempt = policy.name_allowed(host)
    for addr in addresses:
        reason = address_block_reason(addr)
        if reason and not name_exempt and not policy.address_allowed(addr):
            raise _refuse_address(reason)


def _resolve(host: str, port: int, resolve: Callable[..., list]) -> list[IPAddress]:
    try:
        infos = resolve(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        infos = []
    addresses: list[IPAddress] = []
    for info in infos:
        try:
            text = str(info[4][0])
            addr = ipaddress.ip_address(text.split("%", 1)[0])
            if "%" in text:  # a zone index means link-local scope: keep that fact
                addr = ipaddress.IPv6Address(f"{addr}%{text.split('%', 1)[1]}")
        except (ValueError, IndexError, TypeError):
            continue
        if addr not in addresses:
            addresses.append(addr)
    if not addresses:
        raise UnsafeWebhookUrl("unresolvable", "webhook URL host could not be resolved")
    return addresses


def _pick(addresses: list[IPAddress]) -> IPAddress:
    """First address, preferring IPv4 (Lambda egress is IPv4-first); mapped -> IPv4."""
    normalized: list[IPAddress] = []
    for addr in addresses:
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            normalized.append(addr.ipv4_mapped)
        else:
            normalized.append(addr)
    return next((a for a in normalized if a.version == 4), normalized[0])
