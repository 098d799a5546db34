"""Blocking sends keep their connection alive (API Gateway drops responses idle for 5 min).

The Web Adapter functions' apps are driven here the way the Lambda Web Adapter drives them
(an HTTP request with API Gateway's requestContext in `x-amzn-request-context`), but at the
ASGI level so that every body chunk is time-stamped as the app sends it, and so that the
client can hang up mid-response (httpx's ASGITransport buffers whole responses).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from a2a_serverless.local.stack import LocalStack
from tests import wire
from tests.integration import flows_for_tests
from tests.integration.harness import CallLog, ddb, load_event, table, user_message

GATED = "tests.integration.flows_for_tests:gated"
SEND_FUNCTION = "SendMessageFunction"
RPC_FUNCTION = "StreamFunction"
KEEPALIVE = b"\n"
INTERVAL = 0.1


@dataclass
class Received:
    """What the app sent, with the time of each body chunk after the request."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    finished: bool = False  # the last body message (more_body false) was sent

    @property
    def body(self) -> bytes:
        return b"".join(chunk for _, chunk in self.chunks)


def drive(
    app: Any, event: dict[str, Any], *, hang_up_after: float | None = None, limit: float = 20.0
) -> Received:
    """One request to a Web Adapter function's app, as the adapter makes it from `event`.
    With `hang_up_after`, the client disconnects that many seconds in. The app must be done
    within `limit` seconds."""
    headers = {k: v[-1] for k, v in (event.get("multiValueHeaders") or {}).items()}
    headers.update(event.get("headers") or {})
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    body = (event.get("body") or "").encode()
    headers["content-length"] = str(len(body))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": event["httpMethod"],
        "scheme": "http",
        "path": event["path"],
        "raw_path": event["path"].encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }
    received = Received()

    async def run() -> None:
        started = time.monotonic()
        gone = asyncio.Event()
        requested = False

        async def receive() -> dict[str, Any]:
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                received.status = message["status"]
                received.headers = {k.decode(): v.decode() for k, v in message["headers"]}
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    received.chunks.append((time.monotonic() - started, chunk))
                if not message.get("more_body", False):
                    received.finished = True
                    gone.set()

        async def hang_up() -> None:
            assert hang_up_after is not None
            await asyncio.sleep(hang_up_after)
            gone.set()

        hanging = asyncio.ensure_future(hang_up()) if hang_up_after is not None else None
        try:
            await asyncio.wait_for(app(scope, receive, send), limit)
        finally:
            if hanging is not None:
                hanging.cancel()

    asyncio.run(run())
    return received


def send_event(text: str, **body: Any) -> dict[str, Any]:
    return load_event("send_message.json", body={"message": user_message(text), **body})


def rpc_event(version: str, text: str) -> tuple[dict[str, Any], wire.RpcRequest]:
    """A blocking send as a JSON-RPC call on `POST /` (StreamFunction): 1.0 `SendMessage`
    or 0.3 `message/send` (no A2A-Version header)."""
    if version == "1.0":
        method, params = "SendMessage", {"message": user_message(text)}
    else:
        message = {
            "kind": "message",
            "role": "user",
            "messageId": f"m-{uuid.uuid4().hex}",
            "parts": [{"kind": "text", "text": text}],
        }
        method, params = "message/send", {"message": message}
    payload = {"jsonrpc": "2.0", "id": f"call-{uuid.uuid4().hex[:8]}", "method": method}
    event = load_event("send_message.json", body={**payload, "params": params})
    event["path"] = event["resource"] = "/"
    event["multiValueHeaders"] = {}
    event["headers"] = {"Content-Type": "application/json"}
    if version == "1.0":
        event["headers"]["A2A-Version"] = "1.0"
    request = wire.rpc_request(event["body"].encode(), version)
    return event, request


def assert_kept_alive(received: Received, *, before: float) -> int:
    """HTTP 200 without Content-Length; only keep-alive bytes until the last chunk, the first
    no sooner than INTERVAL and well before the end, then more while waiting; the JSON in the
    last chunk, `before` seconds or more after the request. Returns the number of
    keep-alives."""
    assert received.status == 200 and received.finished, received
    assert "content-length" not in received.headers, received.headers
    *keepalives, (last_at, last) = received.chunks
    assert keepalives, f"no keep-alive byte during a {last_at:.2f} s wait: {received.chunks}"
    assert all(chunk == KEEPALIVE for _, chunk in keepalives), keepalives
    assert last[:1] == b"{", last[:50]
    assert last_at >= before, (last_at, before)
    # Bounds loose enough for a loaded machine, still telling "while waiting" from "at the end".
    assert INTERVAL * 0.8 <= keepalives[0][0] < last_at - 0.3, (keepalives[0], last_at)
    times = [at for at, _ in keepalives] + [last_at]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) <= 1.0, gaps
    return len(keepalives)


def echo_text(task: dict[str, Any]) -> str:
    return "".join(p["text"] for a in task.get("artifacts", []) for p in a["parts"])


@pytest.fixture(autouse=True)
def _no_full_collection_while_timed() -> Iterator[None]:
    """The gaps asserted are the keep-alive writer's: a full garbage collection of this long
    test process (~600,000 objects by then) stops every thread for up to ~0.9 s, about the
    longest gap allowed. Collected before each test, not during it."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture
def keepalive_stack(
    monkeypatch: pytest.MonkeyPatch, make_stack: Callable[..., LocalStack]
) -> Iterator[Callable[..., LocalStack]]:
    """make_stack with BLOCKING_KEEPALIVE_SECONDS=INTERVAL and other settings exported first
    (exported settings win over the template's, as with scripts/dev). A gated flow gets
    fresh gates, opened at teardown (before make_stack waits for the executions to end)."""

    def make(env: dict[str, str] | None = None, **parameters: str) -> LocalStack:
        for key, value in {"BLOCKING_KEEPALIVE_SECONDS": str(INTERVAL), **(env or {})}.items():
            monkeypatch.setenv(key, value)
        if parameters.get("Flow") == GATED:
            flows_for_tests.GATES = flows_for_tests.Gates()
        return make_stack(**parameters)

    yield make
    flows_for_tests.GATES.emit.set()
    flows_for_tests.GATES.finish.set()


# -- a wait: keep-alives, then the answer ------------------------------------------------------


def test_waiting_send_writes_newlines_then_the_task(
    keepalive_stack: Callable[..., LocalStack],
) -> None:
    """POST /message:send of a 1 s echo, keep-alive 0.1 s: the response starts at once with
    HTTP 200 and a newline about every 0.1 s, then the completed task; the whole body passes
    the strict wire check as a SendMessageResponse."""
    stack = keepalive_stack()
    received = drive(stack.app_for(SEND_FUNCTION), send_event("slowly [slow=1]"))
    count = assert_kept_alive(received, before=0.9)
    assert count >= 3, received.chunks
    assert received.headers["content-type"] == "application/a2a+json", received.headers
    assert received.body.startswith(KEEPALIVE * count + b"{")
    kept = len(wire.KEPT_ALIVE)
    wire.check_response("POST", "/message:send", 200, received.body)
    assert wire.KEPT_ALIVE[kept:] == [("POST", "/message:send", count)]
    task = json.loads(received.body)["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert echo_text(task) == "Echo: slowly [slow=1]"


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_waiting_jsonrpc_send_writes_newlines_then_the_result(
    keepalive_stack: Callable[..., LocalStack], version: str
) -> None:
    """JSON-RPC SendMessage (1.0) and message/send (0.3) on StreamFunction: the same
    keep-alives, then the JSON-RPC response with the request's id and the completed task."""
    stack = keepalive_stack()
    event, request = rpc_event(version, "rpc slowly [slow=1]")
    received = drive(stack.app_for(RPC_FUNCTION), event)
    assert_kept_alive(received, before=0.9)
    assert received.headers["content-type"] == "application/json", received.headers
    wire.check_jsonrpc_response(request, 200, received.body)
    answer = json.loads(received.body)
    assert answer["id"] == request.id, answer
    task = answer["result"]["task"] if version == "1.0" else answer["result"]
    state = task["status"]["state"]
    assert state == ("TASK_STATE_COMPLETED" if version == "1.0" else "completed"), task
    assert echo_text(task) == "Echo: rpc slowly [slow=1]"


# -- no wait, or no wait yet: the answers of before ----------------------------------------------


def test_quick_answers_are_plain_json(local_stack: LocalStack) -> None:
    """The default 15 s keep-alive: a send done sooner (blocking or not) is the plain JSON
    response, Content-Length and all, no leading whitespace."""
    for body in ({}, {"configuration": {"returnImmediately": True}}):
        received = drive(local_stack.app_for(SEND_FUNCTION), send_event("quick", **body))
        assert received.status == 200 and len(received.chunks) == 1, received
        assert received.body[:1] == b"{", received.body[:50]
        assert received.headers["content-length"] == str(len(received.body))
        assert received.headers["content-type"] == "application/a2a+json"
        wire.check_response("POST", "/message:send", 200, received.body)


def test_refusals_keep_their_status_and_body(keepalive_stack: Callable[..., LocalStack]) -> None:
    """Errors found before the wait are answered as before, whatever the keep-alive: 404 for
    an unknown task, 400 for invalid params; JSON-RPC errors carry the request's id."""
    stack = keepalive_stack()
    app = stack.app_for(SEND_FUNCTION)
    unknown = user_message("hi", task_id=str(uuid.uuid4()))
    received = drive(app, load_event("send_message.json", body={"message": unknown}))
    assert received.status == 404 and received.body[:1] == b"{", received
    assert received.headers["content-length"] == str(len(received.body))
    wire.check_response("POST", "/message:send", 404, received.body)
    invalid = {"message": {"role": "ROLE_USER", "messageId": "m"}}
    received = drive(app, load_event("send_message.json", body=invalid))
    assert received.status == 400 and received.body[:1] == b"{", received
    wire.check_response("POST", "/message:send", 400, received.body)

    event, request = rpc_event("1.0", "hi")
    payload = json.loads(event["body"])
    payload["params"]["message"]["taskId"] = str(uuid.uuid4())
    event["body"] = json.dumps(payload)
    request = wire.rpc_request(event["body"].encode(), "1.0")
    received = drive(stack.app_for(RPC_FUNCTION), event)
    assert received.status == 200 and received.body[:1] == b"{", received
    error = wire.check_jsonrpc_response(request, 200, received.body)
    assert error["code"] == -32001, error


# -- a failure during the wait, after keep-alives ------------------------------------------------


def _steal_the_task_once_it_runs(stack: LocalStack) -> threading.Thread:
    """Once the gated flow runs, give its task to another owner: the send's answer after the
    wait then finds no task of its caller (TaskNotFoundError), a failure after bytes went out."""

    def steal() -> None:
        assert flows_for_tests.GATES.started.wait(10)
        items = ddb().scan(TableName=table(stack))["Items"]
        (task_id,) = {i["pk"]["S"][2:] for i in items if i["sk"]["S"] == "H"}
        ddb().update_item(
            TableName=table(stack),
            Key={"pk": {"S": f"T#{task_id}"}, "sk": {"S": "H"}},
            UpdateExpression="SET #o = :o",
            ExpressionAttributeNames={"#o": "owner"},
            ExpressionAttributeValues={":o": {"S": "mallory"}},
        )

    thread = threading.Thread(target=steal, daemon=True)
    thread.start()
    return thread


def test_a_failure_after_keepalives_is_a_whole_status_body(
    keepalive_stack: Callable[..., LocalStack],
) -> None:
    """HTTP+JSON: the status (200) went out with the first keep-alive, so the failure is a
    complete google.rpc.Status body after the newlines, with the code it would have had."""
    # 2 s: the wait's limit counts from the send's acceptance, which on a loaded machine
    # (the first send of a fresh stack) took ~1 s and left no room for the keep-alives.
    stack = keepalive_stack(env={"BLOCKING_MAX_WAIT_SECONDS": "2"}, Flow=GATED)
    thief = _steal_the_task_once_it_runs(stack)
    received = drive(stack.app_for(SEND_FUNCTION), send_event("hold"))
    thief.join(10)
    assert_kept_alive(received, before=0.9)
    error = wire.check_response("POST", "/message:send", 200, received.body)
    assert error["code"] == 404 and error["status"] == "NOT_FOUND", error
    reasons = [d.get("reason") for d in error.get("details", [])]
    assert "TASK_NOT_FOUND" in reasons, error


def test_a_jsonrpc_failure_after_keepalives_is_an_error_with_the_id(
    keepalive_stack: Callable[..., LocalStack],
) -> None:
    """JSON-RPC: the same failure after keep-alives is a whole JSON-RPC error object
    (TaskNotFoundError, -32001) with the request's id."""
    # 2 s: the wait's limit counts from the send's acceptance, which on a loaded machine
    # (the first send of a fresh stack) took ~1 s and left no room for the keep-alives.
    stack = keepalive_stack(env={"BLOCKING_MAX_WAIT_SECONDS": "2"}, Flow=GATED)
    thief = _steal_the_task_once_it_runs(stack)
    event, request = rpc_event("1.0", "hold")
    received = drive(stack.app_for(RPC_FUNCTION), event)
    thief.join(10)
    assert_kept_alive(received, before=0.9)
    error = wire.check_jsonrpc_response(request, 200, received.body)
    assert error["code"] == -32001, error
    assert json.loads(received.body)["id"] == request.id


# -- the client hangs up ---------------------------------------------------------------------------


def test_client_hang_up_stops_the_wait(keepalive_stack: Callable[..., LocalStack]) -> None:
    """A send held WORKING (wait limit: the template's, minutes), the client gone after 0.6 s:
    the app returns at once and the wait's log reads stop within about a poll interval
    (POLL_MAX_MS=50 here) instead of going on for a client that is not there."""
    stack = keepalive_stack(Flow=GATED)
    calls = CallLog()
    try:
        started = time.monotonic()
        received = drive(stack.app_for(SEND_FUNCTION), send_event("hold"), hang_up_after=0.6)
        returned = time.monotonic()
        assert returned - started < 2.0, returned - started
        time.sleep(1.5)
        (task_id,) = {c.partition[2:] for c in calls.calls if c.reads_event_log}
        during = calls.log_reads(task_id, started, started + 0.6)
        after = calls.log_reads(task_id, returned)
    finally:
        calls.close()
    assert received.status == 200 and not received.finished, received
    assert received.chunks and all(chunk == KEEPALIVE for _, chunk in received.chunks)
    assert len(during) >= 3, f"the wait was not polling: {len(during)} reads"
    assert len(after) <= 1, [round(c.at - returned, 3) for c in after]


# -- the wire check knows where keep-alives may be ----------------------------------------------


def test_wire_check_allows_keepalives_only_before_blocking_send_answers() -> None:
    task = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
    body = json.dumps({"task": task}).encode()
    wire.check_response("POST", "/message:send", 200, KEEPALIVE * 3 + body)
    for method, path, status, bad in (
        ("GET", "/tasks/t", 200, KEEPALIVE + json.dumps(task).encode()),  # not a send
        ("POST", "/message:send", 200, b" " + body),  # not a keep-alive byte
        ("POST", "/message:send", 200, KEEPALIVE + b"\t" + body),
        ("POST", "/message:send", 404, KEEPALIVE + b'{"error":{}}'),  # an error status
    ):
        with pytest.raises(AssertionError):
            wire.check_response(method, path, status, bad)
    send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
    get = {**send, "method": "GetTask"}
    answer = KEEPALIVE + json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"task": task}}).encode()
    wire.check_jsonrpc_response(wire.rpc_request(json.dumps(send).encode(), "1.0"), 200, answer)
    with pytest.raises(AssertionError):
        wire.check_jsonrpc_response(wire.rpc_request(json.dumps(get).encode(), "1.0"), 200, answer)
