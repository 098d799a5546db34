"""The SSRF guard against the operating system's resolver (tests/unit/test_ssrf.py runs it on
a stand-in)."""

from __future__ import annotations

import socket


def test_real_resolver_decodes_legacy_ipv4_forms_the_same_way() -> None:
    # Our parsing of 2130706433 / 0x7f.1 / 127.1 agrees with what the OS would connect to.
    for form in ("2130706433", "0177.0.0.1", "0x7f.1", "127.1"):
        infos = socket.getaddrinfo(form, 443, type=socket.SOCK_STREAM)
        assert {i[4][0] for i in infos} == {"127.0.0.1"}, form
