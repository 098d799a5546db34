"""What the e2e suite saw, and the closing check that it strictly checked every operation.

Every response an e2e client receives is recorded in SEEN (tests/e2e/conftest.py) and checked
by tests/wire.py, which records what it checked. Each process of the run hands those records
over (`session_record`); when the whole e2e suite has run, the session's closing check
(tests/conftest.py) calls `closing_problems` on them and fails the session if an operation was
never checked, whatever order or process the tests ran in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

from tests import wire

CARD_PATH = "/.well-known/agent-card.json"
CORE_OPERATIONS = {"GetAgentCard", "SendMessage", "GetTask", "ListTasks", "CancelTask"}
STREAM_OPERATIONS = {"SendStreamingMessage", "SubscribeToTask"}
PUSH_OPERATIONS = {"PushNotificationConfig"}
# Every push config route (spec §11.3.3): create and list on the collection, get and delete on
# one config.
PUSH_ROUTES = {"POST configs", "GET configs", "GET config", "DELETE config"}


@dataclass
class Seen:
    """One response the suite saw and checked."""

    source: str  # "sdk" (a2a-sdk client) or "raw" (the suite's own httpx requests)
    method: str
    path: str
    status: int
    rpc: str | None = None  # "<version> <method>" of a JSON-RPC call on POST /


# Every response any e2e client received, and every strict-check failure (kept even if some
# caller swallowed the exception raised by the hook).
SEEN: list[Seen] = []
CHECK_FAILURES: list[str] = []


def operation(method: str, path: str) -> str:
    """The A2A operation (or route family) a request addressed (under a tenant or not)."""
    path = wire.without_tenant(path.split("?")[0])
    if path == CARD_PATH:
        return "GetAgentCard"
    if method == "POST" and path == "/message:send":
        return "SendMessage"
    if method == "POST" and path == "/message:stream":
        return "SendStreamingMessage"
    if method == "GET" and path == "/tasks":
        return "ListTasks"
    if path.startswith("/tasks/") and "/pushNotificationConfigs" in path:
        return "PushNotificationConfig"
    # By POST or by GET (the proto's rule; the gateway's GET /tasks/{id} route).
    if method in ("GET", "POST") and path.startswith("/tasks/") and path.endswith(":subscribe"):
        return "SubscribeToTask"
    if method == "GET" and path.startswith("/tasks/"):
        return "GetTask"
    if method == "POST" and path.startswith("/tasks/") and path.endswith(":cancel"):
        return "CancelTask"
    return "Other"


def push_route(method: str, path: str) -> str | None:
    """Which push config route a request addressed, e.g. "DELETE config"; None for others."""
    path = path.split("?")[0]
    if operation(method, path) != "PushNotificationConfig":
        return None
    return f"{method} {'configs' if path.endswith('/pushNotificationConfigs') else 'config'}"


@dataclass
class Observed:
    """The records of an e2e run (`closing_problems`), or made-up ones (the check's tests)."""

    seen: Sequence[Seen]
    check_failures: Sequence[str] = ()
    checked: Sequence[Any] = ()  # wire.CHECKED
    sse_checked: Sequence[tuple[str, str, int, int, bool]] = ()  # wire.SSE_CHECKED
    rpc_checked: Sequence[Any] = ()  # wire.RPC_CHECKED
    rpc_sse_checked: Sequence[Any] = ()  # wire.RPC_SSE_CHECKED
    problems: list[str] = field(default_factory=list)

    def need(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)


def coverage_problems(observed: Observed) -> list[str]:
    """Why the responses seen do not prove every operation strictly checked ([] if they do)."""
    o = observed
    seen = o.seen
    o.need(not o.check_failures, "strict checks failed:\n" + "\n".join(o.check_failures))
    o.need(len(seen) > 100, f"only {len(seen)} responses seen")
    # Every response was checked: HTTP+JSON ones as such, JSON-RPC answers of `POST /` by the
    # version and method of their request.
    rest_seen = [s for s in seen if s.rpc is None]
    rpc_seen = [s for s in seen if s.rpc is not None]
    o.need(
        len(o.checked) + len(o.sse_checked) >= len(rest_seen),
        f"{len(rest_seen)} HTTP+JSON responses, fewer checked",
    )
    o.need(
        len(o.rpc_checked) + len(o.rpc_sse_checked) >= len(rpc_seen),
        f"{len(rpc_seen)} JSON-RPC responses, fewer checked",
    )

    def ops(source: str) -> set[str]:
        return {
            operation(s.method, s.path)
            for s in seen
            if s.source == source and 200 <= s.status < 300
        }

    every = CORE_OPERATIONS | STREAM_OPERATIONS | PUSH_OPERATIONS
    # The a2a-sdk client's own requests went through the strict check, for every operation;
    # and the raw requests covered every route, successes and errors alike.
    for source in ("sdk", "raw"):
        missing = every - ops(source)
        o.need(not missing, f"no strictly checked {source} success of {sorted(missing)}")
    # Push configs: a strictly parsed success on each route, and their errors (400 invalid or
    # refused config or capability off, 404 unknown task or config) as google.rpc.Status.
    push = [(push_route(s.method, s.path), s.status) for s in seen if s.source == "raw"]
    ok_routes = {route for route, status in push if route and 200 <= status < 300}
    o.need(ok_routes >= PUSH_ROUTES, f"push config routes without a success: {ok_routes}")
    push_errors = {status for route, status in push if route and status >= 400}
    o.need(push_errors >= {400, 404}, f"push config errors seen: {push_errors}")
    # Stream operations failed before any stream bytes too (errors are Status JSON, not SSE).
    failed_ops = {operation(s.method, s.path) for s in seen if s.status >= 400}
    o.need(failed_ops >= STREAM_OPERATIONS, f"stream operations never failed: {failed_ops}")
    # Every SSE body was checked frame by frame, from both clients, and most were read to the
    # end (so their closing rules were checked too).
    sse_ops = {operation(method, path) for method, path, _, _, _ in o.sse_checked}
    o.need(sse_ops == STREAM_OPERATIONS, f"SSE bodies checked of {sse_ops}")
    complete = sum(1 for *_, done in o.sse_checked if done)
    o.need(complete >= 10, f"only {complete} SSE bodies read to the end")
    o.need(any(c for _, _, _, c, _ in o.sse_checked), "no heartbeat was seen")
    streamed = sum(
        1
        for s in seen
        if 200 <= s.status < 300 and operation(s.method, s.path) in STREAM_OPERATIONS
    )
    o.need(
        len(o.sse_checked) == streamed,
        f"{streamed} streams answered, {len(o.sse_checked)} SSE bodies checked",
    )
    statuses = {s.status for s in seen}
    o.need({200, 304, 400, 404, 413, 415} <= statuses, f"statuses seen: {statuses}")
    return o.problems


E2E_MODULES = {path.name for path in Path(__file__).parent.glob("test_*.py")}


def session_record(collected: list[str], ran: set[str], deselected: bool) -> dict[str, Any]:
    """What this process collected, ran, saw and checked, as plain data."""
    return {
        "collected": collected,
        "ran": sorted(ran.intersection(collected)),
        "deselected": deselected,
        "seen": [astuple(seen) for seen in SEEN],
        "check_failures": list(CHECK_FAILURES),
        "checked": list(wire.CHECKED),
        "sse_checked": list(wire.SSE_CHECKED),
        "rpc_checked": list(wire.RPC_CHECKED),
        "rpc_sse_checked": list(wire.RPC_SSE_CHECKED),
    }


def closing_problems(records: list[dict[str, Any]]) -> list[str] | None:
    """`coverage_problems` over every process's record; None unless every e2e test was
    collected, selected and run (with part of the suite the counts say nothing)."""
    collected = {nodeid for record in records for nodeid in record["collected"]}
    ran = {nodeid for record in records for nodeid in record["ran"]}
    modules = {nodeid.split("::")[0].rsplit("/", 1)[-1] for nodeid in collected}
    if any(record["deselected"] for record in records) or not modules >= E2E_MODULES:
        return None
    if not collected <= ran:
        return None

    def joined(key: str) -> list[Any]:
        return [tuple(entry) for record in records for entry in record[key]]

    return coverage_problems(
        Observed(
            [Seen(*entry) for entry in joined("seen")],
            [failure for record in records for failure in record["check_failures"]],
            joined("checked"),
            joined("sse_checked"),
            joined("rpc_checked"),
            joined("rpc_sse_checked"),
        )
    )
