"""Webhook receivers for integration tests: one HTTP server on 127.0.0.1 whose hooks (paths)
each answer from a script and keep a log of their POSTs."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What a webhook answers to its n-th POST (0-based): a status, or (seconds to wait, status).
Answer = int | tuple[float, int]
Script = Callable[[int], Answer]


def always(status: int) -> Script:
    return lambda _n: status


def failing_first(count: int, status: int = 500) -> Script:
    return lambda n: status if n < count else 200


@dataclass(frozen=True)
class Post:
    hook: str
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]
    status: int  # what the receiver answered
    at: float = 0.0  # time.monotonic() when it arrived

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _Server(ThreadingHTTPServer):
    # A listen backlog as a web server's (socketserver's default is 5): ten webhooks are
    # POSTed side by side, and a SYN dropped from a full backlog is retried after 1 s, past a
    # scaled-down slow threshold.
    request_queue_size = 128


class Webhooks:
    """One HTTP server; each hook is a path with its own script and its own log of POSTs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.scripts: dict[str, Script] = {}
        self.posts: list[Post] = []
        receivers = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receivers.receive(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def hook(self, name: str, script: Script) -> str:
        self.scripts[name] = script
        return f"http://127.0.0.1:{self.port}/hooks/{name}"

    def receive(self, request: BaseHTTPRequestHandler) -> None:
        name = request.path.removeprefix("/hooks/")
        body = request.rfile.read(int(request.headers.get("Content-Length", "0")))
        with self.lock:
            index = sum(1 for p in self.posts if p.hook == name)
            answer = self.scripts.get(name, always(404))(index)
            delay, status = answer if isinstance(answer, tuple) else (0.0, answer)
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.posts.append(Post(name, headers, json.loads(body), status, time.monotonic()))
        time.sleep(delay)
        with contextlib.suppress(OSError):  # a sender that timed out has hung up
            request.send_response(status)
            request.send_header("Content-Length", "0")
            request.end_headers()

    def posts_to(self, name: str) -> list[Post]:
        with self.lock:
            return [p for p in self.posts if p.hook == name]

    def delivered(self, name: str) -> list[dict[str, Any]]:
        """The bodies the hook accepted, in the order they arrived."""
        return [p.body for p in self.posts_to(name) if p.ok]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
