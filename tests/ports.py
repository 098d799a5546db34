"""Ports for the servers tests start, without two of them ever choosing the same one.

A port the OS hands out for `bind(("127.0.0.1", 0))` comes from the ephemeral range
(32768-60999 on Linux), from which every outgoing connection also takes its local port, and
another test process may be handed the same one before the server binds it. Each pytest-xdist
worker instead takes ports from its own slice of 20000-31999, below that range, each checked
free when taken.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

FIRST, LAST = 20_000, 31_999
SLICES = 8  # pytest-xdist workers with a slice of their own (more share theirs modulo 8)


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    digits = worker.removeprefix("gw")
    return int(digits) % SLICES if digits.isdigit() else 0


_SIZE = (LAST - FIRST + 1) // SLICES
_START = FIRST + _worker_index() * _SIZE
_NEXT = itertools.count(random.randrange(_SIZE))


def listen_port() -> int:
    """A free loopback port of this worker's slice (the next one in turn that binds)."""
    for _ in range(_SIZE):
        port = _START + next(_NEXT) % _SIZE
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_START}-{_START + _SIZE - 1}")
