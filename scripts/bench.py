"""Benchmarks: AWS units and dollars per task, cold starts, and the local stack's speed.

Units are counted, not timed, from the calls one single-turn echo task makes on the local stack
(moto + the real handlers), for a STANDARD and an EXPRESS state machine:
- API Gateway requests, counted at the local gateway;
- every Lambda invocation, with its measured handler time x the template's MemorySize;
- DynamoDB write and read request units of every call, computed from the request and the item
  before and after it (moto reports no capacity), global secondary index writes included (from
  the table's key schema and projections in template.yaml);
- Step Functions state transitions (STANDARD) from the execution history, and the execution's
  duration (EXPRESS);
- CloudWatch Logs bytes the functions print (plus Lambda's and API Gateway's own lines);
- S3 requests of the functions (by pricing class) and the bytes the task leaves in the content
  bucket (stored for RetentionDays); a client's downloads of file artifacts where a task has
  them (GET requests and data transfer out).
They are priced with PRICES (a2a_serverless/local/meter.py, the meter this script counts
with) in $ per 1M tasks; docs/cost.md explains the model.
The same counting gives `large_task_wru` (a task whose message carries a FILE_IN_BYTES file
against the text-only one) and, unless --skip-files, what a task with files costs (a file in,
a FILE_OUT_BYTES artifact out and downloaded; a turn of a conversation of 100 KB messages);
unless --skip-delegation, what a delegated turn of the relay flow costs the delegating stack
(its remote a stub in process), what its wait consumes, and one poll of a remote without push.

Times are ratios against a baseline measured in the same run (the machine is shared and noisy):
cold start (import plus first request of every function, each in a fresh interpreter against a
moto server) against `import boto3; boto3.client('dynamodb')` plus one call, and against a
minimal FastAPI function doing one GetItem (`cold_start_ratio_to_fastapi_peer`). The local
stack's throughput and stream figures come from scripts/bench_local.py, and so do the file
round trip's (`file_roundtrip_mb_per_s` against moto S3 through boto3, unless --skip-files).

Usage: scripts/bench [--json FILE] [--skip-cold-start] [--skip-local] [--skip-files] [--quick]
                     [--skip-delegation] [--cost-doc] [--write-docs] [--only-cold-start]
                     [--repeats N] [--stack-doc] [--delegation-doc]

--cost-doc rewrites the measured section of docs/cost.md and its section read from
template.yaml (what held-open requests and the stack's options cost); --stack-doc rewrites only
the latter, in seconds, measuring nothing; --delegation-doc measures the delegated turns alone
and rewrites their section (and the latter). --write-docs also measures SSE
emit->receive latency (the e2e latency test) and writes docs/stream-latency.md.
--only-cold-start measures the cold starts alone (with --repeats N pairs per function).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import gc
import json
import logging
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))

# The meter (units, their sizing and their prices) is the package's: the local stack's too.
from a2a_serverless.local.meter import (  # noqa: E402, F401
    ACCESS_LOG_LINE_BYTES,
    APIGATEWAY_STREAM_METERING_BYTES,
    DAYS_PER_MONTH,
    EXPRESS_BASE_MEMORY_MB,
    EXPRESS_DURATION_STEP_S,
    EXPRESS_MEMORY_CHUNK_MB,
    LAMBDA_PLATFORM_LOG_BYTES,
    LAMBDA_STREAM_UNBILLED_BYTES,
    LOG_EVENT_OVERHEAD_BYTES,
    PRICES,
    PRICES_SOURCE_DATE,
    READ_UNIT_BYTES,
    S3_FREE_REQUESTS,
    S3_GET_CLASS,
    TRANSACTION_FACTOR,
    TRANSACTION_INDEX_FACTOR,
    WRITE_OPS,
    WRITE_UNIT_BYTES,
    XRAY_FIXED_RATE,
    XRAY_RESERVOIR_PER_SECOND,
    ApiCounter,
    CallCost,
    DynamoMeter,
    Index,
    LambdaMeter,
    TableSchema,
    TemplateValues,
    WriteCost,
    condition_check_cost,
    execution_units,
    function_memory,
    index_write_units,
    item_size,
    number_size,
    price,
    read_units,
    s3_request_classes,
    s3_usd,
    stack_features,
    states_entered,
    table_schema,
    template_functions,
    truthy,
    value_size,
    write_cost,
    write_units,
)

# The targets, printed next to the measured figures. Cold starts are held against what a user
# would write instead (a minimal FastAPI function), not a bare boto3 client.
TARGETS = {
    "wru_per_task": ("<=", 12),
    "large_task_wru_over_text": ("<=", 2),
    "sfn_transitions_per_turn": ("<=", 2),
    "usd_per_million_tasks.EXPRESS": ("<=", 15),
    "usd_per_million_tasks.STANDARD": ("<=", 80),
    "cold_start_ratio_to_fastapi_peer (worst)": ("<=", 1.3),
    "local_tasks_per_second": (">=", 50),
    "local_throughput_ratio_5000_stored": (">=", 0.85),
    "stream_p95_ms_8_streams": ("<=", 150),
    "blocking_send_p50_ms": ("<=", 60),
}

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
WORKFLOWS = ("STANDARD", "EXPRESS")
COST_DOC = ROOT / "docs" / "cost.md"
COST_DOC_BEGIN = "<!-- bench:begin (scripts/bench --cost-doc rewrites this section) -->"
COST_DOC_END = "<!-- bench:end -->"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


@contextlib.contextmanager
def captured_output() -> Iterator[dict[str, int]]:
    """Bytes and lines the process writes to stdout and stderr meanwhile (the functions' logs
    and EMF metrics: what CloudWatch Logs would ingest), at the file descriptor level."""
    result = {"bytes": 0, "lines": 0}
    saved: list[tuple[int, int]] = []
    with tempfile.TemporaryFile() as sink:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd in (1, 2):
            saved.append((fd, os.dup(fd)))
            os.dup2(sink.fileno(), fd)
        try:
            yield result
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            data = sink.read()
            result["bytes"] = len(data)
            result["lines"] = data.count(b"\n")


# -- one single-turn echo task, counted -----------------------------------------------------


def _settle(sfn: Any, machine: str, stream: Any, timeout: float = 30.0) -> None:
    """Until no execution of `machine` runs, then every stream record to the webhook sender."""
    deadline = time.monotonic() + timeout
    while any(
        e["status"] == "RUNNING" for e in sfn.list_executions(stateMachineArn=machine)["executions"]
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"a flow execution is still running after {timeout:g} s")
        time.sleep(0.02)
    while stream.poll_once():
        pass


def _log_bytes(
    template: dict[str, Any],
    workflow: str,
    logs: dict[str, int],
    functions: dict[str, Any],
    api_requests: int,
) -> int:
    """CloudWatch Logs bytes: what the functions printed, Lambda's own lines per invocation,
    API Gateway's access log line per request when the template writes it."""
    invocations = sum(f["invocations"] for f in functions.values())
    log_bytes = (
        logs["bytes"]
        + LOG_EVENT_OVERHEAD_BYTES * logs["lines"]
        + (LAMBDA_PLATFORM_LOG_BYTES + 3 * LOG_EVENT_OVERHEAD_BYTES) * invocations
    )
    if stack_features(template, {"WorkflowType": workflow})["access_log"]:
        log_bytes += (ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES) * api_requests
    return log_bytes


def _message(text: str, *, immediate: bool = False, files: Sequence[bytes] = ()) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": text}]
    parts += [
        {"raw": base64.b64encode(body).decode(), "filename": f"file{i}.bin"}
        for i, body in enumerate(files)
    ]
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    return {"message": message, "configuration": {"returnImmediately": immediate}}


def measure_units(
    workflow: str = "STANDARD",
    *,
    blocking: bool = True,
    text: str = "units please",
    files: Sequence[bytes] = (),
    flow: str | None = None,
) -> dict[str, Any]:
    """Every unit one single-turn echo task (one blocking SendMessage, its turn, its stream
    batch) costs on a fresh local stack with `WorkflowType=workflow` (after one warm-up task, so
    that handler times are warm ones: cold starts are measured on their own). `files`: raw
    parts of the message besides its text; `flow`: the stack's Flow instead of the echo."""
    import boto3
    import httpx

    from a2a_serverless.local.stack import REGION, LocalStack
    from a2a_serverless.store.content import object_key

    parameters = {"WorkflowType": workflow, **({"Flow": flow} if flow else {})}
    stack = LocalStack(parameters=parameters, event_sources="manual").start()
    try:
        assert stack.event_sources is not None
        session_events = boto3._get_default_session().events
        reader = boto3.session.Session().client("dynamodb", region_name=REGION)
        ddb = DynamoMeter(table_schema(stack.template), stack.env["TABLE_NAME"], reader)
        ddb.attach(session_events)  # before the functions make their clients (lazily)
        sqs_calls: Counter[str] = Counter()
        session_events.register(
            "before-call.sqs", lambda model, **_: sqs_calls.update([model.name])
        )
        s3_calls: Counter[str] = Counter()
        session_events.register("before-call.s3", lambda model, **_: s3_calls.update([model.name]))
        lambdas = LambdaMeter(function_memory(stack.template))
        lambdas.wrap(stack)
        api = ApiCounter(stack.gateway())
        stream = stack.event_sources.by_name("WebhookSenderFunction.TaskEvents")
        sfn = stack._client("stepfunctions")
        machine = stack.env["STATE_MACHINE_ARN"]

        def settle() -> None:
            _settle(sfn, machine, stream)

        async def task(client: httpx.AsyncClient, text: str) -> str:
            body = _message(text, immediate=not blocking, files=files)
            response = await client.post("/message:send", json=body, headers=HEADERS)
            assert response.status_code == 200, response.text[:2000]
            return str(response.json()["task"]["id"])

        async def run() -> tuple[str, dict[str, int], float]:
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://bench", timeout=300
            ) as client:
                with captured_output():  # the warm-up's log lines are neither shown nor counted
                    # Its content stored too when the measured one's is: warm S3 clients.
                    large = bool(files) or len(text) > 1024
                    await task(client, text if large else "warm up")
                    await asyncio.to_thread(settle)
                # A full collection of this process's heap (the whole local stack, far more
                # than a function's) would otherwise land in the measured task now and then.
                gc.collect()
                ddb.reset()
                lambdas.reset()
                sqs_calls.clear()
                s3_calls.clear()
                api.requests = 0
                with captured_output() as logs:
                    start = time.perf_counter()
                    task_id = await task(client, text)
                    elapsed = time.perf_counter() - start
                    await asyncio.to_thread(settle)
                return task_id, logs, elapsed

        task_id, logs, send_seconds = asyncio.run(run())
        executions = execution_units(sfn, machine, task_id)
        functions = lambdas.summary()
        log_bytes = _log_bytes(stack.template, workflow, logs, functions, api.requests)
        # What the task left in the content bucket, listed by a client of the bench's own.
        lister = boto3.session.Session(region_name=REGION).client("s3")
        prefix = object_key(task_id, "")
        stored = [
            item
            for page in lister.get_paginator("list_objects_v2").paginate(
                Bucket=stack.env["CONTENT_BUCKET"], Prefix=prefix
            )
            for item in page.get("Contents", [])
        ]
        return {
            "workflow": workflow,
            "blocking": blocking,
            "task_id": task_id,
            "send_ms": round(send_seconds * 1000, 1),
            "api_requests": api.requests,
            "lambda": functions,
            "dynamodb": ddb.summary(),
            "stepfunctions": executions,
            "sqs_requests": dict(sqs_calls),
            "s3_requests": dict(s3_calls),
            "s3_stored_bytes": sum(int(item["Size"]) for item in stored),
            "s3_objects": len(stored),
            "retention_days": int(stack.parameters["RetentionDays"]),
            "log_bytes": log_bytes,
            "function_log_bytes": logs["bytes"],
        }
    finally:
        stack.stop()


# -- one delegated turn, counted --------------------------------------------------------------

RELAY_FLOW = "a2a_serverless.flows.relay:flow"
REMOTE_AGENT_URL = "https://remote-agent.example/"  # never reached: the remote is a stub
REMOTE_ANSWER = "the remote agent's answer"
# Real seconds the meters are read over while a turn waits (they count calls, not time).
WAIT_SAMPLE_SECONDS = 3.0


class StubRemote:
    """The remote agent of a delegated turn, in the bench's process: its bill is someone
    else's. `push`: its card offers push notifications. The message sent answers a WORKING
    task; a read answers it WORKING for the first `working_reads` reads, then COMPLETED with
    one small artifact (the one its notifications carry)."""

    name = "bench-remote"

    def __init__(self, push: bool = True, working_reads: int = 0) -> None:
        from a2a_serverless.models import utcnow

        self.push_notifications = push
        self.working_reads = working_reads
        self.pushes: list[Any] = []  # the push config of each message sent (None: none)
        self.reads = 0
        self.task_id = f"remote-{uuid.uuid4()}"
        self.context_id = f"remote-context-{uuid.uuid4()}"
        self.started = utcnow()

    def _task(self, done: bool) -> Any:
        from datetime import timedelta

        from a2a_serverless.models import Artifact, Part, Task, TaskState, TaskStatus

        if not done:
            status = TaskStatus(state=TaskState.WORKING, timestamp=self.started)
            return Task(id=self.task_id, context_id=self.context_id, status=status)
        status = TaskStatus(
            state=TaskState.COMPLETED, timestamp=self.started + timedelta(seconds=1)
        )
        artifact = Artifact(artifact_id="answer", parts=[Part(text=REMOTE_ANSWER)])
        return Task(
            id=self.task_id, context_id=self.context_id, status=status, artifacts=[artifact]
        )

    def send(self, message: Any, *, push: Any = None) -> Any:
        self.pushes.append(push)
        return self._task(done=False)

    def get_task(self, task_id: str, *, history_length: int | None = None) -> Any:
        self.reads += 1
        return self._task(done=self.reads > self.working_reads)

    def cancel_task(self, task_id: str) -> Any:
        return self._task(done=True)

    def notifications(self) -> list[dict[str, Any]]:
        """What a remote with push sends for a one-artifact answer: the artifact, then the
        COMPLETED status."""
        from a2a_serverless.models import (
            StreamResponse,
            TaskArtifactUpdateEvent,
            TaskStatusUpdateEvent,
        )

        done = self._task(done=True)
        ids = {"task_id": done.id, "context_id": done.context_id}
        artifact = TaskArtifactUpdateEvent(**ids, artifact=done.artifacts[0], last_chunk=True)
        status = TaskStatusUpdateEvent(**ids, status=done.status)
        return [
            StreamResponse(artifact_update=artifact).wire(),
            StreamResponse(status_update=status).wire(),
        ]


@dataclass
class _Marks:
    """Where the meters stood at one moment (their counts grow; nothing is reset)."""

    ddb: int
    lambdas: int
    api: int
    flow_transitions: int
    timer_transitions: int


def measure_delegation_units(workflow: str = "STANDARD", *, push: bool = True) -> dict[str, Any]:
    """Every unit one delegated turn costs the delegating stack (on a fresh local stack whose
    Flow is the relay, `WorkflowType=workflow`, after one warm-up turn): a non-blocking
    SendMessage; the step that delegates (its round's write, the send to the remote, the
    timer started); with `push`, the remote's two notifications (an artifact, then COMPLETED)
    to the receiver route; without, the timer's polls (the remote answers WORKING to the
    first, COMPLETED to the second); the woken step; both stream batches (an hour apart, they
    are two). The remote is a StubRemote (not billed to this stack). "waiting": the units
    between the end of the delegating step and the first notification (the first poll's
    visit, without push), read over WAIT_SAMPLE_SECONDS: every meter counts calls, not time."""
    import boto3
    import httpx

    from a2a_serverless import wiring
    from a2a_serverless.local.stack import REGION, LocalStack
    from a2a_serverless.models import TaskState
    from a2a_serverless.store import DelegationState
    from a2a_serverless.store.dynamodb import DynamoDBTaskStore, keys

    parameters = {"WorkflowType": workflow, "Flow": RELAY_FLOW, "RelayAgentUrl": REMOTE_AGENT_URL}
    stack = LocalStack(parameters=parameters, event_sources="manual").start()
    session_events = boto3._get_default_session().events
    reader = boto3.session.Session().client("dynamodb", region_name=REGION)
    ddb = DynamoMeter(table_schema(stack.template), stack.env["TABLE_NAME"], reader)
    sqs_calls: Counter[str] = Counter()
    s3_calls: Counter[str] = Counter()

    def count_sqs(model: Any, **_: Any) -> None:
        sqs_calls.update([model.name])

    def count_s3(model: Any, **_: Any) -> None:
        s3_calls.update([model.name])

    remotes: list[StubRemote] = []
    real_connect = wiring._connect_remote

    def connect(agent_url: str, credentials: str | None) -> StubRemote:
        assert agent_url == REMOTE_AGENT_URL, agent_url
        return remotes[-1]

    ddb.attach(session_events)  # before the functions make their clients (lazily)
    session_events.register("before-call.sqs", count_sqs)
    session_events.register("before-call.s3", count_s3)
    try:
        wiring._connect_remote = connect
        assert stack.event_sources is not None
        lambdas = LambdaMeter(function_memory(stack.template))
        lambdas.wrap(stack)
        api = ApiCounter(stack.gateway())
        stream = stack.event_sources.by_name("WebhookSenderFunction.TaskEvents")
        sfn = stack._client("stepfunctions")
        machine = stack.env["STATE_MACHINE_ARN"]
        timer_machine = stack.env["TIMER_STATE_MACHINE_ARN"]
        store = DynamoDBTaskStore(reader, stack.env["TABLE_NAME"])

        def entered(arn: str, task_id: str) -> int:
            return sum(
                states_entered(sfn, e["executionArn"])
                for e in sfn.list_executions(stateMachineArn=arn)["executions"]
                if e["name"].startswith(task_id)
            )

        def marks(task_id: str) -> _Marks:
            return _Marks(
                len(ddb.calls),
                len(lambdas.invocations),
                api.requests,
                entered(machine, task_id),
                entered(timer_machine, task_id),
            )

        def stored_bytes(task_id: str) -> int:
            """The round's items (what waiting adds to the task's storage)."""
            found = reader.query(
                TableName=stack.env["TABLE_NAME"],
                KeyConditionExpression="pk = :pk AND begins_with(sk, :r)",
                ExpressionAttributeValues={
                    ":pk": keys.task_pk(task_id),
                    ":r": {"S": keys.DELEGATION_PREFIX},
                },
            )
            return sum(item_size(item) for item in found["Items"])

        def until(what: Callable[[], bool], timeout: float = 60.0) -> None:
            deadline = time.monotonic() + timeout
            while not what():
                if time.monotonic() > deadline:
                    raise TimeoutError("the delegated turn did not get there in time")
                time.sleep(0.02)

        async def turn(client: httpx.AsyncClient) -> dict[str, Any]:
            remotes.append(StubRemote(push=push, working_reads=0 if push else 1))
            body = _message("a delegated turn", immediate=True)
            response = await client.post("/message:send", json=body, headers=HEADERS)
            assert response.status_code == 200, response.text[:2000]
            task_id = str(response.json()["task"]["id"])
            await asyncio.to_thread(_settle, sfn, machine, stream)  # the delegating step
            (record,) = store.task_delegations(task_id)
            assert record.state is DelegationState.WAITING, record
            assert record.mode == ("push" if push else "poll"), record.mode
            # The wait: nothing runs (push), or up to the first poll's visit (Wait, Check,
            # Again, then Wait again: four states entered).
            before = marks(task_id)
            with captured_output() as waiting_logs:
                started = time.monotonic()
                if push:
                    await asyncio.sleep(WAIT_SAMPLE_SECONDS)
                else:
                    await asyncio.to_thread(until, lambda: entered(timer_machine, task_id) >= 4)
                while stream.poll_once():  # an event written meanwhile would reach the sender
                    pass
                waited = time.monotonic() - started
                after = marks(task_id)
            stored = stored_bytes(task_id)
            if push:
                for notification in remotes[-1].notifications():
                    answer = await client.post(
                        f"/delegations/{task_id}/{record.key}",
                        json=notification,
                        headers={"X-A2A-Notification-Token": record.token},
                    )
                    assert answer.status_code == 200, answer.text[:2000]

            def completed() -> bool:
                found = store.get_record(task_id)
                return found is not None and found.state is TaskState.COMPLETED

            await asyncio.to_thread(until, completed)
            await asyncio.to_thread(_settle, sfn, machine, stream)  # the woken step

            def timer_ended() -> bool:
                executions = sfn.list_executions(stateMachineArn=timer_machine)["executions"]
                return all(e["status"] != "RUNNING" for e in executions)

            await asyncio.to_thread(until, timer_ended)
            return {
                "task_id": task_id,
                "before": before,
                "after": after,
                "waiting_logs": waiting_logs,
                "waited": waited,
                "stored": stored,
            }

        async def run() -> tuple[dict[str, Any], dict[str, int]]:
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://bench", timeout=300
            ) as client:
                with captured_output():  # a warm-up turn, neither shown nor counted
                    await turn(client)
                gc.collect()
                ddb.reset()
                lambdas.reset()
                sqs_calls.clear()
                s3_calls.clear()
                api.requests = 0
                with captured_output() as logs:
                    measured = await turn(client)
                return measured, logs

        measured, logs = asyncio.run(run())
        task_id, before, after = measured["task_id"], measured["before"], measured["after"]
        functions = lambdas.summary()
        # The waiting window's lines went to its own capture: they are the turn's too.
        waiting_logs = measured["waiting_logs"]
        all_logs = {k: logs[k] + waiting_logs[k] for k in ("bytes", "lines")}
        timer = execution_units(sfn, timer_machine, task_id)
        (timer_execution,) = [
            e
            for e in sfn.list_executions(stateMachineArn=timer_machine)["executions"]
            if e["name"].startswith(task_id)
        ]
        waiting_functions = lambdas.summary(before.lambdas, after.lambdas)
        waiting_api = after.api - before.api
        waiting = {
            "seconds": round(measured["waited"], 1),
            "api_requests": waiting_api,
            "lambda": waiting_functions,
            "dynamodb": ddb.summary(before.ddb, after.ddb),
            "stepfunctions": {
                "executions": 0,
                "state_transitions": after.flow_transitions - before.flow_transitions,
                "express_gb_seconds": 0.0,
            },
            "timer": {"state_transitions": after.timer_transitions - before.timer_transitions},
            "sqs_requests": {},
            "log_bytes": _log_bytes(
                stack.template, workflow, waiting_logs, waiting_functions, waiting_api
            ),
            "function_log_bytes": waiting_logs["bytes"],
            "round_item_bytes": measured["stored"],
        }
        return {
            "workflow": workflow,
            "push": push,
            "task_id": task_id,
            "remote_pushes": [p is not None for p in remotes[-1].pushes],
            "api_requests": api.requests,
            "lambda": functions,
            "dynamodb": ddb.summary(),
            "stepfunctions": execution_units(sfn, machine, task_id),
            "timer": {
                "executions": timer["executions"],
                "state_transitions": timer["state_transitions"],
                "status": timer_execution["status"],
            },
            "sqs_requests": dict(sqs_calls),
            "s3_requests": dict(s3_calls),
            "log_bytes": _log_bytes(stack.template, workflow, all_logs, functions, api.requests),
            "function_log_bytes": all_logs["bytes"],
            "waiting": waiting,
        }
    finally:
        wiring._connect_remote = real_connect
        ddb.detach(session_events)
        session_events.unregister("before-call.sqs", count_sqs)
        session_events.unregister("before-call.s3", count_s3)
        stack.stop()


def cost_phase() -> dict[str, Any]:
    units = {workflow: measure_units(workflow) for workflow in ("STANDARD", "EXPRESS")}
    prices = {workflow: price(units[workflow], workflow) for workflow in units}
    standard = units["STANDARD"]
    # The same blocking echo task, its message carrying a file too.
    local = _bench_local()
    large = measure_units("STANDARD", files=[local.file_in(local.FILE_IN_BYTES)])
    return {
        "wru_per_task": standard["dynamodb"]["wru"],
        "large_task_wru": large["dynamodb"]["wru"],
        "large_task_wru_text_only": standard["dynamodb"]["wru"],
        "large_task_wru_over_text": large["dynamodb"]["wru"] - standard["dynamodb"]["wru"],
        "large_task_units": large,
        "rru_per_task": standard["dynamodb"]["rru"],
        "usd_per_million_tasks": {w: prices[w]["total"] for w in prices},
        "sfn_transitions_per_turn": standard["stepfunctions"]["state_transitions"],
        "usd_breakdown_per_million_tasks": prices,
        "units_per_task": units,
    }


def price_delegated(units: dict[str, Any], workflow: str) -> dict[str, float]:
    """$ per 1M delegated turns (or waits, or polls), per service: `price`'s lines (the flow's
    state machine as `workflow` bills it) and the delegations' timer, STANDARD always
    (`stepfunctions_timer`: its state transitions)."""
    lines = price(units, workflow)
    timer = units["timer"]["state_transitions"] * PRICES["sfn_standard_transition"] * 1e6
    total = lines.pop("total")
    out: dict[str, float] = {}
    for name, usd in lines.items():
        out[name] = usd
        if name == "stepfunctions":
            out["stepfunctions_timer"] = round(timer, 2)
    out["total"] = round(total + timer, 2)
    return out


def poll_offsets(seconds: float) -> list[int]:
    """When a remote without push is polled, in seconds after the send, up to `seconds`: 2, 4,
    8... seconds apart, then every MAX_POLL_SECONDS (core/delegation.py)."""
    from a2a_serverless.core.delegation import MAX_POLL_SECONDS

    offsets: list[int] = []
    at = 0
    while True:
        at += min(MAX_POLL_SECONDS, 2 ** (len(offsets) + 1))
        if at > seconds:
            return offsets
        offsets.append(at)


def _window(units: dict[str, Any]) -> dict[str, Any]:
    """A measured window (a wait, a poll) in short: its units, and $ per 1M of it."""
    functions = units["lambda"]
    return {
        "seconds": units["seconds"],
        "api_requests": units["api_requests"],
        "lambda_invocations": sum(f["invocations"] for f in functions.values()),
        "lambda_billed_ms": sum(f["billed_ms"] for f in functions.values()),
        "dynamodb_calls": units["dynamodb"]["calls"],
        "wru": units["dynamodb"]["wru"],
        "rru": units["dynamodb"]["rru"],
        "state_transitions": units["stepfunctions"]["state_transitions"]
        + units["timer"]["state_transitions"],
        "log_bytes": units["log_bytes"],
        "round_item_bytes": units["round_item_bytes"],
        "usd_per_million": price_delegated(units, "STANDARD")["total"],
    }


def delegation_phase() -> dict[str, Any]:
    """A delegated turn of the relay flow (its remote with push) on either workflow, a
    non-blocking echo task beside it, and a turn whose remote has no push (its polls)."""
    turns = {workflow: measure_delegation_units(workflow) for workflow in WORKFLOWS}
    echo = {workflow: measure_units(workflow, blocking=False) for workflow in WORKFLOWS}
    polled = measure_delegation_units("STANDARD", push=False)
    return delegation_summary(turns, echo, polled)


def delegation_summary(
    turns: dict[str, dict[str, Any]], echo: dict[str, dict[str, Any]], polled: dict[str, Any]
) -> dict[str, Any]:
    """The report's delegation keys from the measured units: `turns` and `echo` per workflow
    (measure_delegation_units, measure_units non-blocking), `polled` a turn without push."""
    usd = {workflow: price_delegated(turns[workflow], workflow) for workflow in WORKFLOWS}
    waiting = _window(turns["STANDARD"]["waiting"])
    poll = _window(polled["waiting"])
    first_hour = len(poll_offsets(3600))
    # Storage is what an hour of waiting bills: the round's items, for an hour.
    hour_gb_months = waiting["round_item_bytes"] / 1024**3 / (DAYS_PER_MONTH * 24)
    waiting["storage_usd_per_million_hours"] = round(
        hour_gb_months * PRICES["dynamodb_storage_gb_month"] * 1e6, 4
    )
    return {
        "delegated_turn_usd": {workflow: usd[workflow]["total"] for workflow in WORKFLOWS},
        "delegated_turn_usd_breakdown": usd,
        "delegated_turn_units": turns,
        "waiting_units": waiting,
        "poll_units": poll,
        "polls_first_hour": first_hour,
        "polled_hour_usd_per_million": round(first_hour * poll["usd_per_million"], 2),
        "polled_turn_units": polled,
        "polled_turn_usd": price_delegated(polled, "STANDARD"),
        "echo_nonblocking_usd_breakdown": {
            workflow: price(echo[workflow], workflow) for workflow in WORKFLOWS
        },
        "echo_nonblocking_wru": echo["STANDARD"]["dynamodb"]["wru"],
    }


# -- what else a deployed stack bills (from template.yaml, nothing measured) -----------------


def streamed_requests(response_bytes: int) -> int:
    """API Gateway requests one streamed REST response is billed as: one per 10 MB started."""
    return max(1, math.ceil(response_bytes / APIGATEWAY_STREAM_METERING_BYTES))


def held_open_usd(memory_mb: int, seconds: float, response_bytes: int = 0) -> float:
    """$ of one streamed request that holds its function open `seconds`: its API Gateway
    request(s), the Lambda request, and the GB-seconds of the whole time (Lambda bills a
    streaming function until it returns, whether or not the client is still there)."""
    p = PRICES
    return (
        streamed_requests(response_bytes) * p["apigateway_rest_request"]
        + p["lambda_request"]
        + memory_mb / 1024 * seconds * p["lambda_arm64_gb_second"]
    )


def xray_traces_per_second(requests_per_second: float) -> float:
    """Traces X-Ray's default sampling rule records of a steady request rate."""
    reservoir = min(requests_per_second, XRAY_RESERVOIR_PER_SECOND)
    return reservoir + XRAY_FIXED_RATE * (requests_per_second - reservoir)


def _option_parameters(template: dict[str, Any], feature: str) -> dict[str, str]:
    """Parameter values (among their AllowedValues) that turn `feature` to the other side
    of its default: {parameter: value}; empty when no single parameter does."""
    default = stack_features(template)[feature]
    found = {}
    for name, spec in (template.get("Parameters") or {}).items():
        for value in spec.get("AllowedValues") or []:
            if str(value) != str(spec.get("Default")):
                changed = stack_features(template, {name: str(value)})[feature]
                if changed != default:
                    found[name] = str(value)
                    break
    return found


COST_STACK_BEGIN = "<!-- bench:stack:begin (scripts/bench --stack-doc rewrites this section) -->"
COST_STACK_END = "<!-- bench:stack:end -->"
HELD_SECONDS = (1, 30, 300)


def _usd(value: float) -> str:
    if value == 0:
        return "$0"
    return f"${value:,.2f}" if value >= 0.01 else f"${value:.4f}"


def stack_table(template: dict[str, Any]) -> str:
    """The section of docs/cost.md read from template.yaml: held-open requests and the
    stack's lines beside the per-task ones."""
    p = PRICES
    f = stack_features(template)
    memory = f["memory_mb"]
    stream_max = max(f["stream_max_seconds"].values())
    wait_max = f["blocking_max_wait_seconds"]
    held = [
        ("streamed send (`POST /message:stream`) while its turn runs", "StreamFunction", None),
        ("subscription (`POST /tasks/{id}:subscribe`)", "StreamFunction", stream_max),
        ("subscription (`GET /tasks/{id}:subscribe`)", "GetTaskFunction", stream_max),
        ("blocking send (`POST /message:send`) while it waits", "SendMessageFunction", wait_max),
        ("blocking JSON-RPC `SendMessage` (`POST /`)", "StreamFunction", wait_max),
    ]
    heads = [f"{s} s" for s in HELD_SECONDS]
    lines = [
        COST_STACK_BEGIN,
        "",
        "Read from `template.yaml` at its defaults by `scripts/bench --stack-doc` (no "
        "measurement; `--cost-doc` rewrites it too), priced with `PRICES`.",
        "",
        "**Requests held open.** A streamed request bills its function for every second it is "
        "open: Lambda's GB-seconds of the function's memory, plus one Lambda request and one "
        "API Gateway request (a streamed response is metered per 10 MB started: "
        "`streamed_requests`; A2A responses stay far below, so one). $ per 1M requests held "
        "this long:",
        "",
        "| request | function (memory) | " + " | ".join(heads) + " | longest (s) | longest |",
        "|---|---|" + "---|" * (len(heads) + 2),
    ]
    for what, function, longest in held:
        mb = memory[function]
        cells = [_usd(held_open_usd(mb, s) * 1e6) for s in HELD_SECONDS]
        tail = (
            [f"{longest:g}", _usd(held_open_usd(mb, longest) * 1e6)]
            if longest
            else ["the turn's", "—"]
        )
        lines.append(f"| {what} | {function} ({mb} MB) | " + " | ".join([*cells, *tail]) + " |")
    hour = {
        name: memory[name] / 1024 * 3600 * p["lambda_arm64_gb_second"]
        for name in ("StreamFunction", "GetTaskFunction", "SendMessageFunction")
    }
    lines += [
        "",
        "One request held open for an hour: "
        + ", ".join(f"{name} {_usd(usd)}" for name, usd in hour.items())
        + ". The longest column is what the template allows (`STREAM_MAX_SECONDS`, "
        "`BlockingMaxWaitSeconds`): Lambda does not stop a streaming function when its client "
        "disconnects, so a subscription nobody reads any more may be billed until its task "
        "settles or that limit.",
        "",
        "**The stack's other lines**, at the template's defaults (per month unless said):",
        "",
        "| line | at the defaults | otherwise |",
        "|---|---|---|",
    ]

    def other(feature: str, text: str) -> str:
        options = _option_parameters(template, feature)
        if not options:
            return text
        return ", ".join(f"`{k}={v}`" for k, v in options.items()) + ": " + text

    traces = xray_traces_per_second(10) * 86400 * 30
    xray_price = f"{_usd(p['xray_trace_recorded'] * 1e6)} per 1M traces recorded"
    xray_example = (
        f"the default sampling (1 request/s + 5 %) records {traces / 1e6:.1f}M traces a "
        f"30-day month at a steady 10 requests/s: {_usd(traces * p['xray_trace_recorded'])}"
    )

    def on_off(line: str, feature: str, cost: str, on_note: str = "") -> str:
        """A row for a feature that is on or off: its cost now, and the other way."""
        on, off = f"on: {cost}", "off: $0"
        now, then = (on + on_note, off) if f[feature] else (off, on)
        return f"| {line} | {now} | {other(feature, then)} |"

    lines.append(on_off("X-Ray tracing", "tracing", f"{xray_price}; {xray_example}"))
    pitr = f"{_usd(p['dynamodb_pitr_gb_month'])} per GB of the table"
    lines.append(on_off("DynamoDB point-in-time recovery", "pitr", pitr))
    kms_requests = f"{_usd(p['kms_request'] * 10_000)} per 10,000 KMS requests"
    keys = {
        "aws-owned": "AWS owned key: $0",
        "aws-managed": f"AWS managed key (aws/dynamodb): no key charge, {kms_requests}",
        "customer-managed": f"customer managed key: {_usd(p['kms_key_month'])} + {kms_requests}",
    }
    other_key = "aws-managed" if f["table_key"] == "aws-owned" else "aws-owned"
    lines.append(
        f"| the table's encryption key | {keys[f['table_key']]} | "
        + other("table_key", keys[other_key])
        + " |"
    )
    signing = (
        f"a customer managed signing key: {_usd(p['kms_key_month'])} + its `kms:Sign` and "
        "`kms:GetPublicKey` requests (asymmetric: see AWS KMS pricing)"
    )
    lines.append(
        "| Agent Card signing | "
        + (signing if f["card_signing"] else "off: $0")
        + " | "
        + (
            "`CardSigningKeyArn` empty: $0"
            if f["card_signing"]
            else f"`CardSigningKeyArn` set: {signing}"
        )
        + " |"
    )
    alarm = p["cloudwatch_alarm_month"]
    options = _option_parameters(template, "alarms")
    alternatives = [
        f"`{k}={v}`: {n} alarms, {_usd(n * alarm)}"
        for k, v in options.items()
        for n in [stack_features(template, {k: v})["alarms"]]
    ]
    lines.append(
        f"| CloudWatch alarms ({_usd(alarm)} each) | {f['alarms']} alarms: "
        f"{_usd(f['alarms'] * alarm)} | " + ("; ".join(alternatives) or "—") + " |"
    )
    access = (
        f"{ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES} bytes per request: "
        + _usd(
            (ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES)
            * p["cloudwatch_logs_ingested_byte"]
            * 1e6
        )
        + " per 1M requests"
    )
    lines.append(on_off("API access log", "access_log", access, " (in the measured logs line)"))
    lines.append(
        "| CloudWatch Logs ingestion | "
        f"{_usd(p['cloudwatch_logs_ingested_byte'] * 1024**3)} per GB: a blocking send's "
        "lines are measured above (`cloudwatch_logs`); a stream's are not measured | — |"
    )
    lines += ["", COST_STACK_END]
    return "\n".join(lines)


# -- cold start --------------------------------------------------------------------------------

# The sample event each function's first request is made with (events/). SendMessage's is sent
# non-blocking (nothing runs the turn on the moto server); StreamFunction's is its cancel route
# (a plain JSON answer).
COLD_START_EVENTS = {
    "AuthorizerFunction": "authorizer_request.json",
    "AgentCardFunction": "agent_card.json",
    "SendMessageFunction": "send_message.json",
    "GetTaskFunction": "get_task.json",
    "ListTasksFunction": "list_tasks.json",
    "StreamFunction": "cancel_task.json",
    "PushConfigFunction": "push_config_list.json",
    "DelegationReceiverFunction": "delegation_notification.json",
    "FlowWorkerFunction": "flow_worker_step.json",
    "WebhookSenderFunction": "webhook_stream_batch.json",
}

_PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
c0 = time.process_time()
spec = json.loads(sys.argv[1])
if spec["kind"] == "baseline":
    import boto3
    client = boto3.client("dynamodb")
    t1 = time.perf_counter()
    client.get_item(TableName=spec["table"], Key={"pk": {"S": "none"}, "sk": {"S": "none"}})
    t2 = time.perf_counter()
    cpu = time.process_time() - c0
    print(json.dumps({"import_s": t1 - t0, "first_s": t2 - t1, "cpu_s": cpu, "status": 200}))
    sys.exit(0)
sys.path.insert(0, spec["code_dir"])
import app
t1 = time.perf_counter()
event = json.loads(open(spec["event"]).read())
status = None
class Context:
    function_name = spec["name"]
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + spec["name"]
    memory_limit_in_mb = 512
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    log_group_name = "/aws/lambda/" + spec["name"]
    log_stream_name = "bench"
    def get_remaining_time_in_millis(self):
        return 60000
try:
    result = app.handler(event, Context())
    status = result.get("statusCode", 200) if isinstance(result, dict) else 200
except Exception as exc:  # the authorizer's "Unauthorized" is one (API Gateway's 401)
    status = f"{type(exc).__name__}: {exc}"[:80]
t2 = time.perf_counter()
cpu = time.process_time() - c0
print(json.dumps({"import_s": t1 - t0, "first_s": t2 - t1, "cpu_s": cpu, "status": status}))
"""


def _cold_start_resources(endpoint: str, stack: Any) -> None:
    """The table, queues and state machine the functions name, on the moto server."""
    import boto3

    from a2a_serverless.local.stack import REGION

    def client(service: str) -> Any:
        return boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        ).client(service, endpoint_url=endpoint)  # type: ignore[call-overload]  # any service

    client("dynamodb").create_table(**stack.table_request())
    sqs = client("sqs")
    for url in stack.queues.values():
        name = url.rsplit("/", 1)[-1]
        attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
        sqs.create_queue(QueueName=name, Attributes=attributes)
    arn = stack.env.get("STATE_MACHINE_ARN")
    if arn:
        client("stepfunctions").create_state_machine(
            name=arn.rsplit(":", 1)[-1],
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
            roleArn="arn:aws:iam::123456789012:role/bench",
        )


# What a user would write instead of a function: a minimal FastAPI app doing one DynamoDB
# GetItem per request, under Mangum (a buffered function) or under uvicorn as run.sh starts it
# (a Web Adapter function). Probed with events/get_task.json.
PEER_APP = """
import os

import boto3
from fastapi import FastAPI
{mangum_import}
app = FastAPI()
dynamodb = boto3.client("dynamodb")


@app.get("/tasks/{{task_id}}")
def get_task(task_id: str) -> dict:
    key = {{"pk": {{"S": task_id}}, "sk": {{"S": "task"}}}}
    item = dynamodb.get_item(TableName=os.environ["TABLE_NAME"], Key=key)
    return {{"found": "Item" in item}}
{mangum_handler}"""
PEER_EVENT = "get_task.json"
# The run.sh every Web Adapter function has (tests/template/test_functions.py).
RUN_SH = ROOT / "functions" / "get_task" / "run.sh"


def _write_peers(folder: Path) -> dict[str, Path]:
    """The two peers' code folders: "mangum" (app.py with `handler`) and "uvicorn"."""
    peers = {
        "mangum": PEER_APP.format(
            mangum_import="from mangum import Mangum\n",
            mangum_handler='\nhandler = Mangum(app, lifespan="off")\n',
        ),
        "uvicorn": PEER_APP.format(mangum_import="", mangum_handler=""),
    }
    dirs = {}
    for name, text in peers.items():
        (folder / name).mkdir()
        (folder / name / "app.py").write_text(text)
        dirs[name] = folder / name
    return dirs


def _http_request(event: dict[str, Any]) -> bytes:
    """The API Gateway event as the Web Adapter sends it: its headers, API Gateway's request
    context as a header, the path, query and body."""
    headers = {k: v[-1] for k, v in (event.get("multiValueHeaders") or {}).items()}
    headers.update(event.get("headers") or {})
    headers = {k: str(v) for k, v in headers.items() if k.lower() not in ("host", "content-length")}
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    body = (event.get("body") or "").encode()
    query = "&".join(f"{k}={v}" for k, v in (event.get("queryStringParameters") or {}).items())
    target = event["path"] + (f"?{query}" if query else "")
    head = f"{event['httpMethod']} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve_probe(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """run.sh in the code folder, from the process start until it listens (`import_s`: uvicorn
    imports the app before it binds) and until the first request is answered (`first_s`)."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = int(free.getsockname()[1])
    request = _http_request(json.loads(Path(spec["event"]).read_text()))
    # run.sh execs `python`: this interpreter.
    path = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env = {**env, "PORT": str(port), "PATH": path, "A2A_BENCH_PROBE": spec["name"]}
    with tempfile.TemporaryFile() as output:
        t0 = time.perf_counter()
        process = subprocess.Popen(
            ["sh", str(RUN_SH)], cwd=spec["code_dir"], env=env, stdout=output, stderr=output
        )
        try:
            while True:
                if process.poll() is not None:
                    output.seek(0)
                    raise RuntimeError(f"run.sh exited: {output.read().decode()[-2000:]}")
                try:
                    connection = socket.create_connection(("127.0.0.1", port), timeout=60)
                    break
                except OSError:
                    time.sleep(0.002)
            t1 = time.perf_counter()
            with connection:
                connection.sendall(request)
                answer = b""
                while b"\r\n" not in answer:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            t2 = time.perf_counter()
            cpu = _cpu_seconds(process.pid)
        finally:
            process.terminate()
            process.wait(timeout=30)
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else None
    return {"import_s": t1 - t0, "first_s": t2 - t1, "cpu_s": cpu, "status": status}


def _probe(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    if spec["kind"] == "web":
        return _serve_probe(spec, env)
    env = {**env, "A2A_BENCH_PROBE": spec.get("name", spec["kind"])}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# What Lambda's python3.13 runtime brings precompiled and the layer does not: nothing now (the
# layer has its own boto3 and botocore, first on sys.path).
RUNTIME_ONLY_PACKAGES: tuple[str, ...] = ()
BYTECODE_PROBE_FUNCTION = "ListTasksFunction"


def _compile_the_package() -> None:
    """Bytecode for the package, as the layer ships it (shared/Makefile compiles the layer): the
    probes run with PYTHONDONTWRITEBYTECODE, so without this any module edited since its last
    .pyc would be compiled at every probe. Timestamp-checked, as Python itself writes them: an
    unchecked .pyc in the dev tree would hide later edits."""
    import compileall

    compileall.compile_dir(ROOT / "shared" / "a2a_serverless", quiet=1, workers=0)


def _import_without_bytecode(spec: dict[str, Any], env: dict[str, str], repeats: int) -> float:
    """The probe's import time when the layer's modules have no bytecode, as a layer built
    without a Python 3.13 (or with `--no-compile` and no compile step) runs on Lambda: /opt is
    read-only, so Python compiles them from source at every cold start. The standard library
    and the runtime's own packages keep theirs (precompiled on Lambda). Done with a pycache
    prefix: one run writes every imported module's .pyc there, then all but the standard
    library's and RUNTIME_ONLY_PACKAGES' are deleted, and the probe runs again without writing
    (PYTHONDONTWRITEBYTECODE), finding only those."""
    import sysconfig

    # Not sysconfig's platstdlib: in a venv it is the venv's lib/, site-packages and all.
    stdlib = os.path.dirname(os.__file__)
    purelib = sysconfig.get_paths()["purelib"]
    with tempfile.TemporaryDirectory() as prefix:

        def mirrored(path: str) -> Path:
            return Path(prefix) / path.lstrip(os.sep)  # how Python lays a prefix out

        keep = [mirrored(stdlib)]
        keep += [mirrored(os.path.join(purelib, name)) for name in RUNTIME_ONLY_PACKAGES]
        writing = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        _probe(spec, {**writing, "PYTHONPYCACHEPREFIX": prefix})
        for pyc in Path(prefix).rglob("*.pyc"):
            if not any(pyc.is_relative_to(k) for k in keep):
                pyc.unlink()
        assert any(Path(prefix).rglob("*.pyc")), "the standard library's bytecode is gone"
        runs = [_probe(spec, {**env, "PYTHONPYCACHEPREFIX": prefix}) for _ in range(repeats)]
    return round(statistics.median(r["import_s"] for r in runs) * 1000, 1)


def cold_start(
    repeats: int = 7, flow: str | None = None, flow_path: Path | None = None
) -> dict[str, Any]:
    """Import plus first request of every function of the template, each in a fresh
    interpreter talking to a moto server, against `import boto3; boto3.client('dynamodb')` plus
    one GetItem in the same conditions (the median ratio over `repeats` pairs). The package has
    bytecode, as the built layer has; `import_without_bytecode_ms` is one function's import
    without it for the layer's modules (what a layer built without a Python 3.13 costs).
    `peer_ratio`: the same against the FastAPI peer of the function's kind (PEER_APP: under
    Mangum for buffered functions and plain handlers; as run.sh starts it, from the process
    start to the first answer, for the Web Adapter functions, which are probed that way too).

    `flow` (FLOW, `module:attribute`, importable from `flow_path`) measures the functions with
    a flow of your own instead of the default one: what your agent's imports add to each."""
    from moto.server import ThreadedMotoServer

    from a2a_serverless.local.stack import LocalStack, endpoint_env

    # The functions' settings and resource names, as the local stack computes them.
    with LocalStack(event_sources=False) as stack:
        specs = dict(stack.functions)
        stack_env = dict(stack.env)
    _compile_the_package()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    peers_folder = tempfile.mkdtemp(prefix="bench-peers-")
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        _cold_start_resources(endpoint, stack)
        base = {
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT / "shared"),
            "PYTHONDONTWRITEBYTECODE": "1",
            **endpoint_env(endpoint),
        }

        # Each function's probe is paired with a baseline probe run just before it, and the
        # ratio taken per pair: the machine's load drifts over a run, a pair shares it.
        baseline_spec = {"kind": "baseline", "table": stack_env["TABLE_NAME"]}
        baseline_env = {**base, **stack_env}
        probes: dict[str, tuple[dict[str, Any], dict[str, str]]] = {}
        rows: dict[str, dict[str, Any]] = {}
        # The FastAPI peers, each probe paired with the peer of its kind run just before it.
        peer_dirs = _write_peers(Path(peers_folder))
        peer_env = {**base, "TABLE_NAME": stack_env["TABLE_NAME"]}
        peer_probes = {
            kind: (
                {
                    "kind": kind,
                    "code_dir": str(peer_dirs["uvicorn" if kind == "web" else "mangum"]),
                    "event": str(ROOT / "events" / PEER_EVENT),
                    "name": f"fastapi-peer-{kind}",
                },
                peer_env,
            )
            for kind in ("web", "handler")
        }
        for logical_id, spec in specs.items():
            sample = COLD_START_EVENTS.get(logical_id)
            if sample is None:
                rows[logical_id] = {"error": "no sample event in COLD_START_EVENTS"}
                continue
            event_path = ROOT / "events" / sample
            if logical_id == "SendMessageFunction":
                event = json.loads(event_path.read_text())
                body = json.loads(event["body"])
                body["configuration"]["returnImmediately"] = True
                event["body"] = json.dumps(body)
                handle, name = tempfile.mkstemp(suffix=".json")
                os.write(handle, json.dumps(event).encode())
                os.close(handle)
                event_path = Path(name)
            env = {**base, **stack_env, **spec.env}
            if flow:
                env["FLOW"] = flow
                if flow_path is not None:
                    env["PYTHONPATH"] += os.pathsep + str(flow_path)
            if logical_id == "AuthorizerFunction":
                env["AUTH_MODE"] = "ApiKey"  # its deployed use: a key looked up in the table
            probes[logical_id] = (
                {
                    "kind": "web" if spec.is_web_adapter else "handler",
                    "code_dir": str(spec.code_dir),
                    "event": str(event_path),
                    "name": logical_id,
                },
                env,
            )
        if flow:
            # Bytecode for the flow's modules and what they import (their packages' too, in a
            # venv that never imported them), as a built layer would have it: one unmeasured
            # init of each function that writes it.
            for spec_, env in probes.values():
                writing = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
                _probe(spec_, writing)
        runs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
        peer_runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for _ in range(repeats):
            for logical_id, (spec_, env) in probes.items():
                base_run = _probe(baseline_spec, baseline_env)
                peer_runs[logical_id].append(_probe(*peer_probes[spec_["kind"]]))
                runs[logical_id].append((_probe(spec_, env), base_run))

        def ms(values: Iterator[float]) -> float:
            return round(statistics.median(values) * 1000, 1)

        all_baselines = [b for pairs in runs.values() for _, b in pairs]
        baseline = {
            "import_ms": ms(b["import_s"] for b in all_baselines),
            "first_request_ms": ms(b["first_s"] for b in all_baselines),
            "total_ms": ms(b["import_s"] + b["first_s"] for b in all_baselines),
            "cpu_ms": ms(b["cpu_s"] for b in all_baselines),
            "runs": len(all_baselines),
        }
        for logical_id, pairs in runs.items():
            rows[logical_id] = {
                "import_ms": ms(r["import_s"] for r, _ in pairs),
                "first_request_ms": ms(r["first_s"] for r, _ in pairs),
                "total_ms": ms(r["import_s"] + r["first_s"] for r, _ in pairs),
                "status": pairs[-1][0]["status"],
                "ratio": round(
                    statistics.median(
                        (r["import_s"] + r["first_s"]) / (b["import_s"] + b["first_s"])
                        for r, b in pairs
                    ),
                    2,
                ),
                # The same on CPU time (user + system of the probe, from the same start to
                # the same end): wall time on a shared machine moves with the other
                # processes' load (the same code measured 1.45 and 1.96 in two runs); CPU
                # time much less (+-0.1). Wall time stays the figure: Lambda bills it.
                "cpu_ms": ms(r["cpu_s"] for r, _ in pairs),
                "cpu_ratio": round(statistics.median(r["cpu_s"] / b["cpu_s"] for r, b in pairs), 2),
                # Against what a user would write instead (FastAPI, one GetItem; Mangum or
                # uvicorn as this function is served), paired the same way.
                "peer_ratio": round(
                    statistics.median(
                        (r["import_s"] + r["first_s"]) / (p["import_s"] + p["first_s"])
                        for (r, _), p in zip(pairs, peer_runs[logical_id], strict=True)
                    ),
                    2,
                ),
                "peer_cpu_ratio": round(
                    statistics.median(
                        r["cpu_s"] / p["cpu_s"]
                        for (r, _), p in zip(pairs, peer_runs[logical_id], strict=True)
                    ),
                    2,
                ),
            }
        peers = {}
        for kind, name in (("handler", "fastapi_mangum"), ("web", "fastapi_uvicorn")):
            measured = [
                p
                for logical_id, ps in peer_runs.items()
                for p in ps
                if probes[logical_id][0]["kind"] == kind
            ]
            if measured:
                peers[name] = {
                    "total_ms": ms(p["import_s"] + p["first_s"] for p in measured),
                    "cpu_ms": ms(p["cpu_s"] for p in measured),
                    "status": measured[-1]["status"],
                    "runs": len(measured),
                }
        # One function's import again, its layer modules without bytecode (what shipping it
        # saves at each cold start; compare with its import_ms above).
        without = {}
        if BYTECODE_PROBE_FUNCTION in probes:
            spec_, env = probes[BYTECODE_PROBE_FUNCTION]
            without[BYTECODE_PROBE_FUNCTION] = _import_without_bytecode(spec_, env, repeats)
    finally:
        server.stop()
        shutil.rmtree(peers_folder, ignore_errors=True)
    return {
        "flow": flow or stack_env.get("FLOW"),
        "baseline_boto3_client_and_call": baseline,
        "fastapi_peers": peers,
        "functions": rows,
        "import_without_bytecode_ms": without,
    }


# -- the local stack's speed (scripts/bench_local.py) -----------------------------------------

LOCAL_KEYS = (
    "local_tasks_per_second",
    "local_throughput_ratio_5000_stored",
    "blocking_send_p50_ms",
    "stream_p95_ms_8_streams",
    "sdk_inmemory_tasks_per_second",
    "ratio_vs_sdk_inmemory",
    "list_p50_ms_5000_stored",
    "list_filtered_p50_ms_5000_stored",
    "list_client_context_p50_ms_5000_stored",
    "list_since_p50_ms_5000_stored",
)


def _bench_local() -> Any:
    """scripts/bench_local.py as the module `bench_local` (the name its flow is loaded by:
    `Flow=bench_local:BENCH_FLOW`), loaded once."""
    if "bench_local" in sys.modules:
        return sys.modules["bench_local"]
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_local", ROOT / "scripts" / "bench_local.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: its dataclasses look their module up in sys.modules.
    sys.modules["bench_local"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["bench_local"]
        raise
    return module


def local_phase(quick: bool) -> dict[str, Any]:
    """scripts/bench_local.py's figures; None each while it is absent or fails."""
    path = ROOT / "scripts" / "bench_local.py"
    empty: dict[str, Any] = dict.fromkeys(LOCAL_KEYS)
    if not path.exists():
        return {**empty, "local_error": "scripts/bench_local.py is not there"}
    try:
        module = _bench_local()
        with module.functions_quiet():  # timed, not counted: no INFO lines or metric blobs
            figures = module.local_figures(clients=8, stored=5000, quick=quick)
    except Exception as exc:  # a figure missing must not lose the others
        return {**empty, "local_error": f"{type(exc).__name__}: {exc}"}
    return {**empty, **{k: figures.get(k) for k in LOCAL_KEYS}}


# -- files: the round trip's speed, and what a task with files costs ---------------------------

FILE_KEYS = ("file_roundtrip_mb_per_s", "file_baseline_s3_mb_per_s", "file_roundtrip_ratio_to_s3")
BENCH_FLOW = "bench_local:BENCH_FLOW"
CONVERSATION_TURNS = 200
# A turn of the conversation: about 100 KB of text, kept for the next turn ([input]).
CONVERSATION_TEXT = "[input] " + "lorem ipsum " * 8_534


def files_phase(quick: bool) -> dict[str, Any]:
    """bench_local's file round trip (its figures None if it fails), then the units and $ of
    a task with files on the default workflow (EXPRESS): one blocking send of a FILE_IN_BYTES
    file to the bench flow, which reads it and emits a FILE_OUT_BYTES file artifact, which the
    client downloads once (priced, not made: one GET and its bytes out); and one turn of a
    conversation of 100 KB messages on the echo flow, times CONVERSATION_TURNS."""
    local = _bench_local()
    figures: dict[str, Any] = dict.fromkeys(FILE_KEYS)
    try:
        with local.functions_quiet():
            figures.update(local.file_figures(runs=2 if quick else local.FILE_RUNS))
    except Exception as exc:  # a figure missing must not lose the others
        figures["file_error"] = f"{type(exc).__name__}: {exc}"
    image = local.file_in(local.FILE_IN_BYTES)
    task = measure_units("EXPRESS", text=str(local.FILE_OUT_BYTES), files=[image], flow=BENCH_FLOW)
    task["downloads"] = {"requests": 1, "bytes": local.FILE_OUT_BYTES}
    turn = measure_units("EXPRESS", text=CONVERSATION_TEXT)
    turn_usd = price(turn, "EXPRESS")
    figures["file_task"] = {
        "in_bytes": local.FILE_IN_BYTES,
        "out_bytes": local.FILE_OUT_BYTES,
        "s3_requests_by_class": s3_request_classes(task["s3_requests"]),
        "usd_per_million_tasks": price(task, "EXPRESS"),
        "units": task,
    }
    figures["conversation"] = {
        "turns": CONVERSATION_TURNS,
        "message_bytes": len(CONVERSATION_TEXT.encode()),
        "s3_requests_by_class_per_turn": s3_request_classes(turn["s3_requests"]),
        "s3_stored_bytes_per_turn": turn["s3_stored_bytes"],
        "usd_s3_per_conversation": round(CONVERSATION_TURNS * turn_usd["s3"] / 1e6, 6),
        "usd_per_conversation": round(CONVERSATION_TURNS * turn_usd["total"] / 1e6, 6),
        "usd_per_million_turns": turn_usd,
        "units_per_turn": turn,
    }
    return figures


# -- SSE latency page ------------------------------------------------------------------------

LATENCY_TEST = "tests/e2e/test_streaming.py::test_event_latency_emit_to_receive"
LATENCY_DOC = ROOT / "docs" / "stream-latency.md"


def write_latency_doc() -> int:
    """Run the e2e latency test with its page pointed at docs/ (its exit code)."""
    env = {**os.environ, "A2A_STREAM_LATENCY_DOC": str(LATENCY_DOC)}
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", LATENCY_TEST]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


# -- report ------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _meets(value: Any, target: tuple[str, float]) -> str:
    if value is None:
        return "?"
    op, bound = target
    return "ok" if (value <= bound if op == "<=" else value >= bound) else "MISSED"


def headline(report: dict[str, Any]) -> list[tuple[str, Any, tuple[str, float]]]:
    usd = report.get("usd_per_million_tasks") or {}
    ratios = report.get("cold_start_ratio") or {}
    worst = max(ratios.values()) if ratios else None
    peer = report.get("cold_start_ratio_to_fastapi_peer") or {}
    values = {
        "wru_per_task": report.get("wru_per_task"),
        "large_task_wru_over_text": report.get("large_task_wru_over_text"),
        "sfn_transitions_per_turn": report.get("sfn_transitions_per_turn"),
        "usd_per_million_tasks.EXPRESS": usd.get("EXPRESS"),
        "usd_per_million_tasks.STANDARD": usd.get("STANDARD"),
        "cold_start_ratio (worst)": worst,
        "cold_start_ratio_to_fastapi_peer (worst)": max(peer.values()) if peer else None,
        "local_tasks_per_second": report.get("local_tasks_per_second"),
        "local_throughput_ratio_5000_stored": report.get("local_throughput_ratio_5000_stored"),
        "stream_p95_ms_8_streams": report.get("stream_p95_ms_8_streams"),
        "blocking_send_p50_ms": report.get("blocking_send_p50_ms"),
    }
    return [(name, values[name], TARGETS[name]) for name in TARGETS]


def render_text(report: dict[str, Any]) -> str:
    lines = ["figures (measured | target)"]
    for name, value, target in headline(report):
        lines.append(
            f"  {name:<38} {_fmt(value):>10}   {target[0]} {target[1]:<6} {_meets(value, target)}"
        )
    listed = report.get("list_p50_ms_5000_stored")
    if listed is not None:
        filtered = report.get("list_filtered_p50_ms_5000_stored")
        lines.append(
            f"local ListTasks with 5,000 stored: p50 {_fmt(listed)} ms a page of 50, "
            f"{_fmt(filtered)} ms filtered (worst case: the filter's budget read), "
            f"{_fmt(report.get('list_client_context_p50_ms_5000_stored'))} ms by a context a "
            f"client named, "
            f"{_fmt(report.get('list_since_p50_ms_5000_stored'))} ms since a time before all"
        )
    if report.get("large_task_wru") is not None:
        lines.append(
            f"WRU of a task with a file: {report['large_task_wru']} against "
            f"{report['large_task_wru_text_only']} text only"
        )
    if report.get("file_roundtrip_mb_per_s") is not None:
        lines.append(
            f"file round trip: {_fmt(report['file_roundtrip_mb_per_s'])} MB/s, boto3 on moto S3 "
            f"{_fmt(report.get('file_baseline_s3_mb_per_s'))} MB/s in the same run "
            f"(ratio {_fmt(report.get('file_roundtrip_ratio_to_s3'))})"
        )
    file_task = report.get("file_task")
    if file_task:
        usd = file_task["usd_per_million_tasks"]
        lines.append(
            f"$ per 1M file tasks (EXPRESS): {usd['total']:.2f}, of which s3 {usd['s3']:.2f}, "
            f"data transfer out {usd['data_transfer_out']:.2f}"
        )
    conversation = report.get("conversation")
    if conversation:
        lines.append(
            f"a {conversation['turns']}-turn conversation of 100 KB messages: "
            f"${conversation['usd_per_conversation']:.4f}, of which S3 "
            f"${conversation['usd_s3_per_conversation']:.4f}"
        )
    breakdown = report.get("usd_breakdown_per_million_tasks") or {}
    if breakdown:
        services = list(next(iter(breakdown.values())))
        lines.append("$ per 1M single-turn echo tasks, by service")
        lines.append("  " + f"{'':<16}" + "".join(f"{w:>12}" for w in breakdown))
        for service in services:
            lines.append(
                "  "
                + f"{service:<16}"
                + "".join(f"{breakdown[w][service]:>12.2f}" for w in breakdown)
            )
    delegated = report.get("delegated_turn_usd")
    if delegated:
        waiting, poll = report["waiting_units"], report["poll_units"]
        lines.append(
            f"$ per 1M delegated turns (relay, push): STANDARD {delegated['STANDARD']:.2f}, "
            f"EXPRESS {delegated['EXPRESS']:.2f}; the wait: {waiting['lambda_invocations']} "
            f"Lambda invocations, {sum(waiting['dynamodb_calls'].values())} DynamoDB calls, "
            f"{waiting['state_transitions']} transitions; without push, "
            f"${poll['usd_per_million']:.2f} per 1M polls, {report['polls_first_hour']} polls "
            f"the first hour (${report['polled_hour_usd_per_million']:.2f} per 1M)"
        )
    ratios = report.get("cold_start_ratio") or {}
    if ratios:
        lines.append("cold start (import + first request) / (import boto3 + client + one call)")
        lines.append(f"  with FLOW={(report.get('cold_start') or {}).get('flow')}")
        rows = (report.get("cold_start") or {}).get("functions") or {}
        for name, ratio in ratios.items():
            row = rows.get(name, {})
            cpu = row.get("cpu_ratio")
            lines.append(
                f"  {name:<26} {ratio:>6.2f}x"
                + (f"  (CPU {cpu:.2f}x)" if cpu else "")
                + (
                    f"  FastAPI peer {row['peer_ratio']:.2f}x (CPU {row['peer_cpu_ratio']:.2f}x)"
                    if "peer_ratio" in row
                    else ""
                )
            )
    return "\n".join(lines)


def cost_table(report: dict[str, Any]) -> str:
    """The measured section of docs/cost.md."""
    units = report["units_per_task"]
    breakdown = report["usd_breakdown_per_million_tasks"]
    standard = units["STANDARD"]
    ddb = standard["dynamodb"]
    lines = [
        COST_DOC_BEGIN,
        "",
        f"Measured by `scripts/bench --cost-doc` on {date.today().isoformat()} "
        "(one blocking single-turn echo task, warm functions; handler times are the local "
        "stack's, see above).",
        "",
        "| unit per task | STANDARD | EXPRESS |",
        "|---|---|---|",
        f"| API Gateway requests | {standard['api_requests']} "
        f"| {units['EXPRESS']['api_requests']} |",
    ]
    for workflow_units in (standard,):
        for name, row in sorted(workflow_units["lambda"].items()):
            other = units["EXPRESS"]["lambda"].get(name, {"invocations": 0, "billed_ms": 0})
            lines.append(
                f"| {name} invocations (billed ms, {row['memory_mb']} MB) "
                f"| {row['invocations']} ({row['billed_ms']}) "
                f"| {other['invocations']} ({other['billed_ms']}) |"
            )
    express_ddb = units["EXPRESS"]["dynamodb"]
    calls = ", ".join(f"{n} {op}" for op, n in sorted(ddb["calls"].items()))
    lines += [
        f"| DynamoDB calls | {calls} | "
        + ", ".join(f"{n} {op}" for op, n in sorted(express_ddb["calls"].items()))
        + " |",
        f"| DynamoDB WRU: table | {ddb['wru_table']} | {express_ddb['wru_table']} |",
    ]
    for index in sorted(set(ddb["wru_indexes"]) | set(express_ddb["wru_indexes"])):
        lines.append(
            f"| DynamoDB WRU: index {index} | {ddb['wru_indexes'].get(index, 0)} "
            f"| {express_ddb['wru_indexes'].get(index, 0)} |"
        )
    lines += [
        f"| **DynamoDB WRU, total** | **{ddb['wru']}** | **{express_ddb['wru']}** |",
        f"| DynamoDB RRU | {ddb['rru']:g} | {express_ddb['rru']:g} |",
        f"| Step Functions executions | {standard['stepfunctions']['executions']} "
        f"| {units['EXPRESS']['stepfunctions']['executions']} |",
        f"| Step Functions state transitions | {standard['stepfunctions']['state_transitions']} "
        f"| (not billed) |",
        f"| Step Functions Express GB-s | (not billed) "
        f"| {units['EXPRESS']['stepfunctions']['express_gb_seconds']:.4f} |",
        f"| SQS requests | {sum(standard['sqs_requests'].values())} "
        f"| {sum(units['EXPRESS']['sqs_requests'].values())} |",
        f"| S3 requests | {sum(standard.get('s3_requests', {}).values())} "
        f"| {sum(units['EXPRESS'].get('s3_requests', {}).values())} |",
        f"| CloudWatch Logs bytes | {standard['log_bytes']} | {units['EXPRESS']['log_bytes']} |",
        "",
        "| $ per 1M tasks | STANDARD | EXPRESS |",
        "|---|---|---|",
    ]
    for service in breakdown["STANDARD"]:
        bold = "**" if service == "total" else ""
        lines.append(
            f"| {bold}{service}{bold} | {bold}{breakdown['STANDARD'][service]:.2f}{bold} "
            f"| {bold}{breakdown['EXPRESS'][service]:.2f}{bold} |"
        )
    cold = report.get("cold_start")
    if cold:
        base = cold["baseline_boto3_client_and_call"]
        lines += [
            "",
            "Cold start, each function in a fresh interpreter against a moto server: import "
            "plus the first request on its `events/` sample (Web Adapter functions: uvicorn "
            "as run.sh starts it, from the process start to the first answer), as a ratio to "
            "`import boto3; boto3.client('dynamodb')` plus one `GetItem` "
            f"({base['total_ms']:.0f} ms in this run; the median ratio of runs paired with it). "
            "The CPU ratio is the same on the probes' CPU time (user + system, "
            f"{base.get('cpu_ms', 0):.0f} ms for the baseline): on a shared machine it moves far "
            "less with the other processes' load than the wall-time ratio does.",
            "",
            "| function | import ms | first request ms | ratio | CPU ratio |",
            "|---|---|---|---|---|",
        ]
        for name, row in cold["functions"].items():
            if "ratio" in row:
                cpu = row.get("cpu_ratio")
                lines.append(
                    f"| {name} | {row['import_ms']:.0f} | {row['first_request_ms']:.0f} "
                    f"| {row['ratio']:.2f} | {'' if cpu is None else f'{cpu:.2f}'} |"
                )
    lines += ["", COST_DOC_END]
    return "\n".join(lines)


COST_DELEGATION_BEGIN = (
    "<!-- bench:delegation:begin (scripts/bench --cost-doc rewrites this section) -->"
)
COST_DELEGATION_END = "<!-- bench:delegation:end -->"


def _calls(calls: dict[str, int]) -> str:
    return ", ".join(f"{n} {op}" for op, n in sorted(calls.items())) or "0"


def delegation_table(report: dict[str, Any]) -> str:
    """docs/cost.md's measured part of "Delegation"."""
    turns = report["delegated_turn_units"]
    columns = [
        turns["STANDARD"],
        turns["EXPRESS"],
        turns["STANDARD"]["waiting"],
        report["polled_turn_units"]["waiting"],
    ]
    usd = report["delegated_turn_usd_breakdown"]
    echo = report["echo_nonblocking_usd_breakdown"]
    waiting, poll = report["waiting_units"], report["poll_units"]

    def row(label: str, cells: list[Any]) -> str:
        return f"| {label} | " + " | ".join(str(c) for c in cells) + " |"

    lines = [
        COST_DELEGATION_BEGIN,
        "",
        f"Measured by `scripts/bench --cost-doc` (or `--delegation-doc`) on "
        f"{date.today().isoformat()} (warm "
        "functions; handler times are the local stack's, see above). The wait was read over "
        f"{waiting['seconds']:g} s of real time: the meters count calls, not time.",
        "",
        "| unit | delegated turn, STANDARD | delegated turn, EXPRESS | the wait (push) "
        "| one poll (no push) |",
        "|---|---|---|---|---|",
        row("API Gateway requests", [c["api_requests"] for c in columns]),
    ]
    names = sorted({name for c in columns for name in c["lambda"]})
    for name in names:
        memory = next(c["lambda"][name]["memory_mb"] for c in columns if name in c["lambda"])
        cells = []
        for c in columns:
            one = c["lambda"].get(name, {"invocations": 0, "billed_ms": 0})
            cells.append(f"{one['invocations']} ({one['billed_ms']})")
        lines.append(row(f"{name} invocations (billed ms, {memory} MB)", cells))
    lines += [
        row("DynamoDB calls", [_calls(c["dynamodb"]["calls"]) for c in columns]),
        row(
            "**DynamoDB WRU** (index writes included)",
            [f"**{c['dynamodb']['wru']}**" for c in columns],
        ),
        row("DynamoDB RRU", [f"{c['dynamodb']['rru']:g}" for c in columns]),
        row(
            "flow state machine: executions, state transitions",
            [
                f"{c['stepfunctions']['executions']}, {c['stepfunctions']['state_transitions']}"
                + (" (not billed)" if i == 1 else "")
                for i, c in enumerate(columns)
            ],
        ),
        row(
            "flow state machine: Express GB-s",
            ["(not billed)", f"{columns[1]['stepfunctions']['express_gb_seconds']:.4f}", "—", "—"],
        ),
        row(
            "timer (STANDARD): state transitions",
            [c["timer"]["state_transitions"] for c in columns],
        ),
        row("CloudWatch Logs bytes", [c["log_bytes"] for c in columns]),
        "",
        "| $ per 1M | delegated turn, STANDARD | delegated turn, EXPRESS "
        "| echo task (non-blocking), STANDARD | echo task (non-blocking), EXPRESS |",
        "|---|---|---|---|---|",
    ]
    for service in usd["STANDARD"]:
        if service in ("s3", "data_transfer_out") and not any(
            table[w].get(service) for table in (usd, echo) for w in WORKFLOWS
        ):
            continue
        bold = "**" if service == "total" else ""
        cells = [
            f"{bold}{table[w].get(service, 0):.2f}{bold}"
            for table in (usd, echo)
            for w in WORKFLOWS
        ]
        lines.append(row(f"{bold}{service}{bold}", cells))
    offsets = poll_offsets(3600)
    from a2a_serverless.core.delegation import MAX_POLL_SECONDS

    doubling = [at for i, at in enumerate(offsets) if 2 ** (i + 1) < MAX_POLL_SECONDS]
    standard, express = usd["STANDARD"]["total"], usd["EXPRESS"]["total"]
    timer = usd["STANDARD"]["stepfunctions_timer"]
    lines += [
        "",
        f"**A delegated turn** costs {_usd(standard)} per 1M turns on STANDARD and "
        f"{_usd(express)} on EXPRESS, against {_usd(echo['STANDARD']['total'])} and "
        f"{_usd(echo['EXPRESS']['total'])} for a non-blocking echo task measured in the same "
        "run. What it adds: a second flow step (the woken one: a FlowWorker invocation and a "
        "flow execution), the two notifications (two API requests, two receiver invocations), "
        f"the round in DynamoDB ({turns['STANDARD']['dynamodb']['wru']} WRU against the echo's "
        f"{report['echo_nonblocking_wru']}: the round's record, its send, the remote's "
        "statuses, the artifact seen, the wait's end), a second stream batch for the webhook "
        f"sender, and the timer's one STANDARD transition ({_usd(timer)} on either workflow).",
        "",
        "**An hour of waiting** runs nothing: between the end of the delegating step and the "
        f"first notification, {waiting['api_requests']} API requests, "
        f"{waiting['lambda_invocations']} Lambda invocations, "
        f"{sum(waiting['dynamodb_calls'].values())} DynamoDB calls, "
        f"{waiting['state_transitions']} state transitions and {waiting['log_bytes']} log "
        "bytes. The timer's Wait was entered once, when the step started it (its transition "
        "is the turn's); a STANDARD execution is billed per transition, not per second. What "
        f"the hour bills is storage: the round's item ({waiting['round_item_bytes']} bytes) "
        f"at ${PRICES['dynamodb_storage_gb_month']:.2f} per GB-month, "
        f"{_usd(waiting['storage_usd_per_million_hours'])} per 1M turns waiting an hour.",
        "",
        "**Without push** (the remote's card has no `pushNotifications`), the timer polls "
        + ", ".join(str(b - a) for a, b in zip([0, *doubling], doubling, strict=False))
        + f" s apart, then every {MAX_POLL_SECONDS} s: in the first t seconds "
        f"(t ≥ {doubling[-1]}), {len(doubling)} + ⌊(t - {doubling[-1]}) / {MAX_POLL_SECONDS}⌋ "
        f"polls, {len(offsets)} in the first hour, {3600 // MAX_POLL_SECONDS} in each hour "
        f"after. One poll is {poll['lambda_invocations']} FlowWorker invocation "
        f"({poll['lambda_billed_ms']} ms), {poll['state_transitions']} timer transitions "
        f"(Check, Again, Wait), {sum(poll['dynamodb_calls'].values())} DynamoDB calls "
        f"({poll['wru']} WRU, {poll['rru']:g} RRU): {_usd(poll['usd_per_million'])} per 1M "
        f"polls, so an hour of polling costs {_usd(report['polled_hour_usd_per_million'])} per "
        "1M waiting turns where push costs its storage only.",
        "",
        COST_DELEGATION_END,
    ]
    return "\n".join(lines)


def _replace_section(text: str, begin_marker: str, end_marker: str, section: str) -> str:
    begin, end = text.index(begin_marker), text.index(end_marker) + len(end_marker)
    return text[:begin] + section + text[end:]


def write_cost_doc(report: dict[str, Any] | None) -> None:
    """Rewrites docs/cost.md's measured section (given a report) and its template section."""
    from a2a_serverless.local.template import load_template

    text = COST_DOC.read_text()
    if report is not None and report.get("units_per_task"):
        text = _replace_section(text, COST_DOC_BEGIN, COST_DOC_END, cost_table(report))
    if report is not None and report.get("delegated_turn_units"):
        section = delegation_table(report)
        text = _replace_section(text, COST_DELEGATION_BEGIN, COST_DELEGATION_END, section)
    stack = stack_table(load_template(ROOT / "template.yaml"))
    COST_DOC.write_text(_replace_section(text, COST_STACK_BEGIN, COST_STACK_END, stack))


TOP_LEVEL_KEYS = (
    "wru_per_task",
    "large_task_wru",
    "file_roundtrip_mb_per_s",
    "usd_per_million_tasks",
    "sfn_transitions_per_turn",
    "cold_start_ratio",
    "cold_start_ratio_to_fastapi_peer",
    "local_tasks_per_second",
    "local_throughput_ratio_5000_stored",
    "stream_p95_ms_8_streams",
    "delegated_turn_usd",
    "waiting_units",
)
DELEGATION_KEYS = ("delegated_turn_usd", "waiting_units")


def build_report(
    cost: dict[str, Any],
    cold: dict[str, Any] | None = None,
    local: dict[str, Any] | None = None,
    files: dict[str, Any] | None = None,
    delegation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON report: the stable top-level keys (TOP_LEVEL_KEYS, None where not measured),
    then the details."""
    report: dict[str, Any] = {"large_task_wru": None, **cost}
    report.update({**dict.fromkeys(DELEGATION_KEYS), **(delegation or {})})
    report["cold_start_ratio"] = (
        {name: row["ratio"] for name, row in cold["functions"].items() if "ratio" in row}
        if cold
        else {}
    )
    report["cold_start_ratio_to_fastapi_peer"] = (
        {name: row["peer_ratio"] for name, row in cold["functions"].items() if "peer_ratio" in row}
        if cold
        else {}
    )
    if cold:
        report["cold_start"] = cold
    report.update({**dict.fromkeys(LOCAL_KEYS), **(local or {})})
    report.update({**dict.fromkeys(FILE_KEYS), **(files or {})})
    for key in TOP_LEVEL_KEYS:  # a phase that did not run (--delegation-doc: the cost one)
        report.setdefault(key, None)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--skip-cold-start", action="store_true")
    parser.add_argument(
        "--only-cold-start", action="store_true", help="the cold-start phase only (no units, $)"
    )
    parser.add_argument("--repeats", type=int, help="cold-start pairs per function (default 7)")
    parser.add_argument(
        "--flow",
        help="cold starts with this flow (FLOW, module:attribute) instead of the default one",
    )
    parser.add_argument(
        "--flow-path",
        type=Path,
        help="the folder --flow's module is imported from (default: the current one)",
    )
    parser.add_argument("--skip-local", action="store_true", help="no scripts/bench_local.py")
    parser.add_argument(
        "--skip-files", action="store_true", help="no file round trip, no file task's cost"
    )
    parser.add_argument(
        "--skip-delegation", action="store_true", help="no delegated turn (relay flow)"
    )
    parser.add_argument(
        "--delegation-doc",
        action="store_true",
        help=f"only measure the delegated turns and rewrite {COST_DOC}'s Delegation section",
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller runs")
    parser.add_argument("--cost-doc", action="store_true", help=f"rewrite tables in {COST_DOC}")
    parser.add_argument(
        "--stack-doc",
        action="store_true",
        help=f"only rewrite {COST_DOC}'s section read from template.yaml (measures nothing)",
    )
    parser.add_argument(
        "--write-docs", action="store_true", help=f"also measure and write {LATENCY_DOC}"
    )
    args = parser.parse_args()
    if args.stack_doc:
        write_cost_doc(None)
        return 0
    if args.delegation_doc:
        report = build_report({}, delegation=delegation_phase())
        print(render_text(report))
        if args.json:
            args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
        write_cost_doc(report)
        return 0
    if args.only_cold_start and (args.skip_cold_start or args.cost_doc):
        parser.error("--only-cold-start measures no units: not with --skip-cold-start/--cost-doc")
    if args.flow and not args.only_cold_start:
        parser.error("--flow measures cold starts only: add --only-cold-start")
    cost = {} if args.only_cold_start else cost_phase()
    # 7 pairs: a pair's ratio swings by +-0.15 with the machine's load (the same code gave
    # 1.32-1.63 in one run), and the median of 3 moved by as much from run to run.
    repeats = args.repeats or (1 if args.quick else 7)
    flow_path = (args.flow_path or Path(os.environ.get("A2A_BENCH_CWD", os.getcwd()))).resolve()
    cold = (
        None
        if args.skip_cold_start
        else cold_start(repeats=repeats, flow=args.flow, flow_path=flow_path)
    )
    local = None if args.skip_local or args.only_cold_start else local_phase(args.quick)
    files = None if args.skip_files or args.only_cold_start else files_phase(args.quick)
    skip_delegation = args.skip_delegation or args.only_cold_start
    delegation = None if skip_delegation else delegation_phase()
    report = build_report(cost, cold, local, files, delegation)
    print(render_text(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if args.cost_doc:
        write_cost_doc(report)
    if args.write_docs:
        return write_latency_doc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
