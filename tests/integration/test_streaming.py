"""SSE streams (message:stream, :subscribe) and blocking sends, over a real HTTP server.

httpx's ASGITransport buffers whole responses, so the gateway runs under uvicorn on a free
loopback port in a background thread and the client reads the stream as it arrives. What is
streamed is compared with the task's event log (`E#{seq:010d}` items) read from the table.
"""

from __future__ import annotations

import concurrent.futures
import copy
import itertools
import json
import random
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from a2a import types as a2a_types

from a2a_serverless.local.stack import LocalStack
from tests.integration import flows_for_tests
from tests.integration.harness import (
    A2A,
    TERMINAL,
    CallCounter,
    CallLog,
    DynamoCall,
    Resp,
    assert_log_consistent,
    event_log,
    header,
    user_message,
    wait_for,
    wait_idle,
)
from tests.wire import check_response, parse_strict

NUMBERED = "tests.integration.flows_for_tests:numbered"
GATED = "tests.integration.flows_for_tests:gated"
HEARTBEAT = ": keep-alive"


# -- the stack behind a real HTTP server ----------------------------------------------------


class Server:
    """The stack's gateway under uvicorn in a background thread."""

    def __init__(self, stack: LocalStack) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", 0))
        port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(
            stack.gateway(),
            host="127.0.0.1",
            port=port,
            http="h11",
            loop="asyncio",
            lifespan="off",
            log_level="warning",
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def start(self) -> Server:
        self.thread.start()
        wait_for(lambda: self.server.started, timeout=10, interval=0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()
        assert not self.thread.is_alive(), "uvicorn did not stop"


@dataclass
class Served:
    stack: LocalStack
    server: Server

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """serve(Flow=..., env={...}) -> a fresh stack (template parameters, environment
    overrides such as POLL_MAX_MS) behind uvicorn. Teardown: server stopped, gated flows
    released, executions finished, stack stopped."""
    made: list[Served] = []

    def make(env: dict[str, str] | None = None, **parameters: str) -> Served:
        if parameters.get("Flow") == GATED:
            flows_for_tests.GATES = flows_for_tests.Gates()
        flows_for_tests.PROGRESS = flows_for_tests.Progress()
        # No event-source pollers: the read budgets here count the stream's reads only.
        stack = LocalStack(parameters=parameters, env_overrides=env, event_sources=False).start()
        try:
            served = Served(stack, Server(stack).start())
        except BaseException:
            stack.stop()
            raise
        made.append(served)
        return served

    yield make
    try:
        for served in made:
            served.server.stop()
        flows_for_tests.GATES.emit.set()
        flows_for_tests.GATES.finish.set()
        for served in made:  # every stack idle before any stops: stacks nest (LocalStack)
            wait_idle(served.stack)
    finally:
        for served in reversed(made):
            served.stack.stop()


# -- an SSE client --------------------------------------------------------------------------


def _headers(principal: str | None) -> dict[str, str]:
    headers = {"A2A-Version": "1.0", "Content-Type": "application/a2a+json"}
    if principal:
        headers["X-Local-Principal"] = principal
    return headers


@dataclass
class Stream:
    """What one streaming request received."""

    status: int
    content_type: str
    frames: list[dict[str, Any]] = field(default_factory=list)  # the data payloads
    frame_times: list[float] = field(default_factory=list)
    comments: list[tuple[float, str]] = field(default_factory=list)
    ended_at: float | None = None  # the server closed the stream (None: the client did)
    error: Any = None  # the checked google.rpc.Status of an error answer
    body: bytes = b""

    @property
    def first(self) -> dict[str, Any]:
        return self.frames[0]["task"]

    @property
    def rest(self) -> list[dict[str, Any]]:
        return self.frames[1:]


def open_stream(
    url: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    principal: str | None = "alice",
    stop: Callable[[Stream], bool] | None = None,
    on_close: Callable[[], None] | None = None,
    timeout: float = 20.0,
) -> Stream:
    """POST `path` and read the SSE stream until the server ends it, or until `stop(stream)`
    says to hang up (then the connection is closed and `on_close` runs). Every data frame is
    checked strictly as an a2a StreamResponse; an error answer as a google.rpc.Status.

    A stream still open after `timeout` seconds, or silent for 10 s (heartbeats come every
    15 s by default, so a stream that should have ended looks like that), fails the test."""
    deadline = time.monotonic() + timeout
    client = httpx.Client(base_url=url, timeout=min(timeout, 10.0))
    try:
        with client.stream(
            "POST", path, content=json.dumps(body or {}), headers=_headers(principal)
        ) as response:
            stream = Stream(response.status_code, response.headers.get("content-type", ""))
            if response.status_code != 200:
                stream.body = response.read()
                stream.error = check_response("POST", path, response.status_code, stream.body)
                return stream
            assert stream.content_type.startswith("text/event-stream"), stream.content_type
            hung_up = False
            for line in response.iter_lines():
                now = time.monotonic()
                if line.startswith("data: "):
                    payload = json.loads(line[len("data: ") :])
                    parse_strict(payload, a2a_types.StreamResponse)
                    stream.frames.append(payload)
                    stream.frame_times.append(now)
                elif line.startswith(":"):
                    stream.comments.append((now, line))
                else:
                    assert line == "", f"unexpected SSE line {line!r}"
                if stop is not None and stop(stream):
                    hung_up = True
                    break
                assert now < deadline, f"the stream is still open after {timeout} s: {stream}"
            if not hung_up:
                stream.ended_at = time.monotonic()
    finally:
        client.close()
    if on_close is not None:
        on_close()
    return stream


def subscribe(url: str, task_id: str, **kwargs: Any) -> Stream:
    return open_stream(url, f"/tasks/{task_id}:subscribe", **kwargs)


def stream_message(url: str, message: dict[str, Any], **kwargs: Any) -> Stream:
    return open_stream(url, "/message:stream", {"message": message}, **kwargs)


def send_nonblocking(url: str, text: str, principal: str = "alice") -> dict[str, Any]:
    body = {"message": user_message(text), "configuration": {"returnImmediately": True}}
    response = httpx.post(
        url + "/message:send", content=json.dumps(body), headers=_headers(principal), timeout=30
    )
    check_response("POST", "/message:send", response.status_code, response.content)
    assert response.status_code == 200, response.text
    return response.json()["task"]


# -- the oracle: the event log, folded independently -----------------------------------------


def fold(
    events: list[dict[str, Any]], task: dict[str, Any] | None = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Status and artifacts a client holds after these events (A2A append semantics),
    starting from nothing or from a Task snapshot."""
    status = task["status"] if task else None
    artifacts = {a["artifactId"]: copy.deepcopy(a) for a in (task or {}).get("artifacts", [])}
    for event in events:
        if "statusUpdate" in event:
            status = event["statusUpdate"]["status"]
        elif "artifactUpdate" in event:
            update = event["artifactUpdate"]
            chunk = update["artifact"]
            current = artifacts.get(chunk["artifactId"])
            if update.get("append") and current is not None:
                current["parts"].extend(copy.deepcopy(chunk["parts"]))
            else:
                artifacts[chunk["artifactId"]] = copy.deepcopy(chunk)
        elif "task" in event:
            status = event["task"]["status"]
    return status, list(artifacts.values())


def state_of(event: dict[str, Any]) -> str | None:
    update = event.get("statusUpdate")
    return update["status"]["state"] if update else None


def assert_snapshot_then_log(stream: Stream, log: list[tuple[int, dict[str, Any]]]) -> int:
    """The stream is the task folded at some seq S, then exactly the log items S+1.. in order
    (contiguous, nothing lost or repeated) up to the last one. Returns S."""
    assert stream.status == 200 and stream.frames, stream
    assert "task" in stream.frames[0], stream.frames[0]
    assert all("task" not in f for f in stream.rest), "a Task after the first event"
    events = [event for _, event in log]
    seqs = [seq for seq, _ in log]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    after = len(events) - len(stream.rest)
    assert after >= 1, f"{len(stream.rest)} events streamed but the log has {len(events)}"
    differ = [
        seq
        for seq, got, want in zip(seqs[after:], stream.rest, events[after:], strict=True)
        if got != want
    ]
    assert not differ, f"the streamed events are not the log after seq {after}: at {differ}"
    status, artifacts = fold(events[:after])
    assert stream.first["status"] == status, (stream.first["status"], status)
    assert stream.first.get("artifacts", []) == artifacts
    return after


def texts(parts: list[dict[str, Any]]) -> list[str]:
    return [part["text"] for part in parts]


# -- 1. snapshot + tail under concurrency --------------------------------------------------


def test_concurrent_subscribers_see_every_chunk_exactly_once(
    serve: Callable[..., Served],
) -> None:
    """Five subscribers attach at random points while 200 numbered chunks are emitted: each
    one's snapshot parts + streamed append chunks are exactly 0..199, and every post-snapshot
    sequence is a suffix of the task's event log, in order."""
    served = serve(Flow=NUMBERED)
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    attach_at = sorted(rng.sample(range(5, 130), 5))
    task_id = send_nonblocking(served.url, "count")["id"]
    progress = flows_for_tests.PROGRESS
    results: dict[int, Stream | BaseException] = {}

    def subscriber(index: int) -> None:
        try:
            wait_for(lambda: progress.emitted >= attach_at[index], timeout=20, interval=0.001)
            results[index] = subscribe(served.url, task_id)
        except BaseException as exc:  # reported below
            results[index] = exc

    threads = [threading.Thread(target=subscriber, args=(i,)) for i in range(len(attach_at))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    context = f"seed={seed} attach_at={attach_at}"
    for index in range(len(attach_at)):
        outcome = results.get(index)
        if isinstance(outcome, BaseException):
            raise AssertionError(f"subscriber {index} failed ({context})") from outcome
        assert outcome is not None, f"subscriber {index} hung ({context})"

    log = assert_log_consistent(served.stack, task_id)
    events = [event for _, event in log]
    assert state_of(events[-1]) == "TASK_STATE_COMPLETED", events[-1]
    expected = [f"{n};" for n in range(flows_for_tests.NUMBERED_CHUNKS)]
    assert len([e for e in events if "artifactUpdate" in e]) == len(expected)
    for index in range(len(attach_at)):
        stream = results[index]
        assert isinstance(stream, Stream)
        where = f"subscriber {index}, {context}"
        assert_snapshot_then_log(stream, log)
        assert stream.first["status"]["state"] == "TASK_STATE_WORKING", where
        (snapshot_artifact,) = stream.first["artifacts"]
        before = texts(snapshot_artifact["parts"])
        # Attached mid-emission: the snapshot holds some numbers, not all.
        assert attach_at[index] <= len(before) < len(expected), (len(before), where)
        appended = []
        for frame in stream.rest:
            if "artifactUpdate" in frame:
                assert frame["artifactUpdate"]["append"] is True, (frame, where)
                appended.extend(texts(frame["artifactUpdate"]["artifact"]["parts"]))
        assert before + appended == expected, where
        assert state_of(stream.rest[-1]) == "TASK_STATE_COMPLETED", where
        assert stream.ended_at is not None, f"the stream did not end ({where})"
    # The common sequence: every subscriber's tail is the log from its own start to the end
    # (their starts need not follow the attach order: two subscribers released a few events
    # apart may reach the log in either order on a busy machine).
    longest = max((results[i] for i in range(len(attach_at))), key=lambda s: len(s.rest))
    for index in range(len(attach_at)):
        rest = results[index].rest
        assert longest.rest[len(longest.rest) - len(rest) :] == rest


# -- 2. ordering, and where streams end ----------------------------------------------------


def test_message_stream_is_the_log_in_order_and_closes_after_terminal(
    serve: Callable[..., Served],
) -> None:
    """message:stream: the created task (seq 1), then seqs 2..N contiguous, N the terminal
    status, then the server closes the stream at once."""
    served = serve(Flow=NUMBERED)
    stream = stream_message(served.url, user_message("count [n=25]"))
    task_id = stream.first["id"]
    assert stream.first["status"]["state"] == "TASK_STATE_SUBMITTED"
    log = assert_log_consistent(served.stack, task_id)
    assert assert_snapshot_then_log(stream, log) == 1
    states = [state_of(f) for f in stream.rest if state_of(f)]
    assert states == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], states
    assert state_of(stream.frames[-1]) in TERMINAL
    assert stream.ended_at is not None
    assert stream.ended_at - stream.frame_times[-1] < 0.5, "the stream lingered after terminal"
    assert len([f for f in stream.rest if "artifactUpdate" in f]) == 25


def test_stream_closes_after_input_required_and_resumes_with_the_next_turn(
    serve: Callable[..., Served],
) -> None:
    """An interrupted status ends the stream; a subscription to the interrupted task stays
    open and follows the turn the answer starts (§7.6.1); the answer's stream (message:stream
    with taskId) is the log after its snapshot up to the turn's terminal status."""
    served = serve(Flow=NUMBERED)
    first = stream_message(served.url, user_message("count [n=6] [input]"))
    task_id = first.first["id"]
    log = assert_log_consistent(served.stack, task_id)
    assert assert_snapshot_then_log(first, log) == 1
    assert state_of(first.frames[-1]) == "TASK_STATE_INPUT_REQUIRED"
    assert first.ended_at is not None and first.ended_at - first.frame_times[-1] < 0.5

    # Subscribing to the interrupted task: its snapshot, then it waits for the next turn.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        watching = pool.submit(subscribe, served.url, task_id, timeout=30.0)
        time.sleep(1.0)
        assert not watching.done(), "the subscription closed at the interruption"
        answer = stream_message(served.url, user_message("go on [n=4]", task_id=task_id))
        resubscribed = watching.result()
    assert resubscribed.first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert resubscribed.ended_at is not None
    assert state_of(resubscribed.frames[-1]) == "TASK_STATE_COMPLETED"
    assert {state_of(f) for f in resubscribed.rest if "statusUpdate" in f} >= {
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    }

    assert answer.first["id"] == task_id
    log = assert_log_consistent(served.stack, task_id)
    after = assert_snapshot_then_log(answer, log)
    assert after >= len(first.frames) + 1  # at least the new turn's SUBMITTED status
    assert state_of(answer.frames[-1]) == "TASK_STATE_COMPLETED"
    assert answer.ended_at is not None and answer.ended_at - answer.frame_times[-1] < 0.5
    # Turn 2 restarts the artifact (its first chunk has append=false): a client that applies
    # the streamed events to the snapshot holds 0..3 and the terminal status, as the log does.
    status, artifacts = fold(answer.rest, answer.first)
    assert (status, artifacts) == fold([e for _, e in log])
    assert [texts(a["parts"]) for a in artifacts] == [["0;", "1;", "2;", "3;"]]


# -- 3. client disconnect ------------------------------------------------------------------


def _working_gated_task(served: Served) -> str:
    task_id = send_nonblocking(served.url, "hold")["id"]
    assert flows_for_tests.GATES.started.wait(10)
    wait_for(lambda: header(served.stack, task_id)["state"]["S"] == "TASK_STATE_WORKING")
    return task_id


def test_client_disconnect_stops_the_tail(serve: Callable[..., Served]) -> None:
    """Subscribe to a task held WORKING, read the snapshot, hang up: the stream's log reads
    (Query calls on the task's E# range) stop within about one poll interval (50 ms here)."""
    served = serve(Flow=GATED)
    task_id = _working_gated_task(served)
    calls = CallLog()
    try:
        opened: list[float] = []
        closed: list[float] = []

        def hang_up_after_a_while(stream: Stream) -> bool:
            if not opened:
                opened.append(time.monotonic())
            # Let the tail poll for a while first, so the test sees it running.
            time.sleep(0.6)
            return True

        stream = subscribe(
            served.url,
            task_id,
            stop=hang_up_after_a_while,
            on_close=lambda: closed.append(time.monotonic()),
        )
        assert stream.first["status"]["state"] == "TASK_STATE_WORKING"
        assert stream.ended_at is None
        time.sleep(2.0)
        polling = calls.log_reads(task_id, opened[0], closed[0])
        orphaned = calls.log_reads(task_id, closed[0])
    finally:
        calls.close()
    assert len(polling) >= 3, f"the tail was not polling while connected: {len(polling)} reads"
    # A tail left running polls every 50 ms (~40 reads in 2 s, fewer but many more than 5 on a
    # busy machine); a read or two may be in flight while the server sees the hang-up.
    assert len(orphaned) <= 5, (
        f"{len(orphaned)} log reads in the 2 s after the client hung up "
        f"(at +{[round(c.at - closed[0], 3) for c in orphaned]} s): orphaned polling"
    )


# -- 4. idle read budget, heartbeats, clean close --------------------------------------------

IDLE_SECONDS = 8.0
# 25 ms growing x1.5 per empty read: the interval after the 9th empty read is 961 ms, after the
# 10th it is the 1 s cap (~2.9 s in, later on a busy machine).
RAMP_UP_READS = 10


def test_idle_stream_reads_at_most_once_a_second(serve: Callable[..., Served]) -> None:
    """A quiet WORKING task, default polling (POLL_MAX_MS=1000): after the ramp-up the stream
    reads the log at most once a second. Measured here: ~15 reads in 8 s, a steady state of
    ~0.99 reads/s, i.e. ~59-60 reads per idle minute per stream."""
    served = serve(Flow=GATED, env={"POLL_MAX_MS": "1000"})
    task_id = _working_gated_task(served)
    calls = CallLog()
    try:
        opened: list[float] = []

        def after_idle(stream: Stream) -> bool:
            opened.append(time.monotonic())
            time.sleep(IDLE_SECONDS)
            return True

        stream = subscribe(served.url, task_id, stop=after_idle)
        end = opened[0] + IDLE_SECONDS
        reads = calls.log_reads(task_id, opened[0], end)
        everything = calls.of_task(task_id, opened[0], end)
    finally:
        calls.close()
    assert stream.first["status"]["state"] == "TASK_STATE_WORKING"
    assert len(stream.frames) == 1 and not stream.comments  # quiet: no heartbeat before 15 s
    assert everything == reads, [c.operation for c in everything]  # the tail's reads only
    times = [c.at for c in reads]
    # The steady state by count of reads, not by time: a slow machine stretches the ramp-up
    # past any fixed time. (A tail read before `opened` is not in `reads`: then each index is a
    # later read of the tail, whose gaps are no shorter.)
    steady = times[RAMP_UP_READS:]
    assert len(steady) >= 3, times
    rate = (len(steady) - 1) / (steady[-1] - steady[0])
    per_minute = rate * 60
    print(
        f"\nidle stream: {len(reads)} log reads in {IDLE_SECONDS:.0f} s; steady state "
        f"{rate:.3f} reads/s = {per_minute:.1f} reads per idle minute"
    )
    assert rate <= 1.02, f"{rate:.3f} reads/s when idle ({per_minute:.1f}/min)"
    assert len(reads) <= RAMP_UP_READS + IDLE_SECONDS, len(reads)
    assert min(b - a for a, b in itertools.pairwise(steady)) >= 0.95


def test_quiet_stream_heartbeats_and_closes_cleanly_at_max_duration(
    serve: Callable[..., Served],
) -> None:
    """STREAM_HEARTBEAT_SECONDS=1: quiet streams carry `: keep-alive` comments;
    STREAM_MAX_SECONDS=2: the stream ends cleanly (no error, no terminal event) after ~2 s,
    while the task goes on."""
    served = serve(Flow=GATED, env={"STREAM_HEARTBEAT_SECONDS": "1", "STREAM_MAX_SECONDS": "2"})
    task_id = _working_gated_task(served)
    started = time.monotonic()
    stream = subscribe(served.url, task_id, timeout=10)
    assert stream.status == 200 and stream.ended_at is not None
    # Not before the 2 s limit (counted from the request); after it, within a poll and some
    # slack for a busy machine from the snapshot (a stream that ignores the limit runs to the
    # client's 10 s timeout).
    assert stream.ended_at - started >= 1.8, stream.ended_at - started
    lasted = stream.ended_at - stream.frame_times[0]
    assert lasted <= 2.0 + 2.5, lasted
    assert len(stream.frames) == 1, stream.frames  # the snapshot, nothing else happened
    assert stream.first["status"]["state"] == "TASK_STATE_WORKING"
    assert stream.comments, "no heartbeat in a 2 s quiet stream with a 1 s heartbeat"
    assert all(text == HEARTBEAT for _, text in stream.comments), stream.comments
    first_beat = stream.comments[0][0] - stream.frame_times[0]
    # After a quiet heartbeat interval, not before (and before the 2 s close, or none at all).
    assert 0.8 <= first_beat <= 2.0, first_beat
    assert header(served.stack, task_id)["state"]["S"] == "TASK_STATE_WORKING"


# -- 5. blocking SendMessage tails the same log ----------------------------------------------


def measured_send(
    stack: LocalStack, text: str
) -> tuple[Resp, Counter[str], list[DynamoCall], float]:
    """Alice's blocking send: (response, its DynamoDB calls by operation, its calls on the
    task's partition, seconds it took)."""
    counter = CallCounter()
    calls = CallLog()
    try:
        with counter.measure("client send") as ops:
            started = time.monotonic()
            response = A2A(stack, "alice").send(text)
            elapsed = time.monotonic() - started
        mine = [c for c in calls.of_task(response.task["id"]) if c.who == "client send"]
    finally:
        calls.close()
        counter.close()
    return response, ops, mine, elapsed


def test_blocking_send_returns_current_task_at_the_wait_limit(
    serve: Callable[..., Served],
) -> None:
    """BLOCKING_MAX_WAIT_SECONDS=1 and a flow that does not settle: HTTP 200 after ~1 s with
    the WORKING task; the wait was event-log Queries (E# range), not GetItem loops."""
    served = serve(Flow=GATED, BlockingMaxWaitSeconds="1")
    response, ops, mine, elapsed = measured_send(served.stack, "hold")
    assert response.status == 200, response.body
    # The 1 s limit, with slack for a busy machine; without a limit the gated flow never
    # settles and the send would hang until the client's timeout.
    assert 0.9 <= elapsed <= 8.0, elapsed
    assert response.task["status"]["state"] == "TASK_STATE_WORKING", response.task
    tail_reads = [c for c in mine if c.reads_event_log]
    # ~1 s of polling at 25..50 ms: repeated tail reads (fewer on a busy machine), no GetItem.
    assert len(tail_reads) >= 4, ops
    assert ops["GetItem"] == 0, ops
    others = [c for c in mine if not c.reads_event_log and c.operation == "Query"]
    assert len(others) <= 1, [c.params for c in others]  # the final GetTask snapshot
    assert all(c.params.get("ConsistentRead") for c in tail_reads)


def test_blocking_send_returns_the_completed_task(serve: Callable[..., Served]) -> None:
    served = serve()
    response, ops, mine, _ = measured_send(served.stack, "hello there")
    task_id = response.task["id"]
    assert response.status == 200, response.body
    assert response.task["status"]["state"] == "TASK_STATE_COMPLETED", response.task
    assert texts(response.task["artifacts"][0]["parts"])
    assert ops["GetItem"] == 0, ops
    tail_reads = [c for c in mine if c.reads_event_log]
    assert tail_reads and all(c.operation == "Query" for c in tail_reads)
    # Every tail read starts after the last event it already saw: seqs never go backwards.
    starts = [int(c.params["ExpressionAttributeValues"][":from"]["S"][2:]) for c in tail_reads]
    assert starts == sorted(starts) and starts[0] == 1, starts
    log = event_log(served.stack, task_id)
    assert starts[-1] <= log[-1][0]


# -- 6. errors before any stream bytes ------------------------------------------------------


def test_stream_errors_are_http_errors_before_any_stream_bytes(
    serve: Callable[..., Served],
) -> None:
    served = serve()
    url = served.url
    done = stream_message(url, user_message("finish me"))
    task_id = done.first["id"]
    assert state_of(done.frames[-1]) == "TASK_STATE_COMPLETED"

    def expect(stream: Stream, status: int, reason: str) -> None:
        assert stream.status == status, (stream.status, stream.body)
        assert stream.content_type.startswith("application/"), stream.content_type
        assert not stream.frames and not stream.body.startswith(b"data:")
        reasons = [d.get("reason") for d in stream.error.get("details", [])]
        assert reason in reasons, stream.error

    expect(subscribe(url, str(uuid.uuid4())), 404, "TASK_NOT_FOUND")
    expect(subscribe(url, task_id), 400, "UNSUPPORTED_OPERATION")
    expect(subscribe(url, task_id, principal="mallory"), 404, "TASK_NOT_FOUND")
    expect(subscribe(url, task_id, principal=None), 404, "TASK_NOT_FOUND")  # anonymous
    unknown = user_message("hi", task_id=str(uuid.uuid4()))
    expect(stream_message(url, unknown), 404, "TASK_NOT_FOUND")
    expect(
        stream_message(url, user_message("again", task_id=task_id)), 400, "UNSUPPORTED_OPERATION"
    )
    other = user_message("hi", task_id=task_id)
    expect(stream_message(url, other, principal="mallory"), 404, "TASK_NOT_FOUND")

    # The other owner's live task is just as invisible.
    live = stream_message(url, user_message("slowly [slow=1.5]"), stop=lambda s: True)
    expect(subscribe(url, live.first["id"], principal="mallory"), 404, "TASK_NOT_FOUND")
    visible = subscribe(url, live.first["id"])
    assert visible.status == 200 and state_of(visible.frames[-1]) == "TASK_STATE_COMPLETED"
