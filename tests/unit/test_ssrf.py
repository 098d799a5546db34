"""The SSRF guard for webhook URLs: what is refused, what is pinned, what allow-lists exempt."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

import pytest

from a2a_serverless.core.egress import (
    EgressPolicy,
    UnsafeWebhookUrl,
    VettedTarget,
    address_block_reason,
    vet_url,
)

STRICT = EgressPolicy()


def fake_resolver(table: dict[str, list[str]]) -> Callable[..., list]:
    """A getaddrinfo stand-in: name -> addresses, gaierror for unknown names."""
    calls: list[str] = []

    def resolve(host: str, port: int, *args: object, **kwargs: object) -> list:
        calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        out = []
        for addr in table[host]:
            if ":" in addr:
                out.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (addr, port, 0, 0)))
            else:
                out.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (addr, port)))
        return out

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


def no_dns(*args: object, **kwargs: object) -> list:
    raise AssertionError("IP literals and localhost must be judged without DNS")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://127.0.0.1/", "loopback"),
        ("https://localhost/", "loopback"),
        ("https://localhost./", "loopback"),
        ("https://LocalHost/", "loopback"),
        ("https://api.localhost/", "loopback"),
        ("https://2130706433/", "loopback"),
        ("https://0177.0.0.1/", "loopback"),
        ("https://0x7f.0.0.1/", "loopback"),
        ("https://0x7f.1/", "loopback"),
        ("https://127.1/", "loopback"),
        ("https://127.0.0.1.:8443/", "loopback"),
        ("https://[::1]/", "loopback"),
        ("https://[::ffff:127.0.0.1]/", "loopback"),
        ("https://[::ffff:7f00:1]/", "loopback"),
        ("https://[::127.0.0.1]/", "loopback"),  # deprecated IPv4-compatible
        ("https://[2002:7f00:1::]/", "loopback"),  # 6to4 embedding 127.0.0.1
        ("https://[2002:a00:1::]/", "private"),  # 6to4 embedding 10.0.0.1
        ("https://[64:ff9b::7f00:1]/", "loopback"),  # NAT64 embedding 127.0.0.1
        ("https://[64:ff9b::a9fe:a9fe]/", "metadata"),  # NAT64 embedding 169.254.169.254
        ("https://10.0.0.1/", "private"),
        ("https://172.16.5.4/", "private"),
        ("https://172.31.255.255/", "private"),
        ("https://192.168.1.1/", "private"),
        ("https://[fd12:3456::1]/", "private"),
        ("https://100.64.1.1/", "cgnat"),
        ("https://169.254.169.254/latest/meta-data", "metadata"),
        ("https://169.254.170.2/v2/credentials", "metadata"),
        ("https://[fd00:ec2::254]/", "metadata"),
        ("https://100.100.100.200/", "metadata"),
        ("https://[::ffff:169.254.169.254]/", "metadata"),
        ("https://169.254.1.1/", "link_local"),
        ("https://[fe80::1]/", "link_local"),
        ("https://0.0.0.0/", "unspecified"),
        ("https://0/", "unspecified"),
        ("https://[::]/", "unspecified"),
        ("https://224.0.0.1/", "multicast"),
        ("https://239.255.255.250/", "multicast"),
        ("https://[ff02::1]/", "multicast"),
        ("https://255.255.255.255/", "reserved"),
        ("https://240.0.0.1/", "reserved"),
        ("https://198.18.0.1/", "reserved"),
        ("https://[2001::1]/", "reserved"),  # Teredo
        ("https://[100::1]/", "reserved"),  # discard-only, outside 2000::/3
        ("https://192.0.2.10/", "documentation"),
        ("https://[2001:db8::1]/", "documentation"),
        ("http://example.com/", "scheme"),
        ("ftp://example.com/", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://example.com/", "scheme"),
        ("example.com/hook", "scheme"),
        ("https://user:pw@example.com/", "userinfo"),
        ("https://user@example.com/", "userinfo"),
        ("https://@example.com/", "userinfo"),
        ("https://example.com\\@127.0.0.1/", "malformed"),
        ("https:///nohost", "missing_host"),
        ("https://:443/", "missing_host"),
        ("https://example.com:0/", "bad_port"),
        ("https://example.com:65536/", "bad_port"),
        ("https://example.com:99999/", "bad_port"),
        ("https://example.com:https/", "bad_port"),
        ("https://example.com:/", "bad_port"),
        ("https://exa mple.com/", "malformed"),
        ("https://[::1/", "malformed"),
        ("https://example.com/\r\nX-Injected: 1", "malformed"),
        ("https://a..b/", "bad_host"),
        ("https://-bad-.example/", "bad_host"),
        ("https://" + "a" * 64 + ".example/", "bad_host"),
    ],
)
def test_refused(url: str, reason: str) -> None:
    # The real resolver: IP literals in their legacy forms and localhost are judged without
    # any DNS query, so this runs offline.
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url(url, STRICT)
    assert info.value.reason == reason, str(info.value)
    assert str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/",
        "https://2130706433/",
        "https://0x7f.1/",
        "https://[::ffff:7f00:1]/",
        "https://localhost/",
        "https://localhost./",
    ],
)
def test_literals_and_localhost_never_hit_dns(url: str) -> None:
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url(url, STRICT, resolve=no_dns)
    assert info.value.reason == "loopback"


def test_name_resolving_to_private_address_is_refused() -> None:
    resolve = fake_resolver({"internal.example": ["10.1.2.3"]})
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("https://internal.example/hook", STRICT, resolve=resolve)
    assert info.value.reason == "private"
    # The client learns the class of problem, not the internal address.
    assert "10.1.2.3" not in str(info.value)
    assert resolve.calls == ["internal.example"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("addresses", "reason"),
    [
        (["93.184.216.34", "10.0.0.7"], "private"),
        (["10.0.0.7", "93.184.216.34"], "private"),
        (["93.184.216.34", "::1"], "loopback"),
        (["2606:2800:220:1::1", "169.254.169.254"], "metadata"),
        (["93.184.216.34", "::ffff:192.168.0.1"], "private"),
        (["93.184.216.34", "fe80::1%eth0"], "link_local"),
    ],
)
def test_every_resolved_address_is_checked(addresses: list[str], reason: str) -> None:
    resolve = fake_resolver({"mixed.example": addresses})
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("https://mixed.example/", STRICT, resolve=resolve)
    assert info.value.reason == reason


def test_public_name_is_accepted_and_pinned() -> None:
    resolve = fake_resolver({"hooks.example.com": ["93.184.216.34"]})
    vetted = vet_url("https://Hooks.Example.COM./a/b?x=1&y=2#frag", STRICT, resolve=resolve)
    assert vetted == VettedTarget(
        url="https://Hooks.Example.COM./a/b?x=1&y=2#frag",
        scheme="https",
        host="hooks.example.com",
        port=443,
        target="/a/b?x=1&y=2",
        address="93.184.216.34",
    )


def test_pin_prefers_ipv4_and_keeps_port_and_default_path() -> None:
    resolve = fake_resolver({"dual.example": ["2606:2800:220:1::1", "93.184.216.34"]})
    vetted = vet_url("https://dual.example:8443", STRICT, resolve=resolve)
    assert (vetted.address, vetted.port, vetted.target) == ("93.184.216.34", 8443, "/")

    v6 = vet_url("https://v6.example/", STRICT, resolve=fake_resolver({"v6.example": ["2606::1"]}))
    assert v6.address == "2606::1"


def test_public_ip_literals_are_accepted_without_dns() -> None:
    assert vet_url("https://93.184.216.34/", STRICT, resolve=no_dns).address == "93.184.216.34"
    v6 = vet_url("https://[2606:4700::1111]:8443/x", STRICT, resolve=no_dns)
    assert (v6.host, v6.address, v6.port) == ("2606:4700::1111", "2606:4700::1111", 8443)
    mapped = vet_url("https://[::ffff:93.184.216.34]/", STRICT, resolve=no_dns)
    assert (mapped.host, mapped.address) == ("93.184.216.34", "93.184.216.34")
    # A public IPv4 behind NAT64 is reachable and fine.
    assert vet_url("https://[64:ff9b::5db8:d822]/", STRICT, resolve=no_dns).address


def test_non_ascii_path_is_percent_encoded_and_idn_host_is_punycoded() -> None:
    resolve = fake_resolver({"xn--bcher-kva.example": ["93.184.216.34"]})
    vetted = vet_url("https://bücher.example/ä%20b?q=é", STRICT, resolve=resolve)
    assert vetted.host == "xn--bcher-kva.example"
    assert vetted.target == "/%C3%A4%20b?q=%C3%A9"


@pytest.mark.parametrize(
    "resolve",
    [
        fake_resolver({}),
        fake_resolver({"nowhere.example": []}),
        fake_resolver({"nowhere.example": ["not-an-ip"]}),
    ],
)
def test_unresolvable(resolve: Callable[..., list]) -> None:
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("https://nowhere.example/", STRICT, resolve=resolve)
    assert info.value.reason == "unresolvable"


def test_message_never_echoes_userinfo() -> None:
    secret = "s3cr3t-Passw0rd"
    for url in (
        f"https://alice:{secret}@example.com/",
        f"https://alice:{secret}@127.0.0.1/",
        f"http://alice:{secret}@example.com/",
        f"https://alice:{secret}@example.com:99999/",
    ):
        with pytest.raises(UnsafeWebhookUrl) as info:
            vet_url(url, STRICT, resolve=no_dns)
        assert secret not in str(info.value)
        assert "alice" not in str(info.value)
        assert secret not in repr(info.value)


def test_allow_http() -> None:
    resolve = fake_resolver({"example.com": ["93.184.216.34"]})
    vetted = vet_url("http://example.com/hook", EgressPolicy(allow_http=True), resolve=resolve)
    assert (vetted.scheme, vetted.port) == ("http", 80)
    # allow_http does not relax the address checks.
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("http://127.0.0.1/", EgressPolicy(allow_http=True))
    assert info.value.reason == "loopback"


@pytest.mark.parametrize("entry", ["127.0.0.1", "127.0.0.0/8", "localhost", "LOCALHOST."])
def test_allow_hosts_exempts_loopback(entry: str) -> None:
    policy = EgressPolicy(allow_http=True, allow_hosts=frozenset({entry}))
    vetted = vet_url("http://localhost:9000/hook", policy, resolve=no_dns)
    assert (vetted.host, vetted.address, vetted.port) == ("localhost", "127.0.0.1", 9000)


def test_allow_hosts_ip_and_cidr_entries() -> None:
    by_ip = EgressPolicy(allow_hosts=frozenset({"127.0.0.1"}))
    assert vet_url("https://127.0.0.1:8443/", by_ip).address == "127.0.0.1"
    with pytest.raises(UnsafeWebhookUrl):
        vet_url("https://127.0.0.2/", by_ip)  # an exact IP entry is not a range

    by_cidr = EgressPolicy(allow_hosts=frozenset({"127.0.0.0/8", "::1"}))
    assert vet_url("https://127.9.9.9/", by_cidr).address == "127.9.9.9"
    assert vet_url("https://[::1]/", by_cidr).address == "::1"
    # Other private ranges stay refused.
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("https://10.0.0.1/", by_cidr)
    assert info.value.reason == "private"


def test_allow_hosts_ip_entry_does_not_exempt_other_resolved_addresses() -> None:
    policy = EgressPolicy(allow_hosts=frozenset({"127.0.0.0/8"}))
    resolve = fake_resolver({"dev.example": ["127.0.0.1", "10.0.0.1"]})
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("https://dev.example/", policy, resolve=resolve)
    assert info.value.reason == "private"


def test_allow_hosts_name_match_is_exact() -> None:
    policy = EgressPolicy(allow_hosts=frozenset({"dev.example"}))
    resolve = fake_resolver({"dev.example": ["10.0.0.5"], "evil.dev.example": ["10.0.0.5"]})
    assert vet_url("https://DEV.example./", policy, resolve=resolve).address == "10.0.0.5"
    for url in ("https://evil.dev.example/", "https://dev.example.evil/"):
        with pytest.raises(UnsafeWebhookUrl):
            vet_url(url, policy, resolve=resolve)


def test_allow_hosts_does_not_relax_scheme_or_userinfo() -> None:
    policy = EgressPolicy(allow_hosts=frozenset({"localhost"}))
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("http://localhost/", policy)
    assert info.value.reason == "scheme"
    with pytest.raises(UnsafeWebhookUrl) as info:
        vet_url("https://u:p@localhost/", policy)
    assert info.value.reason == "userinfo"


def test_policy_accepts_any_iterable_and_is_hashable() -> None:
    policy = EgressPolicy(allow_hosts=["localhost", "10.0.0.0/8"])  # type: ignore[arg-type]
    assert policy.allow_hosts == frozenset({"localhost", "10.0.0.0/8"})
    assert hash(policy) == hash(EgressPolicy(allow_hosts=frozenset({"10.0.0.0/8", "localhost"})))


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("2002:808:808::1", None),  # 6to4 of a public address
        ("127.255.255.254", "loopback"),
        ("172.15.255.255", None),  # just outside 172.16.0.0/12
        ("172.32.0.0", None),
        ("100.63.255.255", None),  # just outside 100.64.0.0/10
        ("100.128.0.0", None),
        ("fec0::1", "private"),  # deprecated site-local
        ("fe80::1%eth0", "link_local"),
    ],
)
def test_address_block_reason(address: str, reason: str | None) -> None:
    assert address_block_reason(ipaddress.ip_address(address)) == reason
