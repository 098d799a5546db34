"""Push notifications (webhooks, spec §3.1.7 to §3.1.10, §4.3, §13.2) end to end, against local
stacks started by this module, with a real HTTP receiver on 127.0.0.1 in the test process.

Three dev servers, one per policy, shared by the tests of this module:
- `push_server`: the local defaults (http webhooks on loopback allowed) and a 1 s retry base
  (`PUSH_RETRY_BASE_SECONDS`), so parked deliveries come back within seconds;
- `strict_server`: the production egress policy (https only, public addresses only);
- `disabled_server`: `PUSH_NOTIFICATIONS=false`.

Every response of the agent is strictly checked by the conftest hook; every webhook body is
parsed strictly as an a2a-sdk `StreamResponse` here. Waits poll with deadlines: no sleep is an
assertion.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from a2a import types as a2a_types

from tests import wire
from tests.e2e import rpc
from tests.e2e.conftest import (
    ClientPool,
    DevServer,
    checked_client,
    new_principal,
    server_fixture,
)
from tests.e2e.coverage import CARD_PATH

pytestmark = pytest.mark.e2e

A2A_MEDIA_TYPE = "application/a2a+json"
DELIVERY_TIMEOUT = 30.0
# A stream batch reads the task's configs once, before its POSTs: a batch that started before
# a delete was answered may still deliver an event just after it. One batch is one POST of a
# few milliseconds to this receiver; a second is generous.
IN_FLIGHT_GRACE_SECONDS = 1.0
TOKEN = "tok-not-for-logs"
CREDENTIALS = "cred-not-for-logs"
AUTH = {"scheme": "Bearer", "credentials": CREDENTIALS}
# Values that must never come back in an error (they are secrets of the webhook's owner).
SECRETS = (TOKEN, CREDENTIALS)
TERMINAL = wire.TERMINAL_STATES


# -- the webhook receiver ------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """One request the receiver got, and what it answered."""

    index: int  # arrival order at this receiver
    at: float  # time.monotonic() at arrival
    method: str
    path: str  # path and query, as requested
    headers: list[tuple[str, str]]  # as received, names lower-cased, duplicates kept
    body: bytes
    status: int

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k == name.lower()]
        assert len(values) <= 1, f"header {name} sent {len(values)} times: {self.headers}"
        return values[0] if values else None

    def event(self) -> dict[str, Any]:
        """The body as a StreamResponse: strictly parsed with a2a-sdk's protobuf type, exactly
        one member."""
        wire.parse_strict(self.body, a2a_types.StreamResponse)
        payload = json.loads(self.body)
        assert isinstance(payload, dict) and len(payload) == 1, payload
        return payload


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Receiver:
    """A threaded `http.server` on a loopback address recording every request. It answers
    `fail_status` (500 unless set; with a `Location` header when `location` is set) to the first
    `fail_first` requests and to any request before `fail_until` (time.monotonic()), else 200."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.changed = threading.Condition()
        self.requests: list[Delivery] = []
        self.fail_first = 0
        self.fail_until: float | None = None
        self.fail_status = 500
        self.location: str | None = None
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.changed:
                    index = len(receiver.requests)
                    failing = index < receiver.fail_first or (
                        receiver.fail_until is not None and time.monotonic() < receiver.fail_until
                    )
                    status = receiver.fail_status if failing else 200
                    receiver.requests.append(
                        Delivery(
                            index,
                            time.monotonic(),
                            self.command,
                            self.path,
                            [(k.lower(), v) for k, v in self.headers.items()],
                            body,
                            status,
                        )
                    )
                    receiver.changed.notify_all()
                self.send_response(status)
                if failing and receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet test output

        server_type = _Server6 if ":" in host else ThreadingHTTPServer
        self.host = f"[{host}]" if ":" in host else host
        self.server = server_type((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, name: str, host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}/hook/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def of(self, name: str) -> list[Delivery]:
        """Every request of one webhook (its path, query ignored), in arrival order."""
        with self.changed:
            return [r for r in self.requests if r.path.split("?")[0] == f"/hook/{name}"]

    def events(self, name: str) -> list[dict[str, Any]]:
        """The events the webhook acknowledged (answered 2xx), in arrival order."""
        return [r.event() for r in self.of(name) if r.ok]

    def wait_for(
        self, what: str, done: Callable[[], bool], timeout: float = DELIVERY_TIMEOUT
    ) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not done():
                left = deadline - time.monotonic()
                assert left > 0, f"{what}: not within {timeout} s; got {self.requests}"
                self.changed.wait(min(left, 0.5))

    def wait_chunk(self, name: str) -> None:
        """Until `name` has acknowledged an artifact chunk."""
        self.wait_for(
            f"a chunk at {name}",
            lambda: any("artifactUpdate" in e for e in self.events(name)),
        )

    def wait_terminal(self, name: str, timeout: float = DELIVERY_TIMEOUT) -> list[dict[str, Any]]:
        """The acknowledged events of `name` once one of them is a terminal status."""
        self.wait_for(
            f"terminal event at /hook/{name}",
            lambda: any(state_of(e) in TERMINAL for e in self.events(name)),
            timeout,
        )
        return self.events(name)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


# -- the agents ----------------------------------------------------------------------------------


# Queued retries back off 1 s, 2 s, 4 s... instead of 5 s, 10 s...
# Retries of a send are deduplicated within 10 minutes here (off by default): the continuation
# tests below send the same message several times at once.
push_server = server_fixture(
    "push-server", env={"PUSH_RETRY_BASE_SECONDS": "1", "DEDUPE_WINDOW_SECONDS": "600"}
)
# The production egress policy: no http, no allow-listed loopback.
strict_server = server_fixture(
    "push-strict", args=("--param", "PushAllowHttp=false", "--param", "PushAllowHosts=")
)
disabled_server = server_fixture("push-disabled", env={"PUSH_NOTIFICATIONS": "false"})


Connect = Callable[..., httpx.Client]


@pytest.fixture
def connect() -> Iterator[Connect]:
    """connect(server, principal=None, version="1.0"): a checked client, for a fresh principal
    unless one is given."""
    pool = ClientPool()

    def make(
        server: DevServer, principal: str | None = None, version: str | None = "1.0"
    ) -> httpx.Client:
        return pool.open(server.base_url, principal or new_principal("push"), version)

    yield make
    pool.close()


@pytest.fixture
def c(push_server: DevServer, connect: Connect) -> httpx.Client:
    """A checked client of the push server, for a fresh principal."""
    return connect(push_server)


# -- helpers -------------------------------------------------------------------------------------


def state_of(event: dict[str, Any]) -> str | None:
    member = event.get("statusUpdate") or event.get("task")
    return member["status"]["state"] if member else None


def send_body(text: str, **configuration: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"message": rpc.msg10(text)}
    if configuration:
        body["configuration"] = configuration
    return body


def send(client: httpx.Client, text: str, **configuration: Any) -> dict[str, Any]:
    response = client.post("/message:send", json=send_body(text, **configuration))
    assert response.status_code == 200, response.text
    return response.json()["task"]


def start(client: httpx.Client, text: str, **configuration: Any) -> dict[str, Any]:
    """A task that runs in the background (returnImmediately)."""
    task = send(client, text, returnImmediately=True, **configuration)
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED", task
    return task


def read_stream(client: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every event of an SSE answer, read to its end (the conftest tee checks the frames)."""
    events: list[dict[str, Any]] = []
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return events


def create_config(client: httpx.Client, task_id: str, config: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/tasks/{task_id}/pushNotificationConfigs", json=config)
    assert response.status_code == 200, response.text
    return response.json()


def error_of(response: httpx.Response, code: int) -> dict[str, Any]:
    assert response.status_code == code, response.text
    return response.json()["error"]


def reason_of(error: dict[str, Any]) -> str:
    infos = [d for d in error["details"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert len(infos) == 1, error
    return str(infos[0]["reason"])


def violations_of(error: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (v["field"], v["description"])
        for d in error.get("details", [])
        if d["@type"].endswith("google.rpc.BadRequest")
        for v in d["fieldViolations"]
    ]


def assert_not_found(response: httpx.Response, task_id: str) -> None:
    """The plain TaskNotFoundError: nothing says whether the task exists for someone else."""
    error = error_of(response, 404)
    assert error == {
        "code": 404,
        "status": "NOT_FOUND",
        "message": "The specified task ID does not exist or is not accessible",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND",
                "domain": "a2a-protocol.org",
                "metadata": {"taskId": task_id},
            }
        ],
    }, error


def assert_secret_free(text: str, *extra: str) -> None:
    for secret in (*SECRETS, *extra):
        assert secret not in text, f"{secret!r} echoed in {text}"


def artifact_text(events: list[dict[str, Any]]) -> str:
    return "".join(
        part.get("text", "")
        for e in events
        if "artifactUpdate" in e
        for part in e["artifactUpdate"]["artifact"]["parts"]
    )


def log_from_stream(streamed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task's event log as its webhooks get it, from a `/message:stream` answer: that stream
    starts with the task as created (the log's first position: the SUBMITTED status) and then
    carries the rest of the same log, event for event."""
    task = streamed[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED", task
    submitted = {"taskId": task["id"], "contextId": task["contextId"], "status": task["status"]}
    return [{"statusUpdate": submitted}, *streamed[1:]]


def assert_log_shape(events: list[dict[str, Any]], task: dict[str, Any], text: str) -> None:
    """A whole turn of the echo flow as its event log holds it: the SUBMITTED status, WORKING,
    the reply's chunks (first one new, later ones appended, the last one flagged), COMPLETED;
    every event of this task."""
    for event in events:
        member = next(iter(event.values()))
        assert (member["taskId"], member["contextId"]) == (task["id"], task["contextId"]), event
    kinds = [next(iter(e)) for e in events]
    states = [state_of(e) for e in events if "statusUpdate" in e]
    assert states == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], kinds
    assert kinds[:2] == ["statusUpdate", "statusUpdate"] and kinds[-1] == "statusUpdate", kinds
    chunks = [e["artifactUpdate"] for e in events[2:-1]]
    assert len(chunks) == len(kinds) - 3 >= 2, kinds
    assert [c.get("append", False) for c in chunks] == [False] + [True] * (len(chunks) - 1)
    assert [c.get("lastChunk", False) for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert artifact_text(events) == f"Echo: {text}"


# -- 1. CRUD over REST ---------------------------------------------------------------------------


def test_config_crud_over_rest(c: httpx.Client) -> None:
    task = send(c, "for push configs")  # completed: no event will ever be delivered
    configs = f"/tasks/{task['id']}/pushNotificationConfigs"
    hook = "http://127.0.0.1:9/hook?route=a"

    # No id: the agent assigns one; everything else is stored as given, bound to the task.
    assigned = create_config(c, task["id"], {"url": hook, "token": TOKEN, "authentication": AUTH})
    uuid.UUID(assigned["id"])
    assert assigned == {
        "id": assigned["id"],
        "taskId": task["id"],
        "url": hook,
        "token": TOKEN,
        "authentication": AUTH,
    }
    # A client-given id is kept (and taskId in the body may repeat the path's).
    mine = create_config(
        c, task["id"], {"id": "cfg-mine", "taskId": task["id"], "url": "http://localhost:9/b"}
    )
    assert mine == {"id": "cfg-mine", "taskId": task["id"], "url": "http://localhost:9/b"}

    assert c.get(f"{configs}/{assigned['id']}").json() == assigned
    assert c.get(f"{configs}/cfg-mine").json() == mine
    listed = c.get(configs).json()
    assert set(listed) == {"configs"}, listed
    assert sorted(listed["configs"], key=lambda x: x["id"]) == sorted(
        [assigned, mine], key=lambda x: x["id"]
    )

    # Delete is idempotent: 200 with an empty object (google.protobuf.Empty) both times.
    for _ in range(2):
        response = c.delete(f"{configs}/cfg-mine")
        assert response.status_code == 200 and response.json() == {}, response.text
    # Gone: TaskNotFoundError naming the config (spec §3.1.8: the config does not exist).
    error = error_of(c.get(f"{configs}/cfg-mine"), 404)
    assert error == {
        "code": 404,
        "status": "NOT_FOUND",
        "message": f"Push notification config cfg-mine of task {task['id']} does not exist",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND",
                "domain": "a2a-protocol.org",
                "metadata": {"taskId": task["id"], "configId": "cfg-mine"},
            }
        ],
    }, error
    assert c.get(configs).json() == {"configs": [assigned]}
    # Deleting a config id that never existed is the same success.
    assert c.delete(f"{configs}/never-was").json() == {}
    assert c.delete(f"{configs}/{assigned['id']}").json() == {}
    assert c.get(configs).json() == {}  # no configs: the (repeated) field is omitted


def test_configs_of_unknown_and_foreign_tasks_are_not_found(
    push_server: DevServer, connect: Connect
) -> None:
    owner = connect(push_server)
    other = connect(push_server)
    task = send(owner, "mine")
    kept = create_config(owner, task["id"], {"url": "http://127.0.0.1:9/x", "token": TOKEN})
    missing = f"missing-{uuid.uuid4().hex}"
    for client, task_id in ((owner, missing), (other, task["id"])):
        configs = f"/tasks/{task_id}/pushNotificationConfigs"
        body = {"url": "http://127.0.0.1:9/y", "token": TOKEN}
        for response in (
            client.post(configs, json=body),
            client.get(configs),
            client.get(f"{configs}/{kept['id']}"),
            client.delete(f"{configs}/{kept['id']}"),
        ):
            assert_not_found(response, task_id)
            assert_secret_free(response.text)
    # The other principal's delete did not delete, and its create did not create.
    assert owner.get(f"/tasks/{task['id']}/pushNotificationConfigs").json() == {"configs": [kept]}


@pytest.mark.parametrize(
    ("config", "field", "description"),
    [
        ({"url": "ftp://x"}, "url", "webhook URL scheme must be https or http"),
        ({}, "url", "is required"),
        ({"url": ""}, "url", "String should have at least 1 character"),
        ({"url": "http://exa mple.com/"}, "url", "webhook URL is malformed"),
        ({"url": "http://127.0.0.1:0/"}, "url", "webhook URL has an invalid port"),
        ({"url": "https://u:pw-s3cret@127.0.0.1/"}, "url", "must not contain credentials"),
        ({"url": "http://127.0.0.1/", "id": ""}, "id", "must be 1 to 128 characters"),
        ({"url": "http://127.0.0.1/", "taskId": "another"}, "taskId", "does not match"),
        ({"url": "http://127.0.0.1/", "authentication": {}}, "authentication.scheme", "required"),
    ],
    ids=["ftp", "no-url", "empty-url", "space", "port-0", "userinfo", "empty-id", "task", "auth"],
)
def test_invalid_configs_are_refused_without_secrets(
    c: httpx.Client,
    config: dict[str, Any],
    field: str,
    description: str,
) -> None:
    task = send(c, "for bad configs")
    configs = f"/tasks/{task['id']}/pushNotificationConfigs"
    body = {"token": TOKEN, "authentication": AUTH, **config}
    response = c.post(configs, json=body)
    error = error_of(response, 400)
    assert error["status"] == "INVALID_ARGUMENT" and reason_of(error) == "INVALID_PARAMS"
    [(violated, said)] = violations_of(error)
    assert violated == field and description in said, error
    assert_secret_free(response.text, "pw-s3cret", *([config["url"]] if config.get("url") else []))
    assert c.get(configs).json() == {}  # nothing stored


# -- 2. delivery ---------------------------------------------------------------------------------


def test_inline_config_delivers_the_event_log_with_its_credentials(
    c: httpx.Client, receiver: Receiver
) -> None:
    text = "push me [slow=1.5]"
    url = receiver.url("inline") + "?route=a%20b&x=1"
    inline = {"url": url, "token": TOKEN, "authentication": AUTH}
    task = start(c, text, taskPushNotificationConfig=inline)
    # A subscriber of the same task: a snapshot of it, then the rest of the same event log.
    streamed = read_stream(c, f"/tasks/{task['id']}:subscribe", {})
    pushed = receiver.wait_terminal("inline")

    # Exactly the task's event log: the log starts with the SUBMITTED status update (the
    # webhook gets no `task` snapshot: events only), and every event came once, in order.
    assert_log_shape(pushed, task, text)
    assert pushed[0] == {
        "statusUpdate": {
            "taskId": task["id"],
            "contextId": task["contextId"],
            "status": task["status"],
        }
    }
    assert [r.ok for r in receiver.requests] == [True] * len(pushed)
    # The stream after its snapshot is the end of the same log, event for event; the events
    # before fold into the snapshot (its status and artifact text).
    snapshot = streamed[0]["task"]
    tail = streamed[1:]
    assert tail and pushed[len(pushed) - len(tail) :] == tail, (pushed, streamed)
    before = pushed[: len(pushed) - len(tail)]
    last_status = next(e["statusUpdate"]["status"] for e in reversed(before) if "statusUpdate" in e)
    assert snapshot["status"] == last_status
    assert "".join(p["text"] for a in snapshot.get("artifacts", []) for p in a["parts"]) == (
        artifact_text(before)
    )

    # Every request: POST to the URL as given (query kept), A2A media type, both credentials.
    for request in receiver.requests:
        assert request.method == "POST"
        assert request.path == "/hook/inline?route=a%20b&x=1"
        assert request.header("content-type") == A2A_MEDIA_TYPE
        assert request.header("x-a2a-notification-token") == TOKEN
        assert request.header("authorization") == f"Bearer {CREDENTIALS}"
        assert request.header("host") == f"127.0.0.1:{receiver.port}"


def test_config_created_on_a_running_task_gets_the_later_events(
    c: httpx.Client, receiver: Receiver
) -> None:
    text = "late config [slow=2]"
    task = start(c, text, taskPushNotificationConfig={"url": receiver.url("all")})
    # Once some events went out, add a second webhook (no token, no authentication).
    receiver.wait_chunk("all")
    seen_before = len(receiver.events("all"))
    late = create_config(c, task["id"], {"url": receiver.url("late")})
    assert late == {"id": late["id"], "taskId": task["id"], "url": receiver.url("late")}

    everything = receiver.wait_terminal("all")
    later = receiver.wait_terminal("late")
    assert_log_shape(everything, task, text)
    # The late webhook got a contiguous end of the log: none of the events delivered before it
    # existed (their batches had read the configs already), all of those after.
    start_at = len(everything) - len(later)
    assert start_at >= seen_before and everything[start_at:] == later, (everything, later)
    assert len(later) >= 2 and later[-1] == everything[-1]
    for request in receiver.of("late"):
        assert request.header("x-a2a-notification-token") is None
        assert request.header("authorization") is None
        assert request.header("content-type") == A2A_MEDIA_TYPE


def test_webhooks_named_by_host_name_or_ipv6_literal(c: httpx.Client, receiver: Receiver) -> None:
    """The local policy allows localhost and ::1 too. The POST goes to the vetted (pinned)
    address and the Host header names the host as the URL wrote it."""
    by_name = start(
        c, "by name", taskPushNotificationConfig={"url": receiver.url("n", "localhost")}
    )
    assert_log_shape(receiver.wait_terminal("n"), by_name, "by name")
    assert {r.header("host") for r in receiver.of("n")} == {f"localhost:{receiver.port}"}
    try:
        v6 = Receiver("::1")
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    try:
        by_v6 = start(c, "by ipv6", taskPushNotificationConfig={"url": v6.url("six")})
        assert_log_shape(v6.wait_terminal("six"), by_v6, "by ipv6")
        assert {r.header("host") for r in v6.of("six")} == {f"[::1]:{v6.port}"}
    finally:
        v6.close()


def test_config_outlives_an_interrupted_turn(c: httpx.Client, receiver: Receiver) -> None:
    """A config lasts until the task ends (spec §3.1.7), not the turn: after input-required,
    the next turn's events go to the same webhook, after the first turn's, in order."""
    inline = {"url": receiver.url("turns")}
    first = read_stream(
        c, "/message:stream", send_body("ask [input]", taskPushNotificationConfig=inline)
    )
    task = first[0]["task"]
    assert state_of(first[-1]) == "TASK_STATE_INPUT_REQUIRED", first
    turn1 = log_from_stream(first)
    receiver.wait_for("the first turn", lambda: len(receiver.events("turns")) >= len(turn1))
    assert receiver.events("turns") == turn1

    answer = {"message": rpc.msg10("more", task_id=task["id"])}
    second = read_stream(c, "/message:stream", answer)  # no config of its own this time
    pushed = receiver.wait_terminal("turns")
    # The second stream starts with a snapshot taken after the turn began; the log events
    # before it (the new SUBMITTED status at least) came to the webhook too.
    tail = second[1:]
    middle = pushed[len(turn1) : len(pushed) - len(tail)]
    assert pushed[: len(turn1)] == turn1 and pushed[len(pushed) - len(tail) :] == tail, pushed
    assert middle and state_of(middle[0]) == "TASK_STATE_SUBMITTED", middle
    assert state_of(pushed[-1]) == "TASK_STATE_COMPLETED"
    assert artifact_text(pushed) == "Echo: ask [input] + more"
    assert all(r.ok for r in receiver.of("turns"))


# -- 3. a failing receiver -----------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["none", "first-3", "window"])
def test_every_event_arrives_in_order_despite_failures(
    c: httpx.Client, receiver: Receiver, failure: str
) -> None:
    """The webhook answers 500 for a while. Two failed inline attempts park it: that event and
    every later one go through the FIFO retry queue (backoff 1 s, 2 s, 4 s...), in order."""
    if failure == "first-3":
        receiver.fail_first = 3  # 2 inline attempts, then the first queued one
    elif failure == "window":
        receiver.fail_until = window_end = time.monotonic() + 2.5
    text = f"retry {failure} [slow=1]"
    # A stream of the same task for reference: the task at creation (the log's first
    # position), then the rest of the log.
    streamed = read_stream(
        c,
        "/message:stream",
        send_body(text, taskPushNotificationConfig={"url": receiver.url("r"), "token": TOKEN}),
    )
    task = streamed[0]["task"]
    pushed = receiver.wait_terminal("r")

    # Nothing missing, nothing reordered, nothing twice: each event was acknowledged once
    # (duplicates would come from a sender crash between POST and bookkeeping, which does not
    # happen here; the FIFO queue drops re-enqueued copies).
    assert_log_shape(pushed, task, text)
    assert pushed == log_from_stream(streamed)
    requests = receiver.of("r")
    if failure == "none":
        assert all(r.ok for r in requests)
    elif failure == "first-3":
        # The first event was tried three times (inline, inline, queued) and then delivered
        # before any later event: no event overtook it while it was retried.
        assert [r.status for r in requests[:4]] == [500, 500, 500, 200]
        assert {r.body for r in requests[:4]} == {requests[0].body}
        assert len(requests) == len(pushed) + 3
    else:
        failed = [r for r in requests if not r.ok]
        assert failed and all(r.at < window_end for r in failed)
        # Every retry was of the first event not yet delivered (the queue keeps the order).
        for request in requests:
            delivered = [r.body for r in requests if r.ok and r.index < request.index]
            assert json.loads(request.body) == pushed[len(delivered)], request


@pytest.mark.parametrize("status", [404, 307])
def test_final_answers_are_not_retried(c: httpx.Client, receiver: Receiver, status: int) -> None:
    """A 4xx other than 408/429, or a redirect, is final: that event is dropped (never
    retried, a redirect never followed) and the next events go out as usual."""
    receiver.fail_first = 1
    receiver.fail_status = status
    receiver.location = receiver.url("elsewhere")  # where a followed redirect would land
    text = f"final {status}"
    streamed = read_stream(
        c, "/message:stream", send_body(text, taskPushNotificationConfig={"url": receiver.url("f")})
    )
    log = log_from_stream(streamed)
    pushed = receiver.wait_terminal("f")
    assert_log_shape(log, streamed[0]["task"], text)
    requests = receiver.of("f")
    # Once each, in order: had the first event been retried (or parked), it would come again
    # before the second one.
    assert [r.status for r in requests] == [status] + [200] * (len(log) - 1)
    assert [json.loads(r.body) for r in requests] == log
    assert pushed == log[1:]
    assert receiver.of("elsewhere") == []


# -- 4. deleting a config stops its deliveries ---------------------------------------------------


def test_deleted_config_gets_no_further_events(c: httpx.Client, receiver: Receiver) -> None:
    text = "delete me [slow=3]"
    # "keep" stays: once it has the terminal event, the sender has processed the whole log.
    task = start(c, text, taskPushNotificationConfig={"url": receiver.url("keep")})
    drop = create_config(c, task["id"], {"url": receiver.url("drop"), "token": TOKEN})
    receiver.wait_chunk("drop")  # a chunk at the doomed webhook
    response = c.delete(f"/tasks/{task['id']}/pushNotificationConfigs/{drop['id']}")
    assert response.status_code == 200 and response.json() == {}
    deleted_at = time.monotonic()

    everything = receiver.wait_terminal("keep")
    assert_log_shape(everything, task, text)
    dropped = receiver.of("drop")
    late = [r for r in dropped if r.at > deleted_at + IN_FLIGHT_GRACE_SECONDS]
    assert not late, f"delivered after the delete: {late}"
    events = [r.event() for r in dropped]
    assert all(state_of(e) not in TERMINAL for e in events), events
    # What it did get is a contiguous run of the log, cut short.
    first = everything.index(events[0])
    assert everything[first : first + len(events)] == events
    assert first + len(events) < len(everything) - 1


# -- inline configs of a continuation message -----------------------------------------------------
#
# A message that continues an input-required task may carry an inline config too. Clients
# retry sends (same messageId, same content): a retry must not add a config, and a message the
# agent refuses must leave none behind (its webhook would otherwise get another message's turn).

CONTINUATION_TRIALS = 6
CONCURRENT_SENDS = 4


def send_concurrently(server: DevServer, principal: str, bodies: list[dict[str, Any]]) -> list[int]:
    """POST /message:send of every body at once (one client and thread each); their statuses."""
    barrier = threading.Barrier(len(bodies))
    statuses: list[int] = [0] * len(bodies)

    def one(index: int) -> None:
        with checked_client(server.base_url, principal=principal) as client:
            barrier.wait()
            statuses[index] = client.post("/message:send", json=bodies[index]).status_code

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


def paused_task(client: httpx.Client) -> dict[str, Any]:
    task = send(client, "what else? [input]")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task


def continuation(task: dict[str, Any], text: str, url: str, message_id: str) -> dict[str, Any]:
    message = rpc.msg10(text, task_id=task["id"])
    message["messageId"] = message_id
    inline = {"url": url, "token": TOKEN}
    return {
        "message": message,
        "configuration": {"returnImmediately": True, "taskPushNotificationConfig": inline},
    }


def test_retried_continuation_stores_its_inline_config_once(
    push_server: DevServer, connect: Connect
) -> None:
    c = connect(push_server)
    principal = c.headers["x-local-principal"]
    for trial in range(CONTINUATION_TRIALS):
        task = paused_task(c)
        # The same message, sent again while the first copy may still be in flight.
        body = continuation(
            task, "more", f"http://127.0.0.1:9/retried-{trial}", f"m-{uuid.uuid4()}"
        )
        statuses = send_concurrently(push_server, principal, [body] * CONCURRENT_SENDS)
        assert statuses == [200] * CONCURRENT_SENDS  # every copy is answered as the one send
        configs = c.get(f"/tasks/{task['id']}/pushNotificationConfigs").json()["configs"]
        assert len(configs) == 1, f"trial {trial}: one send, {len(configs)} configs: {configs}"


def test_refused_continuation_leaves_no_config(push_server: DevServer, connect: Connect) -> None:
    c = connect(push_server)
    principal = c.headers["x-local-principal"]
    for trial in range(CONTINUATION_TRIALS):
        task = paused_task(c)
        # Different messages at once: one continues the task, the others are refused.
        urls = [f"http://127.0.0.1:9/race-{trial}-{i}" for i in range(CONCURRENT_SENDS)]
        bodies = [
            continuation(task, f"answer {i}", url, f"m-{uuid.uuid4()}")
            for i, url in enumerate(urls)
        ]
        statuses = send_concurrently(push_server, principal, bodies)
        assert sorted(statuses) == [200] + [400] * (CONCURRENT_SENDS - 1), statuses
        accepted = urls[statuses.index(200)]
        configs = c.get(f"/tasks/{task['id']}/pushNotificationConfigs").json()["configs"]
        assert [x["url"] for x in configs] == [accepted], (
            f"trial {trial}: configs of refused messages were stored: {configs}"
        )


# -- 5. SSRF guard at creation (production policy) -----------------------------------------------

SSRF_CASES = [
    ("http://example.com/x", "webhook URL scheme must be https"),
    ("https://127.0.0.1/", "loopback"),
    ("https://2130706433/", "loopback"),
    ("https://0177.0.0.1/", "loopback"),
    ("https://0x7f.0.0.1/", "loopback"),
    ("https://127.1/", "loopback"),
    ("https://[::1]/", "loopback"),
    ("https://[::ffff:127.0.0.1]/", "loopback"),
    ("https://localhost./", "loopback"),
    ("https://api.localhost/", "loopback"),
    ("https://0.0.0.0/", "unspecified"),
    ("https://169.254.169.254/latest/meta-data", "cloud metadata"),
    ("https://[fd00:ec2::254]/", "cloud metadata"),
    ("https://10.0.0.1/", "private"),
    ("https://192.168.1.1:8443/", "private"),
    ("https://100.64.0.1/", "carrier-grade NAT"),
    ("https://[fd00::1]/", "private"),
    ("https://[fe80::1]/", "link-local"),
    ("https://[64:ff9b::a9fe:a9fe]/", "cloud metadata"),  # NAT64 of 169.254.169.254
    ("https://user:pw-s3cret@example.com/", "must not contain credentials"),
]
QUERY_SECRET = "sig=q-s3cret"


def with_query_secret(url: str) -> str:
    """The URL with a secret in its query: never to be echoed either."""
    return f"{url}{'&' if '?' in url else '?'}{QUERY_SECRET}"


@pytest.fixture(scope="module")
def strict_task(strict_server: DevServer) -> tuple[str, str]:
    """(principal, task id) of one completed task on the strict server."""
    principal = new_principal("strict")
    with checked_client(strict_server.base_url, principal=principal) as c:
        return principal, send(c, "ssrf target")["id"]


@pytest.mark.parametrize(("url", "reason"), SSRF_CASES, ids=[u for u, _ in SSRF_CASES])
def test_unsafe_webhook_urls_are_refused_over_rest(
    strict_server: DevServer, connect: Connect, strict_task: tuple[str, str], url: str, reason: str
) -> None:
    principal, task_id = strict_task
    c = connect(strict_server, principal)
    configs = f"/tasks/{task_id}/pushNotificationConfigs"
    secret_url = with_query_secret(url)
    response = c.post(configs, json={"url": secret_url, "token": TOKEN, "authentication": AUTH})
    error = error_of(response, 400)
    assert error["status"] == "INVALID_ARGUMENT" and reason_of(error) == "INVALID_PARAMS"
    [(field, description)] = violations_of(error)
    assert field == "url" and reason in description, error
    # Neither the URL (userinfo, query), its host as written, nor the config's secrets.
    host = url.split("//")[1].split("/")[0].split("@")[-1]
    assert_secret_free(response.text, secret_url, "pw-s3cret", QUERY_SECRET, host)
    assert c.get(configs).json() == {}


def test_unsafe_webhook_urls_are_refused_over_jsonrpc(
    strict_server: DevServer, connect: Connect, strict_task: tuple[str, str]
) -> None:
    principal, task_id = strict_task
    c = connect(strict_server, principal)
    for url, reason in (
        ("https://[::ffff:127.0.0.1]/", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "cloud metadata"),
        ("https://user:pw-s3cret@example.com/", "credentials"),
        ("http://example.com/x", "scheme must be https"),
    ):
        params = {
            "taskId": task_id,
            "url": with_query_secret(url),
            "token": TOKEN,
            "authentication": AUTH,
        }
        err = rpc.error(c, "CreateTaskPushNotificationConfig", params, code=-32602)
        assert rpc.error_info(err)["reason"] == "INVALID_PARAMS"
        assert rpc.violated_fields(err) == ["url"] and reason in err["message"], err
        assert_secret_free(json.dumps(err), "pw-s3cret", QUERY_SECRET)
    assert rpc.result(c, "ListTaskPushNotificationConfigs", {"taskId": task_id}) == {}


def test_unsafe_inline_config_creates_no_task(strict_server: DevServer, connect: Connect) -> None:
    c = connect(strict_server)
    inline = {"url": with_query_secret("https://10.1.2.3/"), "token": TOKEN, "authentication": AUTH}
    response = c.post(
        "/message:send", json=send_body("never runs", taskPushNotificationConfig=inline)
    )
    error = error_of(response, 400)
    assert violations_of(error) == [
        (
            "configuration.taskPushNotificationConfig.url",
            "webhook URL host resolves to a private address",
        )
    ], error
    assert_secret_free(response.text, QUERY_SECRET)
    err = rpc.error(
        c,
        "SendMessage",
        send_body("never runs", taskPushNotificationConfig=inline),
        code=-32602,
    )
    assert rpc.violated_fields(err) == ["configuration.taskPushNotificationConfig.url"], err
    assert c.get("/tasks").json()["totalSize"] == 0


# -- 6. capability disabled ----------------------------------------------------------------------


def test_disabled_push_answers_capability_errors(
    disabled_server: DevServer, connect: Connect
) -> None:
    c = connect(disabled_server)
    card = c.get(CARD_PATH).json()
    assert card["capabilities"]["pushNotifications"] is False, card["capabilities"]
    task = send(c, "no push here")
    configs = f"/tasks/{task['id']}/pushNotificationConfigs"
    body = {"url": "http://127.0.0.1:9/x", "token": TOKEN, "authentication": AUTH}
    for response in (
        c.post(configs, json=body),
        c.get(configs),
        c.get(f"{configs}/c1"),
        c.delete(f"{configs}/c1"),
        c.post("/message:send", json=send_body("inline", taskPushNotificationConfig=body)),
    ):
        error = error_of(response, 400)
        assert error["status"] == "FAILED_PRECONDITION", error
        assert reason_of(error) == "PUSH_NOTIFICATION_NOT_SUPPORTED", error
        assert_secret_free(response.text)

    err = rpc.error(
        c, "CreateTaskPushNotificationConfig", {"taskId": task["id"], **body}, code=-32003
    )
    assert rpc.error_info(err)["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    assert_secret_free(json.dumps(err))
    err = rpc.error(c, "SendMessage", send_body("x", taskPushNotificationConfig=body), code=-32003)
    assert rpc.error_info(err)["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    assert_secret_free(json.dumps(err))
    v03 = connect(disabled_server, c.headers["x-local-principal"], version=None)
    params = {
        "taskId": task["id"],
        "pushNotificationConfig": {"url": body["url"], "token": TOKEN},
    }
    err = rpc.error(v03, "tasks/pushNotificationConfig/set", params, code=-32003)
    assert rpc.error_info(err)["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    assert_secret_free(json.dumps(err))
    inline03 = {
        "message": rpc.msg03("x"),
        "configuration": {"pushNotificationConfig": params["pushNotificationConfig"]},
    }
    rpc.error(v03, "message/send", inline03, code=-32003)
    # Only the first task exists: no refused send created one.
    assert c.get("/tasks").json()["totalSize"] == 1


# -- 7. a config made over JSON-RPC 0.3 gets what 0.3 receivers expect ---------------------------


def _v03_tasks(receiver: Receiver, name: str) -> list[dict[str, Any]]:
    """The acknowledged payloads of a 0.3 webhook: each a 0.3 Task (schema-checked)."""
    return [wire.check_v03(json.loads(r.body), "Task") for r in receiver.of(name) if r.ok]


@pytest.mark.parametrize("how", ["set on a running task", "inline in message/send"])
def test_v03_webhooks_receive_v03_tasks(
    push_server: DevServer, connect: Connect, receiver: Receiver, how: str
) -> None:
    """A 0.3 receiver gets the Task as of each event, in 0.3 shape (`kind: "task"`, lower-case
    states) as application/json, as 0.3 senders post it (0.3 spec §9.5)."""
    c = connect(push_server, version=None)  # no A2A-Version: 0.3
    text = "via 0.3 [slow=2]"
    config = {
        "url": receiver.url("v03"),
        "token": TOKEN,
        "authentication": {"schemes": ["Bearer"], "credentials": CREDENTIALS},
    }
    configuration: dict[str, Any] = {"blocking": False}
    if how == "inline in message/send":
        configuration["pushNotificationConfig"] = config
    task = rpc.result(
        c, "message/send", {"message": rpc.msg03(text), "configuration": configuration}
    )
    assert task["kind"] == "task" and task["status"]["state"] in ("submitted", "working"), task
    if how == "set on a running task":
        created = rpc.result(
            c,
            "tasks/pushNotificationConfig/set",
            {"taskId": task["id"], "pushNotificationConfig": config},
        )
        assert created == {
            "taskId": task["id"],
            "pushNotificationConfig": {"id": created["pushNotificationConfig"]["id"], **config},
        }

    def completed() -> bool:
        pushed = _v03_tasks(receiver, "v03")
        return bool(pushed) and pushed[-1]["status"]["state"] == "completed"

    receiver.wait_for("a completed 0.3 task at /hook/v03", completed)
    pushed = _v03_tasks(receiver, "v03")
    assert all(t["kind"] == "task" and t["id"] == task["id"] for t in pushed), pushed
    assert all(t["contextId"] == task["contextId"] for t in pushed), pushed
    # Each payload is the task as of one more event: states only move forward, and the
    # reply's text only grows, to the full echo at the end.
    order = ["submitted", "working", "completed"]
    states = [order.index(t["status"]["state"]) for t in pushed]
    assert states == sorted(states), [t["status"]["state"] for t in pushed]

    def text_of(t: dict[str, Any]) -> str:
        return "".join(p["text"] for a in t.get("artifacts", []) for p in a["parts"])

    texts = [text_of(t) for t in pushed]
    assert all(a == b[: len(a)] for a, b in itertools.pairwise(texts)), texts
    assert texts[-1] == f"Echo: {text}"
    if how == "inline in message/send":  # every event, from the first
        assert pushed[0]["status"]["state"] == "submitted"
        assert len(pushed) == len(set(map(json.dumps, pushed)))
    for request in receiver.of("v03"):
        assert request.header("x-a2a-notification-token") == TOKEN
        assert request.header("authorization") == f"Bearer {CREDENTIALS}"
        assert request.header("content-type") == "application/json"
