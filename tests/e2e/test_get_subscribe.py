"""SubscribeToTask by the proto's GET rule (`GET /tasks/{id}:subscribe`, and `/{tenant}/...`)
against a real `scripts/dev` server, raw HTTP (the a2a-sdk client subscribes by POST only).

API Gateway routes `GET /tasks/x:subscribe` to the `GET /tasks/{id}` resource, so
GetTaskFunction streams it (Lambda Web Adapter). It must be the POST's operation exactly: the
same stream (a Task snapshot, then the task's updates, closed at a terminal state; kept open
across an interruption it was opened at), the same errors before any stream bytes (a terminal
task, an unknown task, another owner's task), tenants included. Every response, SSE bodies
frame by frame, goes through the strict wire check of conftest's clients.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests import wire
from tests.e2e.conftest import new_principal
from tests.e2e.test_wire import message_body, reason_of

pytestmark = pytest.mark.e2e

SSE = "text/event-stream"
TENANT = "acme"


def start(client: httpx.Client, text: str, prefix: str = "") -> dict[str, Any]:
    """A task that runs after the answer (returnImmediately), so a stream can watch it."""
    body = {**message_body(text), "configuration": {"returnImmediately": True}}
    response = client.post(f"{prefix}/message:send", json=body)
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def finished(client: httpx.Client, text: str) -> dict[str, Any]:
    response = client.post("/message:send", json=message_body(text))
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    assert task["status"]["state"] in wire.TERMINAL_STATES, task["status"]
    return task


def stream_events(client: httpx.Client, method: str, path: str) -> list[dict[str, Any]]:
    """A whole SSE answer (read until the server closes it): its data frames' payloads."""
    with client.stream(method, path) as response:
        body = response.read()
        assert response.status_code == 200, body
        assert response.headers["content-type"].startswith(SSE), response.headers
        assert response.headers["cache-control"] == "no-cache"
    return [f.payload for f in wire.split_sse(body, complete=True) if f.payload is not None]


def error_before_stream(client: httpx.Client, method: str, path: str) -> tuple[int, Any]:
    """The answer of a refused subscription: a JSON google.rpc.Status, never a stream."""
    with client.stream(method, path) as response:
        body = response.read()
        assert not response.headers["content-type"].startswith(SSE), body
        assert response.headers["content-type"].startswith(
            ("application/json", "application/a2a+json")
        )
        return response.status_code, response.json()["error"]


def state_of(event: dict[str, Any]) -> str | None:
    member = event.get("task") or event.get("statusUpdate")
    return member["status"]["state"] if member else None


def streamed_text(events: list[dict[str, Any]]) -> str:
    """The snapshot's artifact text plus the chunks appended after it."""
    text = "".join(p["text"] for a in events[0]["task"].get("artifacts", []) for p in a["parts"])
    for event in events[1:]:
        update = event.get("artifactUpdate")
        if update is not None:
            chunk = "".join(p["text"] for p in update["artifact"]["parts"])
            text = text + chunk if update.get("append") else chunk
    return text


def final_text(client: httpx.Client, task_id: str, prefix: str = "") -> str:
    task = client.get(f"{prefix}/tasks/{task_id}").json()
    return "".join(p["text"] for a in task.get("artifacts", []) for p in a["parts"])


# -- the stream ----------------------------------------------------------------------------------


def test_get_subscribe_streams_the_task_until_it_ends_like_post(
    raw: Callable[..., httpx.Client],
) -> None:
    principal = new_principal("get-sub")
    by_get, by_post = raw(principal=principal), raw(principal=principal)
    task = start(by_get, "watch me by GET [slow=4]")
    path = f"/tasks/{task['id']}:subscribe"
    with ThreadPoolExecutor(2) as pool:
        get = pool.submit(stream_events, by_get, "GET", path)
        post = pool.submit(stream_events, by_post, "POST", path)
        streams = {"GET": get.result(timeout=60), "POST": post.result(timeout=60)}
    expected = final_text(by_get, task["id"])
    assert expected == "Echo: watch me by GET [slow=4]"
    for method, events in streams.items():
        assert list(events[0]) == ["task"] and events[0]["task"]["id"] == task["id"], method
        assert state_of(events[-1]) == "TASK_STATE_COMPLETED", (method, events[-1])
        assert list(events[-1]) == ["statusUpdate"], method
        assert streamed_text(events) == expected, method
    # The GET stream watched the task work: more than the snapshot and the end.
    assert any("artifactUpdate" in e for e in streams["GET"]), streams["GET"]


def test_get_subscribe_at_an_interruption_follows_the_next_turn(http: httpx.Client) -> None:
    """§7.6.1 as for the POST: opened on an input-required task, the stream stays open through
    the follow-up turn and closes at its end."""
    paused = http.post("/message:send", json=message_body("ask me [input]")).json()["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    with ThreadPoolExecutor(1) as pool:
        watching = pool.submit(stream_events, http, "GET", f"/tasks/{paused['id']}:subscribe")
        time.sleep(1.0)  # the stream is open (a heartbeat later it still is)
        assert not watching.done()
        reply = message_body("here you go [slow=1]", taskId=paused["id"])
        reply["configuration"] = {"returnImmediately": True}
        assert http.post("/message:send", json=reply).status_code == 200
        events = watching.result(timeout=60)
    states = [state_of(e) for e in events if state_of(e)]
    assert states[0] == "TASK_STATE_INPUT_REQUIRED"
    assert "TASK_STATE_WORKING" in states and states[-1] == "TASK_STATE_COMPLETED", states


# -- errors, before any stream bytes -------------------------------------------------------------


def refused_as_post_is(
    client: httpx.Client, path: str, code: int, status: str, reason: str
) -> None:
    """GET `path` is refused with this code, status and reason, byte for byte as POST is."""
    got, error = error_before_stream(client, "GET", path)
    assert got == code
    assert error["status"] == status
    assert reason_of(error) == reason
    assert (got, error) == error_before_stream(client, "POST", path)


@pytest.mark.parametrize("text", ["finished", "broken [fail]", "no [reject]"])
def test_get_subscribe_to_a_terminal_task_is_refused_as_post_is(
    http: httpx.Client, text: str
) -> None:
    task = finished(http, text)
    path = f"/tasks/{task['id']}:subscribe"
    refused_as_post_is(http, path, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")


def test_get_subscribe_to_an_unknown_or_foreign_task_is_not_found(
    raw: Callable[..., httpx.Client],
) -> None:
    owner, intruder = raw(principal=new_principal("owner")), raw(principal=new_principal("x"))
    paused = owner.post("/message:send", json=message_body("mine [input]")).json()["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    for who, task_id in ((owner, str(uuid.uuid4())), (intruder, paused["id"])):
        path = f"/tasks/{task_id}:subscribe"
        refused_as_post_is(who, path, 404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_get_task_is_still_a_plain_json_answer(http: httpx.Client) -> None:
    task = finished(http, "read me")
    response = http.get(f"/tasks/{task['id']}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/a2a+json")
    assert response.json()["id"] == task["id"]


# -- tenants -------------------------------------------------------------------------------------


def test_get_subscribe_under_a_tenant(http: httpx.Client) -> None:
    prefix = f"/{TENANT}"
    task = start(http, "tenant watch [slow=2]", prefix)
    events = stream_events(http, "GET", f"{prefix}/tasks/{task['id']}:subscribe")
    assert events[0]["task"]["id"] == task["id"]
    assert state_of(events[-1]) == "TASK_STATE_COMPLETED"
    assert streamed_text(events) == final_text(http, task["id"], prefix)
    # The task is the caller's under that tenant only.
    for wrong in ("", "/globex"):
        code, error = error_before_stream(http, "GET", f"{wrong}/tasks/{task['id']}:subscribe")
        assert (code, reason_of(error)) == (404, "TASK_NOT_FOUND"), wrong
