"""The per-task meter of a running local stack (local/meter.py `TaskMeter`).

- One echo task on a metered stack has the units scripts/bench counts for one task
  (`measure_units`): the same DynamoDB calls and units, invocations, API requests, state
  transitions and S3 requests. What legitimately differs: handler times (timed twice), and the
  log bytes, since the meter does not capture what the functions print (only Lambda's and API
  Gateway's own lines). Non-blocking sends: a blocking send polls the event log until the
  step ends, so its reads depend on timing.
- Two concurrent tasks are attributed apart: each has its own request, invocations and items
  (the webhook sender's shared batch split between them), and no unit is counted twice or lost
  (the sum over the tasks is the stack's total, which a plain `DynamoMeter` confirms).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import boto3
import httpx
import pytest

from a2a_serverless.local.meter import (
    LOG_EVENT_OVERHEAD_BYTES,
    DynamoMeter,
    TaskMeter,
    table_schema,
)
from a2a_serverless.local.stack import REGION, LocalStack
from tests.scripts import load_script

bench = load_script("bench.py", "scripts_bench", register=True)


def _send_all(stack: LocalStack, bodies: list[dict[str, Any]]) -> list[str]:
    """Each body sent at once through the gateway; the ids of the tasks, once every execution
    ended and the stream was delivered."""
    assert stack.event_sources is not None
    stream = stack.event_sources.by_name("WebhookSenderFunction.TaskEvents")
    sfn = stack._client("stepfunctions")

    async def run() -> list[str]:
        transport = httpx.ASGITransport(app=stack.gateway())
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as c:
            answers = await asyncio.gather(
                *(c.post("/message:send", json=body, headers=bench.HEADERS) for body in bodies)
            )
        assert all(a.status_code == 200 for a in answers), [a.text[:500] for a in answers]
        return [str(a.json()["task"]["id"]) for a in answers]

    ids = asyncio.run(run())
    bench._settle(sfn, stack.env["STATE_MACHINE_ARN"], stream)
    return ids


def test_metering_is_off_unless_asked() -> None:
    with LocalStack(event_sources=False) as stack:
        assert stack.meter is None


def test_one_task_has_the_units_the_bench_counts() -> None:
    # Non-blocking: a blocking send's reads of the event log depend on how long the step takes.
    counted = bench.measure_units("STANDARD", blocking=False)
    with LocalStack(meter=True, event_sources="manual") as stack:
        assert isinstance(stack.meter, TaskMeter)
        _send_all(stack, [bench._message("warm up", immediate=True)])  # as the bench warms up
        (task_id,) = _send_all(stack, [bench._message("units please", immediate=True)])
        units = stack.meter.units(task_id)
        prices = stack.meter.price(task_id, "STANDARD")
        assert stack.meter.unattributed == Counter()

    ddb, expected = units["dynamodb"], counted["dynamodb"]
    for key in ("calls", "wru", "wru_table", "wru_indexes", "rru"):
        assert ddb[key] == expected[key], key
    assert units["api_requests"] == counted["api_requests"] == 1
    invocations = {name: row["invocations"] for name, row in units["lambda"].items()}
    assert invocations == {name: row["invocations"] for name, row in counted["lambda"].items()}
    assert all(row["billed_ms"] >= 1 for row in units["lambda"].values())
    for key in ("executions", "state_transitions"):
        assert units["stepfunctions"][key] == counted["stepfunctions"][key]
    for key in ("sqs_requests", "s3_requests", "s3_stored_bytes", "retention_days"):
        assert units[key] == counted[key], key
    # The bench's log bytes also hold what the functions printed: its bytes, and one event's
    # overhead per line.
    printed = counted["log_bytes"] - counted["function_log_bytes"] - units["log_bytes"]
    assert printed >= 0 and printed % LOG_EVENT_OVERHEAD_BYTES == 0
    # Priced like the bench's units; the task's share per 1M tasks.
    assert prices["per_million"]["dynamodb"] == bench.price(counted, "STANDARD")["dynamodb"]
    assert prices["per_task"]["total"] == pytest.approx(prices["per_million"]["total"] / 1e6)
    assert prices["per_million"]["total"] > 0


def test_two_concurrent_tasks_are_attributed_apart() -> None:
    with LocalStack(meter=True, event_sources="manual") as stack:
        assert stack.meter is not None
        # A plain meter of the same calls: the stack's DynamoDB total, counted independently.
        plain = DynamoMeter(
            table_schema(stack.template),
            stack.env["TABLE_NAME"],
            boto3.session.Session(region_name=REGION).client("dynamodb"),
        )
        plain.attach(boto3._get_default_session().events)
        try:
            with_file = bench._message("with a file", immediate=True, files=[b"\x01" * 100_000])
            text_only = bench._message("text only", immediate=True)
            first, second = _send_all(stack, [with_file, text_only])
        finally:
            plain.detach(boto3._get_default_session().events)
        meter = stack.meter
        assert set(meter.tasks()) == {first, second}
        units = {task: meter.units(task) for task in (first, second)}
        total = Counter(meter.total)
        tasks_sum: Counter[Any] = Counter()
        for task in (first, second):
            tasks_sum.update(meter.counts(task))

    assert meter.unattributed == Counter()
    assert set(total) == set(tasks_sum)
    for key, value in total.items():
        assert tasks_sum[key] == pytest.approx(value), key
    everything = plain.summary()
    assert total[("dynamodb", "wru_table")] == everything["wru_table"]
    assert total[("dynamodb", "rru")] == pytest.approx(everything["rru"])
    indexes = sum(v for k, v in total.items() if k[0] == "dynamodb_index")
    assert indexes == sum(everything["wru_indexes"].values())

    for task in (first, second):
        one = units[task]
        assert one["api_requests"] == 1
        assert one["lambda"]["SendMessageFunction"]["invocations"] == 1
        assert one["lambda"]["FlowWorkerFunction"]["invocations"] == 1
        assert one["stepfunctions"]["executions"] == 1
        assert one["dynamodb"]["wru"] > 0
    # One webhook sender batch carried both tasks' events: its invocation is shared evenly.
    senders = [units[t]["lambda"]["WebhookSenderFunction"]["invocations"] for t in units]
    assert sum(senders) == pytest.approx(total[("lambda", "WebhookSenderFunction", "invocations")])
    # The file went to the content bucket under the first task's key only.
    assert units[first]["s3_requests"] == {"PutObject": 1}
    assert (units[first]["s3_stored_bytes"], units[first]["s3_objects"]) == (100_000, 1)
    assert (units[second]["s3_requests"], units[second]["s3_stored_bytes"]) == ({}, 0)
