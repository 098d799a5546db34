"""Every AWS call a function of the local stack makes, as IAM authorizes it (local only).

A call is attributed to the function or state machine acting when it is made (`acting_as`),
mapped to the IAM (action, resource ARN) pairs AWS would authorize, with the condition keys
known here (`dynamodb:LeadingKeys` by key kind), and appended once to a JSON-lines file that
tests/iam_check.py checks against the template's roles. Calls with no acting principal are
not recorded; an unmappable operation is recorded as an error. Handlers never import this.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

# The environment variable naming the JSON-lines file (read by local/stack.py).
CALL_LOG_ENV = "A2A_LOCAL_CALL_LOG"

_principal: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "a2a_local_principal", default=None
)
# The stack whose function is running (None: any). Step Functions threads of a stopped stack
# can go on into the next stack of a test session; their calls are no call of that stack.
_stack: contextvars.ContextVar[str | None] = contextvars.ContextVar("a2a_local_stack", default=None)


def current_principal() -> str | None:
    """The logical id of the function or state machine whose code is running, if any."""
    return _principal.get()


@contextlib.contextmanager
def acting_as(principal: str | None, stack: str | None = None) -> Iterator[None]:
    """Attribute the AWS calls of the block (and of tasks and worker threads it starts with
    the context copied: asyncio tasks, anyio/Starlette thread pools) to `principal` of the
    stack `stack` (a CallRecorder's `stack_id`; None: whichever stack records)."""
    principal_token = _principal.set(principal)
    stack_token = _stack.set(stack)
    try:
        yield
    finally:
        _stack.reset(stack_token)
        _principal.reset(principal_token)


class UnknownOperation(LookupError):
    """An API call whose IAM action or resource this module does not know."""


Authorization = tuple[str, str]  # (IAM action, resource ARN)
# Condition keys of a request (key -> values), e.g. {"dynamodb:LeadingKeys": ["APIKEY#k1"]}.
Context = dict[str, list[str]]
# The partition key attribute of a DynamoDB table (by name), None when unknown.
PartitionKeyOf = Callable[[str], "str | None"]
# The ARN IAM authorizes a Secrets Manager secret named so as, None when unknown.
SecretArnOf = Callable[[str], "str | None"]


# -- API call -> IAM (action, resource) -------------------------------------------------------


def _table_arn(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"


# DynamoDB operations on one table (or one of its indexes), authorized as the same action.
_TABLE_OPERATIONS = {
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "DescribeTable",
    "DescribeTimeToLive",
}
# A transaction is authorized item by item, as the single-item action of each
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
_TRANSACT_WRITE_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


# Operations on one item, addressed by its key (or, for PutItem, by the item's own key).
_KEYED_OPERATIONS = {"GetItem", "PutItem", "UpdateItem", "DeleteItem"}


def _leading_keys(
    table: str, items: list[Mapping[str, Any]], partition_key: PartitionKeyOf | None
) -> Context:
    """`dynamodb:LeadingKeys` of a request on `items` (keys or items) of `table`: their
    partition key values, when the table's partition key attribute is known."""
    name = partition_key(table.rsplit("/", 1)[-1]) if partition_key else None
    if name is None:
        return {}
    values = []
    for item in items:
        ((_, value),) = (item.get(name) or {"S": None}).items()
        if value is None:
            return {}  # no partition key here: nothing to tell
        values.append(str(value))
    return {"dynamodb:LeadingKeys": values}


def _dynamodb(
    operation: str,
    params: Mapping[str, Any],
    region: str,
    account: str,
    partition_key: PartitionKeyOf | None,
) -> list[tuple[str, str, Context]]:
    if operation in _TABLE_OPERATIONS:
        resource = _table_arn(params["TableName"], region, account)
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        context: Context = {}
        if operation in _KEYED_OPERATIONS:
            item = params.get("Key") or params.get("Item") or {}
            context = _leading_keys(params["TableName"], [item], partition_key)
        return [(f"dynamodb:{operation}", resource, context)]
    if operation == "TransactWriteItems":
        found = []
        for entry in params["TransactItems"]:
            ((kind, item),) = entry.items()
            if kind not in _TRANSACT_WRITE_ACTIONS:
                raise UnknownOperation(f"dynamodb:TransactWriteItems entry {kind!r}")
            found.append(
                (
                    f"dynamodb:{_TRANSACT_WRITE_ACTIONS[kind]}",
                    _table_arn(item["TableName"], region, account),
                    _leading_keys(
                        item["TableName"],
                        [item.get("Key") or item.get("Item") or {}],
                        partition_key,
                    ),
                )
            )
        return found
    if operation == "TransactGetItems":
        return [
            (
                "dynamodb:GetItem",
                _table_arn(entry["Get"]["TableName"], region, account),
                _leading_keys(entry["Get"]["TableName"], [entry["Get"]["Key"]], partition_key),
            )
            for entry in params["TransactItems"]
        ]
    if operation == "BatchGetItem":  # its own action, per table
        return [
            (
                "dynamodb:BatchGetItem",
                _table_arn(table, region, account),
                _leading_keys(table, list(request.get("Keys") or []), partition_key),
            )
            for table, request in params["RequestItems"].items()
        ]
    if operation == "BatchWriteItem":
        found = []
        for table, requests in params["RequestItems"].items():
            keys = [
                (r.get("PutRequest") or {}).get("Item") or (r.get("DeleteRequest") or {}).get("Key")
                for r in requests
            ]
            found.append(
                (
                    "dynamodb:BatchWriteItem",
                    _table_arn(table, region, account),
                    _leading_keys(table, [k or {} for k in keys], partition_key),
                )
            )
        return found
    raise UnknownOperation(f"dynamodb:{operation}")


def _dynamodb_streams(operation: str, params: Mapping[str, Any]) -> list[Authorization]:
    if operation in ("DescribeStream", "GetShardIterator"):
        return [(f"dynamodb:{operation}", params["StreamArn"])]
    if operation == "GetRecords":
        # A shard iterator is "<stream ARN>|<version>|<token>" (AWS and moto alike).
        stream_arn = str(params["ShardIterator"]).split("|", 1)[0]
        if not stream_arn.startswith("arn:"):
            raise UnknownOperation("dynamodb:GetRecords with an iterator that names no stream")
        return [("dynamodb:GetRecords", stream_arn)]
    if operation == "ListStreams":
        return [("dynamodb:ListStreams", "*")]  # ListStreams has no resource type
    raise UnknownOperation(f"dynamodbstreams:{operation}")


def queue_arn(queue_url: str, region: str) -> str:
    """The ARN of a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)."""
    parsed = urlparse(queue_url)
    parts = parsed.path.strip("/").split("/")
    if len(parts) != 2:
        raise UnknownOperation(f"not a queue URL: {queue_url}")
    account, name = parts
    host = parsed.hostname or ""
    if host.startswith("sqs.") and host.count(".") >= 3:
        region = host.split(".")[1]
    return f"arn:aws:sqs:{region}:{account}:{name}"


# SQS operations and the action each is authorized as: itself, a batch as its single-message
# action.
_SQS_ACTIONS = {
    operation: operation.removesuffix("Batch")
    for operation in (
        "SendMessage",
        "SendMessageBatch",
        "ReceiveMessage",
        "DeleteMessage",
        "DeleteMessageBatch",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
        "GetQueueAttributes",
        "SetQueueAttributes",
        "PurgeQueue",
    )
}


def _sqs(
    operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[Authorization]:
    if operation == "GetQueueUrl":
        owner = params.get("QueueOwnerAWSAccountId") or account
        return [("sqs:GetQueueUrl", f"arn:aws:sqs:{region}:{owner}:{params['QueueName']}")]
    if operation in _SQS_ACTIONS:
        return [(f"sqs:{_SQS_ACTIONS[operation]}", queue_arn(params["QueueUrl"], region))]
    raise UnknownOperation(f"sqs:{operation}")


_STATE_MACHINE_OPERATIONS = {
    "StartExecution",
    "StartSyncExecution",
    "DescribeStateMachine",
    "ListExecutions",
}
_EXECUTION_OPERATIONS = {"StopExecution", "DescribeExecution", "GetExecutionHistory"}


def _states(operation: str, params: Mapping[str, Any]) -> list[Authorization]:
    if operation in _STATE_MACHINE_OPERATIONS:
        return [(f"states:{operation}", params["stateMachineArn"])]
    if operation in _EXECUTION_OPERATIONS:
        return [(f"states:{operation}", params["executionArn"])]
    raise UnknownOperation(f"states:{operation}")


def function_arn(name: str, qualifier: str | None, region: str, account: str) -> str:
    """A Lambda FunctionName (name, partial or full ARN) as the ARN IAM evaluates."""
    if name.startswith("arn:"):
        arn = name
    elif ":function:" in name:  # "<account>:function:<name>[:qualifier]"
        arn = f"arn:aws:lambda:{region}:{name}"
    else:
        arn = f"arn:aws:lambda:{region}:{account}:function:{name}"
    return f"{arn}:{qualifier}" if qualifier else arn


def _lambda(
    operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[Authorization]:
    if operation in ("Invoke", "InvokeWithResponseStream", "InvokeAsync"):
        resource = function_arn(params["FunctionName"], params.get("Qualifier"), region, account)
        return [("lambda:InvokeFunction", resource)]
    raise UnknownOperation(f"lambda:{operation}")


# -- S3: the content bucket, and what a flow's own code calls (FlowPolicy, FlowUsesBedrock) ----

# S3 object operations and the action each is authorized as (on the object's ARN): itself,
# but HeadObject's is GetObject and a multipart upload's steps are PutObject's (aborting one
# is its own action). A presigned GetObject URL is authorized as its signer's GetObject.
_S3_OBJECT_ACTIONS = {
    "HeadObject": "GetObject",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "AbortMultipartUpload": "AbortMultipartUpload",
    "ListParts": "ListMultipartUploadParts",
    **{op: op for op in ("GetObject", "PutObject", "DeleteObject", "GetObjectTagging")},
}
# S3 bucket operations (on the bucket's ARN).
_S3_BUCKET_ACTIONS = {
    "ListObjects": "ListBucket",
    "ListObjectsV2": "ListBucket",
    "HeadBucket": "ListBucket",
}


def _s3(operation: str, params: Mapping[str, Any]) -> list[Authorization]:
    if operation in _S3_OBJECT_ACTIONS:
        resource = f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"
        return [(f"s3:{_S3_OBJECT_ACTIONS[operation]}", resource)]
    if operation in _S3_BUCKET_ACTIONS:
        return [(f"s3:{_S3_BUCKET_ACTIONS[operation]}", f"arn:aws:s3:::{params['Bucket']}")]
    raise UnknownOperation(f"s3:{operation}")


def _secretsmanager(
    operation: str, params: Mapping[str, Any], secret_arn: SecretArnOf | None
) -> list[Authorization]:
    if operation in ("GetSecretValue", "DescribeSecret"):
        secret = str(params["SecretId"])
        if not secret.startswith("arn:"):
            # IAM authorizes the secret's full ARN, which ends in a suffix its name does not
            # tell: the stack's secrets tell it (`secret_arn`).
            arn = secret_arn(secret) if secret_arn else None
            if arn is None:
                raise UnknownOperation(f"secretsmanager:{operation} by name ({secret}): no ARN")
            secret = arn
        return [(f"secretsmanager:{operation}", secret)]
    raise UnknownOperation(f"secretsmanager:{operation}")


# Converse and InvokeModel authorize as InvokeModel; their streaming forms as
# InvokeModelWithResponseStream.
_BEDROCK_ACTIONS = {
    "Converse": "InvokeModel",
    "InvokeModel": "InvokeModel",
    "ConverseStream": "InvokeModelWithResponseStream",
    "InvokeModelWithResponseStream": "InvokeModelWithResponseStream",
}


def _bedrock(
    operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[Authorization]:
    if operation not in _BEDROCK_ACTIONS:
        raise UnknownOperation(f"bedrock-runtime:{operation}")
    model = str(params["modelId"])
    if not model.startswith("arn:"):
        # A cross-Region inference profile id starts with its geography (us., eu., apac.).
        profile = model.split(".", 1)[0] in ("us", "eu", "apac", "us-gov", "global")
        model = (
            f"arn:aws:bedrock:{region}:{account}:inference-profile/{model}"
            if profile
            else f"arn:aws:bedrock:{region}::foundation-model/{model}"
        )
    return [(f"bedrock:{_BEDROCK_ACTIONS[operation]}", model)]


def authorize(
    service: str,
    operation: str,
    params: Mapping[str, Any],
    *,
    region: str,
    account: str,
    partition_key: PartitionKeyOf | None = None,
    secret_arn: SecretArnOf | None = None,
) -> list[tuple[str, str, Context]]:
    """The IAM (action, resource ARN, condition keys) that AWS authorizes an API call as.

    `service` is botocore's service name (dynamodb, dynamodbstreams, sqs, stepfunctions,
    lambda, s3; and secretsmanager, bedrock-runtime, which flows call); anything else raises
    UnknownOperation. `partition_key` names a DynamoDB table's partition key attribute (for
    `dynamodb:LeadingKeys`); `secret_arn` a secret's ARN by its name."""
    if service == "dynamodb":
        return _dynamodb(operation, params, region, account, partition_key)
    found: list[Authorization]
    if service == "dynamodbstreams":
        found = _dynamodb_streams(operation, params)
    elif service == "sqs":
        found = _sqs(operation, params, region, account)
    elif service == "stepfunctions":
        found = _states(operation, params)
    elif service == "lambda":
        found = _lambda(operation, params, region, account)
    elif service == "s3":
        found = _s3(operation, params)
    elif service == "secretsmanager":
        found = _secretsmanager(operation, params, secret_arn)
    elif service == "bedrock-runtime":
        found = _bedrock(operation, params, region, account)
    else:
        raise UnknownOperation(f"{service}:{operation}")
    return [(action, resource, {}) for action, resource in found]


def authorizations(
    service: str, operation: str, params: Mapping[str, Any], *, region: str, account: str
) -> list[Authorization]:
    """The IAM (action, resource ARN) pairs that AWS authorizes an API call as (`authorize`
    without the condition keys)."""
    return [
        (action, resource)
        for action, resource, _ in authorize(
            service, operation, params, region=region, account=account
        )
    ]


def key_kind(value: str) -> str:
    """A partition key's kind: up to and including its first `#` (the whole key without one)."""
    head, sep, _ = value.partition("#")
    return head + sep


def moto_partition_key(account: str, region: str) -> PartitionKeyOf:
    """The partition key attribute of a table of moto's backend (the local stack's tables)."""
    known: dict[str, str | None] = {}

    def partition_key(table: str) -> str | None:
        if table not in known:
            from moto.dynamodb.models import dynamodb_backends

            found = dynamodb_backends[account][region].tables.get(table)
            known[table] = found.hash_key_attr if found is not None else None
        return known[table]

    return partition_key


def moto_secret_arn(account: str, region: str) -> SecretArnOf:
    """A secret's ARN in moto's backend (the local stack's secrets); for a name no secret
    has, the ARN IAM evaluates then: the name's, without the suffix a secret's ARN ends in."""

    def secret_arn(name: str) -> str:
        from moto.secretsmanager.models import secretsmanager_backends

        found = secretsmanager_backends[account][region].secrets.get(name)
        return (
            found.arn
            if found is not None
            else (f"arn:aws:secretsmanager:{region}:{account}:secret:{name}")
        )

    return secret_arn


# -- recording --------------------------------------------------------------------------------


class CallRecorder:
    """Appends the attributed calls of one local stack to a JSON-lines file.

    Lines: one `{"kind": "stack", ...}` with the resources the stack created (what the
    template's intrinsics resolve to), then one `{"kind": "call", ...}` per distinct
    (principal, action, resource), or `{"kind": "error", ...}` for a call that could not be
    mapped. Appends are single writes on an O_APPEND file: several processes (the e2e
    suite's `scripts/dev` servers and the test process) can share one file."""

    _EVENT = "before-parameter-build"

    def __init__(self, path: Path | str, account: str, stack_id: str | None = None) -> None:
        self.path = Path(path)
        self.account = account
        self.stack_id = stack_id or uuid.uuid4().hex
        self._seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()
        self._emitters: list[Any] = []
        # Set when the stack stops. Clients keep the hooks they were created with, and moto's
        # Step Functions threads can outlive a test's stack: what they do then (with the
        # stack's settings gone) is no call the deployed function would make.
        self.closed = False
        # The partition key attribute of each table (region -> lookup): moto's tables.
        self._partition_keys: dict[str, PartitionKeyOf] = {}
        # Set when the stack has started: before that no function of it has run, and a call
        # attributed to one comes from an earlier stack's execution (moto starts a thread per
        # Task state) reaching this stack's handler while its settings are not yet in place.
        self.armed = False

    # Hooks on botocore event emitters: a session's (copied into every client it creates
    # afterwards) or one client's.

    def attach(self, emitter: Any) -> None:
        """Record the calls of every client created from now on by the session owning
        `emitter` (boto3 session `.events`), attributed to the principal acting."""
        emitter.register(self._EVENT, self._on_call, unique_id=self._unique_id)
        self._emitters.append(emitter)

    def pin(self, client: Any, principal: str) -> None:
        """Attribute every call of `client` to `principal`, whatever context makes it (the
        Step Functions interpreter's clients, called from threads with no context)."""
        events = client.meta.events
        events.unregister(self._EVENT, unique_id=self._unique_id)

        def on_call(params: dict[str, Any], model: Any, context: Any = None, **_: Any) -> None:
            self._record(principal, model, params, context)

        events.register(self._EVENT, on_call, unique_id=f"{self._unique_id}-pinned")

    def detach(self) -> None:
        self.closed = True
        for emitter in self._emitters:
            emitter.unregister(self._EVENT, unique_id=self._unique_id)
        self._emitters.clear()

    @property
    def _unique_id(self) -> str:
        return f"a2a-local-calls-{self.stack_id}"

    def _on_call(self, params: dict[str, Any], model: Any, context: Any = None, **_: Any) -> None:
        principal = current_principal()
        if principal is not None and _stack.get() in (None, self.stack_id):
            self._record(principal, model, params, context)

    def _record(self, principal: str, model: Any, params: Mapping[str, Any], context: Any) -> None:
        if self.closed or not self.armed:
            return
        service = model.service_model.service_name
        region = (context or {}).get("client_region") or "us-east-1"
        if region not in self._partition_keys:
            self._partition_keys[region] = moto_partition_key(self.account, region)
        try:
            found = authorize(
                service,
                model.name,
                params,
                region=region,
                account=self.account,
                partition_key=self._partition_keys[region],
                secret_arn=moto_secret_arn(self.account, region),
            )
        except (UnknownOperation, KeyError, TypeError, ValueError) as exc:
            # Recorded, never raised: the caller (a poller, a handler) might swallow it.
            self._write(
                ("error", principal, service, model.name),
                {
                    "kind": "error",
                    "principal": principal,
                    "operation": f"{service}:{model.name}",
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
            return
        operation = f"{service}:{model.name}"
        if (context or {}).get("is_presign_request"):
            # No request is sent: the URL's user is authorized as the principal signing now.
            operation += " (presigned)"
        for action, resource, condition_keys in found:
            kinds = tuple(
                (key, tuple(sorted({key_kind(v) for v in values})))
                for key, values in sorted(condition_keys.items())
            )
            line: dict[str, Any] = {
                "kind": "call",
                "principal": principal,
                "action": action,
                "resource": resource,
                "operation": operation,
                # Where a surprising call came from, when pytest runs the stack.
                "test": os.environ.get("PYTEST_CURRENT_TEST"),
                "thread": threading.current_thread().name,
            }
            if condition_keys:
                line["context"] = condition_keys
            self._write(("call", principal, action, resource, repr(kinds)), line)

    def write_stack(self, resources: Mapping[str, Any]) -> None:
        """The values the template's intrinsics resolve to in this stack."""
        self._write(("stack",), {"kind": "stack", **resources})

    def _write(self, key: tuple[str, ...], line: dict[str, Any]) -> None:
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            data = (json.dumps({**line, "stack": self.stack_id}) + "\n").encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
