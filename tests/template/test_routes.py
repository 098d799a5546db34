"""Every gateway route reaches its function, with the right transfer mode, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.template.sam import (
    BUFFERED,
    STREAM,
    TEMPLATE,
    load_sam,
    resources_of_type,
    routes,
    target_function,
    transfer_mode,
    transfer_modes,
    translate,
)

# Each function's routes, as "METHOD path" pairs.
_ROUTES_OF = {
    "AgentCardFunction": [
        "GET /.well-known/agent-card.json",
        "GET /.well-known/jwks.json",
        "GET /extendedAgentCard",
    ],
    "SendMessageFunction": ["POST /message:send"],
    "ListTasksFunction": ["GET /tasks"],
    "GetTaskFunction": ["GET /tasks/{id}"],
    "StreamFunction": ["POST /message:stream", "POST /tasks/{id}", "POST /"],
    "PushConfigFunction": [
        "POST /tasks/{id}/pushNotificationConfigs",
        "GET /tasks/{id}/pushNotificationConfigs",
        "GET /tasks/{id}/pushNotificationConfigs/{configId}",
        "DELETE /tasks/{id}/pushNotificationConfigs/{configId}",
    ],
    "DelegationReceiverFunction": ["POST /delegations/{taskId}/{key}"],
}
ROUTES = {
    tuple(route.split(" ", 1)): function
    for function, routes_of_function in _ROUTES_OF.items()
    for route in routes_of_function
}

# Responses that may outlive API Gateway's 29 s buffered limit.
LONG_LIVED = {
    ("POST", "/message:send"),
    ("POST", "/message:stream"),
    ("GET", "/tasks/{id}"),  # GET /tasks/{id}:subscribe arrives here (the proto's GET rule)
    ("POST", "/tasks/{id}"),
    ("POST", "/"),
}
# Every operation also under a tenant (the proto's `/{tenant}/...` bindings), on the same
# function; not the public card and its keys, nor JSON-RPC (which carries `tenant` in params),
# nor the delegations' notifications (the task in the path is the stack's own).
_NO_TENANT = {
    ("GET", "/.well-known/agent-card.json"),
    ("GET", "/.well-known/jwks.json"),
    ("POST", "/"),
    ("POST", "/delegations/{taskId}/{key}"),
}
ROUTES |= {
    (m, "/{tenant}" + p): f for (m, p), f in list(ROUTES.items()) if (m, p) not in _NO_TENANT
}
LONG_LIVED |= {(m, "/{tenant}" + p) for m, p in LONG_LIVED if p != "/"}
MODES = {route: STREAM if route in LONG_LIVED else BUFFERED for route in ROUTES}


def test_every_route_reaches_its_function_and_no_other_route_exists(cfn: dict[str, Any]) -> None:
    found = {route: target_function(integration) for route, integration in routes(cfn).items()}
    assert found == ROUTES


def test_no_catch_all_resources(cfn: dict[str, Any]) -> None:
    paths = routes(cfn)
    assert not [p for _, p in paths if "{proxy+}" in p or p == "/{proxy}"]
    assert not [m for m, _ in paths if m == "X-AMAZON-APIGATEWAY-ANY-METHOD"]


def test_the_gateway_may_invoke_each_function_on_exactly_its_routes(cfn: dict[str, Any]) -> None:
    granted: set[tuple[str, str, str]] = set()
    permissions = resources_of_type(cfn, "AWS::Lambda::Permission")
    # The authorizer's: on the API's authorizers, not a route (tests/template/test_auth.py).
    assert permissions.pop("AuthorizerFunctionPermission")["Properties"]["FunctionName"] == {
        "Fn::GetAtt": ["AuthorizerFunction", "Arn"]
    }
    for permission in permissions.values():
        props = permission["Properties"]
        assert props["Action"] == "lambda:InvokeFunction"
        assert props["Principal"] == "apigateway.amazonaws.com"
        template, variables = props["SourceArn"]["Fn::Sub"]
        assert variables["__ApiId__"] == {"Ref": "Api"}
        match = re.fullmatch(
            r"arn:aws:execute-api:\$\{AWS::Region\}:\$\{AWS::AccountId\}:"
            r"\$\{__ApiId__\}/\$\{__Stage__\}/(?P<method>[A-Z]+)(?P<path>/.*)",
            template,
        )
        assert match, template
        granted.add(
            (match["method"], match["path"], props["FunctionName"]["Ref"].removesuffix("Aliaslive"))
        )
    # SAM writes path parameters in permissions as `*`.
    expected = {
        (method, re.sub(r"\{[^}]+\}", "*", path), function)
        for (method, path), function in ROUTES.items()
    }
    assert granted == expected


def test_long_lived_routes_stream_and_all_others_are_buffered(cfn: dict[str, Any]) -> None:
    assert transfer_modes(cfn) == MODES


def _mutated(tmp_path: Path, old: str, new: str, count: int) -> dict[str, Any]:
    text = TEMPLATE.read_text()
    assert text.count(old) == count, f"mutation target {old!r} not found {count} times"
    copy = tmp_path / "template.yaml"
    copy.write_text(text.replace(old, new))
    return translate(load_sam(copy))


def test_detector_catches_the_stream_value_trap(tmp_path: Path) -> None:
    # `STREAM` is the OpenAPI integration value; the SAM event property wants RESPONSE_STREAM.
    # SAM and cfn-lint accept the wrong one silently and deploy buffered routes.
    mutated = _mutated(
        tmp_path,
        "ResponseTransferMode: RESPONSE_STREAM",
        "ResponseTransferMode: STREAM",
        len(LONG_LIVED),
    )
    modes = transfer_modes(mutated)
    assert {route: modes[route] for route in LONG_LIVED} == dict.fromkeys(LONG_LIVED, BUFFERED)
    assert modes != MODES  # the assertion of the test above would fail on this template
    for route in LONG_LIVED:
        uri = routes(mutated)[route]["uri"]["Fn::Sub"]
        assert uri.endswith(f"/functions/${{{ROUTES[route]}.Arn}}/invocations"), uri


def test_detector_catches_a_forgotten_transfer_mode() -> None:
    sam = load_sam()
    del sam["Resources"]["StreamFunction"]["Properties"]["Events"]["TaskAction"]["Properties"][
        "ResponseTransferMode"
    ]
    modes = transfer_modes(translate(sam))
    assert modes[("POST", "/tasks/{id}")] == BUFFERED
    assert modes != MODES


def test_detector_catches_a_buffered_route_turned_streaming() -> None:
    sam = load_sam()
    event = sam["Resources"]["ListTasksFunction"]["Properties"]["Events"]["ListTasks"]
    event["Properties"]["ResponseTransferMode"] = "RESPONSE_STREAM"
    modes = transfer_modes(translate(sam))
    assert modes[("GET", "/tasks")] == STREAM
    assert modes != MODES


@pytest.mark.parametrize(
    "integration",
    [
        {"responseTransferMode": "STREAM", "uri": "invocations"},
        {"uri": "response-streaming-invocations"},
    ],
)
def test_detector_flags_half_configured_integrations(
    cfn: dict[str, Any], integration: dict[str, str]
) -> None:
    base = dict(routes(cfn)[("POST", "/message:send")])
    base.pop("responseTransferMode")
    uri = base["uri"]["Fn::Sub"].rsplit("/", 1)[0] + "/" + integration["uri"]
    base["uri"] = {"Fn::Sub": uri}
    if "responseTransferMode" in integration:
        base["responseTransferMode"] = integration["responseTransferMode"]
    assert transfer_mode(base).startswith("INCONSISTENT")
