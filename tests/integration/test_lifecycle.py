"""Task lifecycle through the real handlers and real state-machine executions in moto."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from a2a_serverless.local.stack import LocalStack
from tests.helpers import user_message
from tests.integration.harness import (
    A2A,
    SAMPLE_CONTEXT_ID,
    TERMINAL,
    assert_log_consistent,
    executions,
    invoke_web_adapter,
    invoke_worker,
    load_event,
    partition,
    sfn,
    wait_idle,
    wait_state,
)


def _text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def _history(stack: LocalStack, name: str) -> list[dict[str, Any]]:
    arn = next(e["executionArn"] for e in executions(stack) if e["name"] == name)
    return sfn().get_execution_history(executionArn=arn, maxResults=1000)["events"]


def _entered(history: list[dict[str, Any]], state: str) -> int:
    return sum(
        1
        for e in history
        if e["type"].endswith("StateEntered") and e["stateEnteredEventDetails"]["name"] == state
    )


def test_sample_events_drive_blocking_send_and_get(local_stack: LocalStack) -> None:
    """events/send_message.json as-is (blocking) completes with the echo artifact; the
    get_task.json event with the id substituted returns the same task."""
    send = invoke_web_adapter(
        local_stack.app_for("SendMessageFunction"), load_event("send_message.json")
    )
    assert send.status == 200, send.body
    task = send.task
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["contextId"] == SAMPLE_CONTEXT_ID
    assert _text(task) == "Echo: hello from sam local invoke"
    assert [a["artifactId"] for a in task["artifacts"]] == ["echo"]
    assert [m["role"] for m in task["history"]] == ["ROLE_USER"]

    got = invoke_web_adapter(
        local_stack.app_for("GetTaskFunction"), load_event("get_task.json", task_id=task["id"])
    )
    assert got.status == 200
    assert got.json == task
    wait_idle(local_stack)
    assert [e["name"] for e in executions(local_stack)] == [f"{task['id']}-1"]
    assert_log_consistent(local_stack, task["id"])


def test_non_blocking_send_then_steps(local_stack: LocalStack, alice: A2A) -> None:
    """Non-blocking returns SUBMITTED/WORKING at once; [steps=3] runs three executions of one
    RunStep each (a step that asks for another starts it), one chunk per step, and completes."""
    sent = alice.send("a b c d [steps=3]", blocking=False)
    assert sent.status == 200
    task_id = sent.task["id"]
    assert sent.task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert "artifacts" not in sent.task or len(sent.task["artifacts"][0]["parts"]) < 3
    done = wait_state(alice, task_id, TERMINAL)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _text(done) == "Echo: a b c d [steps=3]"
    assert len(done["artifacts"][0]["parts"]) == 3
    found = sorted(wait_idle(local_stack), key=lambda e: e["name"])
    assert [(e["name"], e["status"]) for e in found] == [
        (f"{task_id}-1", "SUCCEEDED"),
        (f"{task_id}-1-1", "SUCCEEDED"),
        (f"{task_id}-1-2", "SUCCEEDED"),
    ]
    for execution in found:
        history = _history(local_stack, execution["name"])
        assert _entered(history, "RunStep") == 1
        assert _entered(history, "MarkFailed") == 0
    log = assert_log_consistent(local_stack, task_id)
    appends = [ev["artifactUpdate"].get("append", False) for _, ev in log if "artifactUpdate" in ev]
    assert appends == [False, True, True]


def test_multi_turn_input_required(local_stack: LocalStack, alice: A2A) -> None:
    first = alice.send("hello [input]")
    task = first.task
    task_id = task["id"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["role"] == "ROLE_AGENT"
    assert task["status"]["message"]["parts"] == [{"text": "What should I add to the echo?"}]

    follow = alice.send("world", task_id=task_id, context_id=task["contextId"])
    assert follow.status == 200, follow.body
    done = follow.task
    assert done["id"] == task_id
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _text(done) == "Echo: hello [input] + world"
    assert [m["role"] for m in done["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]

    names = {e["name"]: e["status"] for e in wait_idle(local_stack)}
    assert names == {f"{task_id}-1": "SUCCEEDED", f"{task_id}-2": "SUCCEEDED"}
    assert _states(local_stack, task_id) == [
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    # A terminal task takes no more messages.
    late = alice.send("again", task_id=task_id)
    assert late.status == 400 and late.reason == "UNSUPPORTED_OPERATION"


def _states(stack: LocalStack, task_id: str) -> list[str]:
    log = assert_log_consistent(stack, task_id)
    return [ev["statusUpdate"]["status"]["state"] for _, ev in log if "statusUpdate" in ev]


def test_crash_takes_the_catch_path(local_stack: LocalStack, alice: A2A) -> None:
    sent = alice.send("boom [crash]")
    task = sent.task
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert "RuntimeError" in text and "stopped" in text
    assert "crashed on request" not in text and "[crash]" not in text  # no exception text
    (execution,) = wait_idle(local_stack)
    assert execution["status"] == "SUCCEEDED"  # Catch -> MarkFailed (which ends it)
    history = _history(local_stack, execution["name"])
    assert _entered(history, "MarkFailed") == 1
    assert _states(local_stack, task["id"]) == [
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_FAILED",
    ]


def test_worker_fail_event_on_working_task(local_stack: LocalStack, alice: A2A) -> None:
    """flow_worker_fail.json (the Catch payload) on a WORKING task ends it FAILED with an
    explanation, never the Cause; the still-running step then stops writing."""
    sent = alice.send("slowly now [slow=1.5]", blocking=False)
    task_id = sent.task["id"]
    wait_state(alice, task_id, {"TASK_STATE_WORKING"})
    event = load_event("flow_worker_fail.json", task_id=task_id)
    result = invoke_worker(local_stack, event)
    assert result == {"taskId": task_id, "turn": 1, "continue": False}
    task = alice.get(task_id).json
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert "timed out" in text
    assert "RequestId" not in text and "900.00" not in text
    wait_idle(local_stack)
    assert alice.get(task_id).json["status"]["state"] == "TASK_STATE_FAILED"
    assert _states(local_stack, task_id)[-1] == "TASK_STATE_FAILED"


def _frozen(stack: LocalStack, task_id: str) -> list[dict[str, Any]]:
    return sorted(partition(stack, task_id), key=lambda i: i["sk"]["S"])


@pytest.mark.parametrize("worker_event", ["flow_worker_step.json", "flow_worker_fail.json"])
def test_worker_ignores_stale_turns_and_canceled_tasks(
    local_stack: LocalStack, alice: A2A, worker_event: str
) -> None:
    # A task now at turn 2 (completed), and a canceled one.
    done_id = alice.send("one [input]").task["id"]
    assert alice.send("two", task_id=done_id).task["status"]["state"] == "TASK_STATE_COMPLETED"
    canceled_id = alice.send("three [input]").task["id"]
    assert alice.cancel(canceled_id).task["status"]["state"] == "TASK_STATE_CANCELED"
    wait_idle(local_stack)

    cases = [(done_id, 1), (done_id, 2), (canceled_id, 1), (canceled_id, 2)]
    for task_id, turn in cases:
        before = _frozen(local_stack, task_id)
        event = load_event(worker_event, task_id=task_id)
        event["turn"] = turn
        result = invoke_worker(local_stack, event)
        assert result["continue"] is False, (task_id, turn, result)
        assert _frozen(local_stack, task_id) == before, (worker_event, task_id, turn)
    assert alice.get(done_id).json["status"]["state"] == "TASK_STATE_COMPLETED"
    assert alice.get(canceled_id).json["status"]["state"] == "TASK_STATE_CANCELED"


def _through_gateway(stack: LocalStack, method: str, path: str, body: Any = None) -> Any:
    """A request to the local API Gateway as a client sends it; an error the app raises after
    answering (Starlette re-raises it for the server's log) does not hide the answer."""

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=stack.gateway(), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://local") as client:
            return await client.request(
                method,
                path,
                json=body,
                headers={"A2A-Version": "1.0", "x-local-principal": "alice"},
            )

    return asyncio.run(call())


def test_failed_start_execution_ends_the_task_failed() -> None:
    """The task is written before StartExecution; when that call fails (here: the functions
    name a state machine that does not exist) the send answers an error, and the task it
    wrote ends FAILED with an explanatory status message instead of staying SUBMITTED."""
    missing = "arn:aws:states:us-east-1:123456789012:stateMachine:no-such-machine"
    stack = LocalStack(env_overrides={"STATE_MACHINE_ARN": missing}, event_sources=False).start()
    try:
        alice = A2A(stack, "alice")
        for blocking in (False, True):
            message = user_message(f"hello, blocking={blocking}")
            body = {"message": message, "configuration": {"returnImmediately": not blocking}}
            sent = _through_gateway(stack, "POST", "/message:send", body)
            assert sent.status_code == 500, sent.text
            assert sent.json()["error"]["status"] == "INTERNAL", sent.text
            assert "no-such-machine" not in sent.text  # no internals in the answer
            (listed,) = [
                t
                for t in alice.list(pageSize=100, historyLength=100).json["tasks"]
                if message["messageId"] in {m["messageId"] for m in t.get("history", [])}
            ]
            got = alice.get(listed["id"]).json
            assert got["status"]["state"] == "TASK_STATE_FAILED", got
            text = got["status"]["message"]["parts"][0]["text"]
            assert "could not start" in text, text
        assert executions(stack) == []
    finally:
        stack.stop()


def test_each_turn_sees_its_own_request_metadata(make_stack: Any) -> None:
    """A follow-up's SendMessageRequest.metadata reaches the flow (ctx.request_metadata); the
    task's metadata (ctx.metadata) stays the first send's."""
    import json

    from tests.integration.harness import A2A, invoke_web_adapter, load_event

    stack = make_stack(Flow="tests.integration.flows_for_tests:metadata_echo")
    alice = A2A(stack, "alice")

    def send(body: dict[str, Any]) -> dict[str, Any]:
        event = load_event("send_message.json", principal="alice", body=body)
        return invoke_web_adapter(stack.app_for("SendMessageFunction"), event).task

    first = send({"message": user_message("one"), "metadata": {"trace": "t-1"}})
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", first
    second = send(
        {"message": user_message("two", task_id=first["id"]), "metadata": {"trace": "t-2"}}
    )
    assert second["status"]["state"] == "TASK_STATE_COMPLETED", second
    seen = {a["artifactId"]: json.loads(a["parts"][0]["text"]) for a in second["artifacts"]}
    assert seen["turn-1"] == {"request": {"trace": "t-1"}, "task": {"trace": "t-1"}}
    assert seen["turn-2"] == {"request": {"trace": "t-2"}, "task": {"trace": "t-1"}}
    too_big = invoke_web_adapter(
        stack.app_for("SendMessageFunction"),
        load_event(
            "send_message.json",
            principal="alice",
            body={"message": user_message("x"), "metadata": {"blob": "x" * 70_000}},
        ),
    )
    assert too_big.status == 400 and "metadata" in too_big.body.decode(), too_big.body
    assert alice.list().json["totalSize"] == 1
