"""The SnapStart parameter: off by default, on for the buffered API functions when set, and
every route of those functions invokes the published alias (SnapStart never applies to
$LATEST), with the gateway's permission on that alias."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.template.sam import (
    FUNCTIONS,
    resolve_ifs,
    resources_of_type,
    rest_api_body,
)

# Not GetTaskFunction: it runs under the Lambda Web Adapter (it streams GET :subscribe), which
# SnapStart's after-restore hook cannot reach (docs/deploy.md).
SNAPSTART = {"AgentCardFunction", "ListTasksFunction", "PushConfigFunction"}
ALIAS = "live"


def _apply_on(cfn: dict[str, Any], function: str, parameters: dict[str, str]) -> str | None:
    props = cfn["Resources"][function]["Properties"]
    snap = resolve_ifs(cfn, props.get("SnapStart"), parameters)
    return None if snap is None else snap["ApplyOn"]


@pytest.mark.parametrize(("value", "expected"), [("false", "None"), ("true", "PublishedVersions")])
def test_snapstart_follows_the_parameter_on_the_buffered_api_functions(
    cfn: dict[str, Any], value: str, expected: str
) -> None:
    assert cfn["Parameters"]["SnapStart"]["Default"] == "false"
    for function in SNAPSTART:
        assert _apply_on(cfn, function, {"SnapStart": value}) == expected, function
    # The others are untouched (their invokers name the function ARN; see docs/deploy.md).
    for function in set(FUNCTIONS) - SNAPSTART:
        assert _apply_on(cfn, function, {"SnapStart": value}) is None, function


def test_switching_snapstart_publishes_a_new_version(cfn: dict[str, Any]) -> None:
    """A Version's Description cannot be updated in place: a different one replaces the
    version, i.e. publishes one with the function's current SnapStart setting."""
    versions = resources_of_type(cfn, "AWS::Lambda::Version")
    for function in SNAPSTART:
        (version,) = [
            v for v in versions.values() if v["Properties"]["FunctionName"] == {"Ref": function}
        ]
        descriptions = {
            value: resolve_ifs(cfn, version["Properties"]["Description"], {"SnapStart": value})
            for value in ("true", "false")
        }
        assert descriptions["true"] != descriptions["false"], function


def test_every_route_of_a_snapstart_function_invokes_its_alias(cfn: dict[str, Any]) -> None:
    aliases = resources_of_type(cfn, "AWS::Lambda::Alias")
    for function in SNAPSTART:
        alias_id = f"{function}Alias{ALIAS}"
        assert aliases[alias_id]["Properties"]["FunctionName"] == {"Ref": function}
        assert aliases[alias_id]["Properties"]["Name"] == ALIAS
    seen: set[str] = set()
    for path, item in rest_api_body(cfn)["paths"].items():
        for method, operation in item.items():
            uri = str((operation.get("x-amazon-apigateway-integration") or {}).get("uri"))
            for function in SNAPSTART:
                if re.search(rf"\$\{{{function}(\.Arn|Alias\w+)\}}", uri):
                    assert f"${{{function}Alias{ALIAS}}}" in uri, (method, path, uri)
                    seen.add(function)
    assert seen == SNAPSTART  # each has routes, all through the alias


def test_the_gateway_may_invoke_the_alias_only(cfn: dict[str, Any]) -> None:
    permissions = resources_of_type(cfn, "AWS::Lambda::Permission")
    for function in SNAPSTART:
        targets = {
            str(p["Properties"]["FunctionName"])
            for p in permissions.values()
            if function in str(p["Properties"]["FunctionName"])
        }
        assert targets == {str({"Ref": f"{function}Alias{ALIAS}"})}, function
