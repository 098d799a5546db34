"""A user's first `sam deploy` on a new AWS account: with the defaults the stack asks nothing of
the account it may not have (concurrency quota, API Gateway's CloudWatch role), changes no
account-wide setting, leaves nothing behind when the create fails, and bills nothing the user
did not ask for (X-Ray, a KMS key, point-in-time recovery). Each of those stays a parameter.
docs/deploy.md says when to set each one."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from tests.template.sam import (
    FUNCTIONS,
    ROOT,
    access_log_setting,
    condition_holds,
    resolve_if,
    resources_of_type,
    role_of,
    translate,
)
from tests.template.test_translate_and_lint import _lint

# The parameters of this page and their defaults: what a first deploy gets.
DEFAULTS: dict[str, Any] = {
    "FlowWorkerReservedConcurrency": -1,
    "SendMessageReservedConcurrency": -1,
    "StreamReservedConcurrency": -1,
    "GetTaskReservedConcurrency": -1,
    "ApiAccessLogs": "false",
    "CreateApiGatewayLoggingRole": "false",
    "Tracing": "Disabled",
    "TableKmsKey": "aws-owned",
    "TablePointInTimeRecovery": "false",
    "TableDeletionProtection": "false",
    "Alarms": "true",
    "SendAndStreamMemorySize": 512,
}
XRAY = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"
STATE_MACHINES = ("FlowStateMachine", "DelegationTimerStateMachine")
# What deleting the stack keeps (and a failed first create does not): the tasks, what never
# reached a webhook, and the region's API Gateway logging role that other APIs may use.
KEPT = {
    "TasksTable",
    "PushDeadLetterQueue",
    "PushStreamFailureQueue",
    "ApiGatewayLoggingRole",
    "ApiGatewayAccount",
}
DEPLOY_DOC = ROOT / "docs" / "deploy.md"


def _stage(cfn: dict[str, Any]) -> dict[str, Any]:
    (stage,) = resources_of_type(cfn, "AWS::ApiGateway::Stage").values()
    return stage["Properties"]


def _xray_attached(cfn: dict[str, Any], principal: str, parameters: dict[str, str]) -> bool:
    """Whether the principal's role gets X-Ray's managed policy: a plain entry, or one under
    the TracesActive condition (entries under other features' conditions are theirs)."""
    _, role = role_of(cfn, principal)
    for arn in role["Properties"].get("ManagedPolicyArns", []):
        if isinstance(arn, dict) and arn.get("Fn::If", [None])[0] == "TracesActive":
            arn = resolve_if(cfn, arn, parameters)
        if arn == XRAY:
            return True
    return False


@pytest.fixture(scope="module")
def traced(sam: dict[str, Any]) -> dict[str, Any]:
    """The translation with Tracing=Active (SAM resolves the parameter: it is not a condition)."""
    return translate(sam, {"Tracing": "Active"})


def test_the_defaults(cfn: dict[str, Any]) -> None:
    assert {name: cfn["Parameters"][name]["Default"] for name in DEFAULTS} == DEFAULTS


def test_every_parameter_here_has_its_row_in_the_deploy_guide(cfn: dict[str, Any]) -> None:
    rows = {
        name: line
        for line in DEPLOY_DOC.read_text().splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`(\w+)`", line.split("|")[1])
    }
    for name, default in DEFAULTS.items():
        assert name in rows, f"docs/deploy.md has no parameter row for {name}"
        assert f"`{default}`" in rows[name], f"{name}: its row does not give the default {default}"


# -- 1. Concurrency: tests/template/test_operations.py (nothing reserved by default) -------------


# -- 2. API Gateway's account-wide logging role ----------------------------------------------


def test_no_access_log_and_no_account_setting_by_default(cfn: dict[str, Any]) -> None:
    """A stage with access logging fails to create where the region has no API Gateway
    CloudWatch role (a new account has none), and setting one changes the whole region's."""
    assert resolve_if(cfn, _stage(cfn)["AccessLogSetting"]) is None
    assert not condition_holds(cfn, "LogsApiAccess", {})
    assert not condition_holds(cfn, "ManagesApiGatewayAccount", {})
    for name in ("ApiAccessLogGroup", "ApiGatewayLoggingRole", "ApiGatewayAccount"):
        condition = cfn["Resources"][name]["Condition"]
        assert not condition_holds(cfn, condition, {}), name


def test_access_logs_where_the_account_has_a_role(cfn: dict[str, Any]) -> None:
    parameters = {"ApiAccessLogs": "true"}
    setting = resolve_if(cfn, _stage(cfn)["AccessLogSetting"], parameters)
    assert setting == access_log_setting(cfn)
    assert setting["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    assert cfn["Resources"]["ApiAccessLogGroup"]["Condition"] == "LogsApiAccess"
    assert condition_holds(cfn, "LogsApiAccess", parameters)
    # The account's role stays whatever it is.
    assert not condition_holds(cfn, "ManagesApiGatewayAccount", parameters)


def test_the_account_setting_is_made_well_after_its_role(cfn: dict[str, Any]) -> None:
    """API Gateway refuses a role IAM has not propagated yet. CloudFormation offers no delay or
    retry, so the setting waits for the table (slower to create than the role): a narrower
    window, not a closed one (docs/deploy.md)."""
    account = cfn["Resources"]["ApiGatewayAccount"]
    assert account["Properties"]["CloudWatchRoleArn"] == {
        "Fn::GetAtt": ["ApiGatewayLoggingRole", "Arn"]
    }
    assert account["DependsOn"] == "TasksTable"
    assert "DependsOn" not in cfn["Resources"]["TasksTable"]
    both = {"ApiAccessLogs": "true", "CreateApiGatewayLoggingRole": "true"}
    assert condition_holds(cfn, account["Condition"], both)


# -- 3 and 12. What a failed first create leaves, what deleting the stack keeps ---------------


def test_a_failed_first_create_leaves_nothing(cfn: dict[str, Any]) -> None:
    """`Retain` would keep a resource when its stack's create rolls back too: every resource the
    stack keeps is `RetainExceptOnCreate` instead."""
    for name, resource in cfn["Resources"].items():
        policy = resource.get("DeletionPolicy", "Delete")
        if resource["Type"] == "AWS::Lambda::Version":
            # SAM keeps published versions (AutoPublishAlias); Lambda deletes them with the
            # function, which a rollback deletes.
            assert policy == "Retain", name
            continue
        assert policy in ("Delete", "RetainExceptOnCreate"), (name, policy)


def test_what_deleting_the_stack_keeps(cfn: dict[str, Any]) -> None:
    kept = {
        name
        for name, resource in cfn["Resources"].items()
        if resource.get("DeletionPolicy") == "RetainExceptOnCreate"
    }
    assert kept == KEPT
    for name in KEPT:  # nor does an update that replaces one delete it
        assert cfn["Resources"][name]["UpdateReplacePolicy"] == "Retain", name


def test_log_groups_and_the_retry_queue_go_with_the_stack(cfn: dict[str, Any]) -> None:
    """Logs are diagnostics with a retention, and two of the groups are named after the stack:
    kept, they would make a new stack of the same name fail ("already exists"). The retry
    queue's parked deliveries have no sender without the stack."""
    for name, resource in resources_of_type(cfn, "AWS::Logs::LogGroup").items():
        assert resource.get("DeletionPolicy", "Delete") == "Delete", name
    named_after_the_stack = [
        name
        for name, resource in resources_of_type(cfn, "AWS::Logs::LogGroup").items()
        if "${AWS::StackName}" in str(resource["Properties"]["LogGroupName"])
    ]
    assert sorted(named_after_the_stack) == [
        "ApiAccessLogGroup",
        "DelegationTimerStateMachineLogGroup",
        "FlowStateMachineLogGroup",
    ]
    assert cfn["Resources"]["PushRetryQueue"].get("DeletionPolicy", "Delete") == "Delete"


def test_the_table_is_kept_and_its_protections_are_parameters(cfn: dict[str, Any]) -> None:
    table = cfn["Resources"]["TasksTable"]
    props = table["Properties"]
    # Deletion protection would also block the delete that rolls back a failed create.
    assert props["DeletionProtectionEnabled"] == {"Ref": "TableDeletionProtection"}
    assert props["PointInTimeRecoverySpecification"] == {
        "PointInTimeRecoveryEnabled": {"Ref": "TablePointInTimeRecovery"}
    }
    for name in ("TableDeletionProtection", "TablePointInTimeRecovery"):
        assert cfn["Parameters"][name]["AllowedValues"] == ["true", "false"]


def test_cfn_lint_knows_the_deletion_policies() -> None:
    """RetainExceptOnCreate passes the lint of template.yaml (test_translate_and_lint.py) because
    cfn-lint accepts it, not because it looks at no policy: a made-up one is an error."""
    text = (ROOT / "template.yaml").read_text()
    assert "DeletionPolicy: RetainExceptOnCreate" in text
    broken = text.replace(
        "DeletionPolicy: RetainExceptOnCreate", "DeletionPolicy: RetainExceptOnFailure", 1
    )
    findings = _lint(broken, ["us-east-1"])
    assert any(f.startswith("E") and "RetainExceptOnFailure" in f for f in findings), findings


# -- 4. What a first deploy is billed for -----------------------------------------------------


def test_the_table_on_the_free_aws_owned_key(cfn: dict[str, Any]) -> None:
    sse = cfn["Resources"]["TasksTable"]["Properties"]["SSESpecification"]
    # SSEEnabled false: DynamoDB's AWS owned key (no KMS requests billed); true: aws/dynamodb.
    assert resolve_if(cfn, sse) == {"SSEEnabled": False}
    assert resolve_if(cfn, sse, {"TableKmsKey": "aws-managed"}) == {
        "SSEEnabled": True,
        "SSEType": "KMS",
    }
    assert cfn["Parameters"]["TableKmsKey"]["AllowedValues"] == ["aws-owned", "aws-managed"]


def test_no_tracing_by_default(cfn: dict[str, Any]) -> None:
    for name in FUNCTIONS:
        props = cfn["Resources"][name]["Properties"]
        assert "TracingConfig" not in props, name
        # Without a Tracer the functions never import the X-Ray SDK.
        env = props["Environment"]["Variables"]
        assert resolve_if(cfn, env["POWERTOOLS_TRACE_DISABLED"]) == "true", name
    for name in (*FUNCTIONS, *STATE_MACHINES):
        assert not _xray_attached(cfn, name, {}), name
    assert resolve_if(cfn, _stage(cfn)["TracingEnabled"]) is False
    for name in STATE_MACHINES:
        state_machine = cfn["Resources"][name]["Properties"]
        assert resolve_if(cfn, state_machine["TracingConfiguration"]["Enabled"]) is False


def test_tracing_active_traces_everything(traced: dict[str, Any]) -> None:
    active = {"Tracing": "Active"}
    for name in FUNCTIONS:
        props = traced["Resources"][name]["Properties"]
        assert props["TracingConfig"] == {"Mode": {"Ref": "Tracing"}}, name  # = Active
        env = props["Environment"]["Variables"]
        assert resolve_if(traced, env["POWERTOOLS_TRACE_DISABLED"], active) == "false", name
    for name in (*FUNCTIONS, *STATE_MACHINES):
        assert _xray_attached(traced, name, active), name
    assert resolve_if(traced, _stage(traced)["TracingEnabled"], active) is True
    for name in STATE_MACHINES:
        state_machine = traced["Resources"][name]["Properties"]
        assert resolve_if(traced, state_machine["TracingConfiguration"]["Enabled"], active)


def test_cfn_lint_finds_nothing_in_the_traced_translation(traced: dict[str, Any]) -> None:
    """SAM writes `Mode: !Ref Tracing` only when Tracing=Active; cfn-lint resolves a Ref to
    every allowed value (Disabled is not a mode), CloudFormation to the deployed one: lint it
    with that Ref resolved. One region: the full lint of the default translation is
    test_translate_and_lint.py's."""
    deployed = copy.deepcopy(traced)
    for name in FUNCTIONS:
        props = deployed["Resources"][name]["Properties"]
        assert props["TracingConfig"]["Mode"] == {"Ref": "Tracing"}
        props["TracingConfig"]["Mode"] = "Active"
    assert _lint(json.dumps(deployed, indent=1), ["us-east-1"]) == []


def test_the_waiting_functions_memory(cfn: dict[str, Any]) -> None:
    """SendMessage and Stream are billed while a blocking send or a stream waits, and load the
    flow (its imports set their floor): a parameter. GetTask never loads the flow: 256 MB."""
    resources = cfn["Resources"]
    for name in ("SendMessageFunction", "StreamFunction"):
        assert resources[name]["Properties"]["MemorySize"] == {"Ref": "SendAndStreamMemorySize"}
    parameter = cfn["Parameters"]["SendAndStreamMemorySize"]
    assert (parameter["MinValue"], parameter["MaxValue"]) == (128, 10240)
    assert resources["GetTaskFunction"]["Properties"]["MemorySize"] == 256
