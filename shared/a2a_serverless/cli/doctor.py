"""`a2a-serverless doctor`: before `sam deploy`, check the account and region against the
template (./template.yaml, else the packaged one) and --param NAME=VALUE overrides.

Each check prints OK, WARN or FAIL with a reason and a fix; exit 1 if any failed. Read-only.

  concurrency        the account's Lambda concurrency quota against the template's reservations
  web-adapter-layer  the Lambda Web Adapter layer version exists in the region, for arm64
  snapstart          (SnapStart=true) the region offers SnapStart for Python
  bedrock-model      (Bedrock flow) the model or inference profile exists and can be invoked
  card-signing-key   (CardSigningKeyArn set) the KMS key signs ES256 and IAM may grant its use
  apigateway-logs    the region's API Gateway CloudWatch Logs role, as access logging needs
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OK, WARN, FAIL = "OK", "WARN", "FAIL"
# Lambda refuses a reservation that leaves the account fewer unreserved executions than this.
MIN_UNRESERVED = 100
# The account that publishes the public Lambda Web Adapter layers (awslabs/aws-lambda-web-adapter).
WEB_ADAPTER_ACCOUNT = "753240598075"
WEB_ADAPTER_LAYER = "LambdaAdapterLayerArm64"
# Lambda SnapStart (Python runtimes included) is offered in every commercial Region but these
# (docs.aws.amazon.com/lambda/latest/dg/snapstart.html, "Supported Regions").
SNAPSTART_EXCLUDED_REGIONS = {
    "ap-southeast-6": "Asia Pacific (New Zealand)",
    "ap-east-2": "Asia Pacific (Taipei)",
}
# A cross-Region inference profile id starts with its geography: us.amazon.nova-lite-v1:0.
INFERENCE_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "jp.", "au.", "ca.", "global.")
BEDROCK_FLOW = "a2a_serverless.flows.bedrock:flow"
LAMBDA_CONCURRENCY_QUOTA = "L-B99A9384"  # Service Quotas: Lambda "Concurrent executions"
# What a Get/Describe of a missing resource answers (ValidationException: a malformed id).
NOT_FOUND = ("ResourceNotFoundException", "NotFoundException", "ValidationException")
FUNCTION_TYPES = ("AWS::Serverless::Function", "AWS::Lambda::Function")


@dataclass
class Result:
    name: str
    status: str
    reason: str
    fix: str = ""


class Skip(Exception):
    """The check does not apply to this configuration (not printed)."""


@dataclass
class Context:
    """What every check reads: the AWS session, the region, the template and its parameters."""

    session: Any
    region: str
    template: dict[str, Any]
    parameters: dict[str, str]
    resolver: Any  # a2a_serverless.local.template.Resolver
    overrides: dict[str, str]  # the parameters given on the command line
    clients: dict[tuple[str, str], Any] = field(default_factory=dict)

    def client(self, service: str, region: str | None = None) -> Any:
        """One client per service and region, made when first asked for."""
        key = (service, region or self.region)
        if key not in self.clients:
            self.clients[key] = self.session.client(service, region_name=key[1])
        return self.clients[key]

    def flag(self, name: str) -> bool | None:
        """A "true"/"false" parameter, None when the template has no such parameter."""
        if name not in self.parameters:
            return None
        return self.parameters[name].strip().lower() == "true"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from a2a_serverless.local.__main__ import add_param_argument

    parser.add_argument("--region", help="the region to deploy to (default: your AWS config)")
    parser.add_argument("--profile", help="the AWS profile to use (default: your AWS config)")
    parser.add_argument(
        "--template", help="the template.yaml to check (default: ./template.yaml, else packaged)"
    )
    add_param_argument(
        parser, "a template parameter as you deploy it (repeatable), e.g. --param SnapStart=true"
    )


# -- the checks ------------------------------------------------------------------------------


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", type(exc).__name__))


def _denied(exc: Exception) -> bool:
    code = _error_code(exc)
    return code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation") or (
        "NotAuthorized" in code
    )


def reserved_concurrency(ctx: Context) -> dict[str, int]:
    """Each function's ReservedConcurrentExecutions for these parameters (0 = none)."""
    globals_ = ctx.template.get("Globals", {}).get("Function", {})
    reserved: dict[str, int] = {}
    for logical_id, resource in ctx.template.get("Resources", {}).items():
        if resource.get("Type") not in FUNCTION_TYPES:
            continue
        if "Condition" in resource and not ctx.resolver.condition(resource["Condition"]):
            continue
        properties = resource.get("Properties") or {}
        value = properties.get(
            "ReservedConcurrentExecutions", globals_.get("ReservedConcurrentExecutions")
        )
        resolved = ctx.resolver.resolve(value) if value is not None else None
        if resolved not in (None, ""):
            reserved[logical_id] = max(0, int(str(resolved)))
    return {name: count for name, count in reserved.items() if count}


def check_concurrency(ctx: Context) -> Result:
    reserved = reserved_concurrency(ctx)
    total = sum(reserved.values())
    limit = ctx.client("lambda").get_account_settings()["AccountLimit"]
    quota = int(limit["ConcurrentExecutions"])
    unreserved = int(limit["UnreservedConcurrentExecutions"])
    left = unreserved - total
    what = ", ".join(f"{name} {count}" for name, count in sorted(reserved.items())) or "none"
    reason = (
        f"the template reserves {total} ({what}); the account's quota is {quota}, "
        f"{unreserved} unreserved now, {left} left after this stack (Lambda keeps "
        f"{MIN_UNRESERVED} unreserved)"
    )
    if left >= MIN_UNRESERVED:
        return Result("concurrency", OK, reason)
    return Result(
        "concurrency",
        FAIL,
        reason + ": Lambda would refuse the reservations and the deploy would roll back",
        f"lower the reservations (--param FlowWorkerReservedConcurrency=0, "
        f"SendMessageReservedConcurrency=0, StreamReservedConcurrency=0, "
        f"GetTaskReservedConcurrency=0 reserve none), or ask Service Quotas for more "
        f"(lambda {LAMBDA_CONCURRENCY_QUOTA}); for a stack already deployed its own "
        "reservations are counted twice here",
    )


def check_web_adapter_layer(ctx: Context) -> Result:
    version = ctx.parameters.get("LambdaWebAdapterLayerVersion")
    if not version:
        raise Skip
    arn = (
        f"arn:{_partition(ctx.region)}:lambda:{ctx.region}:{WEB_ADAPTER_ACCOUNT}:layer:"
        f"{WEB_ADAPTER_LAYER}:{version}"
    )
    fix = (
        f"set --param LambdaWebAdapterLayerVersion to a version published in {ctx.region} "
        "(github.com/awslabs/aws-lambda-web-adapter lists the layer ARNs), or deploy to a "
        "region that has it"
    )
    try:
        layer = ctx.client("lambda").get_layer_version_by_arn(Arn=arn)
    except Exception as exc:
        if _denied(exc):
            return Result(
                "web-adapter-layer",
                WARN,
                f"cannot read {arn}: {_error_code(exc)}",
                "allow lambda:GetLayerVersion to check it; the deploy itself needs it too",
            )
        if _error_code(exc) != "ResourceNotFoundException":
            raise
        return Result("web-adapter-layer", FAIL, f"{arn} does not exist in {ctx.region}", fix)
    architectures = layer.get("CompatibleArchitectures") or []
    if architectures and "arm64" not in architectures:
        return Result(
            "web-adapter-layer",
            FAIL,
            f"{arn} is for {', '.join(architectures)}, not arm64 (the functions' architecture)",
            fix,
        )
    return Result("web-adapter-layer", OK, f"{arn} exists for arm64")


def check_snapstart(ctx: Context) -> Result:
    if not ctx.flag("SnapStart"):
        raise Skip
    if ctx.region in SNAPSTART_EXCLUDED_REGIONS:
        return Result(
            "snapstart",
            FAIL,
            f"Lambda SnapStart is not offered in {ctx.region} "
            f"({SNAPSTART_EXCLUDED_REGIONS[ctx.region]})",
            "deploy with --param SnapStart=false (the default), or to another region",
        )
    if _partition(ctx.region) != "aws":
        return Result(
            "snapstart",
            WARN,
            f"{ctx.region} is outside the commercial regions the SnapStart documentation lists",
            "check the Lambda documentation for this partition, or use SnapStart=false",
        )
    return Result("snapstart", OK, f"SnapStart for python3.13 is offered in {ctx.region}")


def check_bedrock(ctx: Context) -> Result:
    model = ctx.parameters.get("BedrockModelId", "")
    # The template's own answer (its UsesBedrock condition: FlowUsesBedrock, or the Bedrock
    # flow), or a flow of your own that reads the model parameter you set.
    uses_bedrock = _condition(ctx, "UsesBedrock", ctx.parameters.get("Flow") == BEDROCK_FLOW)
    uses_bedrock = uses_bedrock or "BedrockModelId" in ctx.overrides
    if not model or not uses_bedrock:
        raise Skip
    bedrock = ctx.client("bedrock")
    profile = model.startswith(INFERENCE_PROFILE_PREFIXES)
    try:
        if profile:
            found = bedrock.get_inference_profile(inferenceProfileIdentifier=model)
            status = found.get("status", "ACTIVE")
        else:
            found = bedrock.get_foundation_model(modelIdentifier=model)["modelDetails"]
            status = (found.get("modelLifecycle") or {}).get("status", "ACTIVE")
    except Exception as exc:
        kind = "inference profile" if profile else "foundation model"
        if _error_code(exc) not in NOT_FOUND and not _denied(exc):
            raise
        if _denied(exc):
            return Result(
                "bedrock-model",
                WARN,
                f"cannot read the {kind} {model}: {_error_code(exc)}",
                "allow bedrock:GetInferenceProfile / bedrock:GetFoundationModel to check it",
            )
        return Result(
            "bedrock-model",
            FAIL,
            f"no {kind} {model} in {ctx.region} ({_error_code(exc)})",
            "set --param BedrockModelId to a model of this region (aws bedrock "
            "list-foundation-models / list-inference-profiles), e.g. an eu./apac. profile "
            "outside the US",
        )
    if status != "ACTIVE":
        return Result(
            "bedrock-model",
            WARN,
            f"{model} is {status} in {ctx.region}",
            "pick an ACTIVE model or profile for BedrockModelId",
        )
    if not profile and "ON_DEMAND" not in (found.get("inferenceTypesSupported") or ["ON_DEMAND"]):
        return Result(
            "bedrock-model",
            FAIL,
            f"{model} cannot be invoked on demand by its id (it supports "
            f"{', '.join(found.get('inferenceTypesSupported') or [])})",
            f"use its cross-region inference profile id, e.g. us.{model} (eu./apac. elsewhere)",
        )
    kind = "inference profile" if profile else "foundation model"
    return Result(
        "bedrock-model",
        OK,
        f"{kind} {model} is ACTIVE in {ctx.region} (model access itself shows on the first "
        "call: the Bedrock console's Model access page grants it)",
    )


def check_card_signing_key(ctx: Context) -> Result:
    arn = ctx.parameters.get("CardSigningKeyArn", "")
    if not arn:
        raise Skip
    parts = arn.split(":")
    key_region = parts[3] if len(parts) > 5 else ctx.region
    key_account = parts[4] if len(parts) > 5 else ""
    if key_region != ctx.region:
        return Result(
            "card-signing-key",
            FAIL,
            f"the key is in {key_region}, the stack in {ctx.region}: the functions call KMS "
            "in their own region, so signing fails and the public Agent Card answers 500",
            f"create the key in {ctx.region} (docs/deploy.md, Agent Card signing)",
        )
    kms = ctx.client("kms", key_region)
    try:
        key = kms.describe_key(KeyId=arn)["KeyMetadata"]
    except Exception as exc:
        if _error_code(exc) not in NOT_FOUND and not _denied(exc):
            raise
        status = WARN if _denied(exc) else FAIL
        return Result(
            "card-signing-key",
            status,
            f"cannot describe {arn}: {_error_code(exc)}",
            "check the ARN (aws kms describe-key --key-id ARN), or allow kms:DescribeKey",
        )
    wrong = [
        f"{name} {key.get(name)} (needs {wanted})"
        for name, wanted in (("KeySpec", "ECC_NIST_P256"), ("KeyUsage", "SIGN_VERIFY"))
        if key.get(name) != wanted
    ]
    if not key.get("Enabled") or key.get("KeyState") != "Enabled":
        wrong.append(f"KeyState {key.get('KeyState')} (needs Enabled)")
    if wrong:
        return Result(
            "card-signing-key",
            FAIL,
            f"the key cannot sign the card: {'; '.join(wrong)}; the public Agent Card would "
            "answer 500",
            "create an ECC_NIST_P256 SIGN_VERIFY key (docs/deploy.md, Agent Card signing), "
            "or enable this one",
        )
    account = key.get("AWSAccountId") or key_account
    try:
        policy = json.loads(kms.get_key_policy(KeyId=arn, PolicyName="default")["Policy"])
    except Exception as exc:
        return Result(
            "card-signing-key",
            WARN,
            f"the key signs ES256, but its policy cannot be read ({_error_code(exc)})",
            "make sure the key policy lets IAM policies of account "
            f"{account} grant kms:Sign and kms:GetPublicKey",
        )
    if not iam_may_grant(policy, account, ("kms:Sign", "kms:GetPublicKey")):
        return Result(
            "card-signing-key",
            FAIL,
            f"the key policy does not let IAM policies of account {account} grant kms:Sign "
            "and kms:GetPublicKey: the functions would be refused and the public Agent Card "
            "answer 500",
            f'add to the key policy {{"Effect": "Allow", "Principal": {{"AWS": '
            f'"arn:aws:iam::{account}:root"}}, "Action": "kms:*", "Resource": "*"}} '
            "(docs/deploy.md, Agent Card signing)",
        )
    return Result(
        "card-signing-key",
        OK,
        "ECC_NIST_P256 / SIGN_VERIFY, enabled; the key policy lets IAM grant kms:Sign and "
        "kms:GetPublicKey",
    )


def iam_may_grant(policy: dict[str, Any], account: str, actions: tuple[str, ...]) -> bool:
    """Whether the key policy delegates `actions` to the IAM policies of `account` (the
    account principal, unconditioned, allowed them), and no statement denies them."""
    principals = {account, f"arn:aws:iam::{account}:root"}
    allowed: set[str] = set()
    statements = policy.get("Statement") or []
    if isinstance(statements, dict):
        statements = [statements]
    for statement in statements:
        listed = statement.get("Action") or []
        names = [listed] if isinstance(listed, str) else list(listed)
        covered = {a for a in actions if any(_matches(n, a) for n in names)}
        if statement.get("Effect") == "Deny" and covered and not statement.get("Condition"):
            return False
        principal = statement.get("Principal") or {}
        aws = principal.get("AWS", []) if isinstance(principal, dict) else principal
        aws = [aws] if isinstance(aws, str) else list(aws)
        unconditioned = not statement.get("Condition")
        if statement.get("Effect") == "Allow" and unconditioned and principals & set(aws):
            allowed |= covered
    return allowed == set(actions)


def _matches(pattern: str, action: str) -> bool:
    pattern, action = pattern.lower(), action.lower()
    if pattern in ("*", "kms:*"):
        return True
    if pattern.endswith("*"):
        return action.startswith(pattern[:-1])
    return pattern == action


def check_apigateway_logs(ctx: Context) -> Result:
    role = ctx.client("apigateway").get_account().get("cloudwatchRoleArn") or ""
    creates_role = ctx.flag("CreateApiGatewayLoggingRole")
    access_logs = ctx.flag("ApiAccessLogs")
    # Without the parameter the template's stage always logs access.
    wants_logs = True if access_logs is None else access_logs
    if role and creates_role:
        return Result(
            "apigateway-logs",
            WARN,
            f"the region already has an API Gateway CloudWatch Logs role ({role}); "
            "CreateApiGatewayLoggingRole=true replaces it for every API of the region",
            "deploy with --param CreateApiGatewayLoggingRole=false to keep it",
        )
    if role:
        return Result("apigateway-logs", OK, f"the region's CloudWatch Logs role is {role}")
    if not wants_logs:
        return Result(
            "apigateway-logs",
            OK,
            "no CloudWatch Logs role in this region, and ApiAccessLogs=false needs none",
        )
    if creates_role or creates_role is None:
        return Result(
            "apigateway-logs",
            OK,
            "no CloudWatch Logs role in this region yet: the stack creates one "
            "(CreateApiGatewayLoggingRole=true; kept when the stack is deleted)",
        )
    fix = "deploy with --param CreateApiGatewayLoggingRole=true (the stack sets the role)"
    if access_logs is not None:
        fix += ", or ApiAccessLogs=false (no access log)"
    return Result(
        "apigateway-logs",
        FAIL,
        "the region has no API Gateway CloudWatch Logs role and CreateApiGatewayLoggingRole="
        "false: API Gateway refuses the stage's access logging and the deploy rolls back",
        fix + "; or set one in the API Gateway console > Settings",
    )


CHECKS: list[tuple[str, Callable[[Context], Result]]] = [
    ("concurrency", check_concurrency),
    ("web-adapter-layer", check_web_adapter_layer),
    ("snapstart", check_snapstart),
    ("bedrock-model", check_bedrock),
    ("card-signing-key", check_card_signing_key),
    ("apigateway-logs", check_apigateway_logs),
]


def _condition(ctx: Context, name: str, otherwise: bool) -> bool:
    """The template's condition `name` for these parameters; `otherwise` if it has none."""
    try:
        return bool(ctx.resolver.condition(name))
    except (KeyError, ValueError):
        return otherwise


def _one_line(exc: Exception, most: int = 200) -> str:
    """An error as one short line (an endpoint's HTML error page included)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= most else text[: most - 1] + "…"


def _partition(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


# -- running ---------------------------------------------------------------------------------


def context(session: Any, template_path: Path, overrides: dict[str, str], region: str) -> Context:
    from a2a_serverless.local.template import (
        Resolver,
        load_template,
        parameter_defaults,
        template_settings,
        with_settings,
    )

    template = load_template(template_path)
    # A scaffolded template keeps most settings in its Mappings: they count as parameters.
    parameters = {**template_settings(template), **parameter_defaults(template), **overrides}
    resolver = Resolver(
        parameters={**parameters, "AWS::Region": region},
        refs={},
        attributes={},
        conditions=template.get("Conditions", {}),
        mappings=with_settings(template.get("Mappings") or {}, parameters),
    )
    return Context(session, region, template, parameters, resolver, overrides)


def diagnose(ctx: Context) -> list[Result]:
    """Every check that applies, in order; an unexpected error is that check's WARN."""
    results = []
    for name, check in CHECKS:
        try:
            results.append(check(ctx))
        except Skip:
            continue
        except Exception as exc:
            status = WARN if _denied(exc) else FAIL
            results.append(
                Result(
                    name,
                    status,
                    f"could not check: {_error_code(exc)}: {_one_line(exc)}",
                    "check your AWS credentials and region (aws sts get-caller-identity)",
                )
            )
    return results


def _template_path(template: str | None) -> Path:
    if template:
        path = Path(template)
        if not path.is_file():
            raise SystemExit(f"a2a-serverless doctor: no template at {template}")
        return path
    here = Path.cwd() / "template.yaml"
    return here if here.is_file() else Path(__file__).parent / "template.yaml"


def run(args: argparse.Namespace) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError

    from a2a_serverless.local.__main__ import parse_params

    overrides = parse_params(args.param)
    path = _template_path(args.template)
    try:
        session = boto3.session.Session(profile_name=args.profile, region_name=args.region)
    except BotoCoreError as exc:
        print(f"a2a-serverless doctor: {exc}", file=sys.stderr)
        return 1
    region = session.region_name
    if not region:
        print(
            "a2a-serverless doctor: no region: pass --region, or set AWS_REGION or your "
            "profile's region",
            file=sys.stderr,
        )
        return 1
    if session.get_credentials() is None:
        print(
            "a2a-serverless doctor: no AWS credentials: run aws configure (or aws sso login), "
            "set AWS_PROFILE, or pass --profile",
            file=sys.stderr,
        )
        return 1
    ctx = context(session, path, overrides, region)
    print(f"doctor: {path} in {region}")
    results = diagnose(ctx)
    for result in results:
        print(f"{result.status:<4}  {result.name:<17}  {result.reason}")
        if result.fix and result.status != OK:
            print(f"      {'':<17}  fix: {result.fix}")
    failed = sum(r.status == FAIL for r in results)
    warned = sum(r.status == WARN for r in results)
    print(
        f"{'FAILED' if failed else 'OK'}: {len(results)} checks, {failed} failed, {warned} warnings"
    )
    return 1 if failed else 0
