"""Every AWS call a function of the local stack makes, as IAM authorizes it (local only).

The local stack runs every function in one process, so a call is attributed to the function
(or state machine) running when it is made, through a context variable that the stack sets
around each invocation (`acting_as`). Each call is mapped to the IAM (action, resource ARN)
pairs AWS would authorize it as, and appended once per stack to a JSON-lines file, for the
tests to evaluate against the roles of the translated template (tests/iam_check.py).

Calls made while no principal acts (the stack creating its resources, tests reading the table
directly) are not recorded. An operation this module cannot map is recorded as an error: it
must fail the check, not pass unseen. Lambda handlers never import this module.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
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


def _dynamodb(
    operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[Authorization]:
    if operation in _TABLE_OPERATIONS:
        resource = _table_arn(params["TableName"], region, account)
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        return [(f"dynamodb:{operation}", resource)]
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
                )
            )
        return found
    if operation == "TransactGetItems":
        return [
            ("dynamodb:GetItem", _table_arn(entry["Get"]["TableName"], region, account))
            for entry in params["TransactItems"]
        ]
    if operation in ("BatchGetItem", "BatchWriteItem"):  # their own actions, per table
        return [
            (f"dynamodb:{operation}", _table_arn(table, region, account))
            for table in params["RequestItems"]
        ]
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


# SQS operations and the action each is authorized as (a batch as its single-message action).
_SQS_ACTIONS = {
    "SendMessage": "SendMessage",
    "SendMessageBatch": "SendMessage",
    "ReceiveMessage": "ReceiveMessage",
    "DeleteMessage": "DeleteMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibility": "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
    "GetQueueAttributes": "GetQueueAttributes",
    "SetQueueAttributes": "SetQueueAttributes",
    "PurgeQueue": "PurgeQueue",
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


def authorizations(
    service: str, operation: str, params: Mapping[str, Any], *, region: str, account: str
) -> list[Authorization]:
    """The IAM (action, resource ARN) pairs that AWS authorizes an API call as.

    `service` is botocore's service name (dynamodb, dynamodbstreams, sqs, stepfunctions,
    lambda); anything else raises UnknownOperation."""
    if service == "dynamodb":
        return _dynamodb(operation, params, region, account)
    if service == "dynamodbstreams":
        return _dynamodb_streams(operation, params)
    if service == "sqs":
        return _sqs(operation, params, region, account)
    if service == "stepfunctions":
        return _states(operation, params)
    if service == "lambda":
        return _lambda(operation, params, region, account)
    raise UnknownOperation(f"{service}:{operation}")


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
        try:
            found = authorizations(service, model.name, params, region=region, account=self.account)
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
        for action, resource in found:
            self._write(
                ("call", principal, action, resource),
                {
                    "kind": "call",
                    "principal": principal,
                    "action": action,
                    "resource": resource,
                    "operation": f"{service}:{model.name}",
                    # Where a surprising call came from, when pytest runs the stack.
                    "test": os.environ.get("PYTEST_CURRENT_TEST"),
                    "thread": threading.current_thread().name,
                },
            )

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
