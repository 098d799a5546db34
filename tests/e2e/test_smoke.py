"""`scripts/smoke`, the post-deploy smoke test, run exactly as a user runs it (a subprocess):
it passes against the session's local stack, and it fails — non-zero exit, FAIL lines — against
a wrong base URL and against a server that answers a bad card or 500s."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import CARD_PATH, LOCAL_PRINCIPAL_HEADER, ROOT, new_principal

SMOKE = ROOT / "scripts" / "smoke"
CHECKS = [
    "agent-card",
    "send-blocking",
    "send-nonblocking",
    "stream",
    "subscribe",
    "push-config",
    "jsonrpc",
    "long-request",
]
RUN_TIMEOUT_SECONDS = 180.0
# Tasks one default run creates: both sends, the stream, the subscribe, push-config, jsonrpc.
SMOKE_TASKS = 6


@dataclass
class SmokeRun:
    code: int
    stdout: str
    stderr: str

    @property
    def document(self) -> dict[str, Any]:
        return json.loads(self.stdout)

    @property
    def checks(self) -> dict[str, dict[str, Any]]:
        return {check["name"]: check for check in self.document["checks"]}

    def explain(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def run_smoke(*args: str) -> SmokeRun:
    done = subprocess.run(
        [str(SMOKE), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    return SmokeRun(done.returncode, done.stdout, done.stderr)


def test_smoke_passes_against_the_local_stack(
    base_url: str, raw: Callable[..., httpx.Client]
) -> None:
    # The local stack allows http webhooks on loopback only (example.com is refused there);
    # nothing listens on port 9 and nothing is delivered: the config's task has finished.
    principal = new_principal("smoke")
    run = run_smoke(
        base_url,
        "--json",
        "--push-url",
        "http://127.0.0.1:9/a2a-smoke",
        "--header",
        f"{LOCAL_PRINCIPAL_HEADER}:{principal}",
    )
    assert run.code == 0, run.explain()
    document = run.document
    assert document["ok"] is True and document["baseUrl"] == base_url, run.explain()
    checks = run.checks
    assert list(checks) == CHECKS, run.explain()
    # Against the echo flow every check applies: only the opt-in long request is skipped.
    for name in CHECKS[:-1]:
        assert checks[name]["status"] == "PASS", run.explain()
    long_check = checks["long-request"]
    assert long_check["status"] == "SKIP" and "--long" in long_check["detail"], run.explain()
    # The human lines go to stderr with --json, one per check.
    for name, check in checks.items():
        assert f"{check['status']}  {name}" in run.stderr, run.explain()
    assert "OK: 7 passed, 0 failed, 1 skipped" in run.stderr, run.explain()
    stream = checks["stream"]["timings"]
    assert 0 < stream["first_byte_s"] <= stream["total_s"], stream
    # The subscribe really followed the busy task: the snapshot, then events until it ended.
    subscribe = checks["subscribe"]
    assert "snapshot TASK_STATE_SUBMITTED" in subscribe["detail"] or (
        "snapshot TASK_STATE_WORKING" in subscribe["detail"]
    ), subscribe
    assert subscribe["timings"]["total_s"] >= 2.5, subscribe  # [slow=3] was followed live
    # The --header reached the server on every send: the smoke's tasks (one per check that
    # sends) all belong to that fresh principal.
    listed = raw(principal=principal).get("/tasks", params={"pageSize": 50}).json()
    assert listed["totalSize"] == SMOKE_TASKS, listed


def test_smoke_fails_on_a_wrong_stage_prefix(base_url: str) -> None:
    run = run_smoke(f"{base_url}/prod", "--timeout", "10")
    assert run.code == 1, run.explain()
    lines = run.stdout.splitlines()
    assert any(line.startswith("FAIL  agent-card") and "HTTP 404" in line for line in lines), (
        run.explain()
    )
    # `/prod/message:send` and the like are valid tenant routes (tenant "prod"), so some of the
    # operations pass; the card has no tenant binding, and that failure fails the run.
    assert lines[-1].startswith("FAILED: "), run.explain()


def test_smoke_fails_when_unreachable() -> None:
    # Port 1 on loopback: connection refused at once. The card fails, the rest cannot run.
    run = run_smoke("http://127.0.0.1:1", "--timeout", "5", "--json")
    assert run.code == 1, run.explain()
    checks = run.checks
    assert checks["agent-card"]["status"] == "FAIL", run.explain()
    assert "cannot reach" in checks["agent-card"]["detail"], run.explain()
    assert {c["status"] for name, c in checks.items() if name != "agent-card"} == {"SKIP"}


# -- a fake server: a card (good or bad) and 500 for everything else ---------------------------


@dataclass
class FakeAgent:
    base_url: str
    card: dict[str, Any] | None  # None: the card route answers 500 as well
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


def fake_card(interface_url: str) -> dict[str, Any]:
    """A strict A2A 1.0 card declaring both 1.0 interfaces at interface_url."""
    return {
        "name": "Fake Agent",
        "description": "answers a card and nothing else",
        "supportedInterfaces": [
            {"url": interface_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": interface_url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ],
        "version": "1.0.0",
        "capabilities": {"streaming": True, "pushNotifications": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "d", "tags": ["echo"]}],
    }


@pytest.fixture
def fake_agent() -> Iterator[FakeAgent]:
    agent = FakeAgent(base_url="", card=None)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            agent.requests.append((self.command, self.path, dict(self.headers.items())))
            if self.command == "GET" and self.path == "/prod" + CARD_PATH and agent.card:
                status, body = 200, json.dumps(agent.card).encode()
            else:
                status, body = 500, b'{"message": "Internal server error"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    agent.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield agent
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


CARD_CASES = {
    # The classic deploy mistake: PUBLIC_BASE_URL (or the derived URL) without the stage.
    "stage-missing": (lambda origin: fake_card(origin), "FAIL", "stage"),
    "other-host": (
        lambda origin: fake_card("https://agent.example.org"),
        "FAIL",
        "PUBLIC_BASE_URL",
    ),
    "not-strict": (
        lambda origin: {**fake_card(origin + "/prod"), "capabilities": {"streamin": True}},
        "FAIL",
        "not a strict A2A 1.0 AgentCard",
    ),
    "card-500": (None, "FAIL", "HTTP 500"),
    # Control: a good card passes, so the other cases fail for their defect alone.
    "good-card": (lambda origin: fake_card(origin + "/prod"), "PASS", "at the base URL"),
}


@pytest.mark.parametrize("case", list(CARD_CASES))
def test_smoke_fails_against_a_bad_server(fake_agent: FakeAgent, case: str) -> None:
    make_card, card_status, card_detail = CARD_CASES[case]
    fake_agent.card = make_card(fake_agent.base_url) if make_card else None
    key = uuid.uuid4().hex
    run = run_smoke(
        f"{fake_agent.base_url}/prod",
        "--json",
        "--timeout",
        "10",
        "--api-key",
        key,
        "--header",
        "X-Smoke-Test: yes",
    )
    assert run.code == 1, run.explain()
    checks = run.checks
    assert checks["agent-card"]["status"] == card_status, run.explain()
    assert card_detail in checks["agent-card"]["detail"], run.explain()
    for name in CHECKS[1:-1]:
        assert checks[name]["status"] == "FAIL", run.explain()
        assert "HTTP 500" in checks[name]["detail"], run.explain()
    assert "FAIL  send-blocking" in run.stderr, run.explain()
    # Every request carried the authentication options.
    assert fake_agent.requests, run.explain()
    for method, path, headers in fake_agent.requests:
        lowered = {k.lower(): v for k, v in headers.items()}
        assert lowered.get("x-api-key") == key, (method, path, headers)
        assert lowered.get("x-smoke-test") == "yes", (method, path, headers)
        assert lowered.get("a2a-version") == "1.0", (method, path, headers)
        assert path.startswith("/prod/"), (method, path)


def test_smoke_usage_errors_exit_2() -> None:
    run = run_smoke("not-a-url")
    assert run.code == 2 and "BASE_URL must be an http(s) URL" in run.stderr, run.explain()
    run = run_smoke("http://127.0.0.1:1", "--header", "no-colon")
    assert run.code == 2 and "NAME:VALUE" in run.stderr, run.explain()
