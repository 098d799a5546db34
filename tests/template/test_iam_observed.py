"""The IAM check of observed calls (tests/iam_check.py) on hand-made call logs: it denies
what the translated roles do not allow, allows what they do, and reports unused grants."""

from __future__ import annotations

import copy
import json
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from tests.iam_check import (
    MANAGED_POLICIES,
    Call,
    CallLog,
    Roles,
    as_context,
    conditions_hold,
    decide,
    evaluate,
    read_log,
    resolver_for,
)
from tests.template.sam import translate

REGION = "us-east-1"
ACCOUNT = "123456789012"
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/a2a-local-TasksTable"
# The state machine's fixed name: {AWS::StackName}-flow-{WorkflowType} (the local stack's name).
MACHINE_NAME = "a2a-serverless-local-flow-EXPRESS"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{MACHINE_NAME}"
EXECUTION = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{MACHINE_NAME}:t-1"
WORKER = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:a2a-local-FlowWorkerFunction"
STREAM = f"{TABLE}/stream/2025-01-01T00:00:00.000"


def queue(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


# What a local stack writes as its "stack" line: the values its intrinsics resolve to.
RESOURCES: dict[str, Any] = {
    "parameters": {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "WorkflowType": "EXPRESS"},
    "refs": {
        "TasksTable": "a2a-local-TasksTable",
        "FlowStateMachine": MACHINE,
        "FlowWorkerFunction": "a2a-local-FlowWorkerFunction",
    },
    "attributes": {
        "TasksTable.Arn": TABLE,
        "TasksTable.StreamArn": STREAM,
        "FlowStateMachine.Arn": MACHINE,
        "FlowStateMachine.Name": MACHINE_NAME,
        "FlowWorkerFunction.Arn": WORKER,
        "PushRetryQueue.Arn": queue("a2a-local-PushRetryQueue.fifo"),
        "PushDeadLetterQueue.Arn": queue("a2a-local-PushDeadLetterQueue.fifo"),
        "PushStreamFailureQueue.Arn": queue("a2a-local-PushStreamFailureQueue"),
        "ContentBucket.Arn": "arn:aws:s3:::a2a-local-contentbucket",
    },
}

# StreamFunction's policy once: JSON-RPC's ListTasks and
# DeleteTaskPushNotificationConfig were served by a role that could do neither.
STREAM_POLICY_BEFORE = [
    {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:ConditionCheckItem",
                ],
                "Resource": {"Fn::GetAtt": ["TasksTable", "Arn"]},
            },
            {
                "Effect": "Allow",
                "Action": ["states:StartExecution"],
                "Resource": {"Ref": "FlowStateMachine"},
            },
        ]
    }
]


def log_of(*calls: Call, stack: str = "s1") -> CallLog:
    log = CallLog(stacks={stack: RESOURCES})
    for call in calls:
        log.calls[(stack, call)] = None
    return log


def test_a_call_outside_the_role_is_denied(sam: dict[str, Any]) -> None:
    before = copy.deepcopy(sam)
    before["Resources"]["StreamFunction"]["Properties"]["Policies"] = STREAM_POLICY_BEFORE
    index_query = Call("StreamFunction", "dynamodb:Query", f"{TABLE}/index/byOwner")
    delete = Call("StreamFunction", "dynamodb:DeleteItem", TABLE)
    table_query = Call("StreamFunction", "dynamodb:Query", TABLE)
    report = evaluate(log_of(index_query, delete, table_query), translate(before))
    assert report.failed
    assert report.denied == sorted([index_query, delete], key=lambda c: c.action)


def test_the_template_allows_what_stream_function_does(cfn: dict[str, Any]) -> None:
    calls = [
        Call("StreamFunction", "dynamodb:Query", f"{TABLE}/index/byOwnerState"),
        Call("StreamFunction", "dynamodb:DeleteItem", TABLE),
        Call("StreamFunction", "states:StartExecution", MACHINE),
        Call("FlowWorkerFunction", "states:StartExecution", MACHINE),  # a step starts the next
        Call("FlowStateMachine", "lambda:InvokeFunction", WORKER),
        # Lambda's pollers, with the managed policies' grants.
        Call("WebhookSenderFunction", "dynamodb:GetRecords", STREAM),
        Call("WebhookSenderFunction", "sqs:ReceiveMessage", queue("a2a-local-PushRetryQueue.fifo")),
    ]
    report = evaluate(log_of(*calls), cfn)
    assert not report.failed, report.denied


def key_of(pk: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A call's condition keys: the item's partition key (as local/calls.py records it)."""
    return as_context({"dynamodb:LeadingKeys": [pk]})


def test_the_authorizer_may_read_a_key_record_and_nothing_else(cfn: dict[str, Any]) -> None:
    lookup = Call("AuthorizerFunction", "dynamodb:GetItem", TABLE, context=key_of("APIKEY#k1"))
    report = evaluate(log_of(lookup), cfn)
    assert not report.failed, report.denied
    assert {(g.action, g.key) for g in report.granted["AuthorizerFunction"]} == {
        ("dynamodb:GetItem", '{"Fn::GetAtt": ["TasksTable", "Arn"]}')
    }
    assert report.unused["AuthorizerFunction"] == []
    # Observed calls are (principal, action, resource): the key kinds are the check's only.
    assert report.observed["AuthorizerFunction"] == {Call(*astuple(lookup)[:3])}


@pytest.mark.parametrize(
    "call",
    [
        Call("GetTaskFunction", "dynamodb:PutItem", TABLE),  # a reader writing
        Call("SendMessageFunction", "states:StopExecution", EXECUTION),
        Call("StreamFunction", "states:StopExecution", EXECUTION),  # cancel stops no execution
        Call("ListTasksFunction", "dynamodb:Query", TABLE.replace("TasksTable", "Other")),
        Call("WebhookSenderFunction", "sqs:SendMessage", queue("somebody-elses")),
        Call("AgentCardFunction", "dynamodb:GetItem", TABLE),
        # The authorizer reads one key record: no query, no write, no other table, no other
        # item (a task's header, the keys' listing), and no read whose key was not seen.
        Call("AuthorizerFunction", "dynamodb:GetItem", TABLE, context=key_of("T#task-1")),
        Call("AuthorizerFunction", "dynamodb:GetItem", TABLE, context=key_of("APIKEYS")),
        Call("AuthorizerFunction", "dynamodb:GetItem", TABLE),
        Call("AuthorizerFunction", "dynamodb:Query", TABLE),
        Call("AuthorizerFunction", "dynamodb:PutItem", TABLE),
        Call("AuthorizerFunction", "dynamodb:UpdateItem", TABLE),
        Call("AuthorizerFunction", "dynamodb:GetItem", TABLE.replace("TasksTable", "Other")),
        Call("AuthorizerFunction", "dynamodb:Query", f"{TABLE}/index/byOwner"),
        Call("FlowStateMachine", "lambda:InvokeFunction", WORKER.replace("Flow", "Other")),
        Call("NoSuchFunction", "dynamodb:GetItem", TABLE),  # no role at all
    ],
)
def test_each_denial_fails_the_check(cfn: dict[str, Any], call: Call) -> None:
    report = evaluate(log_of(call), cfn)
    assert report.failed and report.denied == [call]


def test_a_call_of_an_undescribed_stack_is_denied(cfn: dict[str, Any]) -> None:
    log = log_of()
    log.calls[("unknown", Call("GetTaskFunction", "dynamodb:Query", TABLE))] = None
    assert evaluate(log, cfn).failed


def test_denials_in_a_stack_with_overridden_resources_are_tolerated(
    cfn: dict[str, Any],
) -> None:
    missing = Call("WebhookSenderFunction", "sqs:SendMessage", queue("no-such-queue.fifo"))
    log = CallLog(stacks={"s1": {**RESOURCES, "overrides": ["PUSH_RETRY_QUEUE_URL"]}})
    log.calls[("s1", missing)] = None
    report = evaluate(log, cfn)
    assert not report.failed and report.tolerated == [missing]
    assert evaluate(log_of(missing), cfn).denied == [missing]  # the same call elsewhere fails


def test_unmapped_calls_fail_the_check(cfn: dict[str, Any]) -> None:
    log = log_of(Call("GetTaskFunction", "dynamodb:Query", TABLE))
    log.errors.append({"principal": "GetTaskFunction", "operation": "dynamodb:X", "error": "?"})
    report = evaluate(log, cfn)
    assert report.failed and not report.denied


def test_unused_grants_are_reported_per_statement_resource(cfn: dict[str, Any]) -> None:
    report = evaluate(log_of(Call("ListTasksFunction", "dynamodb:Query", TABLE)), cfn)
    assert not report.failed
    unused = {(g.action, g.key) for g in report.unused["ListTasksFunction"]}
    index_query = next(
        g.key for g in report.granted["ListTasksFunction"] if g.key.endswith('index/*"}')
    )
    assert ("dynamodb:Query", index_query) in unused  # the indexes were never queried
    assert ("dynamodb:GetItem", '{"Fn::GetAtt": ["TasksTable", "Arn"]}') in unused
    used = {(g.action, g.key) for g in report.granted["ListTasksFunction"]} - unused
    assert used == {("dynamodb:Query", '{"Fn::GetAtt": ["TasksTable", "Arn"]}')}


def test_every_managed_policy_the_template_attaches_is_embedded(cfn: dict[str, Any]) -> None:
    roles = Roles(cfn)
    resolver = resolver_for(RESOURCES, cfn)
    for principal in roles.principals:
        assert roles.documents(principal, resolver)  # raises KeyError for a missing one
    plain = {arn for arns in roles.managed.values() for arn in arns if isinstance(arn, str)}
    assert set(MANAGED_POLICIES) >= plain


def test_policies_attached_by_their_roles_count_under_their_condition(
    cfn: dict[str, Any],
) -> None:
    """FlowPolicy (always) and BedrockInvokePolicy (UsesBedrock) attach themselves to roles:
    the check reads them, and a conditional one only in a stack where its condition holds."""
    roles = Roles(cfn)
    attached = {p for p, _, _ in roles.attached["FlowWorkerFunction"]}
    assert {"FlowPolicy", "BedrockInvokePolicy"} <= attached
    for principal in ("SendMessageFunction", "StreamFunction", "AgentCardFunction"):
        assert "FlowPolicy" in {p for p, _, _ in roles.attached[principal]}, principal
    model = "anthropic.claude-3-haiku-20240307-v1:0"
    call = Call(
        "FlowWorkerFunction",
        "bedrock:InvokeModelWithResponseStream",
        f"arn:aws:bedrock:{REGION}::foundation-model/{model}",
    )
    echo = {**RESOURCES, "parameters": {**RESOURCES["parameters"], "BedrockModelId": model}}
    bedrock = {**echo, "parameters": {**echo["parameters"], "FlowUsesBedrock": "true"}}
    assert evaluate(CallLog(stacks={"s1": echo}, calls={("s1", call): None}), cfn).denied == [call]
    assert not evaluate(CallLog(stacks={"s1": bedrock}, calls={("s1", call): None}), cfn).failed


@pytest.mark.parametrize(
    ("condition", "context", "holds"),
    [
        ({"ForAllValues:StringLike": {"k": ["APIKEY#*"]}}, {"k": ["APIKEY#a"]}, True),
        ({"ForAllValues:StringLike": {"k": ["APIKEY#*"]}}, {"k": ["APIKEY#a", "T#b"]}, False),
        ({"ForAnyValue:StringLike": {"k": ["APIKEY#*"]}}, {"k": ["APIKEY#a", "T#b"]}, True),
        ({"StringEquals": {"k": "v"}}, {"k": ["v"]}, True),
        ({"StringEquals": {"k": "v"}}, {}, False),  # absent: a plain operator fails
        ({"StringEqualsIfExists": {"k": "v"}}, {}, True),
        ({"StringNotEquals": {"k": ["a", "b"]}}, {"k": ["c"]}, True),
        (
            {"ArnLike": {"k": "arn:aws:bedrock:*:1:inference-profile/p"}},
            {"k": ["arn:aws:bedrock:us-east-1:1:inference-profile/p"]},
            True,
        ),
        # A key the recorder gives (LeadingKeys) but did not see: cannot be judged.
        ({"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["APIKEY#*"]}}, {}, False),
    ],
)
def test_conditions(condition: dict[str, Any], context: dict[str, list[str]], holds: bool) -> None:
    assert conditions_hold(condition, context) is holds


def test_a_condition_the_check_cannot_judge_raises() -> None:
    with pytest.raises(ValueError, match="NumericLessThan"):
        conditions_hold({"NumericLessThan": {"k": "1"}}, {"k": ["0"]})


def test_an_explicit_deny_wins() -> None:
    allow = {"Statement": [{"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}]}
    deny = {"Statement": [{"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE}]}
    assert decide([allow], "dynamodb:DeleteItem", TABLE)
    assert not decide([allow, deny], "dynamodb:DeleteItem", TABLE)
    assert not decide([], "dynamodb:GetItem", TABLE)


def test_the_log_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    lines = [
        {"kind": "stack", "stack": "s1", **RESOURCES},
        {
            "kind": "call",
            "stack": "s1",
            "principal": "GetTaskFunction",
            "action": "dynamodb:GetItem",
            "resource": TABLE,
            "operation": "dynamodb:GetItem",
        },
        {"kind": "error", "stack": "s1", "principal": "P", "operation": "s3:X", "error": "e"},
    ]
    lines.append({**lines[1], "principal": "AuthorizerFunction", "context": {"k": ["v"]}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    log = read_log(path)
    assert log.stacks == {"s1": RESOURCES}
    assert list(log.calls) == [
        ("s1", Call("GetTaskFunction", "dynamodb:GetItem", TABLE, "dynamodb:GetItem")),
        (
            "s1",
            Call(
                "AuthorizerFunction",
                "dynamodb:GetItem",
                TABLE,
                "dynamodb:GetItem",
                as_context({"k": ["v"]}),
            ),
        ),
    ]
    assert log.errors == [{"principal": "P", "operation": "s3:X", "error": "e"}]
    assert read_log(tmp_path / "missing.jsonl").empty
