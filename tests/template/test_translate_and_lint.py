"""template.yaml translates offline, and cfn-lint finds nothing in it or in its translation."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from cfnlint.api import lint
from cfnlint.config import ManualArgs
from cfnlint.helpers import REGIONS
from samtranslator.model.exceptions import InvalidDocumentException

from tests.template.sam import FUNCTIONS, TEMPLATE, OfflineManagedPolicyLoader, translate

# cfn-lint rules ignored on purpose. Keep each one justified; none is needed today.
IGNORED_RULES: set[str] = set()


def _lint(text: str) -> list[str]:
    """Errors and warnings in every region, experimental rules included (informational not)."""
    matches = lint(
        text,
        config=ManualArgs(regions=list(REGIONS), include_experimental=True),
    )
    return [
        f"{m.rule.id} line {m.linenumber}: {m.message}"
        for m in matches
        if m.rule.id[0] in "EW" and m.rule.id not in IGNORED_RULES
    ]


def test_translates_to_plain_cloudformation(cfn: dict[str, Any]) -> None:
    assert "Transform" not in cfn
    assert "Globals" not in cfn
    types = {r["Type"] for r in cfn["Resources"].values()}
    assert not [t for t in types if t.startswith("AWS::Serverless::")]
    functions = {k for k, v in cfn["Resources"].items() if v["Type"] == "AWS::Lambda::Function"}
    assert functions == set(FUNCTIONS)
    assert {
        "AWS::Lambda::Function",
        "AWS::ApiGateway::RestApi",
        "AWS::ApiGateway::Deployment",
        "AWS::ApiGateway::Stage",
        "AWS::DynamoDB::Table",
        "AWS::StepFunctions::StateMachine",
        "AWS::Lambda::LayerVersion",
        "AWS::Lambda::Permission",
        "AWS::IAM::Role",
        "AWS::Lambda::EventSourceMapping",
        "AWS::SQS::Queue",
        "AWS::Logs::LogGroup",
        "AWS::CloudWatch::Alarm",
        "AWS::SNS::Topic",
        "AWS::SNS::Subscription",
        "AWS::ApiGateway::Account",
        "AWS::CloudFormation::WaitConditionHandle",
    } == types


def test_translation_takes_every_allowed_workflow_type(sam: dict[str, Any]) -> None:
    for workflow_type in ("STANDARD", "EXPRESS"):
        cfn = translate(sam, {"WorkflowType": workflow_type})
        props = cfn["Resources"]["FlowStateMachine"]["Properties"]
        assert props["StateMachineType"] == {"Ref": "WorkflowType"}


def test_translation_needs_no_iam_lookup(
    sam: dict[str, Any], policy_loader: OfflineManagedPolicyLoader
) -> None:
    # template.yaml names no managed policy, so the IAM-backed loader is never consulted.
    assert policy_loader.calls == 0
    # A policy named without an ARN: SAM's bundled map first, then the loader.
    named = copy.deepcopy(sam)
    policies = named["Resources"]["GetTaskFunction"]["Properties"]["Policies"]
    policies += ["AWSXrayWriteOnlyAccess", "A2aTestOnlyPolicy"]
    loader = OfflineManagedPolicyLoader({"A2aTestOnlyPolicy": "arn:aws:iam::aws:policy/A2aTest"})
    translated = translate(named, loader=loader)
    assert loader.calls == 1
    arns = translated["Resources"]["GetTaskFunctionRole"]["Properties"]["ManagedPolicyArns"]
    assert "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess" in arns
    assert "arn:aws:iam::aws:policy/A2aTest" in arns


def test_translation_rejects_an_invalid_template(sam: dict[str, Any]) -> None:
    broken = copy.deepcopy(sam)
    broken["Resources"]["GetTaskFunction"]["Properties"]["Events"]["GetTask"]["Properties"][
        "RestApiId"
    ] = {"Ref": "NoSuchApi"}
    with pytest.raises(InvalidDocumentException):
        translate(broken)


def test_cfn_lint_finds_nothing_in_the_translated_template(cfn: dict[str, Any]) -> None:
    assert _lint(json.dumps(cfn, indent=1)) == []


def test_cfn_lint_finds_nothing_in_template_yaml() -> None:
    assert _lint(TEMPLATE.read_text()) == []


def test_cfn_lint_check_can_fail(cfn: dict[str, Any]) -> None:
    broken = copy.deepcopy(cfn)
    broken["Resources"]["GetTaskFunction"]["Properties"]["Runtime"] = "python2.0"
    broken["Resources"]["TasksTable"]["Properties"]["BillingMode"] = "FREE"
    findings = _lint(json.dumps(broken, indent=1))
    assert any(f.startswith("E") and "python2.0" in f for f in findings), findings
    assert any(f.startswith("E") and "FREE" in f for f in findings), findings
