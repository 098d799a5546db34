"""Build the stack of template.yaml inside moto, in this process, and route HTTP like API Gateway.

- DynamoDB table and state machine are created from template.yaml (same properties).
- Step Functions executions run in moto's interpreter; their Lambda tasks call the real
  handlers in-process (moto would otherwise need Docker to run Lambda code).
- SQS queues are created from template.yaml; the functions' DynamoDB and SQS event sources
  are polled by threads that invoke the real handlers as Lambda's mappings would
  (local/events.py).
- Every function's FastAPI app is served behind one ASGI gateway with the template's routes.
- With A2A_LOCAL_CALL_LOG set, every AWS call a function (or the state machine) makes is
  recorded as IAM sees it, attributed to the function running (local/calls.py).
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import re
import sys
import threading
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a_serverless.local.calls import CALL_LOG_ENV, CallRecorder, acting_as
from a2a_serverless.local.events import EventSources, QueueMapping, StreamMapping, parse_filters
from a2a_serverless.local.template import Resolver, load_template, parameter_defaults

logger = logging.getLogger(__name__)

REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK = "a2a-local"
LOCAL_PRINCIPAL_HEADER = "x-local-principal"
# Emulation-only variables of the deployed functions, meaningless in-process.
_DEPLOY_ONLY_ENV = {"AWS_LAMBDA_EXEC_WRAPPER", "AWS_LWA_INVOKE_MODE", "PORT"}
# Variables that name the stack's own resources: always the local ones.
_RESOURCE_ENV = {
    "TABLE_NAME",
    "STATE_MACHINE_ARN",
    "PUSH_RETRY_QUEUE_URL",
    "PUSH_DEAD_LETTER_QUEUE_URL",
}
# Parameter values of the local stack where the template's defaults are for deployment: the
# developer's webhook receiver runs on this machine, over http.
LOCAL_PARAMETERS = {"PushAllowHttp": "true", "PushAllowHosts": "127.0.0.1,localhost,::1"}


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

    @property
    def is_web_adapter(self) -> bool:
        return self.handler.endswith(".sh")


def _load_module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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


def _attributed_handler(
    handler: Callable[[dict[str, Any], Any], Any], logical_id: str, stack_id: str
) -> Callable[[dict[str, Any], Any], Any]:
    """A Lambda handler whose AWS calls are attributed to its function (local/calls.py)."""

    def invoke(event: dict[str, Any], context: Any) -> Any:
        with acting_as(logical_id, stack_id):
            return handler(event, context)

    return invoke


class _AttributedApp:
    """A function's ASGI app whose AWS calls are attributed to the function (the context
    variable reaches the request's tasks and Starlette's worker threads)."""

    def __init__(self, app: Any, logical_id: str, stack_id: str) -> None:
        self.app = app
        self.logical_id = logical_id
        self.stack_id = stack_id

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        with acting_as(self.logical_id, self.stack_id):
            await self.app(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


class _LambdaContext:
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


class LocalStack:
    """moto + the real handlers, created from template.yaml."""

    def __init__(
        self,
        root: Path | None = None,
        parameters: dict[str, str] | None = None,
        env_overrides: dict[str, str] | None = None,
        event_sources: bool | str = True,
    ) -> None:
        self.root = root or project_root()
        self.template = load_template(self.root / "template.yaml")
        self.parameters = {
            **parameter_defaults(self.template),
            **LOCAL_PARAMETERS,
            **(parameters or {}),
        }
        # True: pollers run in threads (as deployed); "manual": mappings built, polled by the
        # caller (deterministic tests); False: none.
        self.event_source_mode = {True: "threads", False: "off"}.get(event_sources, event_sources)
        if self.event_source_mode not in ("threads", "manual", "off"):
            raise ValueError(f"event_sources must be True, False or 'manual': {event_sources!r}")
        self.event_sources: EventSources | None = None
        self.queues: dict[str, str] = {}  # logical id -> queue URL
        self.env_overrides = env_overrides or {}
        self.functions: dict[str, FunctionSpec] = {}
        self.env: dict[str, str] = {}
        self._mock: Any = None
        self._patches: list[tuple[Any, str, Any]] = []
        self._handlers: dict[str, Callable[[dict[str, Any], Any], Any]] = {}
        self._apps: dict[str, Any] = {}
        self._saved_env: dict[str, str | None] = {}
        self.recorder: CallRecorder | None = None
        self.stack_id = uuid.uuid4().hex  # names this stack's calls (local/calls.py)
        # Execution role ARN -> logical id of the state machine that runs with it.
        self._state_machine_roles: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> LocalStack:
        base_env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            "MOTO_ALLOW_NONEXISTENT_REGION": "true",
        }
        self._set_env(base_env)
        from moto import mock_aws

        self._mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
        self._mock.start()
        self._record_calls()
        self._serialize_dynamodb()
        self._cheap_transactions()
        self._fifo_groups_in_order()
        resources = self.template["Resources"]
        resolver = Resolver(
            {**self.parameters, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}, {}, {}
        )
        self._create_table(resources, resolver)
        self._create_queues(resources, resolver)
        self._create_functions(resources, resolver)
        self._create_state_machine(resources, resolver)
        self._collect_function_env(resources, resolver)
        # A setting the developer exported wins over the template's value (resources do not:
        # they name what this stack just created).
        exported = {
            key: os.environ[key]
            for key in self.env
            if key in os.environ and key not in _RESOURCE_ENV and key not in base_env
        }
        self._set_env({**self.env, **exported, **self.env_overrides})
        from a2a_serverless import wiring

        wiring.reset()
        if self.recorder is not None:
            self.recorder.write_stack(
                {
                    "parameters": resolver.parameters,
                    "refs": resolver.refs,
                    "attributes": resolver.attributes,
                    # Resources named away from the template's (a test's deliberate
                    # misconfiguration): calls outside the roles are expected there.
                    "overrides": sorted(set(self.env_overrides) & _RESOURCE_ENV),
                }
            )
        if self.event_source_mode != "off":
            self.event_sources = self._create_event_sources(resources, resolver)
        if self.event_sources is not None and self.event_source_mode == "threads":
            self.event_sources.start()
        return self

    def stop(self) -> None:
        if self.event_sources is not None:
            self.event_sources.stop()
            self.event_sources = None
        for target, name, original in reversed(self._patches):
            setattr(target, name, original)
        self._patches.clear()
        if self.recorder is not None:
            self.recorder.detach()
            self.recorder = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        from a2a_serverless import wiring

        wiring.reset()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _set_env(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    def _patch(self, target: Any, name: str, replacement: Any) -> None:
        self._patches.append((target, name, getattr(target, name)))
        setattr(target, name, replacement)

    def _record_calls(self) -> None:
        """With A2A_LOCAL_CALL_LOG set: record every AWS call of the stack's boto3 clients
        that a principal makes (functions: see `handler_for`/`app_for`; event source
        mappings: the function's role; the state machine's interpreter: its role)."""
        path = os.environ.get(CALL_LOG_ENV)
        if not path:
            return
        import boto3
        import moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils as sfn_lambda  # noqa: E501
        import moto.stepfunctions.parser.asl.utils.boto_client as sfn_clients

        recorder = self.recorder = CallRecorder(path, ACCOUNT, self.stack_id)
        # mock_aws has just reset boto3's default session: every client made from now on
        # (the functions', the pollers', moto's interpreter's) inherits this hook.
        recorder.attach(boto3._get_default_session().events)
        original = sfn_clients.boto_client_for
        stack = self

        def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
            client = original(region=region, service=service, state_credentials=state_credentials)
            role = getattr(state_credentials, "role_arn", None)
            principal = stack._state_machine_roles.get(str(role))
            # Every execution of this stack runs with a role it created; another role is an
            # execution of an earlier stack whose thread outlived it (tests): not ours to judge.
            if principal is not None:
                recorder.pin(client, principal)
            return client

        for module in (sfn_clients, sfn_lambda):
            self._patch(module, "boto_client_for", boto_client_for)

    def _serialize_dynamodb(self) -> None:
        """moto's DynamoDB and SQS are not thread-safe; serialise their calls as the real
        services' conditions, transactions and receives are atomic."""
        from moto.core.botocore_stubber import BotocoreStubber

        lock = threading.RLock()
        original = BotocoreStubber.__call__

        queue_lock = threading.RLock()

        def locked_call(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
            if ".dynamodb." in event_name or ".dynamodbstreams." in event_name:
                with lock:
                    return original(self, event_name, request, **kwargs)
            if ".sqs." in event_name:  # pollers and senders share moto's queues
                with queue_lock:
                    return original(self, event_name, request, **kwargs)
            return original(self, event_name, request, **kwargs)

        self._patch(BotocoreStubber, "__call__", locked_call)

    def _cheap_transactions(self) -> None:
        """moto backs up every table a transaction touches with a deep copy (and keeps every
        copy alive), so each transaction costs O(table) and the process slows down with every
        task. Check all conditions first, back up only the touched items, and let moto apply
        the writes without its table copies. Same outcome: all items or none."""
        import copy

        import moto.dynamodb.models as dynamodb_models
        from moto.dynamodb.exceptions import TransactionCanceledException
        from moto.dynamodb.models.table import Table

        backend_class = dynamodb_models.DynamoDBBackend
        original = backend_class.transact_write_items
        skip_table_copies = threading.local()

        class _CopyWithoutTables:
            def __getattr__(self, name: str) -> Any:
                return getattr(copy, name)

            @staticmethod
            def deepcopy(value: Any, memo: Any = None) -> Any:
                if isinstance(value, Table) and getattr(skip_table_copies, "on", False):
                    return value
                return copy.deepcopy(value, memo)

        self._patch(dynamodb_models, "copy", _CopyWithoutTables())

        def transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
            touched: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
            errors: list[tuple[Any, Any, Any]] = []
            for entry in transact_items:
                op_type, op = next(iter(entry.items()))
                table = backend.get_table(op["TableName"])
                if op_type == "Put":
                    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                    if table.range_key_attr is not None:
                        key[table.range_key_attr] = op["Item"][table.range_key_attr]
                else:
                    key = op["Key"]
                current = backend.get_item(op["TableName"], key)
                condition = op.get("ConditionExpression")
                if condition is not None and not dynamodb_models.get_filter_expression(
                    condition,
                    op.get("ExpressionAttributeNames"),
                    op.get("ExpressionAttributeValues"),
                ).expr(current):
                    errors.append(
                        ("ConditionalCheckFailed", "The conditional request failed", None)
                    )
                else:
                    errors.append((None, None, None))
                old = copy.deepcopy(current.to_json()["Attributes"]) if current else None
                touched.append((op["TableName"], key, old))
            if any(code is not None for code, _, _ in errors):
                raise TransactionCanceledException(errors)
            skip_table_copies.on = True
            try:
                original(backend, transact_items)
            except Exception:
                for table_name, key, old in reversed(touched):  # undo partial writes
                    if old is None:
                        backend.get_table(table_name).delete_item(
                            *_key_values(backend, table_name, key)
                        )
                    else:
                        backend.get_table(table_name).put_item(old)
                raise
            finally:
                skip_table_copies.on = False

        def _key_values(backend: Any, table_name: str, key: dict[str, Any]) -> tuple[Any, Any]:
            from moto.dynamodb.models.dynamo_type import DynamoType

            table = backend.get_table(table_name)
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = (
                DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
            )
            return hash_value, range_value

        self._patch(backend_class, "transact_write_items", transact_write_items)

    def _fifo_groups_in_order(self) -> None:
        """moto unlocks a FIFO message group only once the last of its in-flight messages is
        seen visible again, skipping the earlier ones on the way: a batch that timed out comes
        back out of order (a3 before a2). Forget in-flight messages whose visibility timeout
        ran out before each receive, as SQS does."""
        from moto.sqs.models import SQSBackend

        original = SQSBackend.receive_message

        def receive_message(backend: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
            queue = backend.get_queue(queue_name)
            for message in list(queue.pending_messages):
                if message.visible:
                    queue.pending_messages.discard(message)
            return original(backend, queue_name, *args, **kwargs)

        self._patch(SQSBackend, "receive_message", receive_message)

    # -- resources -------------------------------------------------------------------------

    def _client(self, service: str) -> Any:
        import boto3

        return boto3.client(service, region_name=REGION)

    def _create_table(self, resources: dict[str, Any], resolver: Resolver) -> None:
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::DynamoDB::Table":
                continue
            props = resolver.resolve(resource["Properties"])
            name = props.get("TableName") or f"{STACK}-{logical_id}"
            kwargs: dict[str, Any] = {
                "TableName": name,
                "AttributeDefinitions": props["AttributeDefinitions"],
                "KeySchema": props["KeySchema"],
                "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
            }
            if props.get("GlobalSecondaryIndexes"):
                kwargs["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
            if props.get("StreamSpecification"):
                kwargs["StreamSpecification"] = {
                    "StreamEnabled": True,
                    "StreamViewType": props["StreamSpecification"]["StreamViewType"],
                }
            db = self._client("dynamodb")
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

    def _create_queues(self, resources: dict[str, Any], resolver: Resolver) -> None:
        """Every AWS::SQS::Queue, dead-letter targets first (a redrive policy names one)."""
        sqs = self._client("sqs")
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
                arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
                    "Attributes"
                ]["QueueArn"]
                resolver.refs[logical_id] = url
                resolver.attributes[f"{logical_id}.Arn"] = arn
                resolver.attributes[f"{logical_id}.QueueName"] = name
                resolver.attributes[f"{logical_id}.QueueUrl"] = url
                self.queues[logical_id] = url
                del pending[logical_id]
                created = True
            if not created:
                raise ValueError(f"local stack: cannot create queues {sorted(pending)}")

    def _create_event_sources(self, resources: dict[str, Any], resolver: Resolver) -> EventSources:
        """One poller per DynamoDB or SQS event of a function, as its Lambda mapping."""
        queue_urls = {
            resolver.attributes[f"{logical_id}.Arn"]: url for logical_id, url in self.queues.items()
        }
        mappings = []
        for logical_id in self.functions:
            events = resources[logical_id]["Properties"].get("Events") or {}
            for event_name, event in events.items():
                if event.get("Type") in ("DynamoDB", "SQS"):
                    props = resolver.resolve(event["Properties"])
                    invoke = self._event_invoker(logical_id)
                    name = f"{logical_id}.{event_name}"
                    mappings.append(
                        self._mapping(name, logical_id, event["Type"], props, invoke, queue_urls)
                    )
        return EventSources(mappings)

    def _mapping(
        self,
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
                sqs=self._client("sqs"),
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
            streams=self._client("dynamodbstreams"),
            sqs=self._client("sqs"),
            stream_arn=props["Stream"],
            batch_size=int(props.get("BatchSize", 100)),
            filters=parse_filters(props.get("FilterCriteria")),
            report_item_failures=item_failures,
            bisect=str(props.get("BisectBatchOnFunctionError", "false")).lower() == "true",
            maximum_retry_attempts=int(props.get("MaximumRetryAttempts", -1)),
            on_failure_queue_url=queue_urls.get(on_failure.get("Destination") or ""),
            starting_position=str(props.get("StartingPosition", "TRIM_HORIZON")),
        )

    def _event_invoker(self, logical_id: str) -> Callable[[dict[str, Any]], Any]:
        name = f"{STACK}-{logical_id}"

        def invoke(event: dict[str, Any]) -> Any:
            return self.handler_for(logical_id)(event, _LambdaContext(name))

        return invoke

    def _create_functions(self, resources: dict[str, Any], resolver: Resolver) -> None:
        iam = self._client("iam")
        role_arn = iam.create_role(
            RoleName="a2a-local-lambda",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        self._role_arn = role_arn
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("app.py", "def handler(event, context):\n    return event\n")
        lam = self._client("lambda")
        for logical_id, resource in resources.items():
            if resource["Type"] == "AWS::Serverless::LayerVersion":
                resolver.refs[logical_id] = (
                    f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:{logical_id}:1"
                )
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
            self.functions[logical_id] = FunctionSpec(
                logical_id=logical_id,
                code_dir=self.root / props["CodeUri"],
                handler=props["Handler"],
                env={},
                events=events,
            )
        from moto.awslambda.models import LambdaFunction

        stack = self

        def invoke(fn: Any, body: Any, request_headers: Any, response_headers: Any) -> Any:
            return stack._invoke(fn.function_name, body, response_headers)

        self._patch(LambdaFunction, "invoke", invoke)
        resources_api = [k for k, v in resources.items() if v["Type"] == "AWS::Serverless::Api"]
        for api in resources_api:
            resolver.refs[api] = "local"

    def _create_state_machine(self, resources: dict[str, Any], resolver: Resolver) -> None:
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::Serverless::StateMachine":
                continue
            props = resource["Properties"]
            definition = json.dumps(props["Definition"])
            substitutions = resolver.resolve(props.get("DefinitionSubstitutions") or {})
            for key, value in substitutions.items():
                definition = definition.replace("${" + key + "}", str(value))
            sfn = self._client("stepfunctions")
            # A role of its own, as SAM creates: the interpreter's calls are attributed by it.
            role_arn = self._client("iam").create_role(
                RoleName=f"{STACK}-{logical_id}",
                AssumeRolePolicyDocument=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "states.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ],
                    }
                ),
            )["Role"]["Arn"]
            self._state_machine_roles[role_arn] = logical_id
            arn = sfn.create_state_machine(
                name=f"{STACK}-{logical_id}",
                definition=definition,
                roleArn=role_arn,
                type=resolver.resolve(props.get("Type", "STANDARD")),
            )["stateMachineArn"]
            resolver.refs[logical_id] = arn
            resolver.attributes[f"{logical_id}.Name"] = f"{STACK}-{logical_id}"
            resolver.attributes[f"{logical_id}.Arn"] = arn

    def _collect_function_env(self, resources: dict[str, Any], resolver: Resolver) -> None:
        globals_env = (
            self.template.get("Globals", {}).get("Function", {}).get("Environment", {})
        ).get("Variables", {})
        merged: dict[str, str] = {}
        for key, value in _resolvable(resolver, globals_env).items():
            merged[key] = str(value)
        for logical_id, spec in self.functions.items():
            own = resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
            spec.env = {k: str(v) for k, v in _resolvable(resolver, own).items()}
            for key, value in spec.env.items():
                if key not in _DEPLOY_ONLY_ENV:
                    merged[key] = value
        self.env = merged

    # -- Lambda emulation ------------------------------------------------------------------

    def handler_for(self, logical_id: str) -> Callable[[dict[str, Any], Any], Any]:
        if logical_id not in self._handlers:
            spec = self.functions[logical_id]
            module_name, _, attribute = spec.handler.partition(".")
            module = _load_module(f"_a2a_local_{logical_id}", spec.code_dir / f"{module_name}.py")
            self._handlers[logical_id] = _attributed_handler(
                getattr(module, attribute), logical_id, self.stack_id
            )
        return self._handlers[logical_id]

    def app_for(self, logical_id: str) -> Any:
        """The FastAPI app a function serves (both Mangum and Web Adapter functions)."""
        if logical_id not in self._apps:
            spec = self.functions[logical_id]
            module = _load_module(f"_a2a_local_app_{logical_id}", spec.code_dir / "app.py")
            self._apps[logical_id] = _AttributedApp(module.app, logical_id, self.stack_id)
        return self._apps[logical_id]

    def _invoke(self, function_name: str, body: Any, response_headers: Any) -> str:
        logical_id = function_name.removeprefix(f"{STACK}-")
        event = json.loads(body) if isinstance(body, str | bytes) and body else (body or {})
        try:
            result = self.handler_for(logical_id)(event, _LambdaContext(function_name))
        except Exception as exc:  # the Lambda runtime reports it as an unhandled error
            logger.exception("%s raised", logical_id)
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)})
        return json.dumps(result)

    # -- API Gateway emulation -------------------------------------------------------------

    def gateway(self) -> Gateway:
        routes = []
        for logical_id, spec in self.functions.items():
            for method, path in spec.events:
                routes.append((method, path, self.app_for(logical_id)))
        return Gateway(routes, stage=self.parameters.get("StageName", "prod"))


class Gateway:
    """An ASGI app that routes like an API Gateway REST API and adds its request context."""

    def __init__(self, routes: list[tuple[str, str, Any]], stage: str = "prod") -> None:
        self.stage = stage
        self.routes = []
        for method, path, app in routes:
            pattern = re.escape(path)
            pattern = re.sub(r"\\\{[^/}]+\\\}", "[^/]+", pattern)
            self.routes.append((method, re.compile(f"^{pattern}/?$"), path, app))
        # Literal paths win over parameterised ones, as in API Gateway.
        self.routes.sort(key=lambda r: r[2].count("{"))

    def match(self, method: str, path: str) -> tuple[Any, str] | None:
        for route_method, pattern, resource, app in self.routes:
            if route_method == method and pattern.match(path):
                return app, resource
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        found = self.match(scope["method"], scope["path"])
        if found is None:
            # What API Gateway answers for a route it does not have (see template GatewayResponses).
            body = json.dumps(
                {
                    "error": {
                        "code": 404,
                        "status": "NOT_FOUND",
                        "message": f"No operation at {scope['method']} {scope['path']}",
                    }
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        app, resource = found
        headers = [
            (k, v)
            for k, v in scope["headers"]
            if k.lower() not in (b"x-amzn-request-context", LOCAL_PRINCIPAL_HEADER.encode())
        ]
        principal = next(
            (
                v.decode()
                for k, v in scope["headers"]
                if k.lower() == LOCAL_PRINCIPAL_HEADER.encode()
            ),
            None,
        )
        context: dict[str, Any] = {
            "resourcePath": resource,
            "httpMethod": scope["method"],
            "requestId": str(uuid.uuid4()),
            "stage": self.stage,
            "identity": {"sourceIp": (scope.get("client") or ("127.0.0.1",))[0]},
        }
        if principal:
            # Local stand-in for a Lambda authorizer's principalId.
            context["authorizer"] = {"principalId": principal}
        headers.append((b"x-amzn-request-context", json.dumps(context).encode()))
        await app({**scope, "headers": headers}, receive, send)
