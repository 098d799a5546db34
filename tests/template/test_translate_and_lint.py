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


def _lint(text: str, regions: list[str] = REGIONS) -> list[str]:
    """Errors and warnings in every region (by default), experimental rules included
    (informational not)."""
    matches = lint(
        text,
        config=ManualArgs(regions=list(regions), include_experimental=True),
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
        "AWS::Lambda::Version",  # AutoPublishAlias (SnapStart parameter)
        "AWS::Lambda::Alias",
        "AWS::ApiGateway::RestApi",
        "AWS::ApiGateway::Deployment",
        "AWS::ApiGateway::Stage",
        "AWS::DynamoDB::Table",
        "AWS::StepFunctions::StateMachine",
        "AWS::Lambda::LayerVersion",
        "AWS::Lambda::Permission",
        "AWS::IAM::Role",
        "AWS::IAM::Policy",  # AgentCardSigningPolicy (CardSigningKeyArn set)
        "AWS::IAM::ManagedPolicy",  # FlowPolicy: what the flow's own code may call
        "AWS::Lambda::EventSourceMapping",
        "AWS::SQS::Queue",
        "AWS::Logs::LogGroup",
        "AWS::CloudWatch::Alarm",
        "AWS::SNS::Topic",
        "AWS::SNS::Subscription",
        "AWS::ApiGateway::Account",
        "AWS::ApiGateway::UsagePlan",
        "AWS::CloudFormation::WaitConditionHandle",
        "AWS::S3::Bucket",  # ContentBucket: part content too large for the table
        "AWS::S3::BucketPolicy",
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
    # One region: what differs by region (types, runtimes) is linted in every region on
    # template.yaml below, which cfn-lint translates with the same SAM translator.
    assert _lint(json.dumps(cfn, indent=1), ["us-east-1"]) == []


# Parameter sets of every Auth mode (and the other conditional parts: quota, CORS).
MODES = {
    "ApiKey": {"Auth": "ApiKey", "ApiKeyQuotaPerDay": "1000"},
    "Jwt": {"Auth": "Jwt", "JwtIssuer": "https://issuer.example", "JwtAudience": "a2a"},
    "Iam": {"Auth": "Iam"},
    "None": {"Auth": "None", "CorsAllowOrigins": "https://app.example"},
}


def _without_deployment_id(cfn: dict[str, Any]) -> str:
    """The template as text, the Deployment's logical id and description (new on every
    transform: the Api's AlwaysDeploy) replaced by placeholders."""
    cfn = copy.deepcopy(cfn)
    (deployment,) = [k for k, v in cfn["Resources"].items() if v["Type"].endswith("Deployment")]
    cfn["Resources"][deployment]["Properties"]["Description"] = "RestApi deployment"
    return json.dumps(cfn, sort_keys=True).replace(deployment, "ApiDeploymentX")


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_auth_mode_translates_to_the_linted_template(
    sam: dict[str, Any], cfn: dict[str, Any], mode: str
) -> None:
    # The modes differ only in conditions CloudFormation resolves at deploy time, so the one
    # translation linted below is every mode's (cfn-lint checks each condition scenario).
    assert _without_deployment_id(translate(sam, MODES[mode])) == _without_deployment_id(cfn)


def test_the_translation_check_sees_a_mode_dependent_translation(sam: dict[str, Any]) -> None:
    # SAM resolves some parameter Refs with their values, e.g. a function's AutoPublishAlias.
    varied = copy.deepcopy(sam)
    props = varied["Resources"]["GetTaskFunction"]["Properties"]
    props["AutoPublishAlias"] = {"Ref": "JwtAudience"}
    assert _without_deployment_id(translate(varied, {"JwtAudience": "live"})) != (
        _without_deployment_id(translate(varied, {"JwtAudience": "next"}))
    )


def test_cfn_lint_finds_nothing_in_template_yaml() -> None:
    assert _lint(TEMPLATE.read_text()) == []


def test_cfn_lint_check_can_fail(cfn: dict[str, Any]) -> None:
    broken = copy.deepcopy(cfn)
    broken["Resources"]["GetTaskFunction"]["Properties"]["Runtime"] = "python2.0"
    broken["Resources"]["TasksTable"]["Properties"]["BillingMode"] = "FREE"
    # One region is enough to see the linter work (the template's Rules make each region's
    # pass cost about a second of condition solving).
    findings = _lint(json.dumps(broken, indent=1), ["us-east-1"])
    assert any(f.startswith("E") and "python2.0" in f for f in findings), findings
    assert any(f.startswith("E") and "FREE" in f for f in findings), findings
