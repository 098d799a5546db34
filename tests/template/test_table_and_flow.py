"""The tasks table and the per-step state machine."""

from __future__ import annotations

from typing import Any

from tests.template.sam import state_machine_definition

LAMBDA_TRANSIENT = {
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
}
# The worker's own error when the step after a finished one could not be started
# (flows/runtime.py): retried, since the re-run finds the step done and starts it again.
NEXT_STEP_NOT_STARTED = "NextStepNotStarted"


def _table(cfn: dict[str, Any]) -> dict[str, Any]:
    table = cfn["Resources"]["TasksTable"]
    assert table["Type"] == "AWS::DynamoDB::Table"
    return table["Properties"]


def test_table_billing_streams_and_ttl(cfn: dict[str, Any]) -> None:
    table = _table(cfn)
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in table
    # Old images too: a TTL removal of a task header names the counters it leaves.
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]


def test_table_indexes(cfn: dict[str, Any]) -> None:
    table = _table(cfn)
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    # One index: each status change moves one entry (context and state are filters on it).
    assert set(indexes) == {"byOwner"}
    hash_keys = {name: index["KeySchema"][0] for name, index in indexes.items()}
    assert hash_keys == {"byOwner": {"AttributeName": "g1pk", "KeyType": "HASH"}}
    defined = {a["AttributeName"] for a in table["AttributeDefinitions"]}
    for name, index in indexes.items():
        assert index["KeySchema"][1] == {"AttributeName": "gsk", "KeyType": "RANGE"}, name
        projection = index["Projection"]
        assert projection["ProjectionType"] == "INCLUDE", name
        included = set(projection["NonKeyAttributes"])
        # List pages need these; the (large) flow state never goes to an index.
        assert {"taskId", "contextId", "state", "status"} <= included, name
        assert "flowState" not in included, name
        assert {k["AttributeName"] for k in index["KeySchema"]} <= defined


def test_state_machine_type_comes_from_the_parameter(cfn: dict[str, Any]) -> None:
    props = cfn["Resources"]["FlowStateMachine"]["Properties"]
    assert props["StateMachineType"] == {"Ref": "WorkflowType"}
    parameter = cfn["Parameters"]["WorkflowType"]
    assert parameter["AllowedValues"] == ["STANDARD", "EXPRESS"]
    # Safe by default: one execution per step, each step bounded well inside EXPRESS's 5 min.
    assert parameter["Default"] == "EXPRESS"
    assert props["DefinitionSubstitutions"] == {
        "FlowWorkerArn": {"Fn::GetAtt": ["FlowWorkerFunction", "Arn"]}
    }


def test_the_flow_workers_memory_is_a_parameter(cfn: dict[str, Any]) -> None:
    """Lambda's CPU follows memory: a flow waiting on a model needs little, a CPU-bound one
    more. The default keeps the measured figures (docs/cost.md)."""
    props = cfn["Resources"]["FlowWorkerFunction"]["Properties"]
    assert props["MemorySize"] == {"Ref": "FlowWorkerMemorySize"}
    parameter = cfn["Parameters"]["FlowWorkerMemorySize"]
    assert (parameter["Default"], parameter["MinValue"], parameter["MaxValue"]) == (
        1024,
        128,
        10240,
    )


def test_run_step_retries_transient_lambda_errors_and_catches_the_rest(
    cfn: dict[str, Any],
) -> None:
    definition = state_machine_definition(cfn, "FlowStateMachine")
    states = definition["States"]
    assert definition["StartAt"] == "RunStep"
    run = states["RunStep"]
    assert run["Type"] == "Task"
    assert run["Resource"] == "arn:aws:states:::lambda:invoke"
    assert run["Parameters"]["FunctionName"] == "${FlowWorkerArn}"
    transient, throttled = run["Retry"]
    assert set(transient["ErrorEquals"]) | set(throttled["ErrorEquals"]) == LAMBDA_TRANSIENT | {
        NEXT_STEP_NOT_STARTED
    }
    assert NEXT_STEP_NOT_STARTED in transient["ErrorEquals"]
    assert transient["MaxAttempts"] >= 1
    # A throttled step never ran: it waits for a free worker longer than for a glitch (but
    # within EXPRESS's budget: tests/template/test_step_executions.py).
    assert throttled["ErrorEquals"] == ["Lambda.TooManyRequestsException"]
    waits = [
        min(
            throttled["IntervalSeconds"] * throttled["BackoffRate"] ** n,
            throttled["MaxDelaySeconds"],
        )
        for n in range(throttled["MaxAttempts"])
    ]
    assert sum(waits) >= 60, waits
    (catch,) = run["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]
    assert catch["Next"] == "MarkFailed"
    assert catch["ResultPath"] == "$.error"  # keeps taskId/turn for MarkFailed
    assert states["MarkFailed"]["Parameters"]["FunctionName"] == "${FlowWorkerArn}"
    assert states["MarkFailed"]["Parameters"]["Payload"]["action"] == "fail"
    assert states["MarkFailed"]["End"] is True
