"""The resources of template.yaml, created in moto: table, buckets, queues, functions, state
machine.

Each `create_*` reads its resources from the template, creates them with boto3 (mock_aws
must be running), and records their names and ARNs in the Resolver, so later properties
(`!Ref`, `!GetAtt`, `!Sub`) and the functions' environment resolve to the local resources.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import sys
import uuid
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a_serverless.local.events import QueueMapping, StreamMapping, parse_filters
from a2a_serverless.local.template import Resolver

logger = logging.getLogger(__name__)

REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK = "a2a-local"
# Emulation-only variables of the deployed functions, meaningless in-process.
DEPLOY_ONLY_ENV = {"AWS_LAMBDA_EXEC_WRAPPER", "AWS_LWA_INVOKE_MODE", "PORT"}
# Variables that name the stack's own resources: always the local ones.
RESOURCE_ENV = {
    "TABLE_NAME",
    "CONTENT_BUCKET",
    "STATE_MACHINE_ARN",
    "TIMER_STATE_MACHINE_ARN",
    "PUSH_RETRY_QUEUE_URL",
    "PUSH_DEAD_LETTER_QUEUE_URL",
}

Handler = Callable[[dict[str, Any], Any], Any]


def project_root() -> Path:
    """The folder holding template.yaml (this package lives in <root>/shared/)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "template.yaml").exists():
            return parent
    raise FileNotFoundError("template.yaml not found above " + str(here))


@dataclass
class FunctionSpec:
    logical_id: str
    code_dir: Path
    handler: str
    env: dict[str, str]
    events: list[tuple[str, str]]  # (METHOD, path)
    reserved_concurrency: int | None = None  # ReservedConcurrentExecutions (None: unreserved)

    @property
    def is_web_adapter(self) -> bool:
        return self.handler.endswith(".sh")


class LambdaContext:
    """The context object the Lambda runtime passes a handler, as far as ours read it."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        self.memory_limit_in_mb = 1024
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def load_module(name: str, path: Path) -> Any:
    """A function's code file, imported under `name` (functions share file names)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def client(service: str) -> Any:
    import boto3

    return boto3.client(service, region_name=REGION)  # type: ignore[call-overload]


def _resolvable(resolver: Resolver, variables: dict[str, Any]) -> dict[str, Any]:
    """The variables whose values the local stack can resolve (others name resources it
    does not create; they are skipped with a warning)."""
    resolved = {}
    for key, value in variables.items():
        try:
            resolved[key] = resolver.resolve(value)
        except KeyError as exc:
            logger.warning("local stack: %s not set (%s)", key, exc)
    return resolved


def _queue_attribute(value: Any) -> str:
    """A CloudFormation queue property as the SQS API attribute string."""
    if isinstance(value, dict):  # RedrivePolicy: JSON with a numeric maxReceiveCount
        return json.dumps({k: int(v) if k == "maxReceiveCount" else v for k, v in value.items()})
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _create_role(name: str, service: str) -> str:
    """An IAM role that `service` (e.g. lambda.amazonaws.com) may assume; its ARN."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
        ],
    }
    return client("iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))[
        "Role"
    ]["Arn"]


def table_request(props: dict[str, Any], name: str) -> dict[str, Any]:
    """create_table's arguments for a table of these properties (keys, indexes, billing),
    without its stream."""
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if props.get("GlobalSecondaryIndexes"):
        kwargs["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    return kwargs


def create_tables(resources: dict[str, Any], resolver: Resolver) -> None:
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::DynamoDB::Table":
            continue
        props = resolver.resolve(resource["Properties"])
        name = props.get("TableName") or f"{STACK}-{logical_id}"
        kwargs = table_request(props, name)
        if props.get("StreamSpecification"):
            kwargs["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": props["StreamSpecification"]["StreamViewType"],
            }
        db = client("dynamodb")
        description = db.create_table(**kwargs)["TableDescription"]
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            db.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={
                    "AttributeName": ttl["AttributeName"],
                    "Enabled": bool(ttl.get("Enabled", True)),
                },
            )
        resolver.refs[logical_id] = name
        resolver.attributes[f"{logical_id}.Arn"] = description["TableArn"]
        if "LatestStreamArn" in description:
            resolver.attributes[f"{logical_id}.StreamArn"] = description["LatestStreamArn"]


def create_buckets(resources: dict[str, Any], resolver: Resolver) -> list[str]:
    """Every AWS::S3::Bucket (named `{STACK}-{logical id}` in lower case, as S3 wants), with
    its default encryption; their names. Lifecycle, public access and bucket policies are not
    applied: moto enforces none of them."""
    s3 = client("s3")
    names = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::S3::Bucket":
            continue
        props = resolver.resolve(resource.get("Properties") or {})
        name = props.get("BucketName") or f"{STACK}-{logical_id}".lower()
        s3.create_bucket(Bucket=name)
        encryption = props.get("BucketEncryption")
        if encryption:
            rules = [
                {"ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"]}
                for rule in encryption["ServerSideEncryptionConfiguration"]
            ]
            s3.put_bucket_encryption(
                Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules}
            )
        resolver.refs[logical_id] = name
        resolver.attributes[f"{logical_id}.Arn"] = f"arn:aws:s3:::{name}"
        resolver.attributes[f"{logical_id}.DomainName"] = f"{name}.s3.amazonaws.com"
        resolver.attributes[f"{logical_id}.RegionalDomainName"] = (
            f"{name}.s3.{REGION}.amazonaws.com"
        )
        names.append(name)
    return names


def empty_buckets(names: list[str]) -> None:
    """Delete every object and unfinished multipart upload of the buckets."""
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT]["aws"]
    for name in names:
        bucket = backend.get_bucket(name)
        if not len(getattr(bucket, "keys", [None])) and not getattr(bucket, "multiparts", [None]):
            continue  # already empty (moto's store says so without a request)
        s3 = client("s3")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for entry in page.get("Contents", []):
                s3.delete_object(Bucket=name, Key=entry["Key"])
        uploads = s3.list_multipart_uploads(Bucket=name).get("Uploads", [])
        for upload in uploads:
            s3.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])


def create_queues(resources: dict[str, Any], resolver: Resolver) -> dict[str, str]:
    """Every AWS::SQS::Queue, dead-letter targets first (a redrive policy names one); their
    URLs by logical id."""
    sqs = client("sqs")
    queues: dict[str, str] = {}
    pending = {k: v for k, v in resources.items() if v["Type"] == "AWS::SQS::Queue"}
    while pending:
        created = False
        for logical_id, resource in list(pending.items()):
            try:
                props = resolver.resolve(resource.get("Properties") or {})
            except KeyError:
                continue  # its dead-letter queue is not created yet
            fifo = str(props.get("FifoQueue", "false")).lower() == "true"
            name = props.get("QueueName") or f"{STACK}-{logical_id}" + (".fifo" if fifo else "")
            attributes = {
                key: _queue_attribute(value)
                for key, value in props.items()
                if key not in ("QueueName", "Tags", "SqsManagedSseEnabled")
            }
            url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            resolver.refs[logical_id] = url
            resolver.attributes[f"{logical_id}.Arn"] = arn
            resolver.attributes[f"{logical_id}.QueueName"] = name
            resolver.attributes[f"{logical_id}.QueueUrl"] = url
            queues[logical_id] = url
            del pending[logical_id]
            created = True
        if not created:
            raise ValueError(f"local stack: cannot create queues {sorted(pending)}")
    return queues


def create_functions(
    resources: dict[str, Any], resolver: Resolver, root: Path
) -> dict[str, FunctionSpec]:
    """Every AWS::Serverless::Function, as a moto function with placeholder code (the real
    handlers run in-process: moto_fidelity.lambda_invoke), and its spec by logical id."""
    role_arn = _create_role("a2a-local-lambda", "lambda.amazonaws.com")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("app.py", "def handler(event, context):\n    return event\n")
    lam = client("lambda")
    functions: dict[str, FunctionSpec] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resolver.refs[logical_id] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:{logical_id}:1"
        if resource["Type"] == "AWS::Serverless::Api":
            resolver.refs[logical_id] = "local"
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        name = f"{STACK}-{logical_id}"
        arn = lam.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role_arn,
            Handler="app.handler",
            Code={"ZipFile": archive.getvalue()},
        )["FunctionArn"]
        resolver.refs[logical_id] = name
        resolver.attributes[f"{logical_id}.Arn"] = arn
        events = [
            (str(e["Properties"]["Method"]).upper(), str(e["Properties"]["Path"]))
            for e in (props.get("Events") or {}).values()
            if e.get("Type") == "Api"
        ]
        reserved = resolver.resolve(props.get("ReservedConcurrentExecutions"))
        functions[logical_id] = FunctionSpec(
            logical_id=logical_id,
            code_dir=root / props["CodeUri"],
            handler=props["Handler"],
            env={},
            events=events,
            reserved_concurrency=None if reserved in (None, "") else int(reserved),
        )
    return functions


def create_state_machines(
    resources: dict[str, Any], resolver: Resolver, roles: dict[str, str]
) -> None:
    """Every AWS::Serverless::StateMachine, each with a role of its own as SAM creates
    (`roles`: role ARN -> logical id, by which the interpreter's calls are attributed)."""
    sfn = client("stepfunctions")
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Serverless::StateMachine":
            continue
        props = resource["Properties"]
        definition = json.dumps(props["Definition"])
        substitutions = resolver.resolve(props.get("DefinitionSubstitutions") or {})
        for key, value in substitutions.items():
            definition = definition.replace("${" + key + "}", str(value))
        role_arn = _create_role(f"{STACK}-{logical_id}", "states.amazonaws.com")
        roles[role_arn] = logical_id
        # The template's Name when it sets one: other resources build the ARN from it.
        name = str(resolver.resolve(props["Name"])) if "Name" in props else f"{STACK}-{logical_id}"
        arn = sfn.create_state_machine(
            name=name,
            definition=definition,
            roleArn=role_arn,
            type=resolver.resolve(props.get("Type", "STANDARD")),
        )["stateMachineArn"]
        resolver.refs[logical_id] = arn
        resolver.attributes[f"{logical_id}.Name"] = name
        resolver.attributes[f"{logical_id}.Arn"] = arn


def waiting_state_machines(resources: dict[str, Any]) -> list[str]:
    """The logical ids of the state machines whose definition has a Wait state."""
    return [
        logical_id
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::StateMachine"
        and any(
            state.get("Type") == "Wait"
            for state in (resource["Properties"].get("Definition") or {}).get("States", {}).values()
        )
    ]


def create_secrets(secrets: Mapping[str, str], replace: bool = False) -> None:
    """Secrets Manager secrets, name -> SecretString; `replace`: every other secret of the
    account deleted first and these made anew (a reset stack's)."""
    sm = client("secretsmanager")
    if replace:
        for page in sm.get_paginator("list_secrets").paginate():
            for secret in page["SecretList"]:
                sm.delete_secret(SecretId=secret["ARN"], ForceDeleteWithoutRecovery=True)
    for name, value in secrets.items():
        sm.create_secret(Name=name, SecretString=value)


def function_env(
    template: dict[str, Any], resolver: Resolver, functions: Mapping[str, FunctionSpec]
) -> dict[str, str]:
    """Fill each function's own environment; return the union of all of them over the
    Globals (one process runs every function, so they share os.environ)."""
    resources = template["Resources"]
    globals_env = (template.get("Globals", {}).get("Function", {}).get("Environment", {})).get(
        "Variables", {}
    )
    merged = {key: str(value) for key, value in _resolvable(resolver, globals_env).items()}
    for logical_id, spec in functions.items():
        own = resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        spec.env = {k: str(v) for k, v in _resolvable(resolver, own).items()}
        for key, value in spec.env.items():
            if key not in DEPLOY_ONLY_ENV:
                merged[key] = value
    return merged


def event_source_mappings(
    resources: dict[str, Any],
    resolver: Resolver,
    functions: Mapping[str, FunctionSpec],
    queues: Mapping[str, str],
    invoker: Callable[[str], Callable[[dict[str, Any]], Any]],
) -> list[StreamMapping | QueueMapping]:
    """One mapping emulation per DynamoDB or SQS event of a function, and per
    AWS::Lambda::EventSourceMapping of a function of the template (`invoker(logical_id)` runs
    the function on a batch). A mapping is named `{function}.{event}`: an explicit mapping
    whose logical id is SAM's for an event (`{function}{event}`) has the event's name."""
    queue_urls = {
        resolver.attributes[f"{logical_id}.Arn"]: url for logical_id, url in queues.items()
    }
    mappings: list[StreamMapping | QueueMapping] = []
    for logical_id in functions:
        events = resources[logical_id]["Properties"].get("Events") or {}
        for event_name, event in events.items():
            if event.get("Type") in ("DynamoDB", "SQS"):
                props = resolver.resolve(event["Properties"])
                name = f"{logical_id}.{event_name}"
                mappings.append(
                    _mapping(
                        name, logical_id, event["Type"], props, invoker(logical_id), queue_urls
                    )
                )
    for mapping_id, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        if resource.get("Condition") and not resolver.condition(resource["Condition"]):
            continue
        settings = dict(resource["Properties"])
        function = _function_of(settings.pop("FunctionName", None), functions)
        event = _event_of_mapping(resolver.resolve(settings), queue_urls)
        if function is None or event is None:
            raise ValueError(
                f"{mapping_id}: the local stack emulates mappings of a template function "
                "from a DynamoDB stream or an SQS queue of the template"
            )
        event_type, props = event
        suffix = mapping_id[len(function) :] if mapping_id.startswith(function) else ""
        name = f"{function}.{suffix}" if suffix else mapping_id
        mappings.append(_mapping(name, function, event_type, props, invoker(function), queue_urls))
    return mappings


def _function_of(value: Any, functions: Mapping[str, FunctionSpec]) -> str | None:
    """The logical id of the template function a mapping's FunctionName names (Ref or GetAtt)."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        target = arg if key == "Ref" else arg[0] if key == "Fn::GetAtt" else None
        if isinstance(target, str) and target in functions:
            return target
    return None


def _event_of_mapping(
    props: dict[str, Any], queue_urls: Mapping[str, str]
) -> tuple[str, dict[str, Any]] | None:
    """An AWS::Lambda::EventSourceMapping's properties as the SAM event (type, properties) it
    is the same mapping as: EventSourceArn a queue of the stack (SQS) or a stream (DynamoDB)."""
    source = props.get("EventSourceArn", "")
    settings = {k: v for k, v in props.items() if k != "EventSourceArn"}
    if source in queue_urls:
        return "SQS", {**settings, "Queue": source}
    if ":dynamodb:" in source and "/stream/" in source:
        return "DynamoDB", {**settings, "Stream": source}
    return None


def _mapping(
    name: str,
    function: str,
    event_type: str,
    props: dict[str, Any],
    invoke: Callable[[dict[str, Any]], Any],
    queue_urls: dict[str, str],
) -> StreamMapping | QueueMapping:
    """A SAM DynamoDB or SQS event's settings, as its mapping emulation (its own calls
    are made with the function's role, as Lambda's pollers are)."""
    item_failures = "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or [])
    if event_type == "SQS":
        return QueueMapping(
            name=name,
            invoke=invoke,
            principal=function,
            sqs=client("sqs"),
            queue_url=queue_urls[props["Queue"]],
            queue_arn=props["Queue"],
            batch_size=int(props.get("BatchSize", 10)),
            report_item_failures=item_failures,
        )
    on_failure = (props.get("DestinationConfig") or {}).get("OnFailure") or {}
    return StreamMapping(
        name=name,
        invoke=invoke,
        principal=function,
        streams=client("dynamodbstreams"),
        sqs=client("sqs"),
        stream_arn=props["Stream"],
        batch_size=int(props.get("BatchSize", 100)),
        filters=parse_filters(props.get("FilterCriteria")),
        report_item_failures=item_failures,
        bisect=str(props.get("BisectBatchOnFunctionError", "false")).lower() == "true",
        maximum_retry_attempts=int(props.get("MaximumRetryAttempts", -1)),
        on_failure_queue_url=queue_urls.get(on_failure.get("Destination") or ""),
        starting_position=str(props.get("StartingPosition", "TRIM_HORIZON")),
    )
