"""Where moto answers differently from the services the stack emulates: fixed for correctness.

moto's DynamoDB and SQS are not thread-safe, its FIFO queues hand a timed-out group back out of
order, it would need Docker to run Lambda code, it keeps every model it makes and every emptied
partition, and it lets an unused placeholder through in a transaction. Each fix here is always
on: the stack refuses to start when one cannot apply (`check`). Speed-ups are in moto_speedups.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from a2a_serverless.local.calls import CallRecorder
from a2a_serverless.local.patching import (
    DYNAMODB_LOCK,
    SQS_LOCK,
    STATE_MACHINE_CLIENTS,
    Patch,
    Patches,
    patch,
    problem,
    wrap_state_machine_clients,
)


@patch("moto.core.common_models:BaseModel.__new__(cls, args, kwargs)")
def untracked_models(patches: Patches) -> None:
    """moto appends every model it creates to a class-level list (for its server's dashboard)
    and never lets go: a long-running local stack would keep every shard iterator, record and
    execution it ever made. Models are made without joining that list."""
    from moto.core import common_models

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return object.__new__(cls)

    patches.replace(common_models.BaseModel, "__new__", new)


@patch(
    "moto.dynamodb.models.table:Table.delete_item(self, hash_key, range_key)",
    "moto.dynamodb.models.table:Table.get_item(self, hash_key, range_key, projection_expression)",
)
def empty_partitions_dropped(patches: Patches) -> None:
    """moto keeps a partition emptied of its last item, and its `items` (a defaultdict) adds an
    empty one for every key read and not found: one per task ever written, a steady leak. A
    partition goes with its last item, and a read adds none (an absent one reads the same)."""
    from moto.dynamodb.models.table import Table

    original_delete = Table.delete_item
    original_get = Table.get_item

    def delete_item(table: Any, hash_key: Any, range_key: Any) -> Any:
        item = original_delete(table, hash_key, range_key)
        if range_key is not None and not table.items.get(hash_key, True):
            table.items.pop(hash_key, None)
        return item

    def get_item(table: Any, hash_key: Any, range_key: Any = None, *args: Any) -> Any:
        if range_key and table.items.get(hash_key) is None:
            return None
        return original_get(table, hash_key, range_key, *args)

    patches.replace(Table, "delete_item", delete_item)
    patches.replace(Table, "get_item", get_item)


@patch("moto.core.botocore_stubber:BotocoreStubber.__call__(self, event_name, request, kwargs)")
def serialize_calls(patches: Patches) -> None:
    """moto's DynamoDB and SQS are not thread-safe; serialise their calls as the real
    services' conditions, transactions and receives are atomic."""
    from moto.core.botocore_stubber import BotocoreStubber

    lock = DYNAMODB_LOCK
    queue_lock = SQS_LOCK
    original = BotocoreStubber.__call__

    def locked_call(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        # Event names carry the service id: "dynamodb", and "dynamodb-streams" for Streams.
        if ".dynamodb." in event_name or ".dynamodb-streams." in event_name:
            with lock:
                return original(self, event_name, request, **kwargs)
        if ".sqs." in event_name:  # pollers and senders share moto's queues
            with queue_lock:
                return original(self, event_name, request, **kwargs)
        return original(self, event_name, request, **kwargs)

    patches.replace(BotocoreStubber, "__call__", locked_call)


@patch(
    "moto.sqs.models:SQSBackend.receive_message(self, queue_name, count, wait_seconds_timeout, "
    "visibility_timeout, message_attribute_names)",
    "moto.sqs.models:SQSBackend.get_queue",
)
def fifo_groups_in_order(patches: Patches) -> None:
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

    patches.replace(SQSBackend, "receive_message", receive_message)


@patch(
    "moto.awslambda.models:LambdaFunction.invoke(self, body, request_headers, response_headers)",
    "moto.awslambda.models:lambda_backends",
)
def lambda_invoke(
    patches: Patches,
    invoke: Callable[[str, Any, Any], str],
    earlier_threads: frozenset[threading.Thread] = frozenset(),
) -> None:
    """Run Lambda code in-process (moto would use Docker): `invoke(function_name, body,
    response_headers)` returns the response payload. Calls from `earlier_threads` (an older
    stack's executions that outlived it) are not sent to this stack's functions.
    """
    from moto.awslambda.models import LambdaFunction, lambda_backends

    def invoke_in_process(fn: Any, body: Any, request_headers: Any, response_headers: Any) -> Any:
        name: str = fn.function_name
        if threading.current_thread() in earlier_threads:
            raise RuntimeError(f"{name}: an execution of a stopped local stack")
        try:
            current = lambda_backends[fn.account_id][fn.region].get_function(name)
        except Exception:  # moto's not-found errors
            current = None
        if current is not fn:
            # An older stack's execution: its function went with that stack, so it fails.
            raise RuntimeError(f"{name} belongs to a stopped local stack")
        return invoke(name, body, response_headers)

    patches.replace(LambdaFunction, "invoke", invoke_in_process)


@patch(*STATE_MACHINE_CLIENTS)
def state_machine_calls(patches: Patches, recorder: CallRecorder, roles: Mapping[str, str]) -> None:
    """Attribute the calls of moto's Step Functions interpreter to the state machine whose
    execution role it runs with (`roles`: role ARN -> logical id, filled as they are made)."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
            client = original(region=region, service=service, state_credentials=state_credentials)
            principal = roles.get(str(getattr(state_credentials, "role_arn", None)))
            # Every execution of this stack runs with a role it created; another role is an
            # execution of an earlier stack whose thread outlived it (tests): not ours to judge.
            if principal is not None:
                recorder.pin(client, principal)  # idempotent: the client may be a shared one
            return client

        return boto_client_for

    wrap_state_machine_clients(patches, wrap)


@patch(
    "moto.dynamodb.responses:DynamoHandler.transact_write_items(self)",
    "moto.dynamodb.exceptions:MockValidationException",
)
def transaction_placeholders_checked(patches: Patches) -> None:
    """Refuse a TransactWriteItems item with an unused `ExpressionAttributeNames` or
    `ExpressionAttributeValues` placeholder, as DynamoDB does (moto checks only the names of
    an update expression there)."""
    import re

    from moto.dynamodb.exceptions import MockValidationException
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.transact_write_items
    placeholder = re.compile(r"[#:][A-Za-z0-9_]+")
    expressions = ("ConditionExpression", "UpdateExpression", "ProjectionExpression")
    provided = (("Names", "ExpressionAttributeNames"), ("Values", "ExpressionAttributeValues"))

    def transact_write_items(handler: Any) -> Any:
        for entry in handler.body.get("TransactItems") or []:
            for action in entry.values():
                used = {
                    p for field in expressions for p in placeholder.findall(action.get(field) or "")
                }
                for kind, field in provided:
                    unused = [name for name in action.get(field) or {} if name not in used]
                    if unused:
                        raise MockValidationException(
                            f"Value provided in ExpressionAttribute{kind} unused in expressions: "
                            f"keys: {{{', '.join(unused)}}}"
                        )
        return original(handler)

    patches.replace(DynamoHandler, "transact_write_items", transact_write_items)


FIXES: tuple[Patch, ...] = (
    untracked_models,
    empty_partitions_dropped,
    serialize_calls,
    fifo_groups_in_order,
    lambda_invoke,
    state_machine_calls,
    transaction_placeholders_checked,
)


def check() -> None:
    """Raise RuntimeError naming each fix that cannot apply to the moto installed."""
    problems = [f"{fix.name}: {found}" for fix in FIXES if (found := problem(fix))]
    if problems:
        raise RuntimeError(
            "the local stack cannot start: moto changed where its correctness fixes apply ("
            + "; ".join(problems)
            + "); install the pinned moto: pip install -c "
            "shared/a2a_serverless/local/moto-constraints.txt -e '.[local]'"
        )
