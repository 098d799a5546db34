"""Agent Card signatures in the template: the CardSigningKeyArn parameter reaches the card
function as CARD_SIGNING_KEY, only a key ARN is accepted, the function may sign with that key
(and nothing else) only when one is set, and the JWKS route is public in every Auth mode."""

from __future__ import annotations

import re
from typing import Any

import pytest

from a2a_serverless.settings import Settings
from tests.template.sam import (
    FUNCTIONS,
    condition_holds,
    resolve_ifs,
    resources_of_type,
    rest_api_body,
    role_of,
    routes,
    target_function,
)

KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
JWKS = ("GET", "/.well-known/jwks.json")
SIGNED = {"CardSigningKeyArn": KEY_ARN}


def test_the_parameter_defaults_to_unsigned(cfn: dict[str, Any]) -> None:
    parameter = cfn["Parameters"]["CardSigningKeyArn"]
    assert parameter["Type"] == "String" and parameter["Default"] == ""
    assert Settings.model_fields["card_signing_key"].default == ""


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("", True),
        (KEY_ARN, True),
        ("arn:aws-cn:kms:cn-north-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab", True),
        ("alias/card", False),  # an alias cannot scope an IAM grant on the key
        ("arn:aws:kms:eu-west-1:123456789012:alias/card", False),
        ("1234abcd-12ab-34cd-56ef-1234567890ab", False),
        ("local", False),  # the local stack's generated key is no deployment's
    ],
)
def test_only_a_key_arn_is_accepted(cfn: dict[str, Any], value: str, accepted: bool) -> None:
    # CloudFormation anchors AllowedPattern at both ends; the pattern anchors itself too.
    pattern = cfn["Parameters"]["CardSigningKeyArn"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, value)) is accepted


SIGNERS = ("AgentCardFunction", "StreamFunction")  # the card; JSON-RPC's extended card


def test_only_the_card_serving_functions_get_the_key(cfn: dict[str, Any]) -> None:
    functions = resources_of_type(cfn, "AWS::Lambda::Function")
    assert set(FUNCTIONS) <= set(functions)
    for name in FUNCTIONS:
        variables = functions[name]["Properties"]["Environment"]["Variables"]
        if name in SIGNERS:
            assert variables["CARD_SIGNING_KEY"] == {"Ref": "CardSigningKeyArn"}
        else:
            assert "CARD_SIGNING_KEY" not in variables, name


def test_the_local_stack_takes_an_exported_key(sam: dict[str, Any]) -> None:
    # local/stack.py lets an exported setting win only over a variable the template sets:
    # `CARD_SIGNING_KEY=local scripts/dev` relies on this one being set (tests/e2e shows it).
    own = sam["Resources"]["AgentCardFunction"]["Properties"]["Environment"]["Variables"]
    assert "CARD_SIGNING_KEY" in own


@pytest.mark.parametrize("auth", ["ApiKey", "Jwt", "Iam", "None"])
@pytest.mark.parametrize("cors", [{}, {"CorsAllowOrigins": "https://app.example"}])
def test_the_jwks_route_is_public_and_served_by_the_card_function(
    cfn: dict[str, Any], auth: str, cors: dict[str, str]
) -> None:
    parameters = {"Auth": auth, **cors}
    found = routes(cfn, parameters)
    assert target_function(found[JWKS]) == "AgentCardFunction"
    item = resolve_ifs(cfn, rest_api_body(cfn)["paths"][JWKS[1]], parameters)
    assert "security" not in item["get"]
    assert (("OPTIONS", JWKS[1]) in found) is bool(cors)
    if auth != "None":  # the check above can fail: a protected route of the same API
        extended = resolve_ifs(cfn, rest_api_body(cfn)["paths"]["/extendedAgentCard"], parameters)
        assert extended["get"]["security"]


def test_the_signing_grant_exists_only_with_a_key(cfn: dict[str, Any]) -> None:
    policy = cfn["Resources"]["AgentCardSigningPolicy"]
    assert policy["Type"] == "AWS::IAM::Policy"
    assert condition_holds(cfn, policy["Condition"], SIGNED)
    assert not condition_holds(cfn, policy["Condition"], {})
    props = policy["Properties"]
    assert props["Roles"] == [{"Ref": role_of(cfn, name)[0]} for name in SIGNERS]
    (statement,) = props["PolicyDocument"]["Statement"]
    assert statement == {
        "Effect": "Allow",
        "Action": ["kms:Sign", "kms:GetPublicKey"],
        "Resource": {"Ref": "CardSigningKeyArn"},
    }


def test_no_other_principal_may_use_kms(cfn: dict[str, Any]) -> None:
    for role_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            text = str(policy)
            assert "kms:" not in text, role_id
    kms_policies = [
        logical_id
        for logical_id, resource in resources_of_type(cfn, "AWS::IAM::Policy").items()
        if "kms:" in str(resource["Properties"]["PolicyDocument"])
    ]
    assert kms_policies == ["AgentCardSigningPolicy"]
