"""The Bedrock flow as deployed: its IAM grant exists when FlowUsesBedrock says so (auto: the
bundled Bedrock flow is the configured flow; true: any flow, a user's own BedrockFlow), is
scoped to the configured model, and its parameters reach the flow worker's settings."""

from __future__ import annotations

import json
import os
from typing import Any
from unittest import mock

import pytest
from moto.iam.access_control import IAMPolicy, PermissionResult

from a2a_serverless.local.template import Resolver
from a2a_serverless.settings import Settings
from tests.template.sam import (
    as_list,
    condition_holds,
    resources_of_type,
    role_of,
    statements,
    translate,
)

BEDROCK_FLOW = "a2a_serverless.flows.bedrock:flow"
REGION = "us-east-1"
ACCOUNT = "123456789012"
PARAMETERS = {
    "BedrockModelId": "BedrockModelId",
    "BedrockSystemPrompt": "BedrockSystemPrompt",
    "BedrockMaxTokens": "BedrockMaxTokens",
    "BedrockTemperature": "BedrockTemperature",
}
ENV = {
    "BEDROCK_MODEL_ID": "BedrockModelId",
    "BEDROCK_SYSTEM_PROMPT": "BedrockSystemPrompt",
    "BEDROCK_MAX_TOKENS": "BedrockMaxTokens",
    "BEDROCK_TEMPERATURE": "BedrockTemperature",
}


@pytest.fixture(scope="module")
def bedrock_cfn(sam: dict[str, Any]) -> dict[str, Any]:
    return translate(sam, {"Flow": BEDROCK_FLOW})


def _policies_granting_bedrock(cfn: dict[str, Any]) -> list[str]:
    """Every place in the template that grants a bedrock: action: role inline policies and
    AWS::IAM::Policy resources."""
    found = []
    for role_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        for statement in statements(role):
            if any(str(a).startswith("bedrock:") for a in as_list(statement["Action"])):
                found.append(role_id)
    for policy_id, policy in resources_of_type(cfn, "AWS::IAM::Policy").items():
        if "bedrock:" in json.dumps(policy["Properties"]["PolicyDocument"]):
            found.append(policy_id)
    return found


def _deployed_document(cfn: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    """BedrockInvokePolicy's document with the parameters and pseudo parameters substituted."""
    resolver = Resolver({**parameters, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}, {}, {})
    return resolver.resolve(cfn["Resources"]["BedrockInvokePolicy"]["Properties"]["PolicyDocument"])


def _permitted(document: dict[str, Any], resource: str) -> bool:
    """Both Bedrock actions (streaming or not) allowed on `resource`. Statements with a
    Condition are left out: moto's evaluator does not judge condition keys (the profile-only
    grant is checked separately below)."""
    plain = {"Statement": [s for s in document["Statement"] if "Condition" not in s]}
    results = {
        IAMPolicy(json.dumps(plain)).is_action_permitted(action, resource)
        for action in ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream")
    }
    assert len(results) == 1, "the two actions are granted alike"
    return results == {PermissionResult.PERMITTED}


def test_no_bedrock_grant_with_the_default_flow(cfn: dict[str, Any]) -> None:
    assert cfn["Parameters"]["FlowUsesBedrock"]["Default"] == "auto"
    assert not condition_holds(cfn, "UsesBedrock", {})
    # The policy is in the template, but CloudFormation creates it only under its condition.
    policy = cfn["Resources"]["BedrockInvokePolicy"]
    assert policy["Condition"] == "UsesBedrock"
    assert _policies_granting_bedrock(cfn) == ["BedrockInvokePolicy"]
    for flow in ("a2a_serverless.flows.echo:flow", "my_agent.flow:flow", ""):
        assert not condition_holds(cfn, "UsesBedrock", {"Flow": flow}), flow


@pytest.mark.parametrize(
    ("flow", "uses_bedrock", "granted"),
    [
        (BEDROCK_FLOW, "auto", True),
        ("my_agent.flow:flow", "auto", False),  # a user's own BedrockFlow: say so ...
        ("my_agent.flow:flow", "true", True),  # ... with FlowUsesBedrock=true
        ("a2a_serverless.flows.echo:flow", "true", True),
        (BEDROCK_FLOW, "false", False),  # e.g. the model is granted by a statement of FlowPolicy
        ("my_agent.flow:flow", "false", False),
    ],
)
def test_flow_uses_bedrock_decides_the_grant(
    cfn: dict[str, Any], flow: str, uses_bedrock: str, granted: bool
) -> None:
    parameters = {"Flow": flow, "FlowUsesBedrock": uses_bedrock}
    assert condition_holds(cfn, "UsesBedrock", parameters) is granted
    assert cfn["Parameters"]["FlowUsesBedrock"]["AllowedValues"] == ["auto", "true", "false"]


def test_bedrock_flow_grants_invoke_to_the_worker_only(
    bedrock_cfn: dict[str, Any],
) -> None:
    assert condition_holds(bedrock_cfn, "UsesBedrock", {"Flow": BEDROCK_FLOW})
    policy = bedrock_cfn["Resources"]["BedrockInvokePolicy"]
    worker_role, _ = role_of(bedrock_cfn, "FlowWorkerFunction")
    assert policy["Properties"]["Roles"] == [{"Ref": worker_role}]
    actions = {
        action
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in as_list(statement["Action"])
    }
    # ConverseStream authorizes as InvokeModelWithResponseStream (the bundled flow), Converse
    # and InvokeModel as InvokeModel (a flow of one's own may use either); nothing else.
    assert actions == {"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}
    # No inline policy of any role grants Bedrock (the flow worker's included).
    assert _policies_granting_bedrock(bedrock_cfn) == ["BedrockInvokePolicy"]


@pytest.mark.parametrize(
    ("model_id", "allowed", "denied"),
    [
        (
            "anthropic.claude-3-haiku-20240307-v1:0",
            f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-3-haiku-20240307-v1:0",
            f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-3-opus-20240229-v1:0",
        ),
        (
            "us.amazon.nova-lite-v1:0",
            f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/us.amazon.nova-lite-v1:0",
            f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/us.amazon.nova-pro-v1:0",
        ),
    ],
)
def test_grant_is_scoped_to_the_configured_model(
    bedrock_cfn: dict[str, Any], model_id: str, allowed: str, denied: str
) -> None:
    document = _deployed_document(bedrock_cfn, {"BedrockModelId": model_id})
    assert _permitted(document, allowed)
    assert not _permitted(document, denied)
    assert not _permitted(document, f"arn:aws:bedrock:eu-west-1::foundation-model/{model_id}")


def test_models_behind_a_profile_only_through_that_profile(bedrock_cfn: dict[str, Any]) -> None:
    model_id = "us.amazon.nova-lite-v1:0"
    document = _deployed_document(bedrock_cfn, {"BedrockModelId": model_id})
    (routed,) = [s for s in document["Statement"] if "Condition" in s]
    # Any Region's foundation models (the profile routes across Regions) ...
    assert routed["Resource"] == "arn:aws:bedrock:*::foundation-model/*"
    # ... but only when the request came in through the configured profile.
    assert routed["Condition"] == {
        "ArnLike": {
            "bedrock:InferenceProfileArn": (
                f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{model_id}"
            )
        }
    }


def test_parameters_reach_the_worker_environment(bedrock_cfn: dict[str, Any]) -> None:
    functions = resources_of_type(bedrock_cfn, "AWS::Lambda::Function")
    env = functions["FlowWorkerFunction"]["Properties"]["Environment"]["Variables"]
    for name, parameter in ENV.items():
        assert env[name] == {"Ref": parameter}, name
    assert env["FLOW"] == {"Ref": "Flow"}
    assert set(PARAMETERS) <= set(bedrock_cfn["Parameters"])


def test_parameter_defaults_are_the_settings_defaults(cfn: dict[str, Any]) -> None:
    """The template's defaults, passed as the environment, give the settings' own defaults:
    the flow behaves the same whether deployed or run with no configuration."""
    params = cfn["Parameters"]
    environment = {name: str(params[parameter]["Default"]) for name, parameter in ENV.items()}
    with mock.patch.dict(os.environ, environment):
        deployed = Settings()
    with mock.patch.dict(os.environ, {}, clear=True):
        bare = Settings()
    for field in ("bedrock_model_id", "bedrock_system_prompt", "bedrock_max_tokens"):
        assert getattr(deployed, field) == getattr(bare, field), field
    assert deployed.bedrock_temperature == pytest.approx(bare.bedrock_temperature)


def test_parameters_parse_as_settings() -> None:
    """Values a deployer may choose come through as typed settings (Number parameters
    arrive as strings)."""
    environment = {
        "BEDROCK_MODEL_ID": "eu.anthropic.claude-3-haiku-20240307-v1:0",
        "BEDROCK_SYSTEM_PROMPT": "You answer in French.",
        "BEDROCK_MAX_TOKENS": "2048",
        "BEDROCK_TEMPERATURE": "0.2",
    }
    with mock.patch.dict(os.environ, environment):
        settings = Settings()
    assert settings.bedrock_model_id == "eu.anthropic.claude-3-haiku-20240307-v1:0"
    assert settings.bedrock_system_prompt == "You answer in French."
    assert settings.bedrock_max_tokens == 2048
    assert settings.bedrock_temperature == pytest.approx(0.2)
    assert settings.bedrock_top_p is None


def test_model_id_parameter_refuses_an_arn(cfn: dict[str, Any]) -> None:
    # The grant is built from the id; an ARN would make it name nothing.
    import re

    pattern = re.compile(cfn["Parameters"]["BedrockModelId"]["AllowedPattern"])
    assert pattern.fullmatch("us.amazon.nova-lite-v1:0")
    assert pattern.fullmatch("anthropic.claude-3-haiku-20240307-v1:0")
    assert not pattern.fullmatch(
        "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc"
    )
