"""scripts/bench.py's count of a delegated turn, kept honest without timing anything.

- A delegated turn of the relay flow (its remote a stub with push) counts every function of the
  delegating stack once per thing it did, the two flow steps, and the timer's one Wait; the
  remote got a push config, and the timer ended stopped.
- The wait between the delegating step and the first notification reads zero on every meter,
  while the same meters over the same kind of window count a poll of a remote without push (so
  the zero is not a meter that stopped counting).
- The backoff the doc's polling formula comes from is the one the worker polls by.
- The report keys and the doc section come from the measured units.
"""

from __future__ import annotations

from typing import Any

import pytest

from a2a_serverless.core.delegation import _next_poll
from a2a_serverless.store import DelegationRecord
from tests.scripts import load_script

bench = load_script("bench.py", "scripts_bench", register=True)


@pytest.fixture(scope="module")
def pushed() -> dict[str, Any]:
    return bench.measure_delegation_units("STANDARD")


@pytest.fixture(scope="module")
def polled() -> dict[str, Any]:
    return bench.measure_delegation_units("STANDARD", push=False)


def _invocations(functions: dict[str, Any]) -> dict[str, int]:
    return {name: row["invocations"] for name, row in functions.items()}


def test_a_delegated_turn_counts_what_the_delegating_stack_did(pushed: dict[str, Any]) -> None:
    assert pushed["remote_pushes"] == [True]  # sent with a push config: push mode
    assert pushed["api_requests"] == 3  # the send, the artifact, the COMPLETED status
    assert _invocations(pushed["lambda"]) == {
        "SendMessageFunction": 1,
        "FlowWorkerFunction": 2,  # the step that delegates, the woken one
        "DelegationReceiverFunction": 2,
        "WebhookSenderFunction": 2,  # the two stream batches
    }
    assert pushed["stepfunctions"]["executions"] == 2
    assert pushed["stepfunctions"]["state_transitions"] == 2
    # The timer entered its Wait and was stopped by the wake: nothing else ran.
    assert pushed["timer"] == {"executions": 1, "state_transitions": 1, "status": "ABORTED"}
    ddb = pushed["dynamodb"]
    writes = sum(n for op, n in ddb["calls"].items() if op in bench.WRITE_OPS)
    assert ddb["wru_table"] >= writes
    prices = bench.price_delegated(pushed, "STANDARD")
    assert prices["stepfunctions_timer"] == round(bench.PRICES["sfn_standard_transition"] * 1e6, 2)
    assert prices["total"] == pytest.approx(
        sum(v for k, v in prices.items() if k != "total"), abs=0.05
    )


def test_the_wait_reads_zero_on_every_meter(pushed: dict[str, Any]) -> None:
    waiting = pushed["waiting"]
    assert waiting["seconds"] >= bench.WAIT_SAMPLE_SECONDS - 0.1
    assert waiting["api_requests"] == 0
    assert waiting["lambda"] == {}
    assert waiting["dynamodb"]["calls"] == {}
    assert waiting["stepfunctions"]["state_transitions"] == 0
    assert waiting["timer"] == {"state_transitions": 0}
    assert waiting["function_log_bytes"] == 0
    assert waiting["round_item_bytes"] > 0  # what the wait is billed for: storage
    assert bench.price_delegated(waiting, "STANDARD")["total"] == 0


def test_the_same_meters_count_a_poll_while_a_remote_without_push_is_awaited(
    polled: dict[str, Any],
) -> None:
    assert polled["remote_pushes"] == [False]
    poll = polled["waiting"]
    assert _invocations(poll["lambda"]) == {"FlowWorkerFunction": 1}
    assert poll["timer"] == {"state_transitions": 3}  # Check, Again, Wait
    assert poll["stepfunctions"]["state_transitions"] == 0
    assert poll["dynamodb"]["calls"].get("UpdateItem", 0) >= 1  # the poll counted
    assert poll["dynamodb"]["wru"] >= 1
    # The first Wait, then two polls (WORKING, then COMPLETED: Check, Again, and Wait or Done).
    assert polled["timer"] == {"executions": 1, "state_transitions": 7, "status": "SUCCEEDED"}
    assert _invocations(polled["lambda"])["FlowWorkerFunction"] == 4
    assert "DelegationReceiverFunction" not in polled["lambda"]


def test_poll_offsets_are_the_workers_backoff() -> None:
    offsets = bench.poll_offsets(10 * 3600)
    timeout, deadline = 86400, 1_000_000.0 + 86400
    for polls, offset in enumerate(offsets):
        record = DelegationRecord(
            task_id="t",
            key="1.0.0",
            agent_url="https://remote.example",
            token="x",
            message={},
            timeout_seconds=timeout,
            deadline=deadline,
            polls=polls,
        )
        assert _next_poll(record) - (deadline - timeout) == offset
    assert len(bench.poll_offsets(3600)) == 63


def test_the_report_and_the_doc_come_from_the_units(
    pushed: dict[str, Any], polled: dict[str, Any]
) -> None:
    echo = bench.measure_units("STANDARD", blocking=False)
    # One workflow measured, standing in for both: the shape is what is checked here.
    summary = bench.delegation_summary(
        dict.fromkeys(bench.WORKFLOWS, pushed), dict.fromkeys(bench.WORKFLOWS, echo), polled
    )
    report = bench.build_report({}, delegation=summary)
    assert set(bench.TOP_LEVEL_KEYS) <= set(report)
    assert set(report["delegated_turn_usd"]) == set(bench.WORKFLOWS)
    waiting = report["waiting_units"]
    assert (waiting["lambda_invocations"], waiting["state_transitions"]) == (0, 0)
    assert waiting["dynamodb_calls"] == {}
    assert report["polls_first_hour"] == 63
    section = bench.delegation_table(report)
    assert section.startswith(bench.COST_DELEGATION_BEGIN)
    assert section.endswith(bench.COST_DELEGATION_END)
    assert f"**{pushed['dynamodb']['wru']}**" in section
    assert bench.build_report({})["waiting_units"] is None  # not measured: null
