"""The API's one stage: OpenAPI 3 body, access log, throttling, and what it waits for."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.template.sam import (
    FUNCTIONS,
    access_log_setting,
    condition_holds,
    deployed_stages,
    load_sam,
    resources_of_type,
    rest_api_body,
    translate,
)

# Access log field -> the $context variable it must carry.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "caller": "$context.identity.caller",
    "principal": "$context.authorizer.principalId",
    "httpMethod": "$context.httpMethod",
    "resourcePath": "$context.resourcePath",
    "status": "$context.status",
    "latency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "responseLength": "$context.responseLength",
    "errorMessage": "$context.error.message",
}


def _stage(cfn: dict[str, Any]) -> dict[str, Any]:
    (stage,) = resources_of_type(cfn, "AWS::ApiGateway::Stage").values()
    return stage["Properties"]


def _render(log_format: str) -> dict[str, Any]:
    """One access log line as API Gateway writes it: every $context variable substituted."""
    rendered = re.sub(r"\$context\.[A-Za-z0-9_.]+", "x", log_format)
    assert "$" not in rendered, rendered
    return json.loads(rendered)


def test_exactly_one_stage_is_deployed(cfn: dict[str, Any]) -> None:
    # SAM's Deployment also creates a stage named "Stage" unless OpenApiVersion is set.
    assert deployed_stages(cfn) == [{"Ref": "StageName"}]
    assert cfn["Parameters"]["StageName"]["Default"] == "prod"
    assert rest_api_body(cfn)["openapi"] == "3.0.1"


def test_detector_catches_the_implicit_stage_stage() -> None:
    sam = load_sam()
    del sam["Resources"]["Api"]["Properties"]["OpenApiVersion"]
    assert sorted(map(str, deployed_stages(translate(sam)))) == [
        "Stage",
        str({"Ref": "StageName"}),
    ]


def test_access_log_is_one_json_object_per_request(cfn: dict[str, Any]) -> None:
    setting = access_log_setting(cfn)  # ApiAccessLogs=true (tests/template/test_first_deploy.py)
    assert setting["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    log_format = setting["Format"]
    assert "\n" not in log_format  # one line per request
    line = _render(log_format)
    assert set(ACCESS_LOG_FIELDS) <= set(line)
    fields = json.loads(log_format)  # every value is a quoted variable: JSON as written
    for field, variable in ACCESS_LOG_FIELDS.items():
        assert fields[field] == variable, field


def test_access_log_render_rejects_a_broken_format() -> None:
    with pytest.raises(json.JSONDecodeError):  # an unquoted variable: x is not JSON
        _render('{"status":$context.status,"requestId":"$context.requestId"}')


def test_stage_throttling_comes_from_parameters(cfn: dict[str, Any]) -> None:
    (setting,) = _stage(cfn)["MethodSettings"]
    assert (setting["ResourcePath"], setting["HttpMethod"]) == ("/*", "*")
    assert setting["ThrottlingRateLimit"] == {"Ref": "ApiThrottlingRateLimit"}
    assert setting["ThrottlingBurstLimit"] == {"Ref": "ApiThrottlingBurstLimit"}
    params = cfn["Parameters"]
    assert (
        params["ApiThrottlingRateLimit"]["Default"],
        params["ApiThrottlingBurstLimit"]["Default"],
    ) == (100, 200)


def _depends_on(cfn: dict[str, Any], logical_id: str) -> set[str]:
    """Everything a resource waits for through DependsOn, transitively."""
    seen: set[str] = set()
    pending = [logical_id]
    while pending:
        depends = cfn["Resources"][pending.pop()].get("DependsOn", [])
        for name in [depends] if isinstance(depends, str) else depends:
            if name not in seen:
                seen.add(name)
                pending.append(name)
    return seen


def test_the_api_waits_for_every_function_log_group(cfn: dict[str, Any]) -> None:
    # Until the stage exists nothing can invoke a function, so no function logs (and makes
    # Lambda create its log group, which the stack's own would then collide with) before the
    # stack has created that group with its retention.
    waits_for = _depends_on(cfn, "Api")
    assert {f"{name}LogGroup" for name in FUNCTIONS} <= waits_for
    for name in FUNCTIONS:
        group = cfn["Resources"][f"{name}LogGroup"]["Properties"]
        assert group["LogGroupName"] == {"Fn::Sub": f"/aws/lambda/${{{name}}}"}


def test_the_stage_waits_for_the_account_logging_role_when_the_stack_sets_it(
    cfn: dict[str, Any],
) -> None:
    assert "ApiGatewayAccountReady" in _depends_on(cfn, "Api")
    handle = cfn["Resources"]["ApiGatewayAccountReady"]
    assert "Condition" not in handle  # DependsOn may not name a resource that is not created
    assert handle["Metadata"]["ApiGatewayAccount"] == {
        "Fn::If": ["ManagesApiGatewayAccount", {"Ref": "ApiGatewayAccount"}, ""]
    }
    account = cfn["Resources"]["ApiGatewayAccount"]
    assert account["Condition"] == "ManagesApiGatewayAccount"
    assert account["Properties"]["CloudWatchRoleArn"] == {
        "Fn::GetAtt": ["ApiGatewayLoggingRole", "Arn"]
    }
    # Default: the region's setting is left alone (tests/template/test_first_deploy.py).
    assert not condition_holds(cfn, "ManagesApiGatewayAccount", {})
    assert condition_holds(cfn, "ManagesApiGatewayAccount", {"CreateApiGatewayLoggingRole": "true"})


def test_the_account_logging_role_outlives_the_stack(cfn: dict[str, Any]) -> None:
    # The role is the region's, not this API's: other APIs may log through it after the
    # stack is gone (deleting it would silently stop their logs). A failed first create
    # leaves neither behind.
    role = cfn["Resources"]["ApiGatewayLoggingRole"]
    assert role["Condition"] == "ManagesApiGatewayAccount"
    for resource in (role, cfn["Resources"]["ApiGatewayAccount"]):
        assert resource["DeletionPolicy"] == "RetainExceptOnCreate"
        assert resource["UpdateReplacePolicy"] == "Retain"
    props = role["Properties"]
    (statement,) = props["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "apigateway.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    assert props["ManagedPolicyArns"] == [
        {
            "Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs"
        }
    ]
    assert "Policies" not in props
