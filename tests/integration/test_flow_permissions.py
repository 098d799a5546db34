"""A flow's own AWS calls, proven against its permissions by the observed-calls IAM check
(tests/iam_check.py): a flow whose step reads an S3 object runs on a recording local stack;
the call is recorded under FlowWorkerFunction (the flow's boto3 client is the default
session's, which the recorder hooks), and the check denies it with template.yaml's default
FlowPolicy, and allows it with a statement added to FlowPolicy.

The stack records into a log of this test (not the session's: the session's check evaluates
template.yaml as it is, where this call is, rightly, denied)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from a2a_serverless.local.calls import CALL_LOG_ENV
from a2a_serverless.local.stack import REGION, LocalStack
from tests.iam_check import Call, CallLog, evaluate, read_log
from tests.integration.flows_for_tests import FLOW_BUCKET, FLOW_KEY
from tests.integration.harness import A2A, wait_idle
from tests.template.sam import load_sam, translate

FLOW = "tests.integration.flows_for_tests:reads_s3"
OBJECT = f"arn:aws:s3:::{FLOW_BUCKET}/{FLOW_KEY}"
READ = Call("FlowWorkerFunction", "s3:GetObject", OBJECT)
READS_THE_OBJECT = {
    "Sid": "ReadTheDocuments",
    "Effect": "Allow",
    "Action": "s3:GetObject",
    "Resource": f"arn:aws:s3:::{FLOW_BUCKET}/*",
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CallLog]:
    """One task of the S3-reading flow on a stack recording into its own call log: the log."""
    path = tmp_path_factory.mktemp("flow-calls") / "calls.jsonl"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CALL_LOG_ENV, str(path))
        env.setenv("POLL_MAX_MS", "50")
        stack = LocalStack(parameters={"Flow": FLOW}, event_sources=False).start()
        try:
            s3 = boto3.client("s3", region_name=REGION)  # no principal acting: not recorded
            s3.create_bucket(Bucket=FLOW_BUCKET)
            s3.put_object(Bucket=FLOW_BUCKET, Key=FLOW_KEY, Body=b"hello from S3")
            response = A2A(stack).send("read it")
            assert response.status == 200, response.body
            task = response.task
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            assert "hello from S3" in json.dumps(task)
            wait_idle(stack)
        finally:
            stack.stop()
    yield read_log(path)


def flow_calls(log: CallLog) -> set[Call]:
    return {
        Call(c.principal, c.action, c.resource) for _, c in log.calls if c.action.startswith("s3:")
    }


def with_flow_statement(sam: dict[str, Any], statement: dict[str, Any]) -> dict[str, Any]:
    edited = copy.deepcopy(sam)
    document = edited["Resources"]["FlowPolicy"]["Properties"]["PolicyDocument"]
    document["Statement"].append(statement)
    return edited


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    return translate(load_sam())


def test_the_flows_own_call_is_recorded_under_the_function(recorded: CallLog) -> None:
    assert not recorded.errors, recorded.errors
    assert flow_calls(recorded) == {READ}


def test_the_default_flow_policy_denies_it(recorded: CallLog, cfn: dict[str, Any]) -> None:
    report = evaluate(recorded, cfn)
    assert report.failed
    assert [Call(c.principal, c.action, c.resource) for c in report.denied] == [READ]


def test_a_statement_in_flow_policy_allows_it(recorded: CallLog) -> None:
    edited = translate(with_flow_statement(load_sam(), READS_THE_OBJECT))
    report = evaluate(recorded, edited)
    assert not report.failed, report.denied
    # A statement on another bucket does not.
    elsewhere = {**READS_THE_OBJECT, "Resource": "arn:aws:s3:::other-bucket/*"}
    report = evaluate(recorded, translate(with_flow_statement(load_sam(), elsewhere)))
    assert [Call(c.principal, c.action, c.resource) for c in report.denied] == [READ]


def test_each_function_that_runs_the_flow_gets_the_flow_policy(recorded: CallLog) -> None:
    """A flow's `reply` (SendMessage, Stream) and its module's import (AgentCard too) run
    where its step does not: the same call from those is allowed alike, and from no other."""
    edited = translate(with_flow_statement(load_sam(), READS_THE_OBJECT))
    (stack,) = recorded.stacks

    def denied(principal: str) -> bool:
        call = Call(principal, "s3:GetObject", OBJECT)
        log = CallLog(stacks=dict(recorded.stacks), calls={(stack, call): None})
        return evaluate(log, edited).failed

    for principal in ("SendMessageFunction", "StreamFunction", "AgentCardFunction"):
        assert not denied(principal), principal
    for principal in ("GetTaskFunction", "ListTasksFunction", "WebhookSenderFunction"):
        assert denied(principal), principal
