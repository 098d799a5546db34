"""Offline SAM translation of template.yaml and readers for the translated CloudFormation.

Nothing here talks to AWS: samtranslator needs a region (given through the environment for
the duration of one call) and a managed-policy loader (a fixed map instead of IAM ListPolicies).
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from samtranslator.translator.transform import transform

from a2a_serverless.local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"
# Every Lambda function of the stack (logical ids).
FUNCTIONS = (
    "AuthorizerFunction",
    "AgentCardFunction",
    "SendMessageFunction",
    "GetTaskFunction",
    "ListTasksFunction",
    "StreamFunction",
    "PushConfigFunction",
    "FlowWorkerFunction",
    "WebhookSenderFunction",
    "DelegationReceiverFunction",
)
ARTIFACT_BUCKET = "a2a-serverless-artifacts"


class OfflineManagedPolicyLoader:
    """Stands in for samtranslator's IAM-backed ManagedPolicyLoader.

    SAM asks for this map only when a function lists an AWS managed policy by a name that
    its bundled map does not know; the policies it attaches itself (basic execution, X-Ray)
    are full ARNs already. It is the map `sam validate` would fetch with IAM ListPolicies.
    """

    POLICIES = {
        "AWSLambdaBasicExecutionRole": (
            "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        ),
        "AWSLambdaDynamoDBExecutionRole": (
            "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole"
        ),
        "AWSLambdaRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaRole",
        "AWSLambdaVPCAccessExecutionRole": (
            "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
        ),
        "AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
        "AWSXRayDaemonWriteAccess": "arn:aws:iam::aws:policy/AWSXRayDaemonWriteAccess",
    }

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.policies = {**self.POLICIES, **(extra or {})}
        self.calls = 0

    def load(self) -> dict[str, str]:
        self.calls += 1
        return dict(self.policies)


@contextmanager
def _offline_region() -> Iterator[None]:
    # samtranslator reads the region from a default boto3 session; no profile, no credentials.
    env = {"AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}
    with mock.patch.dict(os.environ, env):
        os.environ.pop("AWS_PROFILE", None)
        yield


def load_sam(path: Path = TEMPLATE) -> dict[str, Any]:
    return load_template(path)


def packaged(sam: dict[str, Any]) -> dict[str, Any]:
    """What `sam package` hands to CloudFormation: local code paths become S3 locations."""
    sam = copy.deepcopy(sam)
    for resource in sam["Resources"].values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = f"s3://{ARTIFACT_BUCKET}/{props[key].rstrip('/')}.zip"
    return sam


def translate(
    sam: dict[str, Any],
    parameters: dict[str, Any] | None = None,
    loader: OfflineManagedPolicyLoader | None = None,
) -> dict[str, Any]:
    """The CloudFormation template that the AWS::Serverless-2016-10-31 transform produces."""
    with _offline_region():
        return transform(
            packaged(sam), dict(parameters or {}), loader or OfflineManagedPolicyLoader()
        )


def resources_of_type(cfn: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in cfn["Resources"].items() if v["Type"] == type_}


# -- API routes --------------------------------------------------------------------------------

_URI = re.compile(
    r"^arn:(?:aws|\$\{AWS::Partition\}):apigateway:\$\{AWS::Region\}:lambda:path/"
    r"(?P<version>\d{4}-\d{2}-\d{2})/functions/\$\{(?P<function>\w+?)(?:\.Arn|Aliaslive)\}/"
    r"(?P<action>invocations|response-streaming-invocations)$"
)
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def rest_api_body(cfn: dict[str, Any]) -> dict[str, Any]:
    apis = resources_of_type(cfn, "AWS::ApiGateway::RestApi")
    assert list(apis) == ["Api"], f"expected exactly one REST API named Api, got {list(apis)}"
    return apis["Api"]["Properties"]["Body"]


def resolve_if(cfn: dict[str, Any], value: Any, parameters: dict[str, str] | None = None) -> Any:
    """A template value as CloudFormation deploys it: a `Fn::If` resolved for the parameters
    (defaults otherwise), None for AWS::NoValue; any other value as it is."""
    if isinstance(value, dict) and list(value) == ["Fn::If"]:
        condition, if_true, if_false = value["Fn::If"]
        chosen = if_true if condition_holds(cfn, condition, parameters or {}) else if_false
        return resolve_if(cfn, chosen, parameters)
    if value == {"Ref": "AWS::NoValue"}:
        return None
    return value


def resolve_ifs(cfn: dict[str, Any], value: Any, parameters: dict[str, str] | None = None) -> Any:
    """resolve_if all the way down: every nested `Fn::If` resolved, and a key or list item
    whose value is AWS::NoValue left out (as CloudFormation does); other intrinsics kept."""
    value = resolve_if(cfn, value, parameters)
    if isinstance(value, dict):
        resolved = {k: resolve_ifs(cfn, v, parameters) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not None}
    if isinstance(value, list):
        items = [resolve_ifs(cfn, v, parameters) for v in value]
        return [v for v in items if v is not None]
    return value


def routes(
    cfn: dict[str, Any], parameters: dict[str, str] | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """(METHOD, path) -> its x-amazon-apigateway-integration, for every method of the API as
    deployed with the parameters (defaults otherwise): a conditional method (the CORS
    preflight) counts only where its condition holds."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path, item in rest_api_body(cfn)["paths"].items():
        for method, operation in item.items():
            assert method in HTTP_METHODS or method == "x-amazon-apigateway-any-method", (
                f"unexpected key {method!r} under {path}"
            )
            operation = resolve_if(cfn, operation, parameters)
            if operation is not None:
                found[(method.upper(), path)] = operation["x-amazon-apigateway-integration"]
    return found


def integration_uri(integration: dict[str, Any]) -> re.Match[str]:
    uri = integration["uri"]
    assert isinstance(uri, dict) and list(uri) == ["Fn::Sub"], uri
    match = _URI.match(uri["Fn::Sub"])
    assert match, f"not a Lambda proxy invocation URI: {uri['Fn::Sub']}"
    return match


def target_function(integration: dict[str, Any]) -> str:
    """The logical id of the Lambda function an integration invokes (as a Lambda proxy)."""
    assert integration["type"] == "aws_proxy", integration
    assert integration["httpMethod"] == "POST", integration
    return integration_uri(integration)["function"]


STREAM = "STREAM"
BUFFERED = "BUFFERED"


def transfer_mode(integration: dict[str, Any]) -> str:
    """STREAM only if both the URI and responseTransferMode say so; BUFFERED only if neither.

    Anything else (a half-configured integration) is reported as INCONSISTENT.
    """
    match = integration_uri(integration)
    streaming_uri = match["action"] == "response-streaming-invocations"
    mode = integration.get("responseTransferMode", "BUFFERED")
    if streaming_uri and mode == "STREAM" and match["version"] == "2021-11-15":
        return STREAM
    if not streaming_uri and mode == "BUFFERED" and match["version"] == "2015-03-31":
        return BUFFERED
    return f"INCONSISTENT(uri={match['action']}, responseTransferMode={mode})"


def transfer_modes(cfn: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {route: transfer_mode(integration) for route, integration in routes(cfn).items()}


# API Gateway's integration timeouts: the default (and buffered maximum without a quota
# increase), and the maximum of a streamed response.
BUFFERED_TIMEOUT_MS = 29_000
STREAM_TIMEOUT_MS = 900_000


def route_timeout_ms(integration: dict[str, Any]) -> int:
    """The integration timeout of a route as deployed (29 s when the template sets none)."""
    return int(integration.get("timeoutInMillis", BUFFERED_TIMEOUT_MS))


def function_routes(cfn: dict[str, Any]) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """Function logical id -> its routes and their integrations."""
    found: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for route, integration in routes(cfn).items():
        found.setdefault(target_function(integration), {})[route] = integration
    return found


def access_log_setting(cfn: dict[str, Any]) -> dict[str, Any]:
    """The stage's AccessLogSetting as deployed with ApiAccessLogs=true (without it the stage
    has none: a region without API Gateway's CloudWatch role refuses a stage that logs)."""
    (stage,) = resources_of_type(cfn, "AWS::ApiGateway::Stage").values()
    setting = resolve_if(cfn, stage["Properties"]["AccessLogSetting"], {"ApiAccessLogs": "true"})
    assert isinstance(setting, dict), setting
    return setting


def deployed_stages(cfn: dict[str, Any]) -> list[Any]:
    """The name of every stage the template deploys: Stage resources, and the stage that a
    Deployment with a StageName creates implicitly (SAM's extra "Stage" stage)."""
    stages = [
        stage["Properties"]["StageName"]
        for stage in resources_of_type(cfn, "AWS::ApiGateway::Stage").values()
    ]
    stages += [
        deployment["Properties"]["StageName"]
        for deployment in resources_of_type(cfn, "AWS::ApiGateway::Deployment").values()
        if "StageName" in deployment["Properties"]
    ]
    return stages


# -- Conditions --------------------------------------------------------------------------------


def condition_holds(cfn: dict[str, Any], name: str, parameters: dict[str, str]) -> bool:
    """Evaluates a template condition for the given parameter values (defaults otherwise), as
    CloudFormation would: Fn::Equals compares the values as strings."""
    return expression_holds(cfn, cfn["Conditions"][name], parameters)


def expression_holds(cfn: dict[str, Any], expression: Any, parameters: dict[str, str]) -> bool:
    """A condition expression (Fn::Equals, Fn::Not, Fn::And, Fn::Or, Condition), e.g. a
    rule's RuleCondition or Assert, for the given parameter values (defaults otherwise)."""
    values = {
        key: str(spec["Default"])
        for key, spec in cfn.get("Parameters", {}).items()
        if "Default" in spec
    }
    values.update(parameters)

    def value(expr: Any) -> str:
        if isinstance(expr, dict) and list(expr) == ["Ref"]:
            return values[expr["Ref"]]
        assert isinstance(expr, str | int), f"cannot evaluate {expr!r}"
        return str(expr)

    def holds(expr: Any) -> bool:
        ((function, args),) = expr.items()
        if function == "Condition":
            return holds(cfn["Conditions"][args])
        if function == "Fn::Equals":
            return value(args[0]) == value(args[1])
        if function == "Fn::Not":
            return not holds(args[0])
        if function == "Fn::Or":
            return any(holds(a) for a in args)
        if function == "Fn::And":
            return all(holds(a) for a in args)
        raise AssertionError(f"unsupported condition function {function}")

    return holds(expression)


# -- IAM ---------------------------------------------------------------------------------------


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def resource_key(resource: Any) -> str:
    """A hashable, readable form of a Resource entry (a string or an intrinsic)."""
    return resource if isinstance(resource, str) else json.dumps(resource, sort_keys=True)


def role_of(cfn: dict[str, Any], logical_id: str) -> tuple[str, dict[str, Any]]:
    resource = cfn["Resources"][logical_id]
    arn = resource["Properties"]["RoleArn" if "RoleArn" in resource["Properties"] else "Role"]
    assert isinstance(arn, dict) and list(arn) == ["Fn::GetAtt"], arn
    role_id, attribute = arn["Fn::GetAtt"]
    assert attribute == "Arn"
    role = cfn["Resources"][role_id]
    assert role["Type"] == "AWS::IAM::Role"
    return role_id, role


def statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in role["Properties"].get("Policies", [])
        for statement in as_list(policy["PolicyDocument"]["Statement"])
    ]


def grants(role: dict[str, Any]) -> dict[str, set[str]]:
    """action -> resources it is allowed on, from the role's inline policies."""
    allowed: dict[str, set[str]] = {}
    for statement in statements(role):
        # A Condition narrows a grant (test_iam.py checks each one the roles have).
        unsupported = set(statement) - {"Sid", "Effect", "Action", "Resource", "Condition"}
        assert not unsupported, f"statement uses {unsupported}; extend the test to judge it"
        assert statement["Effect"] == "Allow", statement
        for action in as_list(statement["Action"]):
            allowed.setdefault(action, set()).update(
                resource_key(r) for r in as_list(statement["Resource"])
            )
    return allowed


# -- State machine -----------------------------------------------------------------------------


def state_machine_definition(cfn: dict[str, Any], logical_id: str) -> dict[str, Any]:
    definition = cfn["Resources"][logical_id]["Properties"]["DefinitionString"]
    separator, lines = definition["Fn::Join"]
    assert all(isinstance(line, str) for line in lines), "definition has intrinsics inline"
    return json.loads(separator.join(lines))
