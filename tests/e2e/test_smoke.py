"""`a2a-serverless smoke` (and scripts/smoke, the same command), the post-deploy smoke test,
run exactly as a user runs it (a subprocess): it passes against the session's local stack, and
it fails — non-zero exit, FAIL lines — against a wrong base URL and against a server that
answers a bad card or 500s. `--long` against the local stack proves the smoke's own logic (a
subscribe and a blocking send held past the limit, followed to their end; the limit lowered
from 29 s): the local gateway has no such limit, so only a run against a deployed stack proves
API Gateway's behaviour."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import (
    CARD_PATH,
    LOCAL_PRINCIPAL_HEADER,
    ROOT,
    DevServer,
    new_principal,
    server_fixture,
)
from tests.e2e.test_cli import command, run_command, user_env

SMOKE = ROOT / "scripts" / "smoke"
CHECKS = [
    "agent-card",
    "send-blocking",
    "send-nonblocking",
    "stream",
    "subscribe",
    "push-config",
    "jsonrpc",
    "long-subscribe",
    "long-request",
]
LONG = ["long-subscribe", "long-request"]
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


def run_smoke(*args: str, installed: bool = False) -> SmokeRun:
    """scripts/smoke ARGS, or (installed) `a2a-serverless smoke ARGS` from a user's shell."""
    done = subprocess.run(
        command("smoke", *args) if installed else [str(SMOKE), *args],
        cwd=ROOT,
        env=user_env() if installed else None,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    return SmokeRun(done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("installed", [False, True], ids=["scripts-smoke", "a2a-serverless"])
def test_smoke_passes_against_the_local_stack(
    base_url: str, raw: Callable[..., httpx.Client], installed: bool
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
        installed=installed,
    )
    assert run.code == 0, run.explain()
    document = run.document
    assert document["ok"] is True and document["baseUrl"] == base_url, run.explain()
    checks = run.checks
    assert list(checks) == CHECKS, run.explain()
    # Against the echo flow every check applies: only the opt-in long ones are skipped.
    for name in CHECKS[: -len(LONG)]:
        assert checks[name]["status"] == "PASS", run.explain()
    for name in LONG:
        long_check = checks[name]
        assert long_check["status"] == "SKIP" and "--long" in long_check["detail"], run.explain()
    # The human lines go to stderr with --json, one per check.
    for name, check in checks.items():
        assert f"{check['status']}  {name}" in run.stderr, run.explain()
    assert "OK: 7 passed, 0 failed, 2 skipped" in run.stderr, run.explain()
    # The stream was delivered live: its first event came seconds before the [slow=3] end.
    stream = checks["stream"]["timings"]
    assert 0 < stream["first_byte_s"] <= stream["first_event_s"] < stream["total_s"] - 1.5
    assert "delivered live" in checks["stream"]["detail"], run.explain()
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
    # POST /message:stream: None = 500; "live" = the events as the task runs; "buffered" =
    # all of them at its end (a gateway that does not stream the response).
    stream: str | None = None


FAKE_TASK_SECONDS = 3.0


def fake_events() -> list[bytes]:
    ids = {"taskId": "t-1", "contextId": "c-1"}
    events = [
        {"task": {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}},
        {"statusUpdate": {**ids, "status": {"state": "TASK_STATE_COMPLETED"}}},
    ]
    return [f"data: {json.dumps(event)}\n\n".encode() for event in events]


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
            if self.path == "/prod/message:stream" and agent.stream:
                self._stream(agent.stream)
                return
            if self.command == "GET" and self.path == "/prod" + CARD_PATH and agent.card:
                status, body = 200, json.dumps(agent.card).encode()
            else:
                status, body = 500, b'{"message": "Internal server error"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _stream(self, mode: str) -> None:
            first, last = fake_events()
            if mode == "buffered":
                time.sleep(FAKE_TASK_SECONDS)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(first)
            self.wfile.flush()
            if mode == "live":
                time.sleep(FAKE_TASK_SECONDS)
            self.wfile.write(last)
            self.wfile.flush()
            self.close_connection = True

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
    for name in CHECKS[1 : -len(LONG)]:
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


# -- --long: past the gateway's limit (lowered here: the local stack has none) ----------------

LONG_RUN_SECONDS = 120.0
# --long-limit: the checks' logic is the same at 29 s, in a fraction of the time.
LIMIT = 4


def run_long(base_url: str, *args: str) -> SmokeRun:
    done = subprocess.run(
        command("smoke", base_url, "--long", "--long-limit", str(LIMIT), "--json", *args),
        cwd=ROOT,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=LONG_RUN_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    return SmokeRun(done.returncode, done.stdout, done.stderr)


def test_long_checks_hold_a_subscribe_and_a_blocking_send_past_the_limit(base_url: str) -> None:
    run = run_long(base_url, "--push-url", "http://127.0.0.1:9/a2a-smoke")
    assert run.code == 0, run.explain()
    checks = run.checks
    assert [name for name, c in checks.items() if c["status"] != "PASS"] == [], run.explain()
    # The subscribe followed the [slow=10] task to its end, events arriving all along.
    subscribe = checks["long-subscribe"]
    assert (
        subscribe["timings"]["total_s"] > LIMIT
        and "ended TASK_STATE_COMPLETED" in (subscribe["detail"])
    ), run.explain()
    assert subscribe["timings"]["first_event_s"] < LIMIT / 2, run.explain()
    request = checks["long-request"]
    assert request["timings"]["send_s"] > LIMIT, run.explain()
    assert "TASK_STATE_COMPLETED" in request["detail"], run.explain()


asks_server = server_fixture(
    "smoke-asks",
    args=("--flow", "tests.e2e.smoke_flows:asks"),
    env={"STREAM_HEARTBEAT_SECONDS": "5"},
)


def test_long_checks_against_a_flow_of_ones_own(asks_server: DevServer) -> None:
    """Another flow: no [slow=N] to lean on. Its tasks wait for input, so the subscribe is
    held open on keep-alives and closed by the smoke; the blocking send cannot be proved."""
    run = run_long(asks_server.base_url, "--push-url", "http://127.0.0.1:9/a2a-smoke")
    assert run.code == 0, run.explain()
    checks = run.checks
    assert "custom flow" in checks["agent-card"]["detail"], run.explain()
    assert "not provable with this flow" in checks["stream"]["detail"], run.explain()
    subscribe = checks["long-subscribe"]
    assert subscribe["status"] == "PASS", run.explain()
    assert "closed by the smoke, the task still TASK_STATE_INPUT_REQUIRED" in subscribe["detail"]
    assert subscribe["timings"]["total_s"] >= LIMIT + 6, run.explain()
    request = checks["long-request"]
    assert request["status"] == "SKIP" and "needs the echo flow" in request["detail"]


@pytest.mark.parametrize(("mode", "status"), [("buffered", "FAIL"), ("live", "PASS")])
def test_a_buffered_stream_fails(fake_agent: FakeAgent, mode: str, status: str) -> None:
    """The echo flow's [slow=3] stream must arrive as it happens: the same events held back
    until the task's end (a route whose response is not streamed) fail the check."""
    fake_agent.card = fake_card(fake_agent.base_url + "/prod")
    fake_agent.stream = mode
    run = run_smoke(f"{fake_agent.base_url}/prod", "--json", "--timeout", "10")
    stream = run.checks["stream"]
    assert stream["status"] == status, run.explain()
    if mode == "buffered":
        assert "buffered route" in stream["detail"], run.explain()
    else:
        assert "delivered live" in stream["detail"], run.explain()


# -- keys, then the smoke with the key: the operator's path on Auth=ApiKey ------------------------

# The auth modes' ApiKey server (one process for the three modules that need one).
apikey_server = server_fixture(
    "smoke-apikey", args=("--param", "Auth=ApiKey", "--param", "AuthCacheTtlSeconds=5")
)


def test_a_key_from_the_command_passes_the_smoke(apikey_server: DevServer) -> None:
    url = apikey_server.base_url
    made = run_command("keys", "create", "--url", url, "--principal", "smoke", cwd=ROOT)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    run = run_smoke(url, "--json", "--push-url", "http://127.0.0.1:9/hook", "--api-key", key)
    assert run.code == 0 and run.document["counts"]["PASS"] == 7, run.explain()
    # Without it every operation but the public card is refused, and the run says why.
    run = run_smoke(url, "--json", "--timeout", "10", installed=True)
    assert run.code == 1 and run.checks["agent-card"]["status"] == "PASS", run.explain()
    assert "HTTP 401" in run.checks["send-blocking"]["detail"], run.explain()
    assert "--api-key KEY" in run.checks["send-blocking"]["detail"], run.explain()
