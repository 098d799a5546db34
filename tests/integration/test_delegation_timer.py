"""The delegations' timer and the stack's side of delegation, on the local stack.

- A timer execution (template.yaml DelegationTimerStateMachine, STANDARD, in moto's
  interpreter) waits its `waitSeconds`, then invokes the flow worker with the round's
  check; while the answer names a next `waitSeconds` it waits again, else it ends. A failed
  check ends the execution, never calls the worker again.
- A round that completes first stops its wait: the worker is not called.
- `reset()` and `stop()` return at once with a long Wait pending (its execution stopped).
- Secrets given to the stack hold a remote agent's headers; the worker's reads of them, its
  timer's starts and stops (and the receiver's stops) are recorded for the observed-calls IAM
  check, and allowed by their roles.
- The gateway serves POST /delegations/{taskId}/{key} without the Auth mode's credential.

The worker itself is stood in for (the stack's `_invoke`): what it answers to a check is the
flow worker's business; what is checked here is what the state machine does with it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from moto.stepfunctions.parser.utils import TMP_THREADS

from a2a_serverless import wiring
from a2a_serverless.local.calls import CALL_LOG_ENV, acting_as
from a2a_serverless.local.stack import LocalStack
from tests.iam_check import CallLog, evaluate, read_log
from tests.integration.harness import sfn, wait_for
from tests.template.sam import load_sam, translate

CHECK = "check_delegations"


class Worker:
    """Stands in for the flow worker's answer to a round's check: `answers` in turn (then
    {}), each invocation's event and time recorded; `fail` makes a check raise."""

    def __init__(self, stack: LocalStack, answers: list[Any], fail: bool = False) -> None:
        self.answers = list(answers)
        self.fail = fail
        self.checks: list[tuple[float, dict[str, Any]]] = []
        self._real = stack._invoke
        self._lock = threading.Lock()

    def __call__(self, function_name: str, body: Any, headers: Any) -> str:
        event = json.loads(body)
        if event.get("action") != CHECK:
            return self._real(function_name, body, headers)
        with self._lock:
            self.checks.append((time.monotonic(), event))
            answer = self.answers.pop(0) if self.answers else {"waitSeconds": 0}
        if self.fail:
            headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": "RuntimeError", "errorMessage": "check failed"})
        return json.dumps(answer)


@pytest.fixture
def worker(
    local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Worker]]:
    def make(answers: list[Any], fail: bool = False) -> Worker:
        stand_in = Worker(local_stack, answers, fail)
        monkeypatch.setattr(local_stack, "_invoke", stand_in)
        return stand_in

    yield make


def _execution_arn(stack: LocalStack, name: str) -> str:
    machine = stack.env["TIMER_STATE_MACHINE_ARN"]
    return machine.replace(":stateMachine:", ":execution:") + ":" + name


def _finished(stack: LocalStack, name: str, timeout: float = 30.0) -> dict[str, Any]:
    client = sfn()
    arn = _execution_arn(stack, name)

    def done() -> dict[str, Any] | None:
        found = client.describe_execution(executionArn=arn)
        return found if found["status"] != "RUNNING" else None

    return wait_for(done, timeout, interval=0.05)


def test_a_wait_ends_in_the_workers_check_of_the_round(
    local_stack: LocalStack, worker: Callable[..., Worker]
) -> None:
    checks = worker([{"waitSeconds": 0}])
    started = time.monotonic()
    name = wiring.get_timer().start_wait("no-such-task", "3.1", 0)
    baseline = _finished(local_stack, name)
    no_wait = checks.checks[0][0] - started
    assert baseline["status"] == "SUCCEEDED"

    checks = worker([{"waitSeconds": 0}])
    started = time.monotonic()
    name = wiring.get_timer().start_wait("no-such-task", "3.2", 2)
    assert _finished(local_stack, name)["status"] == "SUCCEEDED"
    ((at, event),) = checks.checks
    # Nothing before the wait is over (a wait can only take longer under load), and the
    # wait, not the machinery, is what took the time.
    assert at - started >= 1.9
    assert at - started > no_wait
    assert event == {"action": CHECK, "taskId": "no-such-task", "round": "3.2"}


def test_the_timer_waits_again_while_the_check_names_a_wait(
    local_stack: LocalStack, worker: Callable[..., Worker]
) -> None:
    # The answer's own fields, whatever they are, never replace the round's.
    checks = worker([{"waitSeconds": 1, "taskId": "other"}, {"waitSeconds": 0}])
    name = wiring.get_timer().start_wait("t-loop", "1.0", 0)
    assert _finished(local_stack, name)["status"] == "SUCCEEDED"
    events = [event for _, event in checks.checks]
    assert events == [{"action": CHECK, "taskId": "t-loop", "round": "1.0"}] * 2
    assert checks.checks[1][0] - checks.checks[0][0] >= 0.9  # the 1 s it named


def test_a_failed_check_ends_the_timer_without_another_call(
    local_stack: LocalStack, worker: Callable[..., Worker]
) -> None:
    checks = worker([{"waitSeconds": 0}], fail=True)
    name = wiring.get_timer().start_wait("t-fail", "1.0", 0)
    execution = _finished(local_stack, name)
    assert execution["status"] == "FAILED"
    assert execution["error"] == "DelegationCheckFailed"
    assert len(checks.checks) == 1  # no retry of the function's own error, no further call


def test_a_completed_round_stops_its_wait(
    local_stack: LocalStack, worker: Callable[..., Worker]
) -> None:
    checks = worker([])
    timer = wiring.get_timer()
    name = timer.start_wait("t-stop", "2.0", 3600)
    assert timer.start_wait("t-stop", "2.0", 3600) == name  # a retried start: the same wait
    timer.stop_wait("t-stop", "2.0")
    assert _finished(local_stack, name, timeout=5)["status"] == "ABORTED"
    assert checks.checks == []  # the worker was never asked
    timer.stop_wait("t-stop", "2.0")  # already stopped: nothing to do
    timer.stop_wait("t-stop", "7.0")  # never started: nothing to do


def test_reset_stops_a_pending_wait_at_once(local_stack: LocalStack) -> None:
    started = time.monotonic()
    local_stack.reset(timeout=20)
    baseline = time.monotonic() - started

    name = wiring.get_timer().start_wait("t-long", "1.0", 3600)
    arn = _execution_arn(local_stack, name)
    assert sfn().describe_execution(executionArn=arn)["status"] == "RUNNING"
    started = time.monotonic()
    local_stack.reset(timeout=20)  # raised TimeoutError after 20 s before
    pending = time.monotonic() - started
    # Far inside the reset's timeout (a loaded machine took 3.4 s against a 0.08 s baseline).
    assert pending < max(20 * baseline + 1, 0.5 * 20), (pending, baseline)
    running = sfn().list_executions(
        stateMachineArn=local_stack.env["TIMER_STATE_MACHINE_ARN"], statusFilter="RUNNING"
    )
    assert running["executions"] == []


AGENT_SECRET = "a2a-serverless-local/agents/127.0.0.1:8001"


def test_an_own_stack_holds_secrets_serves_the_open_route_and_stops_at_once() -> None:
    stack = LocalStack(
        parameters={"Auth": "ApiKey"},
        event_sources=False,
        secrets={AGENT_SECRET: json.dumps({"X-API-Key": "remote-key"})},
    ).start()
    stopped = False
    try:
        assert stack.env["AGENT_SECRETS_PREFIX"] == "a2a-serverless-local/agents/"
        with acting_as("FlowWorkerFunction", stack.stack_id):
            credentials = wiring.get_agent_credentials()
            assert credentials.headers("http://127.0.0.1:8001/") == {"X-API-Key": "remote-key"}
            assert credentials.headers("http://127.0.0.1:8002/") == {}  # no secret, no headers
            name = wiring.get_timer().start_wait("t-own", "1.0", 3600)
            wiring.get_timer().start_wait("t-own", "2.0", 3600)
            wiring.get_timer().stop_wait("t-own", "2.0")
        with acting_as("DelegationReceiverFunction", stack.stack_id):
            wiring.get_timer().stop_wait("t-own", "3.0")
        _check_recorded_calls(stack)
        _check_the_open_route(stack)

        arn = _execution_arn(stack, name)
        assert sfn().describe_execution(executionArn=arn)["status"] == "RUNNING"
        executing = [t for t in TMP_THREADS if t.is_alive()]
        assert executing
        started = time.monotonic()
        stack.stop()
        stopped = True
        assert time.monotonic() - started < 5  # a 3600 s wait pending
        # The execution's thread ends with it: nothing wakes into a stopped stack.
        wait_for(lambda: not [t for t in executing if t.is_alive()], 5)
    finally:
        if not stopped:
            stack.stop()


def _check_recorded_calls(stack: LocalStack) -> None:
    path = os.environ.get(CALL_LOG_ENV)
    if not path:  # pragma: no cover (tests/conftest.py always sets one)
        return
    session = read_log(Path(path))
    mine = CallLog(
        stacks={stack.stack_id: session.stacks[stack.stack_id]},
        calls={(s, c): None for s, c in session.calls if s == stack.stack_id},
    )
    found = {(c.principal, c.action, c.resource) for _, c in mine.calls}
    timer = stack.env["TIMER_STATE_MACHINE_ARN"]
    executions = timer.replace(":stateMachine:", ":execution:")
    assert {(p, r) for p, a, r in found if a == "states:StopExecution"} == {
        ("FlowWorkerFunction", f"{executions}:t-own-d2_0"),
        ("DelegationReceiverFunction", f"{executions}:t-own-d3_0"),
    }
    secrets = {(p, r) for p, a, r in found if a == "secretsmanager:GetSecretValue"}
    # The secret by its ARN (its name and a suffix); the missing one by the ARN of its name.
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:"
    (existing,) = [r for _, r in secrets if r.startswith(f"{arn}{AGENT_SECRET}-")]
    assert secrets == {
        ("FlowWorkerFunction", existing),
        ("FlowWorkerFunction", f"{arn}a2a-serverless-local/agents/127.0.0.1:8002"),
    }
    assert ("FlowWorkerFunction", "states:StartExecution", timer) in found
    report = evaluate(mine, translate(load_sam()))
    assert not report.failed, report.denied


def _check_the_open_route(stack: LocalStack) -> None:
    """Under Auth=ApiKey, a request without a key reaches the receiver; elsewhere the
    gateway refuses it."""
    reached: list[str] = []

    async def receiver(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    stack._apps["DelegationReceiverFunction"] = receiver

    async def call() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=stack.gateway(), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://local") as client:
            return [
                await client.post("/delegations/t-1/k-1", json={}),
                await client.get("/tasks"),
                await client.post("/acme/delegations/t-1/k-1", json={}),
            ]

    delegation, tasks, tenant = asyncio.run(call())
    assert delegation.status_code == 204 and reached == ["/delegations/t-1/k-1"]
    assert tasks.status_code == 401  # the mode's credential is asked for elsewhere
    assert tenant.status_code in (403, 404) and reached == ["/delegations/t-1/k-1"]
