"""Tenants in the template: every HTTP rule of the proto has its `/{tenant}/...` binding
(additional_bindings) as a gateway route, to the same function, transfer mode, timeout and
security as the route without the tenant; the Tenant parameter reaches the functions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.core.service import RESERVED_TENANTS
from tests.template.sam import resolve_ifs, rest_api_body, routes

# The spec's copy beside the repository, read when present (KNOWN_RULES otherwise: a clone).
PROTO = Path("/work/shared/spec/a2a-v1.0.1.proto")

# `option (google.api.http) = { post: "/message:send" ... additional_bindings { post:
# "/{tenant}/message:send" } }`: the rule, then its tenant binding.
_RULE = re.compile(
    r'option \(google\.api\.http\) = \{\s*(?P<m1>get|post|delete): "(?P<p1>[^"]+)"'
    r".*?additional_bindings:? \{\s*(?P<m2>get|post|delete): \"(?P<p2>[^\"]+)\"",
    re.S,
)
# The rules as the proto wrote them (v1.0.1), should the file not be at hand.
KNOWN_RULES = [
    ("POST", "/message:send"),
    ("POST", "/message:stream"),
    ("GET", "/tasks/{id=*}"),
    ("GET", "/tasks"),
    ("POST", "/tasks/{id=*}:cancel"),
    ("GET", "/tasks/{id=*}:subscribe"),
    ("POST", "/tasks/{task_id=*}/pushNotificationConfigs"),
    ("GET", "/tasks/{task_id=*}/pushNotificationConfigs/{id=*}"),
    ("GET", "/tasks/{task_id=*}/pushNotificationConfigs"),
    ("GET", "/extendedAgentCard"),
    ("DELETE", "/tasks/{task_id=*}/pushNotificationConfigs/{id=*}"),
]


def proto_rules() -> list[tuple[str, str, str]]:
    """(METHOD, path, tenant path) of every HTTP rule of the proto."""
    if not PROTO.is_file():
        return [(m, p, "/{tenant}" + p) for m, p in KNOWN_RULES]
    found = []
    for match in _RULE.finditer(PROTO.read_text()):
        assert match["m1"] == match["m2"], match.group(0)
        found.append((match["m1"].upper(), match["p1"], match["p2"]))
    return found


def resource_of(path: str) -> str:
    """The gateway resource a proto path reaches, parameters as `{}`: `{id=*}` is a segment
    and a `:verb` after it is part of that segment (API Gateway has one `{id}` resource)."""
    path = re.sub(r"\{[^}]*\}(:[A-Za-z]+)?", "{}", path)
    return path


def _normalised(cfn: dict[str, Any]) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    return {
        (method, re.sub(r"\{[^}]*\}", "{}", path)): (path, integration)
        for (method, path), integration in routes(cfn).items()
        if method != "OPTIONS"
    }


def test_the_proto_rules_are_read() -> None:
    rules = proto_rules()
    assert {(m, p) for m, p, _ in rules} == set(KNOWN_RULES)
    assert all(t == "/{tenant}" + p for _, p, t in rules)


@pytest.mark.parametrize("rule", proto_rules(), ids=lambda r: f"{r[0]} {r[1]}")
def test_every_rule_has_its_tenant_route_to_the_same_function(
    cfn: dict[str, Any], rule: tuple[str, str, str]
) -> None:
    method, path, tenant_path = rule
    found = _normalised(cfn)
    plain = found.get((method, resource_of(path)))
    if plain is None:
        # GET /tasks/{id}:subscribe is streamed by the function of GET /tasks/{id}.
        pytest.fail(f"no gateway route for {method} {path}")
    tenant = found.get((method, resource_of(tenant_path)))
    assert tenant is not None, f"no gateway route for {method} {tenant_path}"
    (plain_path, plain_integration), (tenant_resource, tenant_integration) = plain, tenant
    assert tenant_resource == "/{tenant}" + plain_path
    # The whole integration alike: the same function (and alias), invocation action,
    # responseTransferMode and timeout.
    assert tenant_integration == plain_integration
    assert tenant_integration["type"] == "aws_proxy"


def test_tenant_routes_have_the_security_and_preflight_of_their_plain_route(
    cfn: dict[str, Any],
) -> None:
    body = rest_api_body(cfn)
    tenant_paths = [p for p in body["paths"] if p.startswith("/{tenant}/")]
    assert len(tenant_paths) == 7
    for auth in ("None", "ApiKey", "Jwt", "Iam"):
        params = {"Auth": auth, "CorsAllowOrigins": "https://app.example.com"}
        for path in tenant_paths:
            plain = resolve_ifs(cfn, body["paths"][path.removeprefix("/{tenant}")], params)
            tenant = resolve_ifs(cfn, body["paths"][path], params)
            assert set(tenant) == set(plain), path
            for method in plain:
                if method == "options":
                    assert tenant[method] == plain[method]
                    continue
                assert tenant[method].get("security") == plain[method].get("security"), (
                    auth,
                    method,
                    path,
                )
                if auth != "None":
                    assert tenant[method].get("security"), (auth, method, path)


def test_only_tenant_routes_were_added_beside_the_plain_ones(cfn: dict[str, Any]) -> None:
    """Every `/{tenant}` route mirrors a plain one; the card, its keys, JSON-RPC (the
    tenant is in its params) and the delegations' notifications have none."""
    found = {route for route in routes(cfn) if route[0] != "OPTIONS"}
    tenant = {(m, p) for m, p in found if p.startswith("/{tenant}")}
    plain = found - tenant
    assert {(m, p.removeprefix("/{tenant}")) for m, p in tenant} == plain - {
        ("GET", "/.well-known/agent-card.json"),
        ("GET", "/.well-known/jwks.json"),
        ("POST", "/"),
        ("POST", "/delegations/{taskId}/{key}"),
    }


def test_the_tenant_parameter_reaches_every_function(
    cfn: dict[str, Any], sam: dict[str, Any]
) -> None:
    parameter = sam["Parameters"]["Tenant"]
    assert parameter["Default"] == ""
    pattern = re.compile(parameter["AllowedPattern"])
    for good in ("", "acme", "Team_1.eu-west~2", "a" * 64):
        assert pattern.fullmatch(good), good
    for bad in ("a/b", "a b", "a:b", "ä", "a" * 65, "a%2Fb", *sorted(RESERVED_TENANTS)):
        assert not pattern.fullmatch(bad), bad
    for near in ("tasks2", "my.well-known", "..."):  # only the reserved names themselves
        assert pattern.fullmatch(near), near
    assert sam["Globals"]["Function"]["Environment"]["Variables"]["TENANT"] == {"Ref": "Tenant"}
