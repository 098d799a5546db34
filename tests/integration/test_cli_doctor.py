"""`a2a-serverless doctor` run from the command's entry against moto (KMS keys and their
policies, API Gateway's account settings, STS); Lambda's account settings and layer lookup and
Bedrock's models, which moto does not implement, answer through botocore's Stubber. A good
configuration passes (exit 0); each misconfiguration is named with its fix and fails the run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from a2a_serverless.cli import doctor, main

REGION = "eu-west-1"
ACCOUNT = "123456789012"  # moto's
LAYER = f"arn:aws:lambda:{REGION}:753240598075:layer:LambdaAdapterLayerArm64:26"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/apigw-logs"


class Unmocked:
    """Answers for the services moto lacks, queued per service, served by Stubber."""

    def __init__(self) -> None:
        self.queued: dict[str, list[tuple[str, dict[str, Any] | str]]] = {
            "lambda": [],
            "bedrock": [],
        }

    def client(self, service: str, region: str) -> Any:
        client = boto3.client(service, region_name=region)
        stubber = Stubber(client)
        for operation, answer in self.queued[service]:
            if isinstance(answer, str):
                stubber.add_client_error(operation, answer, http_status_code=404)
            else:
                stubber.add_response(operation, answer)
        self.queued[service] = []
        stubber.activate()
        return client


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Unmocked]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",  # --region must win
    }.items():
        monkeypatch.setenv(name, value)
    unmocked = Unmocked()
    moto_client = doctor.Context.client

    def client(self: doctor.Context, service: str, region: str | None = None) -> Any:
        key = (service, region or self.region)
        if service in unmocked.queued and key not in self.clients:
            self.clients[key] = unmocked.client(service, key[1])
        return moto_client(self, service, region)

    monkeypatch.setattr(doctor.Context, "client", client)
    with mock_aws():
        yield unmocked


def healthy_lambda(unmocked: Unmocked, *, quota: int = 1000, layer: bool = True) -> None:
    limit = {"ConcurrentExecutions": quota, "UnreservedConcurrentExecutions": quota}
    unmocked.queued["lambda"].append(
        ("get_account_settings", {"AccountLimit": limit, "AccountUsage": {}})
    )
    unmocked.queued["lambda"].append(
        (
            "get_layer_version_by_arn",
            {"LayerVersionArn": LAYER, "CompatibleArchitectures": ["arm64"]}
            if layer
            else "ResourceNotFoundException",
        )
    )


def nova_profile(unmocked: Unmocked) -> None:
    unmocked.queued["bedrock"].append(
        (
            "get_inference_profile",
            {
                "inferenceProfileName": "US Nova Lite",
                "inferenceProfileArn": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/x",
                "models": [{"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/nova"}],
                "inferenceProfileId": "us.amazon.nova-lite-v1:0",
                "status": "ACTIVE",
                "type": "SYSTEM_DEFINED",
            },
        )
    )


def signing_key(**create: Any) -> str:
    kms = boto3.client("kms", region_name=REGION)
    spec = {"KeySpec": "ECC_NIST_P256", "KeyUsage": "SIGN_VERIFY", **create}
    return str(kms.create_key(**spec)["KeyMetadata"]["Arn"])


def logging_role() -> None:
    boto3.client("apigateway", region_name=REGION).update_account(
        patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": ROLE}]
    )


def run(capsys: pytest.CaptureFixture[str], *params: str) -> tuple[int, dict[str, str], str]:
    argv = ["doctor", "--region", REGION]
    for param in params:
        argv += ["--param", param]
    code = main(argv)
    out = capsys.readouterr().out
    lines = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) > 1 and words[0] in ("OK", "WARN", "FAIL"):
            lines[words[1]] = line
    return code, lines, out


def test_a_good_configuration_passes(aws: Unmocked, capsys: pytest.CaptureFixture[str]) -> None:
    healthy_lambda(aws)
    nova_profile(aws)
    logging_role()
    key = signing_key()
    code, lines, out = run(
        capsys,
        f"CardSigningKeyArn={key}",
        "SnapStart=true",
        f"Flow={doctor.BEDROCK_FLOW}",
        "ApiAccessLogs=true",
        "CreateApiGatewayLoggingRole=false",
        "FlowWorkerReservedConcurrency=100",
        "SendMessageReservedConcurrency=200",
    )
    assert code == 0, out
    assert sorted(lines) == sorted(name for name, _ in doctor.CHECKS), out
    assert all(line.startswith("OK") for line in lines.values()), out
    assert out.splitlines()[-1] == "OK: 6 checks, 0 failed, 0 warnings", out


def test_the_default_configuration_checks_what_applies(
    aws: Unmocked, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy_lambda(aws)
    code, lines, out = run(capsys)
    assert code == 0, out
    # No signing key, no SnapStart, the echo flow: those checks do not apply.
    assert sorted(lines) == ["apigateway-logs", "concurrency", "web-adapter-layer"], out
    assert all(line.startswith("OK") for line in lines.values()), out


def test_each_misconfiguration_fails_with_its_fix(
    aws: Unmocked, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy_lambda(aws, quota=400, layer=False)
    aws.queued["bedrock"].append(("get_foundation_model", "ResourceNotFoundException"))
    kms = boto3.client("kms", region_name=REGION)
    key = signing_key()
    # A policy that names one role only: the functions' IAM policies cannot grant its use.
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/admin"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }
    kms.put_key_policy(KeyId=key, PolicyName="default", Policy=json.dumps(policy))
    code, lines, out = run(
        capsys,
        f"CardSigningKeyArn={key}",
        f"Flow={doctor.BEDROCK_FLOW}",
        "BedrockModelId=amazon.nope-v9",
        "ApiAccessLogs=true",
        "CreateApiGatewayLoggingRole=false",
        "FlowWorkerReservedConcurrency=100",
        "StreamReservedConcurrency=300",
    )
    assert code == 1, out
    for name in (
        "concurrency",
        "web-adapter-layer",
        "bedrock-model",
        "card-signing-key",
        "apigateway-logs",
    ):
        assert lines[name].startswith("FAIL"), out
    assert "kms:Sign" in lines["card-signing-key"], out
    assert out.count("fix: ") == 5, out
    assert out.splitlines()[-1].startswith("FAILED: 5 checks, 5 failed"), out


@pytest.mark.parametrize(
    ("create", "words"),
    [
        ({"KeySpec": "RSA_2048"}, "KeySpec RSA_2048"),
        (
            {"KeySpec": "SYMMETRIC_DEFAULT", "KeyUsage": "ENCRYPT_DECRYPT"},
            "KeyUsage ENCRYPT_DECRYPT",
        ),
    ],
)
def test_a_key_that_cannot_sign_es256_fails(
    aws: Unmocked, capsys: pytest.CaptureFixture[str], create: dict[str, str], words: str
) -> None:
    healthy_lambda(aws)
    logging_role()
    code, lines, out = run(capsys, f"CardSigningKeyArn={signing_key(**create)}")
    assert code == 1 and lines["card-signing-key"].startswith("FAIL"), out
    assert words in lines["card-signing-key"], out


def test_a_disabled_or_missing_key_fails(aws: Unmocked, capsys: pytest.CaptureFixture[str]) -> None:
    key = signing_key()
    boto3.client("kms", region_name=REGION).disable_key(KeyId=key.split("/")[-1])
    healthy_lambda(aws)
    code, lines, out = run(capsys, f"CardSigningKeyArn={key}")
    assert code == 1 and "KeyState Disabled" in lines["card-signing-key"], out
    healthy_lambda(aws)
    missing = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
    code, lines, out = run(capsys, f"CardSigningKeyArn={missing}")
    assert code == 1 and "NotFoundException" in lines["card-signing-key"], out


@pytest.fixture
def no_aws_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AWS config or credentials file, and no instance metadata to fall back on."""
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.usefixtures("no_aws_files")
def test_no_region_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    assert main(["doctor"]) == 1
    assert "no region" in capsys.readouterr().err


@pytest.mark.usefixtures("no_aws_files")
def test_no_credentials_is_said_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    assert main(["doctor", "--region", REGION]) == 1
    captured = capsys.readouterr()
    assert "no AWS credentials" in captured.err and captured.out == ""


def test_a_scaffolded_project_is_checked_with_its_settings(
    aws: Unmocked,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A project's template keeps most settings in Mappings, not Parameters: a setting given
    # with --param is read as a parameter is.
    from a2a_serverless.cli.scaffold import scaffold

    scaffold(tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")
    healthy_lambda(aws, quota=150)
    code, lines, out = run(capsys, "StreamReservedConcurrency=100")
    assert code == 1, out
    assert lines["concurrency"].startswith("FAIL"), out
    assert "web-adapter-layer" in lines, out
