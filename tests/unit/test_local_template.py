"""The local stack's template resolver: condition functions, AWS::NoValue, and the template's
own Api resolved per Auth mode (what the local gateway enforces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.local.authorizers import method_security
from a2a_serverless.local.template import Resolver, load_template, parameter_defaults

ROOT = Path(__file__).resolve().parents[2]

CONDITIONS: dict[str, Any] = {
    "IsA": {"Fn::Equals": [{"Ref": "Mode"}, "A"]},
    "IsB": {"Fn::Equals": [{"Ref": "Mode"}, "B"]},
    "AOrB": {"Fn::Or": [{"Condition": "IsA"}, {"Condition": "IsB"}]},
    "NotA": {"Fn::Not": [{"Condition": "IsA"}]},
    "AAndCount": {"Fn::And": [{"Condition": "IsA"}, {"Fn::Equals": [{"Ref": "Count"}, "3"]}]},
    "Loop": {"Condition": "Loop"},
}


def resolver(**parameters: str) -> Resolver:
    return Resolver({"Mode": "A", "Count": "3", **parameters}, {}, {"Fn.Arn": "arn:fn"}, CONDITIONS)


@pytest.mark.parametrize(
    ("mode", "count", "expected"),
    [
        ("A", "3", {"IsA": True, "IsB": False, "AOrB": True, "NotA": False, "AAndCount": True}),
        ("A", "4", {"IsA": True, "IsB": False, "AOrB": True, "NotA": False, "AAndCount": False}),
        ("B", "3", {"IsA": False, "IsB": True, "AOrB": True, "NotA": True, "AAndCount": False}),
        ("C", "3", {"IsA": False, "IsB": False, "AOrB": False, "NotA": True, "AAndCount": False}),
    ],
)
def test_conditions_follow_the_parameters(mode: str, count: str, expected: dict[str, bool]) -> None:
    r = resolver(Mode=mode, Count=count)
    assert {name: r.condition(name) for name in expected} == expected


def test_numbers_compare_as_strings() -> None:
    r = Resolver({"Count": "3"}, {}, {}, {"Three": {"Fn::Equals": [{"Ref": "Count"}, 3]}})
    assert r.condition("Three") is True


def test_if_resolves_only_the_chosen_branch() -> None:
    # The other branch names a resource this configuration does not have.
    value = {"Fn::If": ["IsA", {"Fn::GetAtt": ["Fn", "Arn"]}, {"Ref": "Missing"}]}
    assert resolver(Mode="A").resolve(value) == "arn:fn"
    with pytest.raises(KeyError):
        resolver(Mode="B").resolve(value)


def test_nested_if_and_no_value_drop_keys_and_items() -> None:
    template = {
        "kept": 1,
        "security": {
            "Fn::If": [
                "IsA",
                [{"x": []}],
                {"Fn::If": ["IsB", [{"y": []}], {"Ref": "AWS::NoValue"}]},
            ]
        },
        "items": ["a", {"Fn::If": ["IsB", "b", {"Ref": "AWS::NoValue"}]}, "c"],
    }
    assert resolver(Mode="A").resolve(template) == {
        "kept": 1,
        "security": [{"x": []}],
        "items": ["a", "c"],
    }
    assert resolver(Mode="B").resolve(template) == {
        "kept": 1,
        "security": [{"y": []}],
        "items": ["a", "b", "c"],
    }
    assert resolver(Mode="C").resolve(template) == {"kept": 1, "items": ["a", "c"]}


def test_condition_function_as_a_value_and_unknown_or_circular_conditions() -> None:
    assert resolver().resolve({"Condition": "NotA"}) is False
    with pytest.raises(KeyError):
        resolver().condition("Nope")
    with pytest.raises(ValueError):
        resolver().condition("Loop")


def test_sub_and_ref_still_resolve() -> None:
    r = resolver()
    assert r.resolve({"Fn::Sub": "${AWS::Region}/${Fn.Arn}/${Mode}"}) == "us-east-1/arn:fn/A"
    assert r.resolve({"Ref": "AWS::NoValue"}) is None


def test_join_and_split_of_a_list_parameter() -> None:
    """A CommaDelimitedList parameter's value is its text as given, comma-separated."""
    r = resolver(Names="a,b,c")
    assert r.resolve({"Fn::Join": ["+", {"Ref": "Names"}]}) == "a+b+c"
    assert r.resolve({"Fn::Split": [",", {"Ref": "Names"}]}) == ["a", "b", "c"]
    assert r.resolve({"Fn::Join": ["-", {"Fn::Split": [",", "x,y"]}]}) == "x-y"
    assert r.resolve({"Fn::Join": ["/", [{"Ref": "Mode"}, "z"]]}) == "A/z"


# -- the real template ------------------------------------------------------------------------


def _template_api(auth: str) -> dict[str, Any]:
    template = load_template(ROOT / "template.yaml")
    r = Resolver(
        {**parameter_defaults(template), "Auth": auth},
        {},
        {"AuthorizerFunction.Arn": "arn:aws:lambda:us-east-1:123456789012:function:authz"},
        template["Conditions"],
    )
    definition: dict[str, Any] = r.resolve(
        template["Resources"]["Api"]["Properties"]["DefinitionBody"]
    )
    return definition


ROUTES = [
    ("POST", "/"),
    ("GET", "/extendedAgentCard"),
    ("POST", "/message:send"),
    ("POST", "/message:stream"),
    ("GET", "/tasks"),
    ("GET", "/tasks/{id}"),
    ("POST", "/tasks/{id}"),
    ("GET", "/tasks/{id}/pushNotificationConfigs"),
    ("POST", "/tasks/{id}/pushNotificationConfigs"),
    ("GET", "/tasks/{id}/pushNotificationConfigs/{configId}"),
    ("DELETE", "/tasks/{id}/pushNotificationConfigs/{configId}"),
]


@pytest.mark.parametrize("auth", ["ApiKey", "Jwt", "Iam", "None"])
def test_template_security_per_mode(auth: str) -> None:
    definition = _template_api(auth)
    assert method_security(definition, "/.well-known/agent-card.json", "GET").open
    for method, path in ROUTES:
        security = method_security(definition, path, method)
        if auth == "None":
            assert security.open, (method, path)
            continue
        assert security.sigv4 is (auth == "Iam"), (method, path)
        assert security.api_key_required is (auth == "ApiKey"), (method, path)
        if auth == "Iam":
            assert security.authorizer is None
        else:
            assert security.authorizer is not None
            header = "Authorization" if auth == "Jwt" else "X-API-Key"
            assert security.authorizer.identity_sources == (f"method.request.header.{header}",)
            assert security.authorizer.type == "request"
            assert "function:authz/invocations" in security.authorizer.uri
            assert security.authorizer.ttl_seconds == 300
