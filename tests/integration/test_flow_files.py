"""The flow API for files on the DynamoDB store and the S3 content store (moto): a file sent
with the message reaches the flow byte-exact through ctx.open, a file artifact past one upload
part goes out as a multipart upload, and a flow state too large for the header comes back to
the next step."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import boto3
import pytest

from a2a_serverless.core.tasklog import status_event
from a2a_serverless.flows import Outcome, StepContext
from a2a_serverless.flows.base import load_flow
from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import Message, Part, TaskState, TaskStatus
from a2a_serverless.store import TaskRecord
from a2a_serverless.store.content import ContentRule, object_key, restored, stored_name
from a2a_serverless.store.dynamodb import DynamoDBTaskStore
from a2a_serverless.store.s3 import PART_BYTES, S3ContentStore
from tests.e2e.flows_for_tests import big_file_chunks
from tests.integration.flows_for_tests import BIG_TEXT
from tests.integration.harness import ddb

INLINE = 32_768


@pytest.fixture
def bucket(local_stack: LocalStack) -> str:
    return local_stack.env["CONTENT_BUCKET"]


@pytest.fixture
def content(bucket: str) -> S3ContentStore:
    return S3ContentStore(lambda: boto3.client("s3"), bucket, 900)


@pytest.fixture
def store(local_stack: LocalStack, content: S3ContentStore) -> DynamoDBTaskStore:
    return DynamoDBTaskStore(
        ddb(), local_stack.env["TABLE_NAME"], 30, ContentRule(content, INLINE), INLINE
    )


def _task(store: DynamoDBTaskStore, *parts: Part) -> str:
    task_id = str(uuid.uuid4())
    status = TaskStatus(state=TaskState.SUBMITTED)
    record = TaskRecord.submitted(task_id, task_id, "owner-1", status)
    message = Message(message_id=str(uuid.uuid4()), role="user", parts=list(parts))
    store.create_task(record, message, status_event(record, status), None)
    return task_id


class Started:
    """An executor that starts nothing: the test runs each next step itself."""

    def start(self, task_id: str, turn: int, context: Any = None, step: int = 0) -> str:
        return f"{task_id}-{turn}-{step}"


def _run(store: DynamoDBTaskStore, content: S3ContentStore, flow: str, task_id: str) -> None:
    worker = FlowWorker(store, load_flow(flow), Started, content)
    step = 0
    while worker.handle({"taskId": task_id, "turn": 1, "step": step})["continue"]:
        step += 1


def test_a_stored_file_reaches_the_flow_byte_exact(
    store: DynamoDBTaskStore, content: S3ContentStore
) -> None:
    photo = hashlib.sha256(b"photo").digest() * 160_000  # 5.12 MB
    small = b"small file"
    task_id = _task(
        store,
        Part(text="digest these"),
        Part(raw=base64.b64encode(photo).decode(), filename="p.png", media_type="image/png"),
        Part(raw=base64.b64encode(small).decode(), filename="s.txt"),
    )
    _run(store, content, "tests.e2e.flows_for_tests:file_digest", task_id)
    (artifact,) = store.read_artifacts(task_id)
    assert artifact.parts[0].text == "\n".join(
        f"{hashlib.sha256(body).hexdigest()} {len(body)}" for body in (photo, small)
    )


def test_a_file_artifact_past_one_part_is_uploaded_in_parts(
    store: DynamoDBTaskStore, content: S3ContentStore, bucket: str
) -> None:
    size = PART_BYTES + 1_000_003
    task_id = _task(store, Part(text=str(size)))
    _run(store, content, "tests.e2e.flows_for_tests:big_file", task_id)
    (artifact,) = store.read_artifacts(task_id)
    (part,) = artifact.parts
    name = stored_name(part)
    assert name is not None and (part.filename, part.media_type) == (
        "big.bin",
        "application/octet-stream",
    )
    s3 = boto3.client("s3")
    key = object_key(task_id, name)
    assert s3.head_object(Bucket=bucket, Key=key)["ETag"].endswith('-2"')  # two upload parts
    expected = hashlib.sha256()
    for chunk in big_file_chunks(size):
        expected.update(chunk)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    got = hashlib.sha256()
    for chunk in body.iter_chunks(1 << 20):
        got.update(chunk)
    assert got.hexdigest() == expected.hexdigest()


STATE_NOTES = [f"note {i} " * 40 for i in range(200)]  # ~200 KB of JSON


def remembers(ctx: StepContext) -> Outcome:
    """Step 0 keeps a state past the inline bound; step 1 reports whether it came back."""
    if ctx.step == 0:
        ctx.state["notes"] = STATE_NOTES
        return Outcome.next_step()
    return Outcome.completed("same" if ctx.state.get("notes") == STATE_NOTES else "lost")


def test_a_large_flow_state_comes_back_to_the_next_step(
    store: DynamoDBTaskStore, content: S3ContentStore
) -> None:
    task_id = _task(store, Part(text="remember"))
    _run(store, content, f"{__name__}:remembers", task_id)
    record = store.get_record(task_id)
    assert record is not None and record.state is TaskState.COMPLETED
    assert record.flow_state_ref is not None and record.flow_state == {}  # kept in S3
    snapshot: Any = store.get_snapshot(task_id, None)
    assert snapshot.status.message.parts[0].text == "same"


def test_a_large_text_artifact_is_one_event_its_text_in_the_bucket(
    store: DynamoDBTaskStore, content: S3ContentStore
) -> None:
    task_id = _task(store, Part(text="big"))
    _run(store, content, "tests.integration.flows_for_tests:big", task_id)
    chunks = [e.artifact_update for _, e in store.read_events(task_id, 0) if e.artifact_update]
    assert len(chunks) == 1  # not split: the store keeps the text in the bucket
    (part,) = chunks[0].artifact.parts
    assert stored_name(part) is not None
    assert restored(part, task_id, content).text == BIG_TEXT
