"""Helpers shared by the test suites (no fixtures, no stack: plain builders)."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types import Message as SdkMessage
from a2a.types import Part as SdkPart
from a2a.types import Role as SdkRole

from a2a_serverless.core.tasklog import status_event
from a2a_serverless.flows import StepContext
from a2a_serverless.flows.base import ArtifactChunk
from a2a_serverless.models import Message, TaskState, TaskStatus
from a2a_serverless.store import TaskRecord


def user_message(
    text: str,
    *,
    message_id: str | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
) -> dict[str, Any]:
    """A 1.0 user Message (proto JSON) with one text part."""
    message: dict[str, Any] = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


def fake_aws_env(monkeypatch: Any) -> None:
    """Test credentials and a region in the environment, as a function has them."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def add_submitted_task(store: Any, message: Message) -> TaskRecord:
    """Create task t-1 (context c-1, owner alice, turn 1) in `store`, submitted with `message`."""
    status = TaskStatus(state=TaskState.SUBMITTED)
    record = TaskRecord(
        task_id="t-1",
        context_id="c-1",
        owner="alice",
        state=TaskState.SUBMITTED,
        status=status,
        status_seq=1,
        turn=1,
        execution="t-1-1",
    )
    store.create_task(record, message, status_event(record, status), None)
    return record


class RecordingEmitter:
    """A flow step's emitter that keeps what the step wrote."""

    def __init__(self) -> None:
        self.statuses: list[Message] = []
        self.chunks: list[ArtifactChunk] = []

    def status(self, message: Message) -> None:
        self.statuses.append(message)

    def artifact(self, chunk: ArtifactChunk) -> None:
        self.chunks.append(chunk)


def violated_fields(error: dict[str, Any]) -> list[str]:
    """The fields a JSON-RPC or HTTP error's google.rpc.BadRequest details name."""
    return [
        v["field"]
        for d in error["data"]
        if d["@type"].endswith("google.rpc.BadRequest")
        for v in d["fieldViolations"]
    ]


class NoExecutions:
    """An executor for flow-worker tests that start no execution."""

    def start(self, task_id: str, turn: int, context: object = None) -> str:  # pragma: no cover
        raise AssertionError("not started here")

    def start_action(self, task_id: str, turn: int, action: str) -> str:  # pragma: no cover
        raise AssertionError("not started here")

    def stop(self, name: str, cause: str) -> None:
        pass


def sdk_user_message(text: str, *, task_id: str = "", context_id: str = "") -> SdkMessage:
    """A user Message of the a2a-sdk (its protobuf type) with one text part."""
    return SdkMessage(
        role=SdkRole.ROLE_USER,
        message_id=f"msg-{uuid.uuid4().hex}",
        parts=[SdkPart(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def artifact_chunk(
    ctx: StepContext, name: str, text: str, index: int, count: int, **extra: Any
) -> None:
    """Emit chunk `index` of `count` of one artifact whose id and name are `name`."""
    ctx.artifact(
        text,
        artifact_id=name,
        name=name,
        append=index > 0,
        last_chunk=index == count - 1,
        **extra,
    )


def create_indexed_table(
    client: Any,
    table: str,
    index: str,
    index_hash: str,
    projection: dict[str, Any] | None = None,
    **extra: Any,
) -> None:
    """An on-demand DynamoDB table keyed pk/sk with one global index `index` keyed
    `index_hash`/gsk (projection: all attributes unless given); `extra` goes to create_table."""
    client.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", index_hash, "gsk")
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": index_hash, "KeyType": "HASH"},
                    {"AttributeName": "gsk", "KeyType": "RANGE"},
                ],
                "Projection": projection or {"ProjectionType": "ALL"},
            }
        ],
        **extra,
    )
