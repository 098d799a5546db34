"""SSE streaming (spec §3.1.2, §3.1.6, §3.5.2, §11.7) against real `scripts/dev` servers.

`POST /message:stream` and `POST /tasks/{id}:subscribe` answer `text/event-stream`: a Task
snapshot first, then the task's status/artifact updates in order, closed after a terminal or
interrupted status. Errors come before any stream bytes, as Status JSON.

Besides the session server, two servers of this module's own:
- heartbeat server: STREAM_HEARTBEAT_SECONDS=1, STREAM_MAX_SECONDS=4;
- latency server: `--flow tests.e2e.flows_for_tests:timed` (artifact chunks stamped with their
  emit time), which measures emit→receive latency and writes it as a Markdown page: to a
  temporary file, or to $A2A_STREAM_LATENCY_DOC (`scripts/bench --write-docs` sets it to
  docs/stream-latency.md; a test run never writes into the repository).

Every response also goes through the strict wire check of conftest (SSE bodies frame by frame).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import (
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils import errors as a2a_errors

from tests import wire
from tests.e2e.conftest import (
    ROOT,
    Agent,
    DevServer,
    checked_async_client,
    dev_server_running,
    new_principal,
    server_fixture,
)
from tests.e2e.flows_for_tests import TIMED_CHUNKS, TIMED_INTERVAL_SECONDS
from tests.e2e.test_wire import message_body, reason_of, violations_of
from tests.helpers import sdk_user_message

pytestmark = pytest.mark.e2e

SSE = "text/event-stream"
DATA_FRAME = re.compile(rb"^data: \{[^\r\n]*\}$")
HEARTBEAT_SECONDS = 1.0
STREAM_MAX_SECONDS = 4.0
POLL_MAX_SECONDS = 1.0  # POLL_MAX_MS default: the longest a quiet tail waits between reads
# Where the latency page goes; unset: a temporary file of the test.
LATENCY_DOC_ENV = "A2A_STREAM_LATENCY_DOC"


# -- reading streams ---------------------------------------------------------------------------


@dataclass
class Received:
    """One SSE frame and when this client parsed it."""

    at: float  # time.monotonic()
    wall: float  # time.time(), comparable with a worker's emit stamp on this machine
    frame: wire.SseFrame

    @property
    def payload(self) -> dict[str, Any]:
        assert self.frame.payload is not None, "a comment has no payload"
        return self.frame.payload


async def read_frames(
    response: httpx.Response, raw: bytearray | None = None
) -> AsyncIterator[Received]:
    """Frames as they arrive; at the end of the body, nothing may be left over."""
    buffer = b""
    async for chunk in response.aiter_bytes():
        if raw is not None:
            raw.extend(chunk)
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            frame = wire.parse_sse_block(block.decode())
            yield Received(time.monotonic(), time.time(), frame)
    assert buffer == b"", f"stream ended inside a frame: {buffer[:200]!r}"


@contextlib.asynccontextmanager
async def open_sse(
    client: httpx.AsyncClient, path: str, body: dict[str, Any] | None = None
) -> AsyncIterator[httpx.Response]:
    async with client.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            await response.aread()
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith(SSE), response.headers
        yield response


async def collect(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any] | None = None,
    timeout: float = 30.0,
) -> list[Received]:
    """A whole stream, until the server closes it."""
    async with asyncio.timeout(timeout), open_sse(client, path, body) as response:
        return [received async for received in read_frames(response)]


@dataclass
class Watcher:
    """A subscriber running in the background; `stop_after` artifact events it hangs up."""

    client: httpx.AsyncClient
    path: str
    body: dict[str, Any] | None = None
    stop_after: int | None = None
    frames: list[Received] = field(default_factory=list)
    closed_by_server: bool = False
    task: asyncio.Task[None] | None = None

    def start(self) -> Watcher:
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async with open_sse(self.client, self.path, self.body) as response:
            async for received in read_frames(response):
                self.frames.append(received)
                if self.stop_after is not None and self.artifacts() >= self.stop_after:
                    return  # leaving the block closes this connection mid-stream
            self.closed_by_server = True

    def artifacts(self) -> int:
        return sum(1 for r in self.events() if r.frame.kind == "artifactUpdate")

    def events(self) -> list[Received]:
        return [r for r in self.frames if not r.frame.is_comment]

    async def done(self, timeout: float = 30.0) -> Watcher:
        assert self.task is not None
        await asyncio.wait_for(self.task, timeout)
        return self


async def wait_until(
    condition: Callable[[], bool], *watchers: Watcher, timeout: float = 15.0
) -> None:
    """Wait for a condition; a watcher that failed meanwhile raises its error here."""
    deadline = time.monotonic() + timeout
    while not condition():
        for watcher in watchers:
            if watcher.task is not None and watcher.task.done():
                watcher.task.result()
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def watch(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any] | None = None,
    stop_after: int | None = None,
) -> Watcher:
    return Watcher(client, path, body, stop_after).start()


# -- reading events ----------------------------------------------------------------------------


def parts_text(parts: list[dict[str, Any]]) -> str:
    return "".join(part["text"] for part in parts)


def artifact_text_of(task: dict[str, Any]) -> str:
    return "".join(parts_text(a["parts"]) for a in task.get("artifacts", []))


def reassemble(events: list[dict[str, Any]]) -> str:
    """Snapshot artifacts plus the appends after it (spec §4.2.2 append semantics)."""
    first = events[0]["task"]
    texts = {a["artifactId"]: parts_text(a["parts"]) for a in first.get("artifacts", [])}
    for event in events[1:]:
        update = event.get("artifactUpdate")
        if update is None:
            continue
        artifact_id = update["artifact"]["artifactId"]
        chunk = parts_text(update["artifact"]["parts"])
        if update.get("append"):
            assert artifact_id in texts, f"append to an artifact never seen: {update}"
            texts[artifact_id] += chunk
        else:
            assert artifact_id not in texts, f"artifact restarted: {update}"
            texts[artifact_id] = chunk
    return "".join(texts.values())


def payloads(frames: list[Received]) -> list[dict[str, Any]]:
    return [r.payload for r in frames if not r.frame.is_comment]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [next(iter(e)) for e in events]


def state_of(event: dict[str, Any]) -> str | None:
    member = event.get("task") or event.get("statusUpdate")
    return member["status"]["state"] if member else None


def start_body(text: str) -> dict[str, Any]:
    """A SendMessage that returns at once, so a stream can watch the task run."""
    return {**message_body(text), "configuration": {"returnImmediately": True}}


async def started_task(client: httpx.AsyncClient, text: str) -> dict[str, Any]:
    response = await client.post("/message:send", json=start_body(text))
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    return task


async def started_subscription(
    client: httpx.AsyncClient, text: str
) -> tuple[dict[str, Any], str, str]:
    """A running task of the client's principal: (task, its subscribe path, the principal)."""
    task = await started_task(client, text)
    return task, f"/tasks/{task['id']}:subscribe", client.headers["X-Local-Principal"]


async def final_task(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    response = await client.get(f"/tasks/{task_id}")
    assert response.status_code == 200, response.text
    return response.json()


def sdk_text(events: list[StreamResponse]) -> str:
    """Reassemble an SDK stream: the Task's artifacts, then the artifact updates."""
    assert events[0].WhichOneof("payload") == "task"
    text = "".join(p.text for a in events[0].task.artifacts for p in a.parts)
    for event in events[1:]:
        if event.WhichOneof("payload") == "artifact_update":
            update = event.artifact_update
            chunk = "".join(p.text for p in update.artifact.parts)
            text = text + chunk if update.append else chunk
    return text


def sdk_states(events: list[StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


def sdk_final_state(events: list[StreamResponse]) -> int:
    """The state a stream leaves the client with: its last status update, or the first
    event's Task when none follows (a continued task's stream starts with the task as read
    when the stream opens: a turn that already ended by then is in that Task, and the
    stream carries nothing after it)."""
    states = sdk_states(events)
    return states[-1] if states else events[0].task.status.state


@pytest.fixture
async def client(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with checked_async_client(base_url, principal=new_principal("sse")) as made:
        yield made


@pytest.fixture
async def clients(base_url: str) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """Factory of extra raw async clients (own connections) for a given principal."""
    made: list[httpx.AsyncClient] = []

    def make(principal: str) -> httpx.AsyncClient:
        one = checked_async_client(base_url, principal=principal)
        made.append(one)
        return one

    yield make
    for one in made:
        await one.aclose()


# -- POST /message:stream, raw ------------------------------------------------------------------


async def test_message_stream_delivers_the_echo_as_separate_ordered_events(
    client: httpx.AsyncClient,
) -> None:
    text = "stream me [slow=2]"
    raw = bytearray()
    async with open_sse(client, "/message:stream", message_body(text)) as response:
        assert response.headers["content-type"].split(";")[0].strip() == SSE
        assert "no-cache" in response.headers.get("cache-control", "")
        frames = [r async for r in read_frames(response, raw)]
        closed_at = time.monotonic()

    # Exact framing: `data: {json}` on one line, then a blank line; nothing else.
    blocks = bytes(raw).split(b"\n\n")
    assert blocks.pop() == b""
    assert blocks and all(DATA_FRAME.fullmatch(block) for block in blocks), bytes(raw)[:300]
    assert len(blocks) == len(frames)

    events = payloads(frames)
    names = kinds(events)
    assert names[0] == "task"
    assert names[1] == "statusUpdate" and state_of(events[1]) == "TASK_STATE_WORKING"
    assert names[2:-1] == ["artifactUpdate"] * (len(names) - 3)
    assert names[-1] == "statusUpdate" and state_of(events[-1]) == "TASK_STATE_COMPLETED"
    task = events[0]["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert [m["parts"][0]["text"] for m in task["history"]] == [text]

    updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert len(updates) >= 4, "a 2 s slow echo is at least 4 chunks"
    assert [bool(u.get("append")) for u in updates] == [False] + [True] * (len(updates) - 1)
    assert [bool(u.get("lastChunk")) for u in updates] == [False] * (len(updates) - 1) + [True]
    assert {u["artifact"]["artifactId"] for u in updates} == {"echo"}
    assert reassemble(events) == f"Echo: {text}"

    # Separate events as they happen, not one burst at the end.
    artifact_times = [r.at for r in frames if r.frame.kind == "artifactUpdate"]
    assert artifact_times[-1] - artifact_times[0] > 1.0, artifact_times
    # The stream closes right after the final status.
    assert closed_at - frames[-1].at < 0.5

    stored = await final_task(client, task["id"])
    assert stored["status"] == events[-1]["statusUpdate"]["status"]
    assert artifact_text_of(stored) == f"Echo: {text}"


@pytest.mark.parametrize(
    ("text", "state"),
    [("nope [fail]", "TASK_STATE_FAILED"), ("no thanks [reject]", "TASK_STATE_REJECTED")],
)
async def test_message_stream_ends_with_the_failure(
    client: httpx.AsyncClient, text: str, state: str
) -> None:
    events = payloads(await collect(client, "/message:stream", message_body(text)))
    assert kinds(events)[0] == "task"
    assert state_of(events[-1]) == state
    assert events[-1]["statusUpdate"]["status"]["message"]["role"] == "ROLE_AGENT"
    assert "artifactUpdate" not in kinds(events)


async def test_subscribe_to_an_interrupted_task_follows_the_turn_its_reply_starts(
    client: httpx.AsyncClient,
) -> None:
    """§7.6.1: a subscription stays open across the interruption (heartbeats while the task
    waits) and closes at the next terminal or interrupted status after new work began."""
    response = await client.post("/message:send", json=message_body("ask me [input]"))
    paused = response.json()["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    path = f"/tasks/{paused['id']}:subscribe"
    watching = asyncio.create_task(collect(client, path, timeout=30))
    await asyncio.sleep(1.5)
    assert not watching.done(), "the subscription closed at the interruption"
    reply = await client.post(
        "/message:send", json=message_body("here you go", taskId=paused["id"])
    )
    assert reply.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    events = payloads(await watching)
    assert kinds(events)[0] == "task"
    assert events[0]["task"]["id"] == paused["id"]
    assert events[0]["task"]["status"] == paused["status"]
    states = [state_of(e) for e in events[1:] if "statusUpdate" in e]
    assert states[-1] == "TASK_STATE_COMPLETED", states
    assert "TASK_STATE_INPUT_REQUIRED" not in states  # the old interruption is not replayed
    assert "TASK_STATE_WORKING" in states
    assert "Echo: ask me [input] + here you go" in "".join(
        p.get("text", "")
        for e in events
        if "artifactUpdate" in e
        for p in e["artifactUpdate"]["artifact"]["parts"]
    )


async def test_subscribe_to_an_interrupted_task_closes_at_the_next_interruption(
    client: httpx.AsyncClient,
) -> None:
    """§7.6.1 again: the follow-up asks for input once more ([input] in the reply), so the
    subscription closes at that new INPUT_REQUIRED — reached after new work began — and not at
    the one it opened on."""
    response = await client.post("/message:send", json=message_body("ask me [input]"))
    paused = response.json()["task"]
    watching = asyncio.create_task(collect(client, f"/tasks/{paused['id']}:subscribe", timeout=30))
    await asyncio.sleep(1.5)
    assert not watching.done(), "the subscription closed at the interruption"
    reply = await client.post(
        "/message:send", json=message_body("more [input]", taskId=paused["id"])
    )
    asked_again = reply.json()["task"]
    assert asked_again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    events = payloads(await watching)
    states = [state_of(e) for e in events[1:] if "statusUpdate" in e]
    assert "TASK_STATE_WORKING" in states, states  # new work began before it closed
    assert states[-1] == "TASK_STATE_INPUT_REQUIRED", states
    assert events[-1]["statusUpdate"]["status"] == asked_again["status"]
    # Still open for business: the answer to the second question completes the task.
    done = await client.post("/message:send", json=message_body("done", taskId=paused["id"]))
    assert done.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert artifact_text_of(done.json()["task"]) == "Echo: ask me [input] + more [input] + done"


async def test_subscribe_to_an_interrupted_task_closes_when_it_is_canceled(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/message:send", json=message_body("ask me [input]"))
    paused = response.json()["task"]
    watching = asyncio.create_task(collect(client, f"/tasks/{paused['id']}:subscribe", timeout=20))
    await asyncio.sleep(1.0)
    canceled = await client.post(f"/tasks/{paused['id']}:cancel")
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"
    events = payloads(await watching)
    assert [state_of(e) for e in events[1:] if "statusUpdate" in e] == ["TASK_STATE_CANCELED"]


# -- a2a-sdk streaming client ------------------------------------------------------------------


async def test_sdk_streaming_send_message(streaming_agent: Agent) -> None:
    text = "sdk stream [slow=1]"
    request = SendMessageRequest(message=sdk_user_message(text))
    events: list[StreamResponse] = []
    arrivals: list[float] = []
    async for event in streaming_agent.client.send_message(request):
        events.append(event)
        arrivals.append(time.monotonic())
    assert events[0].WhichOneof("payload") == "task"
    task_id = events[0].task.id
    assert sdk_states(events)[0] == TaskState.TASK_STATE_WORKING
    assert sdk_states(events)[-1] == TaskState.TASK_STATE_COMPLETED
    assert events[-1].HasField("status_update")
    assert {e.status_update.task_id or e.artifact_update.task_id for e in events[1:]} == {task_id}
    assert sdk_text(events) == f"Echo: {text}"
    artifact_arrivals = [
        t for t, e in zip(arrivals, events, strict=True) if e.HasField("artifact_update")
    ]
    assert len(artifact_arrivals) >= 4
    assert artifact_arrivals[-1] - artifact_arrivals[0] > 0.4, "events arrived in one burst"


async def test_sdk_subscribe_follows_a_running_task(streaming_agent: Agent) -> None:
    text = "watch me via the sdk [slow=2]"
    task = await started_task(streaming_agent.raw, text)
    events = [
        e async for e in streaming_agent.client.subscribe(SubscribeToTaskRequest(id=task["id"]))
    ]
    assert events[0].WhichOneof("payload") == "task"
    assert events[0].task.id == task["id"]
    assert events[0].task.status.state in (
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
    )
    assert sdk_states(events)[-1] == TaskState.TASK_STATE_COMPLETED
    assert sdk_text(events) == f"Echo: {text}"
    stored = await final_task(streaming_agent.raw, task["id"])
    assert artifact_text_of(stored) == f"Echo: {text}"


async def test_sdk_streaming_multi_turn(streaming_agent: Agent) -> None:
    sdk = streaming_agent.client
    first = [
        e
        async for e in sdk.send_message(
            SendMessageRequest(message=sdk_user_message("draft [input]"))
        )
    ]
    assert first[0].WhichOneof("payload") == "task"
    task = first[0].task
    assert sdk_states(first)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
    assert first[-1].status_update.status.message.role == Role.ROLE_AGENT

    answer = sdk_user_message("more words", task_id=task.id, context_id=task.context_id)
    second = [e async for e in sdk.send_message(SendMessageRequest(message=answer))]
    assert second[0].WhichOneof("payload") == "task"
    assert second[0].task.id == task.id
    assert sdk_final_state(second) == TaskState.TASK_STATE_COMPLETED
    assert sdk_text(second) == "Echo: draft [input] + more words"
    stored = await final_task(streaming_agent.raw, task.id)
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["role"] for m in stored["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]


async def test_sdk_stream_errors_are_typed(streaming_agent: Agent) -> None:
    sdk = streaming_agent.client
    done = [e async for e in sdk.send_message(SendMessageRequest(message=sdk_user_message("done")))]
    task = done[0].task
    with pytest.raises(a2a_errors.UnsupportedOperationError):
        _ = [e async for e in sdk.subscribe(SubscribeToTaskRequest(id=task.id))]
    with pytest.raises(a2a_errors.TaskNotFoundError):
        _ = [e async for e in sdk.subscribe(SubscribeToTaskRequest(id=str(uuid.uuid4())))]
    again = sdk_user_message("again", task_id=task.id, context_id=task.context_id)
    with pytest.raises(a2a_errors.UnsupportedOperationError):
        _ = [e async for e in sdk.send_message(SendMessageRequest(message=again))]


# -- many subscribers --------------------------------------------------------------------------


def assert_consistent(a: list[dict[str, Any]], b: list[dict[str, Any]], final_text: str) -> None:
    """Two subscribers that joined at about the same moment: whichever snapshot came first is
    the reference."""
    if len(a) < len(b):
        a, b = b, a
    assert_same_remaining_sequence(a, b, final_text)


def assert_same_remaining_sequence(
    reference: list[dict[str, Any]], later: list[dict[str, Any]], final_text: str
) -> None:
    """`later` (a subscriber that joined after `reference`) starts with a snapshot equal to
    the reference's state at that point and then receives exactly the reference's remaining
    events; both reassemble to the final artifact text."""
    assert kinds(later)[0] == "task"
    rest = later[1:]
    assert "task" not in kinds(rest)
    skipped = len(reference) - 1 - len(rest)
    assert skipped >= 0, "a later subscriber saw more events than an earlier one"
    assert reference[1 + skipped :] == rest, "the remaining sequences differ"
    # The snapshot is the reference's state just before the shared tail: nothing lost or
    # duplicated between snapshot and tail.
    assert artifact_text_of(later[0]["task"]) == reassemble(reference[: 1 + skipped])
    assert reassemble(later) == final_text


async def test_three_subscribers_see_the_identical_sequence(
    client: httpx.AsyncClient, clients: Callable[[str], httpx.AsyncClient]
) -> None:
    text = "three watchers [slow=5]"
    task, path, principal = await started_subscription(client, text)
    first = watch(clients(principal), path)
    await wait_until(lambda: first.artifacts() >= 2, first)
    second = watch(clients(principal), path)
    await wait_until(lambda: first.artifacts() >= 6, first, second)
    third = watch(clients(principal), path)
    for watcher in (first, second, third):
        await watcher.done()
        assert watcher.closed_by_server
    stored = await final_task(client, task["id"])
    final_text = artifact_text_of(stored)
    assert final_text == f"Echo: {text}"
    reference = payloads(first.frames)
    assert state_of(reference[-1]) == "TASK_STATE_COMPLETED"
    assert reassemble(reference) == final_text
    for later in (second, third):
        events = payloads(later.frames)
        assert_same_remaining_sequence(reference, events, final_text)
        assert artifact_text_of(events[0]["task"]), "joined mid-task: the snapshot has text"
    assert len(payloads(third.frames)) < len(payloads(second.frames))


async def test_a_killed_subscriber_does_not_disturb_the_others_and_resumes(
    client: httpx.AsyncClient, clients: Callable[[str], httpx.AsyncClient]
) -> None:
    text = "kill one of us [slow=4]"
    task, path, principal = await started_subscription(client, text)
    victim_client = clients(principal)  # closed by the test, to kill the victim for good
    keeps = watch(clients(principal), path)
    victim = watch(victim_client, path, stop_after=2)
    other = watch(clients(principal), path)
    await victim.done()
    assert not victim.closed_by_server
    await victim_client.aclose()  # its connection is gone for good
    killed_at = victim.frames[-1].at
    await wait_until(lambda: keeps.artifacts() >= victim.artifacts() + 2, keeps, other)
    resumed = watch(clients(principal), path)
    for watcher in (keeps, other, resumed):
        await watcher.done()
        assert watcher.closed_by_server
    final_text = artifact_text_of(await final_task(client, task["id"]))
    assert final_text == f"Echo: {text}"
    reference = payloads(keeps.frames)
    assert reassemble(reference) == final_text
    # The survivors saw events after the kill, and the same ones.
    assert any(r.at > killed_at for r in other.frames)
    assert_consistent(reference, payloads(other.frames), final_text)
    # What the victim got before dying is part of the same sequence (after its snapshot).
    victim_events = payloads(victim.frames)
    assert kinds(victim_events)[0] == "task"
    assert victim.artifacts() == 2
    victim_rest = victim_events[1:]
    n = len(victim_rest)
    # The victim may have taken its snapshot before or after the reference subscriber did
    # (they subscribe concurrently): its events are a run of the reference's, or the
    # reference's first events continue the victim's.
    assert any(reference[i : i + n] == victim_rest for i in range(1, len(reference))) or any(
        victim_rest[k:] == reference[1 : 1 + n - k] for k in range(1, n)
    ), "the killed subscriber saw events the others did not"
    # Reconnected: a fresh snapshot, then the rest, nothing lost or duplicated.
    resumed_events = payloads(resumed.frames)
    assert_same_remaining_sequence(reference, resumed_events, final_text)
    assert artifact_text_of(resumed_events[0]["task"]).startswith(reassemble(victim_events)), (
        "the fresh snapshot lacks what the victim had already seen"
    )
    assert len(artifact_text_of(resumed_events[0]["task"])) > len(reassemble(victim_events))


async def test_cancel_reaches_every_watching_stream(
    client: httpx.AsyncClient, clients: Callable[[str], httpx.AsyncClient]
) -> None:
    task, path, principal = await started_subscription(client, "cancel us both [slow=20]")
    watchers = [watch(clients(principal), path), watch(clients(principal), path)]
    await wait_until(lambda: all(w.artifacts() >= 1 for w in watchers), *watchers)
    response = await client.post(f"/tasks/{task['id']}:cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"]["state"] == "TASK_STATE_CANCELED"
    canceled_at = time.monotonic()
    for watcher in watchers:
        await watcher.done(timeout=5)
        assert watcher.closed_by_server
        events = payloads(watcher.frames)
        assert state_of(events[-1]) == "TASK_STATE_CANCELED"
        assert watcher.frames[-1].at - canceled_at < 3.0
    first, second = (payloads(w.frames) for w in watchers)
    assert first[-1] == second[-1]
    stored = await final_task(client, task["id"])
    assert stored["status"]["state"] == "TASK_STATE_CANCELED"
    for watcher in watchers:
        assert reassemble(payloads(watcher.frames)) == artifact_text_of(stored)


# -- errors come before any stream bytes -------------------------------------------------------


async def error_before_stream(
    client: httpx.AsyncClient, path: str, body: Any = None, **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    """POST a stream operation; the answer must be a plain JSON Status, not an event stream."""
    async with client.stream("POST", path, json=body, **kwargs) as response:
        content = await response.aread()
        assert not response.headers.get("content-type", "").startswith(SSE), content
        assert response.status_code >= 400, content
        assert response.headers["content-type"].startswith(
            ("application/json", "application/a2a+json")
        )
        return response.status_code, json.loads(content)["error"]


async def raw_status_before_stream(
    client: httpx.AsyncClient, content: bytes, content_type: str
) -> int:
    """POST `content` to /message:stream; the answer's status (it must not be a stream)."""
    headers = {"Content-Type": content_type}
    async with client.stream("POST", "/message:stream", content=content, headers=headers) as r:
        await r.aread()
        assert not r.headers["content-type"].startswith(SSE)
        return r.status_code


@pytest.mark.parametrize("text", ["finished", "broken [fail]", "no [reject]"])
async def test_subscribe_to_a_terminal_task_is_unsupported(
    client: httpx.AsyncClient, text: str
) -> None:
    response = await client.post("/message:send", json=message_body(text))
    task = response.json()["task"]
    assert task["status"]["state"] in wire.TERMINAL_STATES
    code, error = await error_before_stream(client, f"/tasks/{task['id']}:subscribe")
    assert code == 400
    assert error["status"] == "FAILED_PRECONDITION"
    assert reason_of(error) == "UNSUPPORTED_OPERATION"


async def test_subscribe_to_a_canceled_task_is_unsupported(client: httpx.AsyncClient) -> None:
    task = await started_task(client, "to be canceled [slow=10]")
    response = await client.post(f"/tasks/{task['id']}:cancel")
    assert response.json()["status"]["state"] == "TASK_STATE_CANCELED"
    code, error = await error_before_stream(client, f"/tasks/{task['id']}:subscribe")
    assert (code, reason_of(error)) == (400, "UNSUPPORTED_OPERATION")


async def test_subscribe_to_unknown_or_foreign_task_is_not_found(
    client: httpx.AsyncClient, clients: Callable[[str], httpx.AsyncClient]
) -> None:
    response = await client.post("/message:send", json=message_body("mine [input]"))
    paused = response.json()["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    intruder = clients(new_principal("intruder"))
    missing = str(uuid.uuid4())
    for who, task_id in ((client, missing), (intruder, paused["id"])):
        code, error = await error_before_stream(who, f"/tasks/{task_id}:subscribe")
        assert code == 404
        assert error["status"] == "NOT_FOUND"
        assert reason_of(error) == "TASK_NOT_FOUND"
    # A follow-up on a stream is not a way into another owner's task either.
    code, error = await error_before_stream(
        intruder, "/message:stream", message_body("let me in", taskId=paused["id"])
    )
    assert (code, reason_of(error)) == (404, "TASK_NOT_FOUND")
    code, error = await error_before_stream(
        client, "/message:stream", message_body("who?", taskId=missing)
    )
    assert (code, reason_of(error)) == (404, "TASK_NOT_FOUND")
    assert (await final_task(client, paused["id"]))["status"] == paused["status"]


@pytest.mark.parametrize(
    ("mutate", "field_name"),
    [
        (lambda b: b["message"].pop("messageId"), "message.messageId"),
        (lambda b: b["message"].update(role="ROLE_AGENT"), "message.role"),
        (lambda b: b["message"].update(parts=[]), "message.parts"),
        (lambda b: b.pop("message"), "message"),
        (lambda b: b.update(configuration={"historyLength": -1}), "configuration.historyLength"),
    ],
    ids=["no-messageId", "role-agent", "no-parts", "no-message", "history-neg"],
)
async def test_message_stream_validation_errors_come_before_the_stream(
    client: httpx.AsyncClient, mutate: Callable[[dict[str, Any]], object], field_name: str
) -> None:
    body = message_body("invalid")
    mutate(body)
    code, error = await error_before_stream(client, "/message:stream", body)
    assert code == 400
    assert error["status"] == "INVALID_ARGUMENT"
    assert reason_of(error) == "INVALID_PARAMS"
    assert field_name in violations_of(error), error
    assert (await client.get("/tasks")).json()["totalSize"] == 0


async def test_message_stream_request_errors_come_before_the_stream(
    client: httpx.AsyncClient,
) -> None:
    code, error = await error_before_stream(
        client, "/message:stream", message_body(), headers={"A2A-Version": "9.9"}
    )
    assert (code, reason_of(error)) == (400, "VERSION_NOT_SUPPORTED")
    assert await raw_status_before_stream(client, b"hello", "text/plain") == 415
    assert await raw_status_before_stream(client, b"{not json", "application/json") == 400
    assert (await client.get("/tasks")).json()["totalSize"] == 0


async def test_message_stream_to_a_terminal_task_is_unsupported(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/message:send", json=message_body("all done"))
    task = response.json()["task"]
    code, error = await error_before_stream(
        client,
        "/message:stream",
        message_body("one more", taskId=task["id"], contextId=task["contextId"]),
    )
    assert code == 400
    assert error["status"] == "FAILED_PRECONDITION"
    assert reason_of(error) == "UNSUPPORTED_OPERATION"
    stored = await final_task(client, task["id"])
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(stored["history"]) == 1


# -- heartbeats and the clean close (a server with short settings) -----------------------------


heartbeat_server = server_fixture(
    "dev-heartbeat",
    env={
        "STREAM_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        "STREAM_MAX_SECONDS": str(STREAM_MAX_SECONDS),
    },
)


@pytest.fixture
async def quiet_client(heartbeat_server: DevServer) -> AsyncIterator[httpx.AsyncClient]:
    principal = new_principal("quiet")
    async with checked_async_client(heartbeat_server.base_url, principal=principal) as made:
        yield made


# "Echo: [slow=40]" is 15 characters, so 15 chunks 40/15 ≈ 2.7 s apart: quiet gaps longer than
# the 1 s heartbeat interval.
SPARSE = "[slow=40]"


async def read_for(
    client: httpx.AsyncClient, path: str, body: dict[str, Any] | None, seconds: float
) -> tuple[list[Received], bool, float]:
    """Read a stream for at most `seconds`: (frames, closed by the server, opened at)."""
    frames: list[Received] = []
    opened = time.monotonic()
    async with open_sse(client, path, body) as response:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                async for received in read_frames(response):
                    frames.append(received)
                return frames, True, opened
    return frames, False, opened


async def test_heartbeats_fill_quiet_periods_only(quiet_client: httpx.AsyncClient) -> None:
    frames, _, opened = await read_for(quiet_client, "/message:stream", message_body(SPARSE), 6.0)
    task = frames[0].payload["task"]
    try:
        comments = [r for r in frames if r.frame.is_comment]
        assert comments, "no heartbeat in 6 s of a stream with 2.7 s quiet gaps"
        assert {r.frame.line for r in comments} == {": keep-alive"}
        times = [opened] + [r.at for r in frames]
        for index, received in enumerate(frames):
            gap = received.at - times[index]
            # Never a long silence: a heartbeat comes within heartbeat + one idle poll.
            assert gap < HEARTBEAT_SECONDS + POLL_MAX_SECONDS + 0.6, (index, gap)
            if received.frame.is_comment:
                # ...and only when the stream has been quiet for the heartbeat interval.
                assert gap > HEARTBEAT_SECONDS - 0.2, (index, gap)
        events = [r for r in frames if not r.frame.is_comment]
        assert kinds(payloads(events))[:2] == ["task", "statusUpdate"]
        assert "artifactUpdate" in kinds(payloads(events))
        seen_text = reassemble(payloads(events))

        # Resubscribing (as after a dropped stream) starts from a fresh snapshot with it all.
        path = f"/tasks/{task['id']}:subscribe"
        again, _, _ = await read_for(quiet_client, path, None, 0.3)
        snapshot = again[0].payload["task"]
        assert snapshot["status"]["state"] == "TASK_STATE_WORKING"
        assert artifact_text_of(snapshot).startswith(seen_text)
    finally:
        await quiet_client.post(f"/tasks/{task['id']}:cancel")


async def test_stream_ends_cleanly_after_max_seconds(quiet_client: httpx.AsyncClient) -> None:
    frames, closed, opened = await read_for(
        quiet_client, "/message:stream", message_body(SPARSE), STREAM_MAX_SECONDS + 3
    )
    lasted = time.monotonic() - opened  # read_for returns as soon as the server closes
    task = frames[0].payload["task"]
    try:
        assert closed, f"the stream did not end within {STREAM_MAX_SECONDS + 3} s"
        assert STREAM_MAX_SECONDS - 0.5 < lasted < STREAM_MAX_SECONDS + 1.5, lasted
        events = payloads(frames)
        # A clean end: no terminal or interrupted event, no error; the task runs on.
        assert all(state_of(e) not in wire.SETTLED_STATES for e in events), events[-1]
        seen_text = reassemble(events)
        again, _, _ = await read_for(quiet_client, f"/tasks/{task['id']}:subscribe", None, 0.3)
        snapshot = again[0].payload["task"]
        assert snapshot["status"]["state"] == "TASK_STATE_WORKING"
        assert artifact_text_of(snapshot).startswith(seen_text)
    finally:
        await quiet_client.post(f"/tasks/{task['id']}:cancel")


# -- latency (a server with a flow that stamps each chunk with its emit time) ------------------


@pytest.fixture(scope="module")
def timed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    # The dev server runs `python -m` from the repo root, which puts the root on sys.path;
    # PYTHONPATH says so explicitly (scripts/_env.sh prepends shared/ to it).
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    with dev_server_running(
        tmp_path_factory.mktemp("dev-timed"),
        args=("--flow", "tests.e2e.flows_for_tests:timed"),
        env={"PYTHONPATH": pythonpath},
    ) as server:
        yield server


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-int(fraction * 1000) * len(ordered) // 1000))
    return ordered[rank - 1]


async def test_event_latency_emit_to_receive(timed_server: DevServer, tmp_path: Path) -> None:
    async with checked_async_client(
        timed_server.base_url, principal=new_principal("timed")
    ) as timed_client:
        frames = await collect(timed_client, "/message:stream", message_body("go"), timeout=30)
    events = [r for r in frames if not r.frame.is_comment]
    assert state_of(events[-1].payload) == "TASK_STATE_COMPLETED"
    updates = [r for r in events if r.frame.kind == "artifactUpdate"]
    metadata = [r.payload["artifactUpdate"]["artifact"]["metadata"] for r in updates]
    assert [m["index"] for m in metadata] == list(range(TIMED_CHUNKS))
    assert reassemble(payloads(events)) == "".join(f"{i} " for i in range(TIMED_CHUNKS))
    latencies = [r.wall - m["emittedAt"] for r, m in zip(updates, metadata, strict=True)]
    assert min(latencies) > -0.05, "received before emitted: clocks disagree?"
    p50 = percentile(latencies, 0.50)
    p95 = percentile(latencies, 0.95)
    poll_min = os.environ.get("POLL_MIN_MS", "25")
    poll_max = os.environ.get("POLL_MAX_MS", "1000")
    summary = (
        f"{len(latencies)} artifact events, one every {TIMED_INTERVAL_SECONDS * 1000:.0f} ms: "
        f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms "
        f"(POLL_MIN_MS={poll_min}, POLL_MAX_MS={poll_max})"
    )
    print(f"\nSSE emit→receive latency on the local stack: {summary}")
    row = (
        f"| {datetime.now(UTC):%Y-%m-%d %H:%M} | {len(latencies)} | {p50 * 1000:.0f} ms "
        f"| {p95 * 1000:.0f} ms | {max(latencies) * 1000:.0f} ms | {poll_min} | {poll_max} |\n"
    )
    doc = Path(os.environ.get(LATENCY_DOC_ENV) or tmp_path / "stream-latency.md")
    doc.write_text(
        "# SSE event latency on the local stack\n\n"
        "Written by `tests/e2e/test_streaming.py::test_event_latency_emit_to_receive` "
        "(run `scripts/bench --write-docs`).\n\n"
        "Method: a third `scripts/dev` server runs the flow `tests.e2e.flows_for_tests:timed`, "
        f"which emits {TIMED_CHUNKS} artifact chunks {TIMED_INTERVAL_SECONDS * 1000:.0f} ms "
        "apart, each with `metadata.emittedAt = time.time()` taken in the worker just before "
        "the event is appended to the task's event log. The test reads `POST /message:stream` "
        "with httpx and takes latency = wall-clock time the SSE frame was parsed - emittedAt "
        "(same machine, same clock). It covers: event-log write (moto DynamoDB), the stream's "
        "adaptive poll of the log, SSE framing, uvicorn, and the client's read.\n\n"
        "| measured (UTC) | events | p50 | p95 | max | POLL_MIN_MS | POLL_MAX_MS |\n"
        "|---|---|---|---|---|---|---|\n" + row + "\n"
        "The poll interval is `POLL_MIN_MS` right after a read that found events and grows by "
        "half per empty read up to `POLL_MAX_MS`; with an event every 100 ms the tail "
        "stays near the fast end, so latency is mostly the grown interval after a gap "
        "(25 → 37 → 56 → 84 ms ... before the next event is found).\n"
    )
    assert row in doc.read_text()
    # Not a benchmark: only a generous sanity bound.
    assert p95 < 2.0, summary


# -- the SSE wire check itself -----------------------------------------------------------------


def _frame(payload: dict[str, Any]) -> str:
    return "data: " + json.dumps(payload) + "\n\n"


_TASK = {"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}}
_DONE = {
    "statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}
}


@pytest.mark.parametrize(
    ("body", "complete", "problem"),
    [
        (_frame(_DONE), True, "first event must be a Task"),
        (
            _frame(_TASK) + _frame(_DONE) + _frame(_DONE),
            True,
            "after the stream should have closed",
        ),
        (_frame(_TASK) + _frame(_TASK), True, "after the Task"),
        (_frame({"task": {**_TASK["task"], "bogus": 1}}), True, "bogus"),
        (_frame({"task": {**_TASK["task"], "status": {"state": "working"}}}), True, "working"),
        (_frame(_TASK)[:-1], True, "ended inside a frame"),
        (_frame(_TASK) + "event: error\n" + _frame(_DONE), True, "one line per SSE frame"),
        (_frame(_TASK) + "keep-alive\n\n", True, "neither"),
        ("", True, "at least one event"),
        (
            _frame(_TASK) + _frame({"statusUpdate": {**_DONE["statusUpdate"], "taskId": "t2"}}),
            True,
            "t2",
        ),
    ],
    ids=[
        "update-first",
        "after-terminal",
        "second-task",
        "unknown-field",
        "bad-enum",
        "truncated",
        "event-line",
        "bare-line",
        "empty",
        "other-task",
    ],
)
def test_sse_wire_check_rejects_bad_streams(
    monkeypatch: pytest.MonkeyPatch, body: str, complete: bool, problem: str
) -> None:
    """The strict SSE check used on every stream above can fail (and says why)."""
    monkeypatch.setattr(wire, "SSE_CHECKED", [])  # not a server response: keep counts exact
    with pytest.raises(Exception, match=re.escape(problem)):
        wire.check_sse_frames(body, complete=complete)


def test_sse_wire_check_accepts_good_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "SSE_CHECKED", [])
    good = _frame(_TASK) + ": keep-alive\n\n" + _frame(_DONE)
    assert len(wire.check_sse_frames(good, complete=True)) == 3
    # Dropped mid-frame by the client: checked up to the last whole frame.
    assert len(wire.check_sse_frames(good[:-5], complete=False)) == 2
    # Ended by STREAM_MAX_SECONDS: no terminal event, still a clean stream.
    assert len(wire.check_sse_frames(_frame(_TASK), complete=True)) == 1
