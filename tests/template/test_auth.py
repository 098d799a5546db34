"""Authentication: the Auth parameter's four modes as the translated template deploys
them. Every route but the public Agent Card is protected by the mode's scheme; the authorizer,
its permission, the usage plan and the API key source follow the mode; the defaults (no
parameter given) refuse anonymous callers. Gateway responses: test_gateway_responses.py."""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any
from unittest import mock

import pytest
import samtranslator.model.apigateway

from tests.template.sam import (
    condition_holds,
    expression_holds,
    integration_uri,
    resolve_if,
    resolve_ifs,
    resources_of_type,
    rest_api_body,
    routes,
    translate,
)

PUBLIC_CARD = ("GET", "/.well-known/agent-card.json")
# Public like the card: the key that verifies its signatures (the signatures' `jku`).
PUBLIC_JWKS = ("GET", "/.well-known/jwks.json")
# Remote agents' notifications for a delegation: the token in the request is the credential
# (checked by the function), not the Auth mode's.
PUBLIC_DELEGATIONS = ("POST", "/delegations/{taskId}/{key}")
PUBLIC = {PUBLIC_CARD, PUBLIC_JWKS, PUBLIC_DELEGATIONS}
# Every Auth value, and what its methods' `security` must be.
SECURITY = {
    "ApiKey": [{"A2AAuthorizer": []}, {"api_key": []}],
    "Jwt": [{"A2AAuthorizer": []}],
    "Iam": [{"SigV4": []}],
    "None": None,
}
MODES = sorted(SECURITY)
# The request header that carries the credential the Lambda authorizer checks.
CREDENTIAL_HEADER = {"ApiKey": "X-API-Key", "Jwt": "Authorization"}
# With origins, the CORS preflight (OPTIONS on every path) is deployed too: it stays public.
WITH_CORS = {"CorsAllowOrigins": "https://app.example"}


def _params(auth: str, **more: str) -> dict[str, str]:
    return {"Auth": auth, **more}


def _security(cfn: dict[str, Any], parameters: dict[str, str]) -> dict[tuple[str, str], Any]:
    """(METHOD, path) -> the method's `security` as deployed (None: public), for every method
    the API has with these parameters."""
    body = rest_api_body(cfn)
    found = {}
    for method, path in routes(cfn, parameters):
        operation = resolve_ifs(cfn, body["paths"][path][method.lower()], parameters)
        found[(method, path)] = operation.get("security")
    return found


def _schemes(cfn: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    return resolve_ifs(cfn, rest_api_body(cfn)["components"]["securitySchemes"], parameters)


def _resource_holds(cfn: dict[str, Any], logical_id: str, parameters: dict[str, str]) -> bool:
    """Whether CloudFormation creates the resource with these parameters."""
    condition = cfn["Resources"][logical_id].get("Condition")
    return condition is None or condition_holds(cfn, condition, parameters)


# -- Parameters and conditions -----------------------------------------------------------------


def test_auth_parameters(cfn: dict[str, Any]) -> None:
    params = cfn["Parameters"]
    assert params["Auth"]["AllowedValues"] == ["ApiKey", "Jwt", "Iam", "None"]
    assert params["Auth"]["Default"] == "ApiKey"
    ttl = params["AuthCacheTtlSeconds"]
    assert (ttl["Default"], ttl["MinValue"], ttl["MaxValue"]) == (300, 0, 3600)
    for name in ("JwtIssuer", "JwtAudience", "JwtJwksUrl"):
        assert params[name]["Type"] == "String" and params[name]["Default"] == "", name
    for name in ("ApiKeyRateLimit", "ApiKeyBurstLimit"):
        assert params[name]["Type"] == "Number" and params[name]["MinValue"] >= 1, name
    assert params["ApiKeyQuotaPerDay"]["Default"] == 0  # no quota unless asked for


@pytest.mark.parametrize(
    ("issuer", "accepted"),
    [
        ("", True),
        ("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbCdEf123", True),
        ("https://tenant.auth0.com/", True),
        ("http://127.0.0.1:8000/_local/oidc", True),  # the local stack's own issuer
        ("http://localhost:8000/_local/oidc", True),
        ("http://issuer.example", False),  # keys fetched over plain HTTP could be forged
        ("issuer.example", False),
        ("https://issuer.example/ x", False),
    ],
)
def test_the_issuer_is_https_but_for_a_local_one(
    cfn: dict[str, Any], issuer: str, accepted: bool
) -> None:
    # CloudFormation matches AllowedPattern against the whole value (Java regex).
    pattern = cfn["Parameters"]["JwtIssuer"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, issuer)) is accepted


@pytest.mark.parametrize("auth", MODES)
def test_conditions_follow_the_mode(cfn: dict[str, Any], auth: str) -> None:
    params = _params(auth)
    for mode in MODES:
        assert condition_holds(cfn, f"AuthIs{mode}", params) is (mode == auth)
    assert condition_holds(cfn, "UsesAuthorizer", params) is (auth in CREDENTIAL_HEADER)


def test_every_function_reads_the_mode_and_the_jwt_settings(cfn: dict[str, Any]) -> None:
    expected = {
        "AUTH_MODE": {"Ref": "Auth"},
        "JWT_ISSUER": {"Ref": "JwtIssuer"},
        "JWT_AUDIENCE": {"Ref": "JwtAudience"},
        "JWT_JWKS_URL": {"Ref": "JwtJwksUrl"},
    }
    for name, function in resources_of_type(cfn, "AWS::Lambda::Function").items():
        env = function["Properties"]["Environment"]["Variables"]
        assert {k: env.get(k) for k in expected} == expected, name


# -- Rules: Auth=Jwt needs its issuer and audience ------------------------------------------------


def _rule_failures(cfn: dict[str, Any], parameters: dict[str, str]) -> list[str]:
    """The AssertDescription of every assertion CloudFormation would fail for the parameters."""
    failures = []
    for rule in cfn["Rules"].values():
        if "RuleCondition" in rule and not expression_holds(cfn, rule["RuleCondition"], parameters):
            continue
        for assertion in rule["Assertions"]:
            if not expression_holds(cfn, assertion["Assert"], parameters):
                failures.append(assertion["AssertDescription"])
    return failures


def test_sam_passes_the_rules_through(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    assert cfn["Rules"] == sam["Rules"]
    assert cfn["Rules"]  # a rule SAM dropped would never be checked by CloudFormation


@pytest.mark.parametrize(
    ("parameters", "failing"),
    [
        ({"Auth": "Jwt"}, ["JwtIssuer", "JwtAudience"]),
        ({"Auth": "Jwt", "JwtIssuer": "https://issuer.example"}, ["JwtAudience"]),
        ({"Auth": "Jwt", "JwtAudience": "a2a"}, ["JwtIssuer"]),
        ({"Auth": "Jwt", "JwtIssuer": "https://issuer.example", "JwtAudience": "a2a"}, []),
        ({}, []),  # the default (ApiKey) needs neither
        ({"Auth": "Iam"}, []),
        ({"Auth": "None"}, []),
    ],
)
def test_jwt_mode_refuses_a_stack_without_issuer_or_audience(
    cfn: dict[str, Any], parameters: dict[str, str], failing: list[str]
) -> None:
    failures = _rule_failures(cfn, parameters)
    assert len(failures) == len(failing), failures
    for name, failure in zip(failing, failures, strict=True):
        assert name in failure


# -- Which methods are protected, by what ---------------------------------------------------------


@pytest.mark.parametrize("cors", [{}, WITH_CORS], ids=["no-cors", "cors"])
@pytest.mark.parametrize("auth", MODES)
def test_every_route_but_the_public_card_has_the_modes_security(
    cfn: dict[str, Any], auth: str, cors: dict[str, str]
) -> None:
    params = _params(auth, **cors)
    security = _security(cfn, params)
    functions_routes = {r for r in security if r[0] != "OPTIONS"}
    assert functions_routes >= PUBLIC and len(functions_routes) == 24
    protected = {route for route, value in security.items() if value is not None}
    if auth == "None":
        assert protected == set()
    else:
        assert protected == functions_routes - PUBLIC
        assert ("GET", "/extendedAgentCard") in protected
    for route in protected:
        assert security[route] == SECURITY[auth], route
    # The preflight carries no credentials (browsers never send them on OPTIONS).
    assert all(security[r] is None for r in security if r[0] == "OPTIONS")
    assert bool([r for r in security if r[0] == "OPTIONS"]) is bool(cors)


def test_the_security_detector_sees_an_unprotected_route(sam: dict[str, Any]) -> None:
    # A route added to a function without its `security` line in the DefinitionBody.
    widened = copy.deepcopy(sam)
    widened["Resources"]["GetTaskFunction"]["Properties"]["Events"]["GetTaskByAlias"] = {
        "Type": "Api",
        "Properties": {"RestApiId": {"Ref": "Api"}, "Path": "/tasks/{id}/alias", "Method": "GET"},
    }
    security = _security(translate(widened), _params("ApiKey"))
    assert security[("GET", "/tasks/{id}/alias")] is None
    assert security[("GET", "/tasks/{id}")] == SECURITY["ApiKey"]


@pytest.mark.parametrize("auth", MODES)
def test_the_security_schemes(cfn: dict[str, Any], auth: str) -> None:
    schemes = _schemes(cfn, _params(auth))
    assert set(schemes) == {"A2AAuthorizer", "api_key", "SigV4"}
    assert schemes["api_key"] == {"type": "apiKey", "name": "x-api-key", "in": "header"}
    assert schemes["SigV4"] == {
        "type": "apiKey",
        "name": "Authorization",
        "in": "header",
        "x-amazon-apigateway-authtype": "awsSigv4",
    }
    custom = schemes["A2AAuthorizer"]
    assert (custom["type"], custom["in"], custom["x-amazon-apigateway-authtype"]) == (
        "apiKey",
        "header",
        "custom",
    )
    authorizer = custom["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "request"
    header = CREDENTIAL_HEADER.get(auth, "X-API-Key")  # unused in Iam and None
    assert custom["name"] == header
    # API Gateway answers 401 without invoking the authorizer when this header is missing, and
    # caches the authorizer's answer per value of it.
    assert authorizer["identitySource"] == f"method.request.header.{header}"
    assert authorizer["authorizerResultTtlInSeconds"] == {"Ref": "AuthCacheTtlSeconds"}


def test_the_authorizer_uri_invokes_the_authorizer_function(cfn: dict[str, Any]) -> None:
    authorizer = rest_api_body(cfn)["components"]["securitySchemes"]["A2AAuthorizer"]
    match = integration_uri({"uri": authorizer["x-amazon-apigateway-authorizer"]["authorizerUri"]})
    assert match["function"] == "AuthorizerFunction"
    assert (match["version"], match["action"]) == ("2015-03-31", "invocations")


@pytest.mark.parametrize(("auth", "source"), [("ApiKey", "AUTHORIZER"), ("Jwt", "HEADER")])
def test_the_usage_plan_key_comes_from_the_authorizer_in_api_key_mode(
    cfn: dict[str, Any], auth: str, source: str
) -> None:
    api = cfn["Resources"]["Api"]["Properties"]
    assert resolve_if(cfn, api["ApiKeySourceType"], _params(auth)) == source


# -- The authorizer function and its permission ---------------------------------------------------


def test_the_authorizer_function(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    source = sam["Resources"]["AuthorizerFunction"]
    assert "Condition" not in source  # the local stack runs it in every mode
    assert source["Properties"]["CodeUri"] == "functions/authorizer/"
    props = cfn["Resources"]["AuthorizerFunction"]["Properties"]
    assert props["Handler"] == "app.handler"
    assert (props["MemorySize"], props["Timeout"]) == (256, 10)


@pytest.mark.parametrize("auth", MODES)
def test_api_gateway_may_invoke_the_authorizer_only_when_it_is_used(
    cfn: dict[str, Any], auth: str
) -> None:
    permissions = {
        logical_id
        for logical_id, permission in resources_of_type(cfn, "AWS::Lambda::Permission").items()
        if permission["Properties"]["FunctionName"] == {"Fn::GetAtt": ["AuthorizerFunction", "Arn"]}
        and _resource_holds(cfn, logical_id, _params(auth))
    }
    assert permissions == ({"AuthorizerFunctionPermission"} if auth in CREDENTIAL_HEADER else set())


def test_the_authorizer_permission_names_the_apis_authorizers(cfn: dict[str, Any]) -> None:
    props = cfn["Resources"]["AuthorizerFunctionPermission"]["Properties"]
    assert props["Action"] == "lambda:InvokeFunction"
    assert props["Principal"] == "apigateway.amazonaws.com"
    assert props["SourceArn"] == {
        "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:"
        "${Api}/authorizers/*"
    }


# -- The usage plan (ApiKey mode) ------------------------------------------------------------------


def _usage_plans(cfn: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    return {
        logical_id: resolve_ifs(cfn, plan["Properties"], parameters)
        for logical_id, plan in resources_of_type(cfn, "AWS::ApiGateway::UsagePlan").items()
        if _resource_holds(cfn, logical_id, parameters)
    }


@pytest.mark.parametrize("auth", MODES)
def test_a_usage_plan_exists_only_in_api_key_mode(cfn: dict[str, Any], auth: str) -> None:
    assert bool(_usage_plans(cfn, _params(auth))) is (auth == "ApiKey")


def test_the_usage_plan_covers_the_stage_with_the_parameters_limits(cfn: dict[str, Any]) -> None:
    (plan,) = _usage_plans(cfn, {}).values()
    (stage_id,) = resources_of_type(cfn, "AWS::ApiGateway::Stage")
    # A Ref to the stage resource: the plan is created after the stage (it must exist).
    assert plan["ApiStages"] == [{"ApiId": {"Ref": "Api"}, "Stage": {"Ref": stage_id}}]
    assert plan["Throttle"] == {
        "RateLimit": {"Ref": "ApiKeyRateLimit"},
        "BurstLimit": {"Ref": "ApiKeyBurstLimit"},
    }
    assert "Quota" not in plan  # ApiKeyQuotaPerDay=0: no quota
    (plan,) = _usage_plans(cfn, {"ApiKeyQuotaPerDay": "5000"}).values()
    assert plan["Quota"] == {"Limit": {"Ref": "ApiKeyQuotaPerDay"}, "Period": "DAY"}


# -- Outputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("auth", MODES)
def test_outputs_name_the_mode_and_the_usage_plan(cfn: dict[str, Any], auth: str) -> None:
    outputs = cfn["Outputs"]
    assert outputs["AuthMode"]["Value"] == {"Ref": "Auth"}
    plan = outputs["UsagePlanId"]
    assert plan["Value"] == {"Ref": "ApiKeyUsagePlan"}
    assert condition_holds(cfn, plan["Condition"], _params(auth)) is (auth == "ApiKey")
    warning = outputs["AuthWarning"]
    assert condition_holds(cfn, warning["Condition"], _params(auth)) is (auth == "None")
    assert "anyone on the internet" in warning["Value"].lower()


# -- The defaults: a deployed stack refuses anonymous callers ------------------------------------


def test_with_no_parameters_changed_anonymous_callers_are_refused(cfn: dict[str, Any]) -> None:
    defaults: dict[str, str] = {}
    assert cfn["Parameters"]["Auth"]["Default"] == "ApiKey"
    security = _security(cfn, defaults)
    schemes = _schemes(cfn, defaults)
    for route, value in security.items():
        if route in PUBLIC:
            assert value is None
            continue
        # Each requirement object is AND-ed: the authorizer (the key must be valid) and the
        # usage plan's key; a method with no requirement would be open.
        assert value, route
        assert {"A2AAuthorizer": []} in value, route
        for requirement in value:
            for name in requirement:
                assert name in schemes, (route, name)
    authorizer = schemes["A2AAuthorizer"]["x-amazon-apigateway-authorizer"]
    assert authorizer["identitySource"] == "method.request.header.X-API-Key"
    assert _resource_holds(cfn, "AuthorizerFunctionPermission", defaults)
    assert _usage_plans(cfn, defaults)


# -- Changing Auth takes effect -------------------------------------------------------------------


def _deployment(cfn: dict[str, Any]) -> str:
    (logical_id,) = resources_of_type(cfn, "AWS::ApiGateway::Deployment")
    return logical_id


def test_changing_auth_redeploys_the_stage(sam: dict[str, Any]) -> None:
    # SAM names the Deployment by a hash of the body as written (its !If unresolved), so a
    # parameter change alone keeps the old Deployment: the stage would keep serving the old
    # configuration (None -> ApiKey: still open). AlwaysDeploy makes one per transform.
    assert sam["Resources"]["Api"]["Properties"]["AlwaysDeploy"] is True
    hashed = copy.deepcopy(sam)
    del hashed["Resources"]["Api"]["Properties"]["AlwaysDeploy"]
    assert _deployment(translate(hashed, _params("None"))) == _deployment(
        translate(hashed, _params("ApiKey"))
    )
    clock = itertools.count(1_700_000_000, 60)  # each transform a minute later
    with mock.patch.object(samtranslator.model.apigateway.time, "time", lambda: next(clock)):
        assert _deployment(translate(sam, _params("None"))) != _deployment(
            translate(sam, _params("ApiKey"))
        )
