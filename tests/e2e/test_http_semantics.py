"""Owner scoping, idempotent retries and concurrency over real HTTP."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import (
    DevServer,
    checked_async_client,
    checked_client,
    new_principal,
    server_fixture,
)
from tests.e2e.test_wire import error_of, message_body, reason_of, send

pytestmark = pytest.mark.e2e

RawFactory = Callable[..., httpx.Client]


# -- owner scoping ------------------------------------------------------------------------------


def test_tasks_are_invisible_to_other_principals(raw: RawFactory) -> None:
    alice = raw(principal=new_principal("alice"))
    bob = raw(principal=new_principal("bob"))
    anonymous = raw()
    context = f"ctx-{uuid.uuid4().hex}"
    finished = send(alice, "alice's secret", contextId=context)
    paused = send(alice, "alice asks [input]", contextId=context)
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    bobs = send(bob, "bob's own")
    anonymous_before = anonymous.get("/tasks").json()["totalSize"]

    for intruder in (bob, anonymous):
        for task in (finished, paused):
            error = error_of(intruder.get(f"/tasks/{task['id']}"), 404)
            assert reason_of(error) == "TASK_NOT_FOUND"
            error = error_of(intruder.post(f"/tasks/{task['id']}:cancel"), 404)
            assert reason_of(error) == "TASK_NOT_FOUND"
        # A follow-up to another owner's task is "not found" too, not a way in.
        response = intruder.post(
            "/message:send", json=message_body("let me in", taskId=paused["id"])
        )
        assert reason_of(error_of(response, 404)) == "TASK_NOT_FOUND"
        by_context = intruder.get("/tasks", params={"contextId": context}).json()
        assert by_context["tasks"] == []
        assert by_context["totalSize"] == 0

    listed = bob.get("/tasks").json()
    assert listed["totalSize"] == 1
    assert [t["id"] for t in listed["tasks"]] == [bobs["id"]]
    assert anonymous.get("/tasks").json()["totalSize"] == anonymous_before
    anonymous_ids = {
        t["id"] for t in anonymous.get("/tasks", params={"pageSize": 100}).json()["tasks"]
    }
    assert not anonymous_ids & {finished["id"], paused["id"], bobs["id"]}

    # Alice still sees and controls both, untouched by the attempts.
    mine = alice.get("/tasks").json()
    assert mine["totalSize"] == 2
    assert {t["id"] for t in mine["tasks"]} == {finished["id"], paused["id"]}
    assert alice.get(f"/tasks/{paused['id']}").json()["status"]["state"] == (
        "TASK_STATE_INPUT_REQUIRED"
    )
    assert len(alice.get(f"/tasks/{paused['id']}").json()["history"]) == 2
    canceled = alice.post(f"/tasks/{paused['id']}:cancel")
    assert canceled.status_code == 200
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"


def test_page_token_does_not_cross_owners(raw: RawFactory) -> None:
    alice = raw(principal=new_principal("alice"))
    bob = raw(principal=new_principal("bob"))
    for text in ("a1", "a2", "a3"):
        send(alice, text)
    send(bob, "b1")
    token = alice.get("/tasks", params={"pageSize": 1}).json()["nextPageToken"]
    assert token
    response = bob.get("/tasks", params={"pageSize": 1, "pageToken": token})
    if response.status_code == 200:
        alice_ids = {t["id"] for t in alice.get("/tasks").json()["tasks"]}
        assert not {t["id"] for t in response.json()["tasks"]} & alice_ids
        assert response.json()["totalSize"] == 1
    else:
        assert reason_of(error_of(response, 400)) == "INVALID_PARAMS"


# -- retries ------------------------------------------------------------------------------------
#
# Deduplication is off by default (DedupeWindowSeconds 0): the retry tests run on a server with
# a 10-minute window.

# The push module's settings (one server for both; the retry base does not touch dedupe).
dedupe_server = server_fixture(
    "dev-dedupe", env={"PUSH_RETRY_BASE_SECONDS": "1", "DEDUPE_WINDOW_SECONDS": "600"}
)


@pytest.fixture
def dhttp(dedupe_server: DevServer) -> Any:
    with checked_client(dedupe_server.base_url, principal=new_principal()) as client:
        yield client


def test_same_message_twice_is_one_task(dhttp: httpx.Client) -> None:
    http = dhttp
    body = message_body("retry me")
    first = http.post("/message:send", json=body)
    second = http.post("/message:send", json=body)
    assert first.status_code == second.status_code == 200
    task1, task2 = first.json()["task"], second.json()["task"]
    assert task1["id"] == task2["id"]
    assert task2["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task2["artifacts"] == task1["artifacts"]
    listed = http.get("/tasks").json()
    assert listed["totalSize"] == 1
    assert len(http.get(f"/tasks/{task1['id']}").json()["history"]) == 1


def test_retry_while_the_first_is_still_running_is_one_task(dhttp: httpx.Client) -> None:
    http = dhttp
    body = message_body("slow retry [slow=0.6]")
    body["configuration"] = {"returnImmediately": True}
    first = http.post("/message:send", json=body).json()["task"]
    assert first["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    again = http.post("/message:send", json=body)
    assert again.status_code == 200
    assert again.json()["task"]["id"] == first["id"]
    assert http.get("/tasks").json()["totalSize"] == 1
    # Not the same request (now blocking): a send of its own, never merged into the first.
    blocking = {k: v for k, v in body.items() if k != "configuration"}
    other = http.post("/message:send", json=blocking).json()["task"]
    assert other["id"] != first["id"]
    assert other["status"]["state"] == "TASK_STATE_COMPLETED"
    assert http.get("/tasks").json()["totalSize"] == 2


def test_same_message_id_with_new_content_is_a_new_task(http: httpx.Client) -> None:
    body = message_body("original")
    first = http.post("/message:send", json=body).json()["task"]
    changed: dict[str, Any] = {"message": {**body["message"], "parts": [{"text": "changed"}]}}
    second = http.post("/message:send", json=changed).json()["task"]
    assert second["id"] != first["id"]
    assert second["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(p["text"] for p in second["artifacts"][0]["parts"]) == "Echo: changed"
    assert http.get("/tasks").json()["totalSize"] == 2


def test_repeated_follow_up_is_not_a_second_turn(http: httpx.Client) -> None:
    """Without a dedupe window (the default) the repeat is a new message to a task that no
    longer waits for one: refused, and the task keeps its one answered turn."""
    paused = send(http, "start [input]")
    follow_up = message_body("answer", taskId=paused["id"])
    done = http.post("/message:send", json=follow_up)
    again = http.post("/message:send", json=follow_up)
    assert done.status_code == 200, done.text
    assert again.status_code == 400, again.text
    assert again.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"
    task = http.get(f"/tasks/{paused['id']}").json()
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]


# -- concurrency --------------------------------------------------------------------------------


async def test_parallel_sends_in_one_context(base_url: str) -> None:
    context = f"ctx-{uuid.uuid4().hex}"
    async with checked_async_client(base_url, principal=new_principal("burst")) as http:
        responses = await asyncio.gather(
            *(
                http.post("/message:send", json=message_body(f"parallel {i}", contextId=context))
                for i in range(10)
            )
        )
        assert [r.status_code for r in responses] == [200] * 10
        tasks = [r.json()["task"] for r in responses]
        assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
        assert {t["contextId"] for t in tasks} == {context}
        texts = sorted("".join(p["text"] for p in t["artifacts"][0]["parts"]) for t in tasks)
        assert texts == sorted(f"Echo: parallel {i}" for i in range(10))
        listed = (await http.get("/tasks", params={"contextId": context})).json()
        assert listed["totalSize"] == 10
        assert {t["id"] for t in listed["tasks"]} == {t["id"] for t in tasks}
        assert len(listed["tasks"]) == 10
