"""The fuzz suite's server, oracles, bystander tasks and tally.

Each fuzz module runs against its own `scripts/dev` (module scope, never the session's
`dev_server`). Every request goes through `exchange`, which applies the oracles:

- never a 5xx, and no request takes longer than HANG_SECONDS (a hang);
- every body is what the binding promises, checked strictly by tests/wire.py: HTTP+JSON
  errors are google.rpc.Status with `code` equal to the HTTP status, successes parse as the
  operation's protobuf type, SSE bodies frame by frame; JSON-RPC answers are HTTP 200
  envelopes echoing the request's id (null only when it cannot be detected), or SSE frames of
  them;
- a stream that rightly stays open (a subscription to an interrupted task) is read for
  STREAM_WINDOW_SECONDS, then checked up to its last complete frame;
- after the run: every task the fuzz made has settled (none stuck in SUBMITTED/WORKING), tasks
  made before it by another owner (one completed, one input-required, one with a push config)
  read back byte-identical (`Bystanders`: GetTask, push config list, ListTasks), and the
  service still works.

Every URL in a generated body is pointed at the loopback discard port (`outbound_safe`), so
no webhook leaves the machine whatever the generators spell.

Those strict checks record what they checked in tests/wire.py's lists, which the e2e suite's
closing coverage check compares with what the e2e clients saw; the fuzz suite's records are
removed again (`_unrecorded`), so the two suites never count each other's responses.

Budget: A2A_FUZZ_EXAMPLES (default 2,500) cases in all, shared between the tests by fixed
fractions; generation is derandomized (the same cases on every run) and keeps no database.
The tally (cases, 5xx, hangs, oracle failures) is written to .pytest-reports/fuzz.json and
printed as one line at the end of the session.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests import wire
from tests.conftest import hand_over
from tests.e2e.conftest import (  # the pool's closing fixture, for this folder's tests too
    LOCAL_PRINCIPAL_HEADER,
    DevServer,
    _servers_stopped,  # noqa: F401
    server_fixture,
)
from tests.fuzz.tally import HANG_SECONDS, TALLY, budget

STREAM_WINDOW_SECONDS = 2.0  # how long a stream that stays open is read before hanging up
SETTLE_SECONDS = 20.0  # after the run, every task the fuzz made has settled within this
JSON_TYPE = "application/json"
A2A_JSON_TYPE = "application/a2a+json"
# Where every webhook URL a fuzz body names is pointed (nothing listens on the discard port):
# generated bodies may spell public or private addresses, and a test sends traffic only to
# this machine's loopback.
SINK_AUTHORITY = b"127.0.0.1:9"

fuzz_server = server_fixture("dev-fuzz")

# Hypothesis keeps caches (Unicode tables, constants found in our code) in `.hypothesis/`;
# with no example database (below) nothing there is worth keeping in the work tree.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "a2a-serverless-hypothesis")


def fuzz_settings(share: float) -> settings:
    """Reproducible (derandomized: the same cases every run), no example database, no
    time-based health checks or deadline (a live server is slower than hypothesis expects;
    hangs are the oracle's business). Failures are shrunk to a small request."""
    return settings(
        max_examples=budget(share),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        print_blob=False,
        report_multiple_bugs=False,
    )


# -- the tally -----------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if TALLY.cases:
        hand_over(session.config, "fuzz", TALLY.as_record())


# -- requests --------------------------------------------------------------------------------


# A scheme starts where no scheme character precedes it (so a long run of letters is
# scanned once, not once per letter).
_URL_AUTHORITY = re.compile(
    rb"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*:)((?:\\?/){2})[^/\"\\?#\s]*"
)
_DIRECTIVE = re.compile(rb"\[(slow|steps)=")


def outbound_safe(body: bytes) -> bytes:
    """`body` with every URL's authority replaced by the loopback sink (so no webhook is ever
    called off this machine), and the echo flow's `[slow=…]`/`[steps=…]` defused (a reply
    spread over minutes is not a hang)."""
    if b":/" in body or b":\\/" in body:
        body = _URL_AUTHORITY.sub(rb"\g<1>\g<2>" + SINK_AUTHORITY, body)
    return _DIRECTIVE.sub(rb"[\1:", body)


@dataclass
class Outcome:
    status: int
    headers: httpx.Headers
    body: bytes
    seconds: float
    event_stream: bool
    complete: bool  # False: a stream still open when the fuzz hung up


# Run tests/wire.py checks without leaving their records (see the module docstring).
_unrecorded = wire.unrecorded


def _strict_loads(body: bytes) -> Any:
    """The request body as the server's gate reads it, or None when it could not parse it."""

    def refuse(name: str) -> Any:
        raise ValueError(name)

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        return value

    try:
        return json.loads(body, parse_constant=refuse, parse_float=finite)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _rpc_request(content: bytes, headers: dict[str, str], params: Any) -> wire.RpcRequest:
    """What the server knows of a JSON-RPC request: the version it selects, and the envelope
    (read whatever the Content-Type, so an error can echo the id)."""
    query = None
    if isinstance(params, list | tuple):
        query = next((v for k, v in params if k.lower() == "a2a-version"), None)
    header = next((v for k, v in headers.items() if k.lower() == "a2a-version"), None)
    payload = _strict_loads(content)
    return wire.RpcRequest(wire.rpc_version(header, query), payload, payload is not None)


def repro(method: str, url: str, headers: dict[str, str], content: bytes | None) -> str:
    """A request as one line a reader can replay."""
    shown = "" if content is None else f" body={content[:3000]!r}"
    if content is not None and len(content) > 3000:
        shown += f" …({len(content)} bytes)"
    return f"{method} {url} headers={headers!r}{shown}"


def exchange(
    client: httpx.Client,
    binding: str,
    method: str,
    path: str,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
    params: Any = None,
) -> Outcome:
    """Send one fuzz request and apply every oracle to its answer (AssertionError naming the
    request on a violation). `binding` is "rest", "jsonrpc-1.0" or "jsonrpc-0.3" (what the
    request was meant for; the oracle follows what the server sees: `POST /` is JSON-RPC)."""
    headers = dict(headers or {})
    if content is not None:
        content = outbound_safe(content)
    request = client.build_request(method, path, content=content, headers=headers, params=params)
    line = repro(method, str(request.url), headers, content)
    TALLY.cases += 1
    TALLY.by_binding[binding] += 1
    started = time.monotonic()
    body = bytearray()
    complete = True
    try:
        response = client.send(request, stream=True)
        try:
            event_stream = response.headers.get("content-type", "").startswith(wire.EVENT_STREAM)
            if event_stream:
                # A stream may rightly stay open (a subscription to an interrupted task waits
                # for its next turn): read it for a while, then hang up. Later reads time out
                # sooner (the transport reads the timeout when the body is first read).
                request.extensions["timeout"] = {
                    **request.extensions.get("timeout", {}),
                    "read": STREAM_WINDOW_SECONDS,
                }
            try:
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if event_stream and time.monotonic() - started > STREAM_WINDOW_SECONDS:
                        complete = False
                        break
                    if time.monotonic() - started > HANG_SECONDS:
                        raise httpx.ReadTimeout("the answer outlasted HANG_SECONDS")
            except httpx.ReadTimeout:
                if not (event_stream and b"\ndata: " in b"\n" + body):
                    raise  # not even a first event
                complete = False
        finally:
            response.close()
    except httpx.TimeoutException as exc:
        TALLY.hangs += 1
        TALLY.problem(f"hang ({exc}): {line}")
        raise AssertionError(f"no answer within {HANG_SECONDS} s: {line}") from None
    seconds = time.monotonic() - started
    TALLY.slowest_seconds = max(TALLY.slowest_seconds, seconds)
    TALLY.request_seconds += seconds
    status = response.status_code
    TALLY.statuses[f"{binding} {status}"] += 1
    if not complete:
        TALLY.open_streams += 1
    outcome = Outcome(status, response.headers, bytes(body), seconds, event_stream, complete)
    if 200 <= status < 300 and _accepted(request, outcome):
        TALLY.accepted += 1
    if status >= 500:
        TALLY.server_errors += 1
        TALLY.problem(f"{status}: {line} -> {outcome.body[:300]!r}")
        raise AssertionError(f"{status} from {line}: {outcome.body[:500]!r}")
    if seconds > HANG_SECONDS:
        TALLY.hangs += 1
        TALLY.problem(f"hang ({seconds:.1f} s): {line}")
        raise AssertionError(f"{seconds:.1f} s for {line}")
    try:
        with _unrecorded():
            _check(request, headers, content, params, outcome)
    except Exception as exc:
        TALLY.failures += 1
        TALLY.problem(f"{exc!r}: {line} -> {status} {outcome.body[:300]!r}")
        raise AssertionError(
            f"{line}\n -> {status} {outcome.body[:1000]!r}\n oracle: {exc!r}"
        ) from None
    return outcome


FLOAT_ID = "(a float id)"


def _v03_float_id(rpc: wire.RpcRequest, body: bytes) -> tuple[wire.RpcRequest, bytes]:
    """JSON-RPC 2.0 allows any number as an id, and the server echoes it; A2A 0.3's schema
    (which the strict checks apply) types ids as string or integer. For a 0.3 request with a
    float id: check the echo here, then let the strict checks see a string id instead."""
    id_ = rpc.payload.get("id") if rpc.is_object else None
    if rpc.version != "0.3" or not isinstance(id_, float):
        return rpc, body
    echoed = json.dumps(id_).encode()
    if b'"id":' + echoed in body:
        body = body.replace(b'"id":' + echoed, b'"id":' + json.dumps(FLOAT_ID).encode())
    return wire.RpcRequest(rpc.version, {**rpc.payload, "id": FLOAT_ID}, rpc.parsed), body


def _accepted(request: httpx.Request, outcome: Outcome) -> bool:
    """Whether an operation ran and succeeded (a stream, an HTTP+JSON 2xx, a JSON-RPC result)."""
    if outcome.event_stream or not wire.is_jsonrpc_call(request.method, request.url.path):
        return True
    with contextlib.suppress(ValueError):
        return "result" in json.loads(outcome.body)
    return False


def _check(
    request: httpx.Request,
    headers: dict[str, str],
    content: bytes | None,
    params: Any,
    outcome: Outcome,
) -> None:
    # The decoded path, with any "?" in it encoded again: it came from a `%3F` inside a path
    # segment (the query is not part of it), and the wire checks split a path's query on "?".
    method, path = request.method, request.url.path.replace("?", "%3F")
    if wire.is_jsonrpc_call(method, path):
        rpc = _rpc_request(content or b"", headers, params)
        rpc, body = _v03_float_id(rpc, outcome.body)
        outcome = Outcome(**{**outcome.__dict__, "body": body})
        if outcome.event_stream:
            assert outcome.status == 200, outcome.status
            wire.check_jsonrpc_sse(outcome.body, complete=outcome.complete, request=rpc)
        else:
            wire.check_jsonrpc_response(rpc, outcome.status, outcome.body)
        return
    if outcome.event_stream:
        assert outcome.status == 200, outcome.status
        wire.check_sse_frames(outcome.body, complete=outcome.complete, method=method, path=path)
        return
    if outcome.status >= 400 or path in ("/", ""):
        # Routes the binding does not have (any method on `/` but POST included) still answer
        # google.rpc.Status.
        wire.check_status_error(json.loads(outcome.body), outcome.status)
        return
    wire.check_response(method, path, outcome.status, outcome.body)


# -- clients and bystanders ------------------------------------------------------------------


def client_for(server: DevServer, principal: str) -> httpx.Client:
    """A plain client of `principal` (the oracles check every answer; no wire hook)."""
    return httpx.Client(
        base_url=server.base_url,
        headers={LOCAL_PRINCIPAL_HEADER: principal},
        timeout=httpx.Timeout(HANG_SECONDS, connect=5.0),
    )


V10 = {"A2A-Version": "1.0", "Content-Type": JSON_TYPE}


def send_text(client: httpx.Client, text: str, **configuration: Any) -> dict[str, Any]:
    """A task made by a plain blocking 1.0 send of `text` (the echo flow obeys directives)."""
    body: dict[str, Any] = {
        "message": {
            "messageId": f"m-{uuid.uuid4().hex}",
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
    }
    if configuration:
        body["configuration"] = configuration
    response = client.post("/message:send", json=body, headers=V10)
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def add_push_config(client: httpx.Client, task_id: str, config: dict[str, Any]) -> str:
    """Create a push config of the task; its id."""
    response = client.post(f"/tasks/{task_id}/pushNotificationConfigs", json=config, headers=V10)
    assert response.status_code == 200, response.text
    created: str = response.json()["id"]
    return created


def own_tasks(client: httpx.Client) -> tuple[list[str], list[str]]:
    """The fuzzing owner's tasks, made before its run for the fuzz to draw ids from: one
    finished, one waiting for input, one waiting with a push config. (task ids, config ids)"""
    done = send_text(client, "mine, finished")
    waiting = send_text(client, "mine, waiting [input]")
    hooked = send_text(client, "mine, hooked [input]")
    config_id = add_push_config(client, hooked["id"], {"url": "http://127.0.0.1:9/mine"})
    return [done["id"], waiting["id"], hooked["id"]], [config_id]


@dataclass
class Bystanders:
    """Another owner's tasks, made before the fuzz run, and their bytes then."""

    client: httpx.Client
    task_ids: list[str]
    config_ids: list[str]
    before: dict[str, bytes]

    def snapshot(self) -> dict[str, bytes]:
        """GetTask and the push config list of each task, and the owner's ListTasks, as the
        bytes on the wire."""
        reads = {"list": "/tasks?includeArtifacts=true&historyLength=100"}
        for task_id in self.task_ids:
            reads[f"task {task_id}"] = f"/tasks/{task_id}"
            reads[f"configs {task_id}"] = f"/tasks/{task_id}/pushNotificationConfigs"
        taken = {}
        for name, path in reads.items():
            response = self.client.get(path, headers=V10)
            assert response.status_code == 200, (path, response.text)
            taken[name] = response.content
        return taken

    def assert_unchanged(self) -> None:
        after = self.snapshot()
        changed = [name for name in self.before if after[name] != self.before[name]]
        assert not changed, {n: (self.before[n][:400], after[n][:400]) for n in changed}


@pytest.fixture(scope="module")
def bystanders(fuzz_server: DevServer) -> Iterator[Bystanders]:
    """Another owner's tasks on the fuzz server, made before a module's fuzz run."""
    client = client_for(fuzz_server, f"bystander-{uuid.uuid4().hex}")
    try:
        done = send_text(client, "a finished task")
        waiting = send_text(client, "waiting for you [input]")
        hooked = send_text(client, "one with a webhook [input]")
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", waiting
        config = {"url": "http://127.0.0.1:9/bystander-hook", "token": "bystander-secret"}
        config_id = add_push_config(client, hooked["id"], config)
        made = Bystanders(client, [done["id"], waiting["id"], hooked["id"]], [config_id], {})
        made.before = made.snapshot()
        yield made
    finally:
        client.close()


UNSETTLED = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}


def assert_tasks_settle(client: httpx.Client) -> int:
    """Every task of `client`'s owner has left SUBMITTED/WORKING (within SETTLE_SECONDS of
    the run's end): accepted input never leaves a task stuck. Returns the number of tasks."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        tasks: list[dict[str, Any]] = []
        token = ""
        while True:
            page = client.get("/tasks", params={"pageSize": "100", "pageToken": token}, headers=V10)
            assert page.status_code == 200, page.text
            tasks += page.json().get("tasks", [])
            token = page.json().get("nextPageToken", "")
            if not token:
                break
        stuck = [t for t in tasks if t["status"]["state"] in UNSETTLED]
        if not stuck or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    details = {t["id"]: client.get(f"/tasks/{t['id']}", headers=V10).text[:1500] for t in stuck}
    assert not stuck, f"{len(stuck)} of {len(tasks)} tasks never settled: {details}"
    return len(tasks)


def assert_service_works(server: DevServer) -> None:
    """A fresh owner can still send, read and list after the fuzz run."""
    with client_for(server, f"after-{uuid.uuid4().hex}") as client:
        task = send_text(client, "still there?")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        read = client.get(f"/tasks/{task['id']}", headers=V10)
        assert read.status_code == 200 and read.json()["id"] == task["id"], read.text
        listed = client.get("/tasks", headers=V10)
        assert listed.status_code == 200 and listed.json()["totalSize"] == 1, listed.text


def assert_after_the_run(server: DevServer, bystanders: Bystanders, client: httpx.Client) -> int:
    """The checks after a module's run: every task of `client`'s owner settled, the other
    owner's tasks read back as before, the service still works. The owner's number of tasks."""
    made = assert_tasks_settle(client)
    bystanders.assert_unchanged()
    assert_service_works(server)
    return made
