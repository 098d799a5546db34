"""Soak test: mixed A2A operations for a long while, then errors, latency and server memory.

By default it starts its own local stack (`scripts/dev` on a free port, stopped with SIGINT at
the end, as Ctrl-C stops it); `--url` targets a stack that is already running (deployed or
local: `--pid` then names the server process whose memory to watch). Concurrent workers
(`--workers`) each run the same mix of scenarios, in turn, for `--duration` seconds:

  HTTP+JSON     blocking and non-blocking sends (polled with GET /tasks/{id}), SSE streams read
                to the end, subscribes to a running task (`[slow=2]`), cancels of a slow task
                (`[slow=3]`), two-turn `[input]` tasks, ListTasks pages (with and without
                artifacts and history), push config create/get/list/delete, and streams with an
                inline webhook config
  JSON-RPC 1.0  the same operations on `POST /`
  JSON-RPC 0.3  message/send, message/stream (with and without an inline webhook), tasks/get,
                tasks/cancel

Webhooks point at a small HTTP receiver this script runs on 127.0.0.1: every delivery is
recorded, and at the end each webhook must have received exactly its task's event log (1.0:
the same events the stream carried after its snapshot, the snapshot's own events before them;
0.3: the task as of each event, ending completed).

The report: per operation (one HTTP request each) the count, errors and p50/p95/max latency;
the RSS of the server's process tree (from /proc: at start, after a warm-up pass, a few samples
during the run, at the end; the growth after warm-up and per 1000 operations); webhook
deliveries received vs expected; tasks this run created that are still not terminal. Exit code
1 on any error, missing delivery, task left unfinished or RSS growth beyond
`--max-rss-growth-mb`; 2 on a usage error. `--json` prints the report as JSON on stdout (the
human summary then goes to stderr).

A config created on a task that has just ended may still receive events of that task (the
webhook sender reads a task's configs per stream batch, and may lag behind the task): those
deliveries are counted apart and must be that task's events, each once, in log order. The
webhook lag is the time from a stream's end (the client saw the terminal status) to the
arrival of the same task's last delivery.

Memory: the local stack keeps its tasks in memory (moto) until they expire, as DynamoDB's TTL
deletes them (local/ttl.py); the server started here makes them expire `--ttl-seconds` (120)
after their last write (A2A_LOCAL_TTL_SECONDS), so a run longer than that reaches a steady
state where as much expires as is written. `steadyGrowthMb` is the RSS growth from the first
sample after 2 x TTL of load to the end (fails beyond `--max-steady-growth-mb`, 25);
`growthPer1000OpsMb` is the slope since the warm-up, to compare between runs. Latencies are
those of one machine running the client, the whole stack and whatever else it runs: compare
runs made on the same machine.

Usage: scripts/soak [--duration S] [--workers N] [--url BASE_URL [--pid PID]] [--json] ...
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
DEV_SCRIPT = ROOT / "scripts" / "dev"
CARD_PATH = "/.well-known/agent-card.json"
A2A_JSON = "application/a2a+json"
EVENT_STREAM = "text/event-stream"
PRINCIPAL_HEADER = "X-Local-Principal"
TTL_ENV = "A2A_LOCAL_TTL_SECONDS"  # local/ttl.py: items expire this long after their write
STARTUP_TIMEOUT_SECONDS = 90.0
SHUTDOWN_TIMEOUT_SECONDS = 15.0
POLL_SECONDS = 0.25
SETTLE_SECONDS = 60.0  # how long a non-blocking task may take to finish
DRAIN_SECONDS = 60.0  # after the run: for the last webhook deliveries and tasks to finish
MAX_ERROR_SAMPLES = 25

TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
INTERRUPTED = {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}
NON_TERMINAL = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", *sorted(INTERRUPTED)]
V03_TERMINAL = {"completed", "failed", "canceled", "rejected"}


class OpFailed(Exception):
    """One request got an answer it must not get (status, protocol, shape or content)."""


# -- statistics ----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass
class OpStats:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0

    def summary(self) -> dict[str, Any]:
        ms = [v * 1000 for v in self.latencies]
        return {
            "count": len(ms),
            "errors": self.errors,
            "p50Ms": round(percentile(ms, 0.50), 1),
            "p95Ms": round(percentile(ms, 0.95), 1),
            "maxMs": round(max(ms, default=0.0), 1),
        }


class Stats:
    """Per-operation outcomes, shared by the workers (one lock: contention is negligible next to
    an HTTP request)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: dict[str, OpStats] = {}
        self.samples: list[dict[str, str]] = []
        self.notes: dict[str, int] = {}
        self.total = 0

    def record(self, op: str, seconds: float, error: str | None) -> None:
        with self.lock:
            stats = self.ops.setdefault(op, OpStats())
            stats.latencies.append(seconds)
            self.total += 1
            if error is not None:
                stats.errors += 1
                if len(self.samples) < MAX_ERROR_SAMPLES:
                    self.samples.append({"operation": op, "detail": error[:500]})

    def error(self, op: str, detail: str) -> None:
        """A failure found outside any one request (e.g. a stream's content)."""
        with self.lock:
            self.ops.setdefault(op, OpStats()).errors += 1
            if len(self.samples) < MAX_ERROR_SAMPLES:
                self.samples.append({"operation": op, "detail": detail[:500]})

    def note(self, name: str) -> None:
        with self.lock:
            self.notes[name] = self.notes.get(name, 0) + 1

    @property
    def errors(self) -> int:
        with self.lock:
            return sum(s.errors for s in self.ops.values())


# -- server memory -------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name, which is in parentheses and may hold anything.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_rss_mb(pid: int) -> float | None:
    """Resident memory of `pid` and all its descendants, in MiB (None once it is gone)."""
    tree = _children()
    total_kb = 0
    found = False
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
                    found = True
        except OSError:
            pass
        pending.extend(tree.get(current, []))
    return round(total_kb / 1024, 1) if found else None


# -- the webhook receiver ------------------------------------------------------------------------


class Receiver:
    """A threaded HTTP server on loopback recording each POST body by path (one path per
    webhook). Answers 200 at once."""

    def __init__(self, host: str, public_base: str | None) -> None:
        self.lock = threading.Lock()
        self.bodies: dict[str, list[bytes]] = {}
        self.arrivals: dict[str, list[float]] = {}  # time.monotonic() of each body
        self.content_types: dict[str, set[str]] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                with receiver.lock:
                    receiver.bodies.setdefault(path, []).append(body)
                    receiver.arrivals.setdefault(path, []).append(time.monotonic())
                    receiver.content_types.setdefault(path, set()).add(
                        (self.headers.get("Content-Type") or "").split(";")[0]
                    )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        port = self.server.server_address[1]
        self.base = (public_base or f"http://{host}:{port}").rstrip("/")
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def new_hook(self, kind: str) -> tuple[str, str]:
        """A fresh webhook: (its path here, its URL)."""
        path = f"/hook/{kind}/{uuid.uuid4().hex}"
        return path, self.base + path

    def received(self, path: str) -> list[bytes]:
        with self.lock:
            return list(self.bodies.get(path, []))

    def last_arrival(self, path: str) -> float | None:
        with self.lock:
            times = self.arrivals.get(path)
            return times[-1] if times else None

    def total(self, prefix: str = "/hook/") -> int:
        with self.lock:
            return sum(len(v) for k, v in self.bodies.items() if k.startswith(prefix))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class PushExpectation:
    """A webhook set inline on a streamed send, and what that stream carried."""

    path: str
    version: str  # "1.0" or "0.3"
    text: str
    snapshot: dict[str, Any]
    tail: list[dict[str, Any]]  # the stream's events after the snapshot
    closed_at: float = field(default_factory=time.monotonic)  # when the stream ended


def _artifact_text(events: list[dict[str, Any]]) -> str:
    return "".join(
        part.get("text", "")
        for e in events
        if "artifactUpdate" in e
        for part in e["artifactUpdate"]["artifact"].get("parts", [])
    )


def _task_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def _is_part_of_log(bodies: list[bytes], task_id: str) -> bool:
    """Whether webhook bodies are distinct events of `task_id`, their states in log order."""
    try:
        events = [json.loads(b) for b in bodies]
        members = [next(iter(e.values())) for e in events]
    except (ValueError, StopIteration, AttributeError):
        return False
    order = {"TASK_STATE_SUBMITTED": 0, "TASK_STATE_WORKING": 1, **dict.fromkeys(TERMINAL, 2)}
    states = [
        order.get(state_of(m), -1)
        for e, m in zip(events, members, strict=True)
        if "statusUpdate" in e
    ]
    return (
        all(m.get("taskId") == task_id for m in members)
        and len(set(bodies)) == len(bodies)
        and -1 not in states
        and states == sorted(states)
    )


def check_push(exp: PushExpectation, bodies: list[bytes]) -> tuple[int, str | None]:
    """(events expected, problem or None) for the deliveries one webhook received."""
    try:
        pushed = [json.loads(b) for b in bodies]
    except ValueError:
        return 0, "a delivery is not JSON"
    if len({json.dumps(p, sort_keys=True) for p in pushed}) != len(pushed):
        return len(pushed), "duplicate deliveries"
    if exp.version == "0.3":
        # The task as of each event: one delivery per event, from the first (submitted).
        expected = 1 + len(exp.tail) if exp.snapshot["status"]["state"] == "submitted" else 0
        states = [p.get("status", {}).get("state") for p in pushed]
        if not pushed or states[-1] != "completed":
            return max(expected, 1), f"last delivered state {states[-1:]}, not completed"
        if expected and len(pushed) != expected:
            return expected, f"{len(pushed)} deliveries for {expected} events"
        if any(p.get("kind") != "task" for p in pushed) or _task_text(pushed[-1]) != (
            f"Echo: {exp.text}"
        ):
            return len(pushed), "0.3 deliveries are not the task's states"
        return len(pushed), None
    tail = exp.tail
    if len(pushed) < len(tail) or pushed[len(pushed) - len(tail) :] != tail:
        return len(tail) + 1, f"{len(pushed)} deliveries do not end with the stream's events"
    before = pushed[: len(pushed) - len(tail)]
    task = exp.snapshot
    first = {
        "statusUpdate": {
            "taskId": task["id"],
            "contextId": task["contextId"],
            "status": before[0]["statusUpdate"]["status"] if before else {},
        }
    }
    if (
        not before
        or before[0] != first
        or first["statusUpdate"]["status"].get("state") != ("TASK_STATE_SUBMITTED")
    ):
        return len(tail) + 1, "the deliveries do not start with the SUBMITTED status"
    statuses = [e["statusUpdate"]["status"] for e in before if "statusUpdate" in e]
    if statuses[-1] != task["status"] or _artifact_text(before) != _task_text(task):
        return len(pushed), "the deliveries before the stream's events do not fold to its snapshot"
    return len(pushed), None


# -- SSE -----------------------------------------------------------------------------------------


def sse_events(response: httpx.Response, seconds: float) -> Iterator[dict[str, Any]]:
    """The JSON of each SSE event (WHATWG rules: data lines joined, blank line ends an event,
    `:` lines are comments), failing once the stream has been open `seconds` (its keep-alive
    comments would otherwise hold a stuck stream open until the server's own limit)."""
    deadline = time.monotonic() + seconds
    data: list[str] = []
    for line in response.iter_lines():
        if time.monotonic() > deadline:
            raise OpFailed(f"stream still open after {seconds:.0f} s")
        if line == "":
            if data:
                try:
                    yield json.loads("\n".join(data))
                except ValueError:
                    raise OpFailed(f"SSE data is not JSON: {data[0][:200]}") from None
                data = []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value[1:] if value.startswith(" ") else value)
    if data:
        raise OpFailed("stream ended inside an event")


def state_of(member: dict[str, Any]) -> str:
    return str(member.get("status", {}).get("state", ""))


# -- one worker ----------------------------------------------------------------------------------


class Worker:
    """One client (its own principal on an open local stack) running the scenarios in turn."""

    def __init__(self, soak: Soak, index: int) -> None:
        self.soak = soak
        self.index = index
        self.stats = soak.stats
        self.principal = f"soak-{soak.run_id}-{index}"
        headers = {PRINCIPAL_HEADER: self.principal, **soak.headers}
        timeout = httpx.Timeout(soak.timeout, connect=min(soak.timeout, 10.0))
        self.http = httpx.Client(base_url=soak.base_url, headers=headers, timeout=timeout)
        self.rng = random.Random(f"{soak.run_id}-{index}")
        self.last_completed: str | None = None
        self.last_completed_at = 0.0  # monotonic: a task older than half the TTL may be gone
        self.rpc_ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    # -- requests -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def op(self, name: str) -> Iterator[None]:
        """Times one request as operation `name`; any failure inside is its error."""
        started = time.perf_counter()
        error: str | None = None
        try:
            yield
        except OpFailed as exc:
            error = str(exc)
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            error = f"malformed answer: {type(exc).__name__}: {exc}"
        self.stats.record(name, time.perf_counter() - started, error)
        if error is not None:
            raise ScenarioAborted(name)

    def rest(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """One HTTP+JSON call that must answer 200 with JSON."""
        headers = {"A2A-Version": "1.0"}
        if body is not None:
            headers["Content-Type"] = A2A_JSON
        response = self.http.request(
            method,
            path,
            content=None if body is None else json.dumps(body).encode(),
            headers=headers,
            params={k: v for k, v in params.items() if v is not None} or None,
        )
        if response.status_code != 200:
            raise OpFailed(f"{method} {path}: HTTP {response.status_code}: {response.text[:300]}")
        return response.json()

    def rpc(self, version: str, method: str, params: dict[str, Any]) -> Any:
        """One JSON-RPC call on POST / that must answer a result."""
        request_id = f"soak-{self.index}-{next(self.rpc_ids)}"
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = self.http.post(
            "/",
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **self._version(version)},
        )
        if response.status_code != 200:
            raise OpFailed(f"{method}: HTTP {response.status_code}: {response.text[:300]}")
        envelope = response.json()
        if envelope.get("jsonrpc") != "2.0" or envelope.get("id") != request_id:
            raise OpFailed(f"{method}: not the envelope of request {request_id}: {envelope}")
        if "error" in envelope or "result" not in envelope:
            raise OpFailed(f"{method}: JSON-RPC error {json.dumps(envelope)[:300]}")
        return envelope["result"]

    @staticmethod
    def _version(version: str) -> dict[str, str]:
        return {"A2A-Version": "1.0"} if version == "1.0" else {}

    def stream(
        self, path: str, body: dict[str, Any], version: str | None, rpc: bool
    ) -> list[dict[str, Any]]:
        """POST an SSE request and read it to the end: the events (JSON-RPC: the results)."""
        headers = {"Content-Type": "application/json", "Accept": EVENT_STREAM}
        if version is not None:
            headers.update(self._version(version))
        events: list[dict[str, Any]] = []
        with self.http.stream(
            "POST", path, content=json.dumps(body).encode(), headers=headers
        ) as response:
            if response.status_code != 200:
                response.read()
                raise OpFailed(f"{path}: HTTP {response.status_code}: {response.text[:300]}")
            kind = response.headers.get("content-type", "")
            if not kind.startswith(EVENT_STREAM):
                response.read()
                raise OpFailed(f"{path}: 200 with {kind!r}, not SSE: {response.text[:200]}")
            for event in sse_events(response, self.soak.timeout):
                if rpc:
                    if event.get("id") != body["id"] or "result" not in event:
                        raise OpFailed(f"{body['method']}: SSE envelope {json.dumps(event)[:300]}")
                    event = event["result"]
                events.append(event)
        if not events:
            raise OpFailed(f"{path}: stream closed without events")
        return events

    # -- checks ---------------------------------------------------------------------------------

    @staticmethod
    def check_stream10(events: list[dict[str, Any]], task_id: str | None = None) -> str:
        """A 1.0 stream: a Task, then updates of that task, closed after a settled status; the
        final state."""
        first = events[0]
        if set(first) != {"task"}:
            raise OpFailed(f"stream starts with {list(first)}, not a task")
        task = first["task"]
        if task_id is not None and task["id"] != task_id:
            raise OpFailed(f"snapshot of task {task['id']}, not {task_id}")
        state = state_of(task)
        for event in events[1:]:
            if len(event) != 1 or next(iter(event)) not in ("statusUpdate", "artifactUpdate"):
                raise OpFailed(f"stream event {list(event)} after the task")
            member = next(iter(event.values()))
            if (member.get("taskId"), member.get("contextId")) != (task["id"], task["contextId"]):
                raise OpFailed("stream event of another task")
            if "statusUpdate" in event:
                if state in TERMINAL:
                    raise OpFailed("event after the terminal status")
                state = state_of(member)
        if state not in TERMINAL | INTERRUPTED:
            raise OpFailed(f"stream closed at {state}")
        return state

    @staticmethod
    def check_stream03(events: list[dict[str, Any]]) -> str:
        first = events[0]
        if first.get("kind") != "task":
            raise OpFailed(f"0.3 stream starts with kind {first.get('kind')}")
        last = events[-1]
        if last.get("kind") != "status-update" or last.get("final") is not True:
            raise OpFailed(f"0.3 stream ends with {json.dumps(last)[:200]}")
        kinds = {e.get("kind") for e in events[1:]}
        if not kinds <= {"status-update", "artifact-update"}:
            raise OpFailed(f"0.3 stream event kinds {kinds}")
        return str(last["status"]["state"])

    @staticmethod
    def expect(task: dict[str, Any], states: set[str], what: str) -> None:
        if state_of(task) not in states:
            raise OpFailed(f"{what}: task in {state_of(task)}, expected {sorted(states)}")

    def text(self, label: str, directive: str = "") -> str:
        return f"soak {label} {self.rng.randrange(10**6)} {directive}".strip()

    def message(self, text: str, task_id: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        if task_id:
            message["taskId"] = task_id
        return message

    @staticmethod
    def message03(text: str) -> dict[str, Any]:
        return {
            "kind": "message",
            "role": "user",
            "messageId": str(uuid.uuid4()),
            "parts": [{"kind": "text", "text": text}],
        }

    def track(self, task: dict[str, Any]) -> str:
        task_id = str(task["id"])
        self.soak.track(self.principal, task_id)
        return task_id

    def send(self, rpc: bool, message: dict[str, Any], **configuration: Any) -> dict[str, Any]:
        """SendMessage over JSON-RPC 1.0 (`rpc`) or HTTP+JSON: the task it answers."""
        request: dict[str, Any] = {"message": message}
        if configuration:
            request["configuration"] = configuration
        if rpc:
            return self.rpc("1.0", "SendMessage", request)["task"]
        return self.rest("POST", "/message:send", request)["task"]

    @staticmethod
    def send_op(rpc: bool, kind: str) -> str:
        """The name a send of `kind` (blocking, non-blocking, ...) is timed as."""
        return f"jsonrpc SendMessage ({kind})" if rpc else f"rest send ({kind})"

    def send_at_once(self, rpc: bool, label: str, directive: str = "") -> str:
        """A fresh message sent with returnImmediately: its task's id."""
        message = self.message(self.text(label, directive))
        with self.op(self.send_op(rpc, "non-blocking")):
            return self.track(self.send(rpc, message, returnImmediately=True))

    # -- HTTP+JSON scenarios ----------------------------------------------------------------------

    def send_blocking(self, rpc: bool, label: str, op: str) -> None:
        """A blocking send answered by the completed echo: this worker's latest ended task."""
        text = self.text(label)
        with self.op(op):
            task = self.send(rpc, self.message(text))
            self.track(task)
            self.expect(task, {"TASK_STATE_COMPLETED"}, op)
            if _task_text(task) != f"Echo: {text}":
                raise OpFailed(f"{op}: artifact text {_task_text(task)!r}, not the echo")
        self.last_completed, self.last_completed_at = task["id"], time.monotonic()

    def rest_send_blocking(self) -> None:
        self.send_blocking(False, "blocking", "rest send (blocking)")

    def rest_send_nonblocking(self) -> None:
        task_id = self.send_at_once(False, "nonblocking")
        self.poll(lambda: self.rest("GET", f"/tasks/{task_id}"), "rest get-task")

    def poll(self, get: Callable[[], dict[str, Any]], op: str) -> dict[str, Any]:
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            with self.op(op):
                task = get()
            if state_of(task) in TERMINAL:
                if state_of(task) != "TASK_STATE_COMPLETED":
                    self.stats.error(op, f"task {task['id']} ended {state_of(task)}")
                return task
            if time.monotonic() > deadline:
                self.stats.error(op, f"task {task['id']} not finished in {SETTLE_SECONDS:.0f} s")
                return task
            time.sleep(POLL_SECONDS)

    def rest_stream(self) -> None:
        text = self.text("stream")
        with self.op("rest stream"):
            events = self.stream("/message:stream", {"message": self.message(text)}, "1.0", False)
            self.track(events[0]["task"])
            self.expect({"status": {"state": self.check_stream10(events)}}, TERMINAL, "stream")
            snapshot_text = _task_text(events[0]["task"])
            if snapshot_text + _artifact_text(events[1:]) != f"Echo: {text}":
                raise OpFailed("stream: the reply's text is not the echo")

    def rest_subscribe(self) -> None:
        task_id = self.send_at_once(False, "subscribe", "[slow=2]")
        with self.op("rest subscribe"):
            events = self.stream(f"/tasks/{task_id}:subscribe", {}, "1.0", False)
            state = self.check_stream10(events, task_id)
            if state != "TASK_STATE_COMPLETED":
                raise OpFailed(f"subscribe: task ended {state}")

    def rest_cancel(self) -> None:
        task_id = self.send_at_once(False, "cancel", "[slow=3]")
        with self.op("rest cancel"):
            response = self.http.post(f"/tasks/{task_id}:cancel", headers={"A2A-Version": "1.0"})
            if response.status_code == 200:
                self.expect(response.json(), {"TASK_STATE_CANCELED"}, "cancel")
            elif not self.cancel_too_late(response.text, "TASK_STATE_COMPLETED"):
                raise OpFailed(f"cancel: HTTP {response.status_code}: {response.text[:300]}")

    def cancel_too_late(self, text: str, finished: str) -> bool:
        """A cancel refused because the slow task already finished (a heavily loaded machine):
        counted apart, not an error."""
        if "TASK_NOT_CANCELABLE" in text and finished in text:
            self.stats.note("cancelTooLate")
            return True
        return False

    def multi_turn(self, rpc: bool, label: str, follow_up: str) -> None:
        """A task that asks for input, then completes with the follow-up message."""
        with self.op(self.send_op(rpc, "input-required")):
            task = self.send(rpc, self.message(self.text(label, "[input]")))
            task_id = self.track(task)
            self.expect(task, {"TASK_STATE_INPUT_REQUIRED"}, "first turn")
        with self.op(self.send_op(rpc, "continuation")):
            task = self.send(rpc, self.message(follow_up, task_id))
            self.expect(task, {"TASK_STATE_COMPLETED"}, "second turn")
            if task["id"] != task_id or not _task_text(task).endswith(f" + {follow_up}"):
                raise OpFailed(f"second turn: {json.dumps(task)[:300]}")

    def rest_multi_turn(self) -> None:
        self.multi_turn(False, "turns", "and the rest")

    def rest_list(self) -> None:
        rich = self.rng.random() < 0.5
        token: str | None = None
        for _ in range(3):
            with self.op("rest list-tasks"):
                page = self.rest(
                    "GET",
                    "/tasks",
                    pageSize=5,
                    pageToken=token,
                    includeArtifacts="true" if rich else None,
                    historyLength=1 if rich else None,
                )
                tasks = page["tasks"]
                if len(tasks) > 5 or any(state_of(t) == "" for t in tasks):
                    raise OpFailed(f"list page: {json.dumps(page)[:300]}")
                token = page.get("nextPageToken") or None
            if not token:
                break

    def ended_task(self, send: Callable[[], None]) -> str:
        """A task of this worker known to have completed (sending one first if need be, or
        when the last one may have expired: the started server's TTL)."""
        ttl = self.soak.ttl_seconds
        if self.last_completed is None or (
            ttl and time.monotonic() - self.last_completed_at > ttl / 2
        ):
            send()
        if self.last_completed is None:
            raise ScenarioAborted("no completed task")
        return self.last_completed

    def rest_push_crud(self) -> None:
        task_id = self.ended_task(self.rest_send_blocking)
        base = f"/tasks/{task_id}/pushNotificationConfigs"
        url = self.soak.crud_hook(task_id)
        with self.op("rest push create"):
            created = self.rest("POST", base, {"url": url, "token": "soak"})
            if created.get("taskId") != task_id or created.get("url") != url:
                raise OpFailed(f"created config {created}")
        with self.op("rest push get"):
            if self.rest("GET", f"{base}/{created['id']}") != created:
                raise OpFailed("the config read back differs")
        with self.op("rest push list"):
            if created not in self.rest("GET", base).get("configs", []):
                raise OpFailed("the new config is not listed")
        with self.op("rest push delete"):
            self.rest("DELETE", f"{base}/{created['id']}")
        with self.op("rest push list"):
            if any(c["id"] == created["id"] for c in self.rest("GET", base).get("configs", [])):
                raise OpFailed("a deleted config is still listed")

    def rest_stream_push(self) -> None:
        text = self.text("push")
        path, url = self.soak.receiver.new_hook("v10")
        body = {
            "message": self.message(text),
            "configuration": {"taskPushNotificationConfig": {"url": url, "token": "soak"}},
        }
        with self.op("rest stream (webhook)"):
            events = self.stream("/message:stream", body, "1.0", False)
            self.track(events[0]["task"])
            self.check_stream10(events)
        self.soak.expect_push(PushExpectation(path, "1.0", text, events[0]["task"], events[1:]))

    # -- JSON-RPC 1.0 scenarios -------------------------------------------------------------------

    def rpc_send(self) -> None:
        self.send_blocking(True, "rpc", "jsonrpc SendMessage")

    def rpc_send_nonblocking(self) -> None:
        task_id = self.send_at_once(True, "rpc nb")
        self.poll(lambda: self.rpc("1.0", "GetTask", {"id": task_id}), "jsonrpc GetTask")

    def rpc_stream(self) -> None:
        body = self.rpc_body("SendStreamingMessage", {"message": self.message(self.text("rs"))})
        with self.op("jsonrpc SendStreamingMessage"):
            events = self.stream("/", body, "1.0", True)
            self.track(events[0]["task"])
            self.expect({"status": {"state": self.check_stream10(events)}}, TERMINAL, "stream")

    def rpc_body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = f"soak-{self.index}-{next(self.rpc_ids)}"
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def rpc_subscribe(self) -> None:
        task_id = self.send_at_once(True, "rpc sub", "[slow=2]")
        with self.op("jsonrpc SubscribeToTask"):
            body = self.rpc_body("SubscribeToTask", {"id": task_id})
            state = self.check_stream10(self.stream("/", body, "1.0", True), task_id)
            if state != "TASK_STATE_COMPLETED":
                raise OpFailed(f"SubscribeToTask: task ended {state}")

    def rpc_cancel(self) -> None:
        task_id = self.send_at_once(True, "rpc cancel", "[slow=3]")
        with self.op("jsonrpc CancelTask"):
            try:
                task = self.rpc("1.0", "CancelTask", {"id": task_id})
                self.expect(task, {"TASK_STATE_CANCELED"}, "CancelTask")
            except OpFailed as exc:
                if not self.cancel_too_late(str(exc), "TASK_STATE_COMPLETED"):
                    raise

    def rpc_multi_turn(self) -> None:
        self.multi_turn(True, "rpc turns", "and more")

    def rpc_list(self) -> None:
        params: dict[str, Any] = {"pageSize": 5}
        if self.rng.random() < 0.5:
            params.update(includeArtifacts=True, historyLength=1)
        for _ in range(3):
            with self.op("jsonrpc ListTasks"):
                page = self.rpc("1.0", "ListTasks", params)
                if len(page["tasks"]) > 5:
                    raise OpFailed(f"ListTasks page of {len(page['tasks'])}")
            if not page.get("nextPageToken"):
                break
            params["pageToken"] = page["nextPageToken"]

    def rpc_push_crud(self) -> None:
        task_id = self.ended_task(self.rpc_send)
        url = self.soak.crud_hook(task_id)
        with self.op("jsonrpc CreateTaskPushNotificationConfig"):
            params = {"taskId": task_id, "url": url, "token": "soak"}
            created = self.rpc("1.0", "CreateTaskPushNotificationConfig", params)
            if created.get("url") != url:
                raise OpFailed(f"created config {created}")
        ids = {"taskId": task_id, "id": created["id"]}
        with self.op("jsonrpc GetTaskPushNotificationConfig"):
            if self.rpc("1.0", "GetTaskPushNotificationConfig", ids) != created:
                raise OpFailed("the config read back differs")
        with self.op("jsonrpc ListTaskPushNotificationConfigs"):
            listed = self.rpc("1.0", "ListTaskPushNotificationConfigs", {"taskId": task_id})
            if created not in listed.get("configs", []):
                raise OpFailed("the new config is not listed")
        with self.op("jsonrpc DeleteTaskPushNotificationConfig"):
            self.rpc("1.0", "DeleteTaskPushNotificationConfig", ids)

    def rpc_stream_push(self) -> None:
        text = self.text("rpc push")
        path, url = self.soak.receiver.new_hook("v10")
        params = {
            "message": self.message(text),
            "configuration": {"taskPushNotificationConfig": {"url": url}},
        }
        with self.op("jsonrpc SendStreamingMessage (webhook)"):
            events = self.stream("/", self.rpc_body("SendStreamingMessage", params), "1.0", True)
            self.track(events[0]["task"])
            self.check_stream10(events)
        self.soak.expect_push(PushExpectation(path, "1.0", text, events[0]["task"], events[1:]))

    # -- JSON-RPC 0.3 scenarios -------------------------------------------------------------------

    def v03_send(self) -> None:
        text = self.text("v03")
        params = {"message": self.message03(text), "configuration": {"blocking": True}}
        with self.op("v0.3 message/send"):
            task = self.rpc("0.3", "message/send", params)
            if task.get("kind") != "task" or task["status"]["state"] != "completed":
                raise OpFailed(f"message/send: {json.dumps(task)[:300]}")
            self.track(task)

    def v03_get(self) -> None:
        params = {"message": self.message03(self.text("v03 nb"))}
        params["configuration"] = {"blocking": False}
        with self.op("v0.3 message/send (non-blocking)"):
            task_id = self.track(self.rpc("0.3", "message/send", params))
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            with self.op("v0.3 tasks/get"):
                task = self.rpc("0.3", "tasks/get", {"id": task_id})
                state = task["status"]["state"]
            if state in V03_TERMINAL:
                if state != "completed":
                    self.stats.error("v0.3 tasks/get", f"task {task_id} ended {state}")
                return
            if time.monotonic() > deadline:
                self.stats.error("v0.3 tasks/get", f"task {task_id} not finished")
                return
            time.sleep(POLL_SECONDS)

    def v03_stream(self) -> None:
        body = self.rpc_body("message/stream", {"message": self.message03(self.text("v03 s"))})
        with self.op("v0.3 message/stream"):
            events = self.stream("/", body, None, True)
            self.track(events[0])
            if self.check_stream03(events) != "completed":
                raise OpFailed("message/stream did not complete")

    def v03_cancel(self) -> None:
        params = {"message": self.message03(self.text("v03 cancel", "[slow=3]"))}
        params["configuration"] = {"blocking": False}
        with self.op("v0.3 message/send (non-blocking)"):
            task_id = self.track(self.rpc("0.3", "message/send", params))
        with self.op("v0.3 tasks/cancel"):
            try:
                task = self.rpc("0.3", "tasks/cancel", {"id": task_id})
                if task["status"]["state"] != "canceled":
                    raise OpFailed(f"tasks/cancel: {task['status']}")
            except OpFailed as exc:
                if not self.cancel_too_late(str(exc), "completed"):
                    raise

    def v03_stream_push(self) -> None:
        text = self.text("v03 push")
        path, url = self.soak.receiver.new_hook("v03")
        config = {"url": url, "token": "soak"}
        params = {"message": self.message03(text), "configuration": {}}
        params["configuration"]["pushNotificationConfig"] = config
        body = self.rpc_body("message/stream", params)
        with self.op("v0.3 message/stream (webhook)"):
            events = self.stream("/", body, None, True)
            self.track(events[0])
            if self.check_stream03(events) != "completed":
                raise OpFailed("message/stream did not complete")
        self.soak.expect_push(PushExpectation(path, "0.3", text, events[0], events[1:]))

    # -- the loop ---------------------------------------------------------------------------------

    def scenarios(self) -> list[Callable[[], None]]:
        rest = [
            self.rest_send_blocking,
            self.rest_send_nonblocking,
            self.rest_stream,
            self.rest_subscribe,
            self.rest_cancel,
            self.rest_multi_turn,
            self.rest_list,
            self.rest_push_crud,
        ]
        rpc = [
            self.rpc_send,
            self.rpc_send_nonblocking,
            self.rpc_stream,
            self.rpc_subscribe,
            self.rpc_cancel,
            self.rpc_multi_turn,
            self.rpc_list,
            self.rpc_push_crud,
        ]
        v03 = [self.v03_send, self.v03_get, self.v03_stream, self.v03_cancel]
        push = [self.rest_stream_push, self.rpc_stream_push, self.v03_stream_push]
        # Interleaved, so a short run with several workers still covers every kind.
        if self.soak.no_push:
            push = []
        return [s for group in itertools.zip_longest(rest, rpc, v03, push) for s in group if s]

    def run_once(self, scenario: Callable[[], None]) -> None:
        try:
            scenario()
        except ScenarioAborted:
            pass  # counted as its operation's error; the next scenario starts fresh
        except Exception as exc:  # a bug here, or an answer no check foresaw: keep going
            self.stats.error(f"scenario {scenario.__name__}", f"{type(exc).__name__}: {exc}")

    def warm_up(self, workers: int) -> None:
        """This worker's share of one pass over every scenario."""
        for scenario in self.scenarios()[self.index :: workers]:
            self.run_once(scenario)

    def run(self, stop: threading.Event) -> None:
        scenarios = self.scenarios()
        # Each worker starts at another point of the same cycle.
        offset = self.index * len(scenarios) // max(1, self.soak.workers)
        for position in itertools.count(offset):
            if stop.is_set():
                return
            self.run_once(scenarios[position % len(scenarios)])


class ScenarioAborted(Exception):
    """An operation of the scenario failed (already counted): the rest of it is skipped."""


# -- the run -------------------------------------------------------------------------------------


class Soak:
    def __init__(self, args: argparse.Namespace, base_url: str, pid: int | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.pid = pid
        self.headers = dict(args.headers)
        self.timeout: float = args.timeout
        self.workers: int = args.workers
        self.duration: float = args.duration
        self.no_push: bool = args.no_push
        # The started server's TTL (a server given by --url expires tasks as it was started).
        self.ttl_seconds: float = 0.0 if args.url else args.ttl_seconds
        self.load_started: float | None = None
        self.early_tasks: list[tuple[str, str]] = []  # (principal, task id) of the warm-up
        self.run_id = uuid.uuid4().hex[:8]
        self.stats = Stats()
        self.receiver = Receiver(args.webhook_host, args.webhook_url)
        self.lock = threading.Lock()
        self.tasks: dict[str, set[str]] = {}  # principal -> task ids this run created
        self.pushes: list[PushExpectation] = []
        self.crud_hooks: dict[str, str] = {}  # webhook path -> the ended task it was set on
        self.memory: list[dict[str, Any]] = []
        self.started = time.monotonic()

    def track(self, principal: str, task_id: str) -> None:
        with self.lock:
            self.tasks.setdefault(principal, set()).add(task_id)
            if self.load_started is None:  # a warm-up task: expired by the end of the run
                self.early_tasks.append((principal, task_id))

    def crud_hook(self, task_id: str) -> str:
        path, url = self.receiver.new_hook("crud")
        with self.lock:
            self.crud_hooks[path] = task_id
        return url

    def expect_push(self, expectation: PushExpectation) -> None:
        with self.lock:
            self.pushes.append(expectation)

    def sample(self, label: str) -> float | None:
        if self.pid is None:
            return None
        rss = tree_rss_mb(self.pid)
        load_started = self.load_started
        self.memory.append(
            {
                "label": label,
                "seconds": round(time.monotonic() - self.started, 1),
                "loadSeconds": (
                    round(time.monotonic() - load_started, 1) if load_started is not None else None
                ),
                "operations": self.stats.total,
                "rssMb": rss,
            }
        )
        return rss

    def run(self) -> dict[str, Any]:
        self.sample("start")
        workers = [Worker(self, i) for i in range(self.workers)]
        try:
            # Warm-up: every scenario once (first imports and code paths), shared out among
            # the workers, so the memory baseline is taken after the one-off growth.
            warm = [
                threading.Thread(target=w.warm_up, args=(self.workers,), daemon=True)
                for w in workers
            ]
            for thread in warm:
                thread.start()
            for thread in warm:
                thread.join()
            baseline_ops = self.stats.total
            self.sample("after warm-up")
            stop = threading.Event()
            threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in workers]
            load_started = self.load_started = time.monotonic()
            for thread in threads:
                thread.start()
            interval = max(5.0, self.duration / 10)
            while time.monotonic() - load_started < self.duration:
                time.sleep(
                    min(interval, max(0.0, self.duration - (time.monotonic() - load_started)))
                )
                if time.monotonic() - load_started < self.duration - 1:
                    self.sample("during")
            stop.set()
            for thread in threads:
                thread.join(timeout=self.timeout * 3 + SETTLE_SECONDS)
            load_seconds = time.monotonic() - load_started
            self.sample("end")
            pushes = self.check_pushes()
            left = self.unfinished_tasks(workers[0])
            left["expired"] = self.expired_tasks(workers[0], load_seconds)
        finally:
            for worker in workers:
                worker.close()
            self.receiver.close()
        return self.report(load_seconds, baseline_ops, pushes, left)

    def check_pushes(self) -> dict[str, Any]:
        """Waits (up to DRAIN_SECONDS) for every webhook to get its task's whole log."""
        deadline = time.monotonic() + DRAIN_SECONDS
        while True:
            results = [(e, *check_push(e, self.receiver.received(e.path))) for e in self.pushes]
            problems = [(e, problem) for e, _, problem in results if problem]
            if not problems or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        expected = sum(n for _, n, _ in results)
        received = sum(len(self.receiver.received(e.path)) for e in self.pushes)
        lags = [
            (arrived - e.closed_at) * 1000
            for e, _, problem in results
            if not problem and (arrived := self.receiver.last_arrival(e.path)) is not None
        ]
        for expectation, problem in problems:
            self.stats.error(
                "webhook deliveries", f"{expectation.version} webhook {expectation.path}: {problem}"
            )
        # A config made on a task that just ended (then deleted) may still get events of the
        # task whose stream batch the sender had not reached yet (it reads a task's configs per
        # batch, and lags under load): only that task's events, each once, in log order.
        crud = 0
        for path, task_id in list(self.crud_hooks.items()):
            bodies = self.receiver.received(path)
            crud += len(bodies)
            if bodies and not _is_part_of_log(bodies, task_id):
                self.stats.error("webhook deliveries", f"config of ended task {task_id}: {bodies}")
        return {
            "webhooks": len(self.pushes),
            "webhooksByVersion": {
                version: sum(1 for e in self.pushes if e.version == version)
                for version in ("1.0", "0.3")
            },
            "expected": expected,
            "received": received,
            "webhooksIncomplete": len(problems),
            "toConfigsOfEndedTasks": crud,
            # Negative: the webhook had the terminal event before the stream client did.
            "lagMs": {
                "p50": round(percentile(lags, 0.5), 1),
                "p95": round(percentile(lags, 0.95), 1),
                "max": round(max(lags, default=0.0), 1),
            },
        }

    def unfinished_tasks(self, worker: Worker) -> dict[str, Any]:
        """Tasks this run created that are not terminal (every scenario ends its tasks), after
        waiting up to DRAIN_SECONDS: found with ListTasks per state, per principal."""
        deadline = time.monotonic() + DRAIN_SECONDS
        created = sum(len(ids) for ids in self.tasks.values())
        while True:
            left: list[str] = []
            try:
                for principal, ids in self.tasks.items():
                    left.extend(self._listed_unfinished(worker, principal, ids))
            except (httpx.HTTPError, OpFailed, ValueError, KeyError) as exc:
                self.stats.error("final task check", f"{type(exc).__name__}: {exc}")
                return {"created": created, "nonTerminal": None, "nonTerminalIds": []}
            if not left or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        if left:
            self.stats.error("final task check", f"{len(left)} tasks never ended: {left[:5]}")
        return {"created": created, "nonTerminal": len(left), "nonTerminalIds": left[:20]}

    def expired_tasks(self, worker: Worker, load_seconds: float) -> dict[str, Any] | None:
        """With a TTL shorter than the run: how many warm-up tasks are gone (GET answers
        404), as DynamoDB's TTL deletes them (the local stack: local/ttl.py)."""
        if not self.ttl_seconds or load_seconds < self.ttl_seconds + 10:
            return None
        gone = 0
        for principal, task_id in self.early_tasks:
            headers = {PRINCIPAL_HEADER: principal, **self.headers, "A2A-Version": "1.0"}
            status = worker.http.get(f"/tasks/{task_id}", headers=headers).status_code
            if status == 404:
                gone += 1
            elif status != 200:
                self.stats.error("expiry check", f"GET /tasks/{task_id}: HTTP {status}")
        return {"checked": len(self.early_tasks), "gone": gone}

    def _listed_unfinished(self, worker: Worker, principal: str, ids: set[str]) -> list[str]:
        headers = {PRINCIPAL_HEADER: principal, **self.headers, "A2A-Version": "1.0"}
        found: list[str] = []
        for state in NON_TERMINAL:
            token: str | None = None
            while True:
                params: dict[str, str | int | None] = {
                    "status": state,
                    "pageSize": 100,
                    "pageToken": token,
                }
                response = worker.http.get(
                    "/tasks",
                    params={k: v for k, v in params.items() if v is not None},
                    headers=headers,
                )
                if response.status_code != 200:
                    raise OpFailed(f"GET /tasks: HTTP {response.status_code}")
                page = response.json()
                found += [t["id"] for t in page["tasks"] if t["id"] in ids]
                token = page.get("nextPageToken") or None
                if not token:
                    break
        return found

    def report(
        self,
        load_seconds: float,
        baseline_ops: int,
        pushes: dict[str, Any],
        tasks: dict[str, Any],
    ) -> dict[str, Any]:
        with self.stats.lock:
            operations = {name: s.summary() for name, s in sorted(self.stats.ops.items())}
            total = self.stats.total
            notes = dict(self.stats.notes)
            samples = list(self.stats.samples)
        errors = sum(o["errors"] for o in operations.values())
        load_ops = total - baseline_ops
        report: dict[str, Any] = {
            "baseUrl": self.base_url,
            "durationSeconds": round(load_seconds, 1),
            "workers": self.workers,
            "totals": {
                "operations": total,
                "loadOperations": load_ops,
                "operationsPerSecond": round(load_ops / load_seconds, 2) if load_seconds else 0,
                "errors": errors,
            },
            "operations": operations,
            "errorSamples": samples,
            "notes": notes,
            "webhooks": pushes,
            "tasks": tasks,
            "memory": self.memory_report(load_ops),
        }
        return report

    def memory_report(self, load_ops: int) -> dict[str, Any] | None:
        if self.pid is None:
            return None
        by_label = {m["label"]: m["rssMb"] for m in self.memory}
        baseline, end = by_label.get("after warm-up"), by_label.get("end")
        growth = round(end - baseline, 1) if baseline is not None and end is not None else None
        per_1000 = round(growth / load_ops * 1000, 2) if growth is not None and load_ops else None
        # Steady state: once tasks written under load have had time to expire (2 x TTL).
        ttl = self.ttl_seconds
        steady = next(
            (
                m
                for m in self.memory
                if m["label"] == "during" and ttl and (m.get("loadSeconds") or 0) >= 2 * ttl
            ),
            None,
        )
        steady_growth = (
            round(end - steady["rssMb"], 1)
            if steady is not None and end is not None and steady["rssMb"] is not None
            else None
        )
        return {
            "steadyFromMb": steady["rssMb"] if steady is not None else None,
            "steadyFromLoadSeconds": steady.get("loadSeconds") if steady is not None else None,
            "steadyGrowthMb": steady_growth,
            "pid": self.pid,
            "startMb": by_label.get("start"),
            "afterWarmupMb": baseline,
            "endMb": end,
            "growthMb": growth,
            "growthPer1000OpsMb": per_1000,
            "samples": self.memory,
        }


# -- the dev server ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class DevServer:
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    exit_code: int | None = None
    stopped_in: float | None = None
    log: str | None = None  # its last lines, when it did not stop cleanly

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def dev_server(
    params: list[str], log_dir: Path, env: dict[str, str] | None = None
) -> Iterator[DevServer]:
    """`scripts/dev --port N`, until SIGINT (Ctrl-C) at the end."""
    port = free_port()
    log_path = log_dir / "soak-dev.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(DEV_SCRIPT), "--port", str(port), *(f"--param={p}" for p in params)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
        )
    server = DevServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        with httpx.Client() as probe:
            while True:
                if process.poll() is not None:
                    raise SystemExit(
                        f"scripts/dev exited {process.returncode}:\n{server.log_tail()}"
                    )
                try:
                    if probe.get(server.base_url + CARD_PATH, timeout=2.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f"scripts/dev did not start:\n{server.log_tail()}")
                time.sleep(0.2)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            started = time.monotonic()
            try:
                server.exit_code = process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
                server.stopped_in = round(time.monotonic() - started, 1)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                server.exit_code = None
        else:
            server.exit_code = process.returncode
        if server.exit_code != 0:
            server.log = server.log_tail()


# -- the command ---------------------------------------------------------------------------------


def parse_header(value: str) -> tuple[str, str]:
    name, sep, content = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--header must be NAME:VALUE, not {value!r}")
    return name.strip(), content.strip()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (600)")
    parser.add_argument("--workers", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--url", help="a running stack's base URL (default: start scripts/dev)")
    parser.add_argument("--pid", type=int, help="with --url: the server process to measure")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="template parameter for the scripts/dev this starts, e.g. WorkflowType=EXPRESS",
    )
    parser.add_argument("--api-key", help="send X-API-Key: KEY (an ApiKey stack)")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        type=parse_header,
        dest="headers",
        metavar="NAME:VALUE",
        help="extra header on every request (e.g. Authorization: Bearer …)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="per request (60 s)")
    parser.add_argument(
        "--max-rss-growth-mb",
        type=float,
        default=100.0,
        help="fail when the server's RSS grows more than this after the warm-up (100)",
    )
    parser.add_argument(
        "--max-steady-growth-mb",
        type=float,
        default=25.0,
        help="fail when RSS grows more than this in the steady state (after 2 x TTL) (25)",
    )
    parser.add_argument(
        "--ttl-seconds",
        type=float,
        default=120.0,
        help="the started server's tasks expire this long after their last write (120; "
        "0: the template's RetentionDays)",
    )
    parser.add_argument("--no-push", action="store_true", help="skip the webhook scenarios")
    parser.add_argument(
        "--webhook-host", default="127.0.0.1", help="address the webhook receiver binds"
    )
    parser.add_argument(
        "--webhook-url", help="public base URL of the receiver (a tunnel to a deployed stack)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.url and urlsplit(args.url).scheme not in ("http", "https"):
        parser.error("--url must be an http(s) URL")
    if args.pid is not None and not args.url:
        parser.error("--pid goes with --url (without it the started server is measured)")
    if args.workers < 1 or args.duration <= 0:
        parser.error("--workers and --duration must be positive")
    if args.api_key:
        args.headers.append(("X-API-Key", args.api_key))
    return args


def verdict(
    report: dict[str, Any], max_growth: float, max_steady_growth: float = math.inf
) -> list[str]:
    """Why the run failed (empty: it passed)."""
    problems = []
    if report["totals"]["errors"]:
        problems.append(f"{report['totals']['errors']} errors")
    if report["tasks"]["nonTerminal"]:
        problems.append(f"{report['tasks']['nonTerminal']} tasks left unfinished")
    expired = report["tasks"].get("expired")
    if expired and expired["gone"] < expired["checked"]:
        problems.append(
            f"{expired['checked'] - expired['gone']} of {expired['checked']} warm-up tasks "
            "outlived the TTL"
        )
    memory = report["memory"]
    if memory and memory["growthMb"] is not None and memory["growthMb"] > max_growth:
        problems.append(f"RSS grew {memory['growthMb']} MB (limit {max_growth:g} MB)")
    steady = memory.get("steadyGrowthMb") if memory else None
    if steady is not None and steady > max_steady_growth:
        problems.append(
            f"RSS grew {steady} MB in the steady state (limit {max_steady_growth:g} MB)"
        )
    server = report.get("server")
    if server and server["exitCode"] != 0:
        problems.append(f"scripts/dev exited {server['exitCode']} on SIGINT")
    return problems


def human(report: dict[str, Any]) -> str:
    lines = [
        f"soak of {report['baseUrl']}: {report['durationSeconds']} s, "
        f"{report['workers']} workers, {report['totals']['operations']} operations "
        f"({report['totals']['operationsPerSecond']}/s), {report['totals']['errors']} errors",
        "",
        f"{'operation':44} {'count':>6} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}",
    ]
    for name, o in report["operations"].items():
        lines.append(
            f"{name:44} {o['count']:>6} {o['errors']:>6} {o['p50Ms']:>8} {o['p95Ms']:>8} "
            f"{o['maxMs']:>8}"
        )
    hooks = report["webhooks"]
    lines += [
        "",
        f"webhooks: {hooks['webhooks']} inline configs, {hooks['received']} deliveries received "
        f"of {hooks['expected']} expected, {hooks['webhooksIncomplete']} incomplete; "
        f"{hooks['toConfigsOfEndedTasks']} to configs set on just-ended tasks; lag after the "
        f"stream's end p50 {hooks['lagMs']['p50']} ms, p95 {hooks['lagMs']['p95']} ms, max "
        f"{hooks['lagMs']['max']} ms",
        f"tasks: {report['tasks']['created']} created, {report['tasks']['nonTerminal']} left "
        "not terminal",
    ]
    expired = report["tasks"].get("expired")
    if expired:
        lines.append(f"expiry: {expired['gone']} of {expired['checked']} warm-up tasks gone (TTL)")
    memory = report["memory"]
    if memory:
        trail = " → ".join(f"{m['rssMb']}" for m in memory["samples"])
        lines.append(
            f"server RSS (MB): start {memory['startMb']}, after warm-up "
            f"{memory['afterWarmupMb']}, end {memory['endMb']}; growth {memory['growthMb']} MB "
            f"({memory['growthPer1000OpsMb']} MB per 1000 operations); samples {trail}"
        )
        if memory.get("steadyGrowthMb") is not None:
            lines.append(
                f"steady state (from {memory['steadyFromLoadSeconds']} s of load, tasks "
                f"expiring): {memory['steadyFromMb']} → {memory['endMb']} MB, growth "
                f"{memory['steadyGrowthMb']} MB"
            )
    else:
        lines.append("server RSS: not measured (--url without --pid)")
    if report["notes"]:
        lines.append(f"notes: {report['notes']}")
    for sample in report["errorSamples"]:
        lines.append(f"ERROR {sample['operation']}: {sample['detail']}")
    lines.append("OK" if report["ok"] else "FAILED: " + "; ".join(report["problems"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server_info: dict[str, Any] | None = None
    with contextlib.ExitStack() as stack:
        if args.url:
            base_url, pid = args.url, args.pid
        else:
            log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
            env = {TTL_ENV: f"{args.ttl_seconds:g}"} if args.ttl_seconds > 0 else {}
            server = stack.enter_context(dev_server(args.param, log_dir, env))
            base_url, pid = server.base_url, server.process.pid
        report = Soak(args, base_url, pid).run()
        if not args.url:
            stack.close()  # stops the server (SIGINT) before the report is written
            server_info = {
                "exitCode": server.exit_code,
                "stoppedInSeconds": server.stopped_in,
                "logTail": server.log,
            }
    if server_info is not None:
        report["server"] = server_info
    report["problems"] = verdict(report, args.max_rss_growth_mb, args.max_steady_growth_mb)
    report["ok"] = not report["problems"]
    if args.json:
        print(human(report), file=sys.stderr)
        print(json.dumps(report, indent=2))
    else:
        print(human(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
