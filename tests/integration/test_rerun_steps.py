"""A flow step that runs twice: a STANDARD `RunStep` retry or an EXPRESS
redelivery calls FlowWorkerFunction again with the same input. The second run must rewrite
nothing the first one wrote: the event log, the folded task (GetTask) and the event items the
table's stream carries to webhooks are exactly those of one run.

The stack's own execution is parked inside the flow (`RERUN.hold`) while the test drives the
worker handler directly; when released it is itself a late duplicate of step 0, which must
also write nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from a2a_serverless.local.stack import REGION, LocalStack
from tests.integration.flows_for_tests import RERUN, Rerun
from tests.integration.harness import (
    A2A,
    assert_log_consistent,
    event_log,
    invoke_worker,
    table,
    wait_idle,
    wait_state,
)

FLOW = "tests.integration.flows_for_tests:two_steps"
# What differs between two tasks of identical runs: ids and times.
VOLATILE = {"taskId", "contextId", "messageId", "timestamp"}


@pytest.fixture(params=["STANDARD", "EXPRESS"])
def stack(request: pytest.FixtureRequest, make_stack: Any) -> Iterator[LocalStack]:
    RERUN.__init__()  # type: ignore[misc]  # fresh controls per test
    stack = make_stack(Flow=FLOW, WorkflowType=request.param)
    yield stack
    RERUN.release.set()  # never leave the parked execution waiting on a failed test


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _log(stack: LocalStack, task_id: str) -> list[tuple[int, Any]]:
    assert_log_consistent(stack, task_id)
    return [(seq, _plain(event)) for seq, event in event_log(stack, task_id)]


def _folded(client: A2A, task_id: str) -> Any:
    task = client.get(task_id).json
    return _plain({k: task.get(k) for k in ("status", "artifacts")})


def _streamed(stack: LocalStack, task_id: str) -> list[int]:
    """Seqs of the event-item INSERTs on the table's stream (what the webhook sender gets)."""
    ddb = boto3.client("dynamodb", region_name=REGION)
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    arn = ddb.describe_table(TableName=table(stack))["Table"]["LatestStreamArn"]
    seqs = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page["Records"]:
                keys = record["dynamodb"]["Keys"]
                if (
                    record["eventName"] == "INSERT"
                    and keys["pk"]["S"] == f"T#{task_id}"
                    and keys["sk"]["S"].startswith("E#")
                ):
                    seqs.append(int(keys["sk"]["S"].removeprefix("E#")))
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return seqs


def _reference(stack: LocalStack, alice: A2A) -> tuple[list[Any], Any, list[int]]:
    """One clean run of the flow: its log, folded task and streamed events."""
    task_id = alice.send("hello").task["id"]
    wait_state(alice, task_id, {"TASK_STATE_COMPLETED"})
    return _log(stack, task_id), _folded(alice, task_id), _streamed(stack, task_id)


def _parked_task(stack: LocalStack, alice: A2A) -> str:
    """A task whose execution is parked inside step 0 (the task is working, nothing emitted)."""
    control: Rerun = RERUN
    control.hold = True
    task_id = alice.send("hello", blocking=False).task["id"]
    assert control.held.wait(20), "the execution never reached the flow"
    return task_id


def _step(task_id: str, step: int) -> dict[str, Any]:
    return {"taskId": task_id, "turn": 1, "step": step}


def _finish(stack: LocalStack, alice: A2A, task_id: str) -> None:
    """Release the parked execution (a late duplicate of step 0) and let it end."""
    RERUN.release.set()
    wait_idle(stack)
    assert alice.get(task_id).json["status"]["state"] == "TASK_STATE_COMPLETED"


def test_step_retried_after_it_completed(stack: LocalStack) -> None:
    """Each step runs twice back to back (the first answer lost): same answers, one run's
    events."""
    alice = A2A(stack, "alice")
    want_log, want_task, want_stream = _reference(stack, alice)
    task_id = _parked_task(stack, alice)

    first = invoke_worker(stack, _step(task_id, 0))
    assert first["continue"] is True
    log_after_step0 = _log(stack, task_id)
    assert invoke_worker(stack, _step(task_id, 0)) == first
    assert _log(stack, task_id) == log_after_step0  # the retry wrote nothing

    done = invoke_worker(stack, _step(task_id, 1))
    assert done["continue"] is False
    assert invoke_worker(stack, _step(task_id, 1)) == done
    _finish(stack, alice, task_id)

    assert _log(stack, task_id) == want_log
    assert _folded(alice, task_id) == want_task
    assert _streamed(stack, task_id) == want_stream


@pytest.mark.parametrize("crash_at", [(0, 2), (1, 1)])
def test_step_rerun_after_dying_half_way(stack: LocalStack, crash_at: tuple[int, int]) -> None:
    """A step emits some events then dies; its re-run appends only what is missing."""
    alice = A2A(stack, "alice")
    want_log, want_task, want_stream = _reference(stack, alice)
    task_id = _parked_task(stack, alice)

    died_in, position = crash_at
    RERUN.crash_at = crash_at
    if died_in == 1:
        assert invoke_worker(stack, _step(task_id, 0))["continue"] is True
    before = len(event_log(stack, task_id))
    with pytest.raises(RuntimeError, match="died half-way"):
        invoke_worker(stack, _step(task_id, died_in))
    assert len(event_log(stack, task_id)) == before + position  # it did write some events

    if died_in == 0:
        assert invoke_worker(stack, _step(task_id, 0))["continue"] is True
    assert invoke_worker(stack, _step(task_id, 1))["continue"] is False
    _finish(stack, alice, task_id)

    assert _log(stack, task_id) == want_log
    assert _folded(alice, task_id) == want_task
    assert _streamed(stack, task_id) == want_stream
