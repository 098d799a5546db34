"""ListTasks against many tasks: every filter combination equals a brute-force answer."""

from __future__ import annotations

import base64
import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import A2A, header, wait_idle

CONTEXTS = ["ctx-a", "ctx-b", "ctx-c"]
# directive -> final state (a "cancel" entry is [input] then CancelTask)
KINDS = [
    ("done", "TASK_STATE_COMPLETED"),
    ("no [fail]", "TASK_STATE_FAILED"),
    ("no [reject]", "TASK_STATE_REJECTED"),
    ("ask [input]", "TASK_STATE_INPUT_REQUIRED"),
    ("ask [auth]", "TASK_STATE_AUTH_REQUIRED"),
    ("cancel [input]", "TASK_STATE_CANCELED"),
]
STATES = sorted({state for _, state in KINDS} | {"TASK_STATE_WORKING"})


def _populate(alice: A2A) -> list[dict[str, Any]]:
    def one(i: int) -> dict[str, Any]:
        text, state = KINDS[(i * 7) % len(KINDS)]
        task = alice.send(f"#{i} {text}", context_id=CONTEXTS[i % 3]).task
        if state == "TASK_STATE_CANCELED":
            task = alice.cancel(task["id"]).task
        assert task["status"]["state"] == state, (i, task["status"])
        return task

    with ThreadPoolExecutor(6) as pool:
        return list(pool.map(one, range(30)))


def _order_key(task: dict[str, Any]) -> tuple[str, str]:
    return task["status"]["timestamp"], task["id"]


def test_list_tasks_matches_brute_force(local_stack: LocalStack, alice: A2A) -> None:
    bob = alice.as_("bob")
    bob_task = bob.send("bob in ctx-a", context_id="ctx-a").task
    _populate(alice)
    wait_idle(local_stack)
    truth = [alice.get(t["id"]).json for t in alice.list_all(page_size=100)[0]]
    assert len(truth) == 30
    ordered = sorted(truth, key=_order_key, reverse=True)
    midpoint = ordered[12]["status"]["timestamp"]

    combos = itertools.product([None, *CONTEXTS, "ctx-none"], [None, *STATES], [None, midpoint])
    for context_id, state, after in combos:
        expected = [
            t
            for t in ordered
            if (context_id is None or t["contextId"] == context_id)
            and (state is None or t["status"]["state"] == state)
            and (after is None or t["status"]["timestamp"] > after)
        ]
        page_size = 4 if context_id is None and state is None else 9
        listed, total = alice.list_all(
            page_size=page_size, contextId=context_id, status=state, statusTimestampAfter=after
        )
        label = (context_id, state, after)
        assert [t["id"] for t in listed] == [t["id"] for t in expected], label
        assert total == len(expected), label
        for got in listed:
            want = next(t for t in expected if t["id"] == got["id"])
            assert got["status"] == want["status"] and got["contextId"] == want["contextId"]
            assert "history" not in got and "artifacts" not in got
        stamps = [t["status"]["timestamp"] for t in listed]
        assert stamps == sorted(stamps, reverse=True), label

    # The liberal spelling of a state filter, and includeArtifacts / historyLength.
    short = alice.list(status="input-required", pageSize=100).json
    assert {t["id"] for t in short["tasks"]} == {
        t["id"] for t in truth if t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    }
    rich = alice.list(
        status="TASK_STATE_COMPLETED", includeArtifacts="true", historyLength=1, pageSize=100
    ).json
    for task in rich["tasks"]:
        want = next(t for t in truth if t["id"] == task["id"])
        assert task["artifacts"] == want["artifacts"]
        assert task["history"] == want["history"][-1:]
    assert bob_task["id"] not in {t["id"] for t in truth}
    assert [t["id"] for t in bob.list_all()[0]] == [bob_task["id"]]


def _token(cursor: dict[str, str]) -> str:
    raw = json.dumps(cursor, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_page_tokens_cannot_be_forged_or_garbled(local_stack: LocalStack, alice: A2A) -> None:
    bob = alice.as_("bob")
    bob_ids = [bob.send(f"bob {i}", context_id="shared").task["id"] for i in range(3)]
    alice_ids = [alice.send(f"alice {i}", context_id="shared").task["id"] for i in range(3)]
    wait_idle(local_stack)

    for bob_id in bob_ids:
        gsk = header(local_stack, bob_id)["gsk"]["S"]
        for query in ({}, {"contextId": "shared"}, {"status": "TASK_STATE_COMPLETED"}):
            forged = alice.list(pageToken=_token({"k": gsk, "id": bob_id}), **query)
            assert forged.status == 200, forged.body
            seen = {t["id"] for t in forged.json.get("tasks", [])}
            assert seen <= set(alice_ids), (query, seen)
            assert "bob" not in forged.body.decode()

    for bad in ("not-a-token", "%%%", _token({"k": "x"}), base64.b64encode(b"[1,2]").decode()):
        response = alice.list(pageToken=bad)
        assert response.status == 400, (bad, response.body)
        assert response.reason == "INVALID_PARAMS"
        violations = [
            v["field"]
            for d in response.json["error"]["details"]
            if d["@type"].endswith("BadRequest")
            for v in d["fieldViolations"]
        ]
        assert violations == ["pageToken"], response.body
