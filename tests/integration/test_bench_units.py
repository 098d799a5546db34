"""scripts/bench.py's counting, kept honest without timing anything.

- One non-blocking single-turn echo task, counted the bench's way, makes exactly the DynamoDB
  calls that tests/integration/test_budgets.py budgets (SendMessage + the worker's step + the
  webhook sender's one Query for the task's stream batch), one invocation of each function
  involved, one API request, and as many state transitions as the template's definition walks.
- The meter prices real calls on the local table like the calculator (tests/unit), from the
  items before and after (index writes from the template's key schema and projections).
- The JSON report has its stable keys.
- A task with a file counts its S3 calls and the bytes it stores; bench_local's file round trip
  moves the bytes it says (both digests checked).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

from a2a_serverless.local.stack import REGION, LocalStack
from a2a_serverless.local.template import load_template
from tests.integration.test_budgets import EXPECTED
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


bench = load_script("bench.py", "scripts_bench", register=True)


def _states_walked(definition: dict[str, Any]) -> int:
    """States one single-step turn enters: Task -> Next, Choice -> Default (`continue` is
    false after the echo's only step), until a terminal state."""
    name, entered = definition["StartAt"], 0
    while True:
        state = definition["States"][name]
        entered += 1
        if state["Type"] in ("Succeed", "Fail") or state.get("End"):
            return entered
        name = state["Default"] if state["Type"] == "Choice" else state["Next"]


def _definition() -> dict[str, Any]:
    template = load_template(ROOT / "template.yaml")
    # The flow's machine (the delegations' timer is the other one).
    machine = template["Resources"]["FlowStateMachine"]
    assert machine["Type"] == "AWS::Serverless::StateMachine"
    return dict(machine["Properties"]["Definition"])


def test_one_task_counts_match_the_call_budgets() -> None:
    units = bench.measure_units("STANDARD", blocking=False, text="a b c d e f g h")
    budget = Counter(EXPECTED["SendMessage, new task, non-blocking"])
    budget.update(EXPECTED["FlowWorker, one echo step, k=3 chunks"])
    # The webhook sender: its batch's headers (one BatchGetItem); the task has no webhook, so
    # no Query of its configs.
    budget.update({"BatchGetItem": 1})
    ddb = units["dynamodb"]
    assert ddb["calls"] == dict(budget)
    assert {name: row["invocations"] for name, row in units["lambda"].items()} == {
        "SendMessageFunction": 1,
        "FlowWorkerFunction": 1,
        "WebhookSenderFunction": 1,
    }
    assert units["api_requests"] == 1
    assert units["stepfunctions"]["executions"] == 1
    assert units["stepfunctions"]["state_transitions"] == _states_walked(_definition())
    # Every write costs at least one unit, a transaction item two.
    writes = sum(n for op, n in ddb["calls"].items() if op in bench.WRITE_OPS)
    assert ddb["wru_table"] >= writes
    assert ddb["wru"] == ddb["wru_table"] + sum(ddb["wru_indexes"].values())
    # The task's header enters the indexes: their writes are counted.
    schema = bench.table_schema(load_template(ROOT / "template.yaml"))
    assert set(ddb["wru_indexes"]) <= {index.name for index in schema.indexes}
    if schema.indexes:
        assert sum(ddb["wru_indexes"].values()) >= 1
    assert ddb["rru"] >= ddb["calls"].get("Query", 0) * 0.5
    assert all(row["billed_ms"] >= 1 for row in units["lambda"].values())
    prices = bench.price(units, "STANDARD")
    assert prices["stepfunctions"] > 0 and prices["dynamodb"] > 0


def test_meter_prices_observed_writes_from_the_items_before_and_after() -> None:
    schema = bench.table_schema(load_template(ROOT / "template.yaml"))
    with LocalStack(event_sources=False) as stack:
        table = stack.env["TABLE_NAME"]
        session = boto3.session.Session(region_name=REGION)
        meter = bench.DynamoMeter(schema, table, boto3.client("dynamodb", region_name=REGION))
        meter.attach(session.events)
        db = session.client("dynamodb")
        index = schema.indexes[0] if schema.indexes else None
        keys = {name: {"S": f"{name}-1"} for name in index.keys} if index else {}
        body = {"S": "x" * 1500}  # in no INCLUDE/KEYS_ONLY index entry
        item = {"pk": {"S": "T#bench"}, "sk": {"S": "H"}, **keys, "zbody": body}

        db.put_item(TableName=table, Item=item)
        (put,) = meter.calls
        assert put.wru_table == 2  # ~1.5 KB
        if index is not None:
            expected = 2 if index.projection == "ALL" else 1
            assert put.wru_indexes == {index.name: expected}

        meter.reset()
        db.update_item(
            TableName=table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET zbody = :b",
            ExpressionAttributeValues={":b": {"S": "y"}},
        )
        (update,) = meter.calls
        assert update.wru_table == 2  # the larger of before (1.5 KB) and after
        if index is not None and index.projection != "ALL":
            assert update.wru_indexes == {}  # nothing the index holds changed

        if index is not None:
            meter.reset()
            moved = index.keys[-1]
            db.update_item(
                TableName=table,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET #k = :v",
                ExpressionAttributeNames={"#k": moved},
                ExpressionAttributeValues={":v": {"S": "moved"}},
            )
            (rekey,) = meter.calls
            assert rekey.wru_indexes == {index.name: 2}  # delete + put

        meter.reset()
        try:
            db.put_item(
                TableName=table,
                Item={**item, "zbody": {"S": "z" * 3000}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except db.exceptions.ConditionalCheckFailedException:
            pass
        (failed,) = meter.calls
        assert (failed.wru_table, failed.wru_indexes) == (1, {})  # the existing (small) item

        meter.reset()
        db.get_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
        db.query(
            TableName=table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": item["pk"]},
            ConsistentRead=True,
            ProjectionExpression="sk",  # a projection does not make the read cheaper
        )
        assert [c.rru for c in meter.calls] == [0.5, 1.0]


def test_report_keys() -> None:
    cost = bench.cost_phase()
    report = bench.build_report(cost)
    assert set(bench.TOP_LEVEL_KEYS) <= set(report)
    assert set(report["usd_per_million_tasks"]) == {"STANDARD", "EXPRESS"}
    assert report["wru_per_task"] == cost["units_per_task"]["STANDARD"]["dynamodb"]["wru"]
    express = cost["units_per_task"]["EXPRESS"]
    assert express["stepfunctions"]["express_gb_seconds"] > 0
    # The same task on either workflow writes the same items.
    assert express["dynamodb"]["wru"] == report["wru_per_task"]


def test_the_bench_task_costs_what_the_docs_say() -> None:
    """scripts/bench's own task (blocking, its text, the local stack's anonymous caller) costs
    the write units of docs/budgets.md: it once drifted to 24 while the write-unit test's task,
    a few bytes smaller, kept its first message in the header (the size bound's margin)."""
    units = bench.measure_units("STANDARD")
    docs = (ROOT / "docs" / "budgets.md").read_text()
    assert f"**{units['dynamodb']['wru']}** |" in docs, units["dynamodb"]


def test_a_task_with_a_file_counts_its_s3_calls_and_stored_bytes() -> None:
    """The file goes to the content bucket in one PutObject (the echo flow never reads it):
    counted, and its bytes priced as stored for RetentionDays."""
    size = 100_000
    units = bench.measure_units("STANDARD", files=[b"\x01" * size])
    assert units["s3_requests"] == {"PutObject": 1}
    assert (units["s3_stored_bytes"], units["s3_objects"]) == (size, 1)
    assert units["retention_days"] >= 1
    stored_gb_months = size / 1024**3 * units["retention_days"] / bench.DAYS_PER_MONTH
    expected = (
        bench.PRICES["s3_put_request"] + stored_gb_months * bench.PRICES["s3_storage_gb_month"]
    )
    assert bench.price(units, "STANDARD")["s3"] == round(expected * 1e6, 2)
    text_only = bench.measure_units("STANDARD")
    assert (text_only["s3_requests"], text_only["s3_stored_bytes"]) == ({}, 0)


def test_the_file_round_trip_and_its_baseline_move_the_bytes() -> None:
    """bench_local's file figures on small files: the client checks both digests (a run that
    moved other bytes raises), and the figures are the median run's."""
    local = bench._bench_local()
    with local.functions_quiet():
        figures = local.file_figures(runs=1, in_bytes=200_000, out_bytes=3 * 1024 * 1024)
    megabytes = (200_000 + 3 * 1024 * 1024) / local.MEGABYTE
    assert figures["file_roundtrip_mb_per_s"] == pytest.approx(
        megabytes / figures["file_roundtrip_seconds"], rel=0.01
    )
    assert figures["file_baseline_s3_mb_per_s"] > 0
    assert figures["file_roundtrip_ratio_to_s3"] > 0
