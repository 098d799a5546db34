"""`a2a-serverless doctor`'s checks on canned AWS answers (botocore's Stubber: no moto, no
network): each finds what it must in the template and its parameters, and says OK, WARN or
FAIL for the reasons it gives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from a2a_serverless.cli import doctor

ROOT = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
RESERVATIONS = {
    "FlowWorkerFunction": 100,
    "SendMessageFunction": 200,
    "StreamFunction": 300,
    "GetTaskFunction": 100,
}
# The parameters that reserve them.
RESERVING = {
    "FlowWorkerReservedConcurrency": "100",
    "SendMessageReservedConcurrency": "200",
    "StreamReservedConcurrency": "300",
    "GetTaskReservedConcurrency": "100",
}


class StubbedSession:
    """A boto3 session whose clients (one per service) answer what the test queued, in
    order, and nothing else."""

    def __init__(self) -> None:
        self.clients: dict[str, tuple[Any, Stubber]] = {}

    def client(self, service: str, region_name: str | None = None) -> Any:
        if service not in self.clients:
            client = boto3.client(
                service,
                region_name=region_name or REGION,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            stubber = Stubber(client)
            stubber.activate()
            self.clients[service] = (client, stubber)
        return self.clients[service][0]

    def answer(
        self, service: str, operation: str, response: dict[str, Any] | str, **expected: Any
    ) -> None:
        """Queue `response` (a dict) or an error code (a str) for the next call."""
        self.client(service)
        stubber = self.clients[service][1]
        if isinstance(response, str):
            stubber.add_client_error(operation, service_error_code=response, http_status_code=400)
        else:
            stubber.add_response(operation, response, expected or None)

    def all_answered(self) -> None:
        for _, stubber in self.clients.values():
            stubber.assert_no_pending_responses()


def make_context(**overrides: str) -> tuple[doctor.Context, StubbedSession]:
    session = StubbedSession()
    return doctor.context(session, ROOT / "template.yaml", overrides, REGION), session


def account_settings(quota: int, unreserved: int) -> dict[str, Any]:
    return {
        "AccountLimit": {
            "ConcurrentExecutions": quota,
            "UnreservedConcurrentExecutions": unreserved,
        },
        "AccountUsage": {},
    }


# -- concurrency --------------------------------------------------------------------------------


def test_the_reservations_follow_the_parameters() -> None:
    ctx, _ = make_context(**RESERVING)
    assert doctor.reserved_concurrency(ctx) == RESERVATIONS
    # 0 and -1 reserve nothing (the template's conditions drop the property).
    ctx, _ = make_context(
        **{**RESERVING, "FlowWorkerReservedConcurrency": "0", "StreamReservedConcurrency": "-1"}
    )
    assert doctor.reserved_concurrency(ctx) == {"SendMessageFunction": 200, "GetTaskFunction": 100}
    ctx, _ = make_context(**{**RESERVING, "SendMessageReservedConcurrency": "25"})
    assert doctor.reserved_concurrency(ctx)["SendMessageFunction"] == 25
    none = {name: "-1" for name in RESERVING}
    ctx, _ = make_context(**none)
    assert doctor.reserved_concurrency(ctx) == {}


def test_concurrency_fails_when_less_than_100_would_stay_unreserved() -> None:
    ctx, session = make_context(**RESERVING)
    session.answer("lambda", "get_account_settings", account_settings(1000, 1000))
    result = doctor.check_concurrency(ctx)
    assert result.status == doctor.OK and "reserves 700" in result.reason, result
    assert "300 left" in result.reason, result
    # A new account's quota of 400: Lambda would refuse, the deploy would roll back.
    session.answer("lambda", "get_account_settings", account_settings(400, 400))
    result = doctor.check_concurrency(ctx)
    assert result.status == doctor.FAIL and "-300 left" in result.reason, result
    assert "FlowWorkerReservedConcurrency=0" in result.fix and "L-B99A9384" in result.fix
    # Reservations the account has already made count too.
    session.answer("lambda", "get_account_settings", account_settings(1000, 750))
    assert doctor.check_concurrency(ctx).status == doctor.FAIL
    session.all_answered()


# -- the Web Adapter layer ----------------------------------------------------------------------


def layer_arn(version: str) -> str:
    return f"arn:aws:lambda:{REGION}:753240598075:layer:LambdaAdapterLayerArm64:{version}"


def test_the_web_adapter_layer_must_exist_for_arm64() -> None:
    ctx, session = make_context(LambdaWebAdapterLayerVersion="26")
    arn = layer_arn("26")
    session.answer(
        "lambda",
        "get_layer_version_by_arn",
        {"LayerVersionArn": arn, "CompatibleArchitectures": ["arm64"]},
        Arn=arn,
    )
    assert doctor.check_web_adapter_layer(ctx).status == doctor.OK
    session.answer("lambda", "get_layer_version_by_arn", "ResourceNotFoundException", Arn=arn)
    result = doctor.check_web_adapter_layer(ctx)
    assert result.status == doctor.FAIL and arn in result.reason, result
    assert "LambdaWebAdapterLayerVersion" in result.fix
    session.answer(
        "lambda",
        "get_layer_version_by_arn",
        {"LayerVersionArn": arn, "CompatibleArchitectures": ["x86_64"]},
    )
    assert "not arm64" in doctor.check_web_adapter_layer(ctx).reason
    session.answer("lambda", "get_layer_version_by_arn", "AccessDeniedException")
    assert doctor.check_web_adapter_layer(ctx).status == doctor.WARN
    session.all_answered()


# -- SnapStart ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("region", "status"),
    [
        ("eu-west-1", "OK"),
        ("ap-east-2", "FAIL"),
        ("ap-southeast-6", "FAIL"),
        ("cn-north-1", "WARN"),
    ],
)
def test_snapstart_is_checked_against_the_documented_regions(region: str, status: str) -> None:
    session = StubbedSession()
    ctx = doctor.context(session, ROOT / "template.yaml", {"SnapStart": "true"}, region)
    assert doctor.check_snapstart(ctx).status == status


def test_snapstart_off_is_not_checked() -> None:
    ctx, _ = make_context()
    with pytest.raises(doctor.Skip):
        doctor.check_snapstart(ctx)


# -- Bedrock ------------------------------------------------------------------------------------

BEDROCK = {"Flow": doctor.BEDROCK_FLOW}


def test_bedrock_is_checked_only_when_the_flow_uses_it() -> None:
    ctx, _ = make_context()  # the echo flow
    with pytest.raises(doctor.Skip):
        doctor.check_bedrock(ctx)


def test_an_inference_profile_id_is_looked_up_as_a_profile() -> None:
    ctx, session = make_context(**BEDROCK)  # BedrockModelId's default: us.amazon.nova-lite-v1:0
    session.answer(
        "bedrock",
        "get_inference_profile",
        {
            "inferenceProfileName": "US Nova Lite",
            "inferenceProfileArn": "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/x",
            "models": [
                {"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-lite-v1:0"}
            ],
            "inferenceProfileId": "us.amazon.nova-lite-v1:0",
            "status": "ACTIVE",
            "type": "SYSTEM_DEFINED",
        },
        inferenceProfileIdentifier="us.amazon.nova-lite-v1:0",
    )
    result = doctor.check_bedrock(ctx)
    assert result.status == doctor.OK and "inference profile" in result.reason, result
    session.all_answered()


def foundation_model(model: str, inference: list[str]) -> dict[str, Any]:
    return {
        "modelDetails": {
            "modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{model}",
            "modelId": model,
            "inferenceTypesSupported": inference,
            "modelLifecycle": {"status": "ACTIVE"},
        }
    }


def test_a_foundation_model_must_be_invocable_on_demand() -> None:
    model = "anthropic.claude-3-haiku-20240307-v1:0"
    ctx, session = make_context(**BEDROCK, BedrockModelId=model)
    session.answer("bedrock", "get_foundation_model", foundation_model(model, ["ON_DEMAND"]))
    assert doctor.check_bedrock(ctx).status == doctor.OK
    # A model only reachable through an inference profile: its id alone cannot be invoked.
    session.answer(
        "bedrock", "get_foundation_model", foundation_model(model, ["INFERENCE_PROFILE"])
    )
    result = doctor.check_bedrock(ctx)
    assert result.status == doctor.FAIL and f"us.{model}" in result.fix, result
    session.answer("bedrock", "get_foundation_model", "ResourceNotFoundException")
    assert doctor.check_bedrock(ctx).status == doctor.FAIL
    session.answer("bedrock", "get_foundation_model", "AccessDeniedException")
    assert doctor.check_bedrock(ctx).status == doctor.WARN
    session.all_answered()


def test_a_flow_of_ones_own_is_checked_when_it_uses_bedrock() -> None:
    model = "amazon.titan-text-express-v1"
    ctx, session = make_context(Flow="my_agent.flow:flow", BedrockModelId=model)
    session.answer("bedrock", "get_foundation_model", foundation_model(model, ["ON_DEMAND"]))
    assert doctor.check_bedrock(ctx).status == doctor.OK
    session.all_answered()
    # The template's FlowUsesBedrock=true says so too (the model left at its default).
    ctx, session = make_context(Flow="my_agent.flow:flow", FlowUsesBedrock="true")
    session.answer("bedrock", "get_inference_profile", "ResourceNotFoundException")
    assert doctor.check_bedrock(ctx).status == doctor.FAIL
    session.all_answered()


# -- the card-signing key's policy --------------------------------------------------------------

ACCOUNT = "123456789012"
ROOT_PRINCIPAL = {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}


@pytest.mark.parametrize(
    ("statements", "grants"),
    [
        ([{"Effect": "Allow", "Principal": ROOT_PRINCIPAL, "Action": "kms:*"}], True),
        ([{"Effect": "Allow", "Principal": {"AWS": ACCOUNT}, "Action": "kms:*"}], True),
        (
            [
                {
                    "Effect": "Allow",
                    "Principal": ROOT_PRINCIPAL,
                    "Action": ["kms:Sign", "kms:GetPublicKey", "kms:Describe*"],
                }
            ],
            True,
        ),
        # Only a named role may use it: IAM policies of the functions' roles cannot.
        (
            [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/admin"},
                    "Action": "kms:*",
                }
            ],
            False,
        ),
        ([{"Effect": "Allow", "Principal": ROOT_PRINCIPAL, "Action": "kms:Sign"}], False),
        (
            [
                {"Effect": "Allow", "Principal": ROOT_PRINCIPAL, "Action": "kms:*"},
                {"Effect": "Deny", "Principal": "*", "Action": "kms:Sign"},
            ],
            False,
        ),
        (
            [
                {
                    "Effect": "Allow",
                    "Principal": ROOT_PRINCIPAL,
                    "Action": "kms:*",
                    "Condition": {"StringEquals": {"kms:CallerAccount": "999999999999"}},
                }
            ],
            False,
        ),
        (
            [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": "arn:aws:iam::999999999999:root"},
                    "Action": "kms:*",
                }
            ],
            False,
        ),
    ],
)
def test_the_key_policy_must_let_iam_grant_sign_and_get_public_key(
    statements: list[dict[str, Any]], grants: bool
) -> None:
    policy = {"Version": "2012-10-17", "Statement": statements}
    assert doctor.iam_may_grant(policy, ACCOUNT, ("kms:Sign", "kms:GetPublicKey")) is grants


def test_a_key_of_another_region_fails_without_a_call() -> None:
    arn = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
    ctx, session = make_context(CardSigningKeyArn=arn)
    result = doctor.check_card_signing_key(ctx)
    assert result.status == doctor.FAIL and "us-east-1" in result.reason, result
    session.all_answered()


# -- API Gateway's CloudWatch role --------------------------------------------------------------

ROLE = f"arn:aws:iam::{ACCOUNT}:role/apigw-logs"


LOGS_ON = {"ApiAccessLogs": "true"}


@pytest.mark.parametrize(
    ("role", "parameters", "status", "words"),
    [
        (ROLE, {**LOGS_ON, "CreateApiGatewayLoggingRole": "false"}, "OK", ROLE),
        (ROLE, {**LOGS_ON, "CreateApiGatewayLoggingRole": "true"}, "WARN", "replaces it"),
        (
            ROLE,
            {"ApiAccessLogs": "false", "CreateApiGatewayLoggingRole": "true"},
            "WARN",
            "replaces it",
        ),
        ("", {**LOGS_ON, "CreateApiGatewayLoggingRole": "true"}, "OK", "the stack creates one"),
        ("", {**LOGS_ON, "CreateApiGatewayLoggingRole": "false"}, "FAIL", "rolls back"),
        (
            "",
            {"ApiAccessLogs": "false", "CreateApiGatewayLoggingRole": "false"},
            "OK",
            "needs none",
        ),
    ],
)
def test_the_api_gateway_logging_role(
    role: str, parameters: dict[str, str], status: str, words: str
) -> None:
    ctx, session = make_context(**parameters)
    session.answer("apigateway", "get_account", {"cloudwatchRoleArn": role} if role else {})
    result = doctor.check_apigateway_logs(ctx)
    assert (result.status, words in result.reason) == (status, True), result
    if status == "FAIL":
        assert "CreateApiGatewayLoggingRole=true" in result.fix
        assert "ApiAccessLogs=false" in result.fix


# -- the run ------------------------------------------------------------------------------------


def test_a_check_that_errors_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: doctor.Context) -> doctor.Result:
        raise RuntimeError("no route to host")

    checks: list[tuple[str, Callable[[doctor.Context], doctor.Result]]] = [("broken", broken)]
    monkeypatch.setattr(doctor, "CHECKS", checks)
    ctx, _ = make_context()
    (result,) = doctor.diagnose(ctx)
    assert result.status == doctor.FAIL and "no route to host" in result.reason


def test_an_error_page_is_reported_in_one_short_line(monkeypatch: pytest.MonkeyPatch) -> None:
    page = "<!doctype html>\n<html>\n<title>404 Not Found</title>\n" + "<p>x</p>\n" * 100

    def broken(ctx: doctor.Context) -> doctor.Result:
        raise RuntimeError(page)

    checks: list[tuple[str, Callable[[doctor.Context], doctor.Result]]] = [("broken", broken)]
    monkeypatch.setattr(doctor, "CHECKS", checks)
    ctx, _ = make_context()
    (result,) = doctor.diagnose(ctx)
    assert "\n" not in result.reason and len(result.reason) < 260
    assert "404 Not Found" in result.reason
