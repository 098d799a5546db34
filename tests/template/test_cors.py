"""CORS: with CorsAllowOrigins set, the gateway answers the preflight of every path itself;
with the default (empty) the API has no OPTIONS method and the functions add no header."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.template.sam import condition_holds, rest_api_body

APP_ORIGIN = "https://app.example"


def _deployed(cfn: dict[str, Any], value: Any, parameters: dict[str, str]) -> Any:
    """`value` as CloudFormation deploys it for the parameters (None for AWS::NoValue)."""
    if isinstance(value, dict) and list(value) == ["Fn::If"]:
        condition, if_true, if_false = value["Fn::If"]
        chosen = if_true if condition_holds(cfn, condition, parameters) else if_false
        return _deployed(cfn, chosen, parameters)
    return None if value == {"Ref": "AWS::NoValue"} else value


def _methods(cfn: dict[str, Any], parameters: dict[str, str]) -> dict[str, dict[str, Any]]:
    """path -> method -> operation, as deployed."""
    deployed: dict[str, dict[str, Any]] = {}
    for path, item in rest_api_body(cfn)["paths"].items():
        for method, operation in item.items():
            operation = _deployed(cfn, operation, parameters)
            if operation is not None:
                deployed.setdefault(path, {})[method] = operation
    return deployed


def test_by_default_no_path_answers_options(cfn: dict[str, Any]) -> None:
    methods = _methods(cfn, {})
    assert methods  # the functions' routes are there
    assert not [path for path, ops in methods.items() if "options" in ops]


def test_with_origins_every_path_answers_its_preflight_at_the_gateway(
    cfn: dict[str, Any],
) -> None:
    methods = _methods(cfn, {"CorsAllowOrigins": APP_ORIGIN})
    missing = [path for path, ops in methods.items() if "options" not in ops]
    assert not missing, f"no preflight on {missing}"
    for path, ops in methods.items():
        integration = ops["options"]["x-amazon-apigateway-integration"]
        assert integration["type"] == "mock", path  # never reaches a function
        assert integration["responses"]["default"]["statusCode"] == "204"
        assert "204" in ops["options"]["responses"]
        # The functions' own methods are still there beside it.
        assert set(ops) - {"options"}, path


def test_the_preflight_allows_the_a2a_headers_and_methods(cfn: dict[str, Any]) -> None:
    ops = _methods(cfn, {"CorsAllowOrigins": APP_ORIGIN})["/"]
    default = ops["options"]["x-amazon-apigateway-integration"]["responses"]["default"]
    params = default["responseParameters"]
    allowed = params["method.response.header.Access-Control-Allow-Headers"].strip("'").split(",")
    assert {"Content-Type", "Authorization", "X-API-Key", "A2A-Version"} <= set(allowed)
    assert {"A2A-Extensions", "X-A2A-Extensions"} <= set(allowed)
    methods = params["method.response.header.Access-Control-Allow-Methods"].strip("'").split(",")
    assert {"GET", "POST", "DELETE"} <= set(methods)
    assert params["method.response.header.Vary"] == "'Origin'"
    # Every header the integration maps is declared on the method response.
    declared = set(ops["options"]["responses"]["204"]["headers"])
    assert {k.removeprefix("method.response.header.") for k in params} <= declared
    assert "Access-Control-Allow-Origin" in declared


def test_the_preflight_echoes_only_an_allowed_origin(cfn: dict[str, Any]) -> None:
    ops = _methods(cfn, {"CorsAllowOrigins": APP_ORIGIN})["/"]
    default = ops["options"]["x-amazon-apigateway-integration"]["responses"]["default"]
    # No static Allow-Origin: one header value cannot name one origin of several.
    assert "method.response.header.Access-Control-Allow-Origin" not in default["responseParameters"]
    template = default["responseTemplates"]["application/json"]
    assert list(template) == ["Fn::Sub"]
    text = template["Fn::Sub"]
    assert "${CorsAllowOrigins}" in text
    assert "$context.responseOverride.header.Access-Control-Allow-Origin = $origin" in text


@pytest.mark.parametrize(("value", "enabled"), [("", False), (APP_ORIGIN, True)])
def test_the_condition_follows_the_parameter(
    cfn: dict[str, Any], value: str, enabled: bool
) -> None:
    assert cfn["Parameters"]["CorsAllowOrigins"]["Default"] == ""
    assert condition_holds(cfn, "HasCorsOrigins", {"CorsAllowOrigins": value}) is enabled


def test_the_functions_read_the_origins(sam: dict[str, Any]) -> None:
    env = sam["Globals"]["Function"]["Environment"]["Variables"]
    assert env["CORS_ALLOW_ORIGINS"] == {"Ref": "CorsAllowOrigins"}


def test_the_detector_sees_an_unconditional_preflight(cfn: dict[str, Any]) -> None:
    # A preflight outside the condition would be found by the default-parameters check.
    op = {"options": {"x-amazon-apigateway-integration": {"type": "mock"}}}
    fake = {**cfn, "Resources": {**cfn["Resources"]}}
    body = {**rest_api_body(cfn), "paths": {"/": op}}
    fake["Resources"]["Api"] = {
        **cfn["Resources"]["Api"],
        "Properties": {**cfn["Resources"]["Api"]["Properties"], "Body": body},
    }
    assert "options" in _methods(fake, {})["/"]


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("", True),
        (APP_ORIGIN, True),
        (f"{APP_ORIGIN}, http://localhost:5173", True),
        ("http://[::1]:8080", True),
        ("*", False),  # a wildcard would let any site read the answers
        (f"{APP_ORIGIN}/", False),  # an origin has no path
        ('https://a"b', False),  # would break out of the preflight's template
        ("https://$context.x", False),
    ],
)
def test_the_parameter_takes_origins_only(sam: dict[str, Any], value: str, accepted: bool) -> None:
    pattern = sam["Parameters"]["CorsAllowOrigins"]["AllowedPattern"]
    # CloudFormation matches the whole value (java.util.regex, same syntax here).
    assert bool(re.fullmatch(pattern, value)) is accepted
