"""Part content and flow states too large for the table go to the content bucket (S3 on moto):
the items keep references, every item stays within DynamoDB's limit, the same content is put
once, and reads answer references as URLs to the task's own objects."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config

from a2a_serverless.core.content import present, present_event_json
from a2a_serverless.core.tasklog import status_event, transition
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import (
    Artifact,
    Message,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    agent_message,
    limits,
)
from a2a_serverless.store import TaskRecord, TooLarge
from a2a_serverless.store.content import (
    ContentRule,
    object_key,
    read_all,
    restored,
    stored_name,
)
from a2a_serverless.store.dynamodb import DynamoDBTaskStore
from a2a_serverless.store.dynamodb import keys as table_keys
from a2a_serverless.store.s3 import S3ContentStore
from tests.integration.harness import ddb, item_size, partition

INLINE = 32_768


class CountingStore(S3ContentStore):
    """The S3 content store, counting its puts."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.puts: list[str] = []

    def put(self, task_id: str, name: str, body: bytes, media_type: str) -> None:
        self.puts.append(name)
        super().put(task_id, name, body, media_type)


@pytest.fixture
def bucket(local_stack: LocalStack) -> str:
    return local_stack.env["CONTENT_BUCKET"]


@pytest.fixture
def content(bucket: str) -> CountingStore:
    # As wiring.get_content_store makes it: Signature V4 on the regional endpoint.
    config = Config(signature_version="s3v4", s3={"addressing_style": "virtual"})
    return CountingStore(lambda: boto3.client("s3", config=config), bucket, 900)


@pytest.fixture
def store(local_stack: LocalStack, content: CountingStore) -> DynamoDBTaskStore:
    return DynamoDBTaskStore(
        ddb(), local_stack.env["TABLE_NAME"], 30, ContentRule(content, INLINE), INLINE
    )


def _object(bucket: str, task_id: str, name: str) -> bytes:
    answer = boto3.client("s3").get_object(Bucket=bucket, Key=object_key(task_id, name))
    return bytes(answer["Body"].read())


def _new_task(store: DynamoDBTaskStore, message: Message) -> tuple[TaskRecord, Message]:
    task_id = str(uuid.uuid4())
    status = TaskStatus(state=TaskState.SUBMITTED)
    record = TaskRecord.submitted(task_id, task_id, "owner-1", status)
    kept = store.create_task(record, message, status_event(record, status), None)
    return record, kept


def _user(*parts: Part) -> Message:
    return Message(message_id=str(uuid.uuid4()), role="user", parts=list(parts))


def test_a_large_text_part_is_stored_and_read_back_as_a_link_to_its_own_object(
    local_stack: LocalStack, store: DynamoDBTaskStore, content: CountingStore, bucket: str
) -> None:
    text = "ü" * 60_000  # 120,000 bytes of UTF-8
    record, kept = _new_task(store, _user(Part(text=text), Part(text="small")))
    name = stored_name(kept.parts[0])
    assert name is not None and name.startswith("text.")
    assert kept.parts[1].text == "small"  # under the threshold: inline
    assert _object(bucket, record.task_id, name) == text.encode()
    items = partition(local_stack, record.task_id)
    assert all(item_size(item) < 4096 for item in items)  # no item holds the text
    snapshot = store.get_snapshot(record.task_id, None)
    assert snapshot is not None
    (message,) = snapshot.history
    assert stored_name(message.parts[0]) == name
    assert restored(message.parts[0], record.task_id, content).text == text
    task = present(snapshot_task(snapshot), content)
    url = task.history[0].parts[0].url  # type: ignore[index]
    assert url is not None and object_key(record.task_id, name) in url
    assert "X-Amz-Signature=" in url and "X-Amz-Expires=900" in url
    assert task.history[0].parts[0].media_type == "text/plain; charset=utf-8"  # type: ignore[index]


def snapshot_task(snapshot: Any) -> Any:
    from a2a_serverless.core.query import task_from_snapshot

    return task_from_snapshot(snapshot)


def test_raw_bytes_are_stored_byte_exact_with_their_media_type_and_filename(
    store: DynamoDBTaskStore, content: CountingStore, bucket: str
) -> None:
    data = hashlib.sha256(b"seed").digest() * 40_000  # 1.28 MB
    part = Part(raw=base64.b64encode(data).decode(), media_type="image/png", filename="a.png")
    record, kept = _new_task(store, _user(part))
    (stored,) = kept.parts
    name = stored_name(stored)
    assert name is not None and name.startswith("raw.")
    assert (stored.media_type, stored.filename, stored.raw) == ("image/png", "a.png", None)
    assert _object(bucket, record.task_id, name) == data
    head = boto3.client("s3").head_object(Bucket=bucket, Key=object_key(record.task_id, name))
    assert head["ContentType"] == "image/png"
    assert read_all(content.open(record.task_id, name)) == data


def test_many_small_parts_are_stored_largest_first_until_the_item_fits(
    local_stack: LocalStack, store: DynamoDBTaskStore
) -> None:
    parts = [Part(text=f"{i:03d}" + "x" * 30_000) for i in range(20)]  # 600 KB, each inline
    record, kept = _new_task(store, _user(*parts))
    stored = [p for p in kept.parts if stored_name(p)]
    assert 0 < len(stored) < 20  # some stay inline
    for given, written in zip(parts, kept.parts, strict=True):
        assert written.text in (None, given.text)  # inline ones unchanged, in place
    items = partition(local_stack, record.task_id)
    assert all(item_size(item) <= limits.MAX_ITEM_BYTES for item in items)
    snapshot = store.get_snapshot(record.task_id, None)
    assert snapshot is not None
    assert len(snapshot.history[0].parts) == 20


def test_a_status_message_is_stored_once_for_its_header_event_and_history(
    local_stack: LocalStack, store: DynamoDBTaskStore, content: CountingStore
) -> None:
    record, _ = _new_task(store, _user(Part(text="hi")))
    parts = [Part(text=chr(65 + i) * 30_000) for i in range(3)]  # 90 KB: over the header's 64 KiB
    message = agent_message(parts, record.task_id, record.context_id)
    content.puts.clear()
    transition(store, record, TaskState.INPUT_REQUIRED, message=message)
    assert len(content.puts) == len(set(content.puts)) >= 1
    fresh = store.get_record(record.task_id)
    assert fresh is not None and fresh.status.message is not None
    header_refs = [stored_name(p) for p in fresh.status.message.parts]
    snapshot = store.get_snapshot(record.task_id, None)
    assert snapshot is not None
    assert [stored_name(p) for p in snapshot.history[-1].parts] == header_refs
    events = store.read_events(record.task_id, 0)
    last = events[-1][1].status_update
    assert last is not None and last.status.message is not None
    assert [stored_name(p) for p in last.status.message.parts] == header_refs
    items = partition(local_stack, record.task_id)
    assert all(item_size(item) <= limits.MAX_ITEM_BYTES for item in items)


def test_an_artifact_of_megabytes_is_one_event_with_a_reference(
    store: DynamoDBTaskStore, content: CountingStore, bucket: str
) -> None:
    record, _ = _new_task(store, _user(Part(text="hi")))
    data = b"\x00\x01" * 1_500_000
    artifact = Artifact(
        artifact_id="a", parts=[Part(raw=base64.b64encode(data).decode(), filename="z.bin")]
    )
    event = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id=record.task_id, context_id=record.context_id, artifact=artifact, last_chunk=True
        )
    )
    assert store.append_event(record.task_id, 2, event, "1.0.0")
    (stored,) = store.read_artifacts(record.task_id)[0].parts
    name = stored_name(stored)
    assert name is not None and _object(bucket, record.task_id, name) == data
    body = store.get_event_json(record.task_id, 2)
    assert body is not None and len(body) < 2048
    shown = json.loads(present_event_json(body, content))
    url = shown["artifactUpdate"]["artifact"]["parts"][0]["url"]
    assert url.startswith("https://") and object_key(record.task_id, name) in url


def test_a_large_flow_state_goes_to_the_bucket_and_back_inline_when_it_shrinks(
    local_stack: LocalStack, store: DynamoDBTaskStore, content: CountingStore
) -> None:
    record, _ = _new_task(store, _user(Part(text="hi")))
    transition(store, record, TaskState.WORKING)
    big = {"turns": ["y" * 1000 for _ in range(500)]}  # ~500 KB: past the 64 KiB inline bound
    store.save_flow_state(record.task_id, 1, big, 0)
    key = table_keys.task_key(record.task_id, table_keys.HEADER)
    header = table_keys.record_of(ddb().get_item(TableName=store._table, Key=key)["Item"])
    assert header.flow_state == {} and header.flow_state_ref is not None
    assert json.loads(read_all(content.open(record.task_id, header.flow_state_ref))) == big
    store.save_flow_state(record.task_id, 1, {"small": 1}, 1)
    fresh = store.get_record(record.task_id)
    assert fresh is not None
    assert (fresh.flow_state, fresh.flow_state_ref) == ({"small": 1}, None)


def test_without_a_content_store_a_part_past_the_item_is_refused(local_stack: LocalStack) -> None:
    plain = DynamoDBTaskStore(ddb(), local_stack.env["TABLE_NAME"])
    with pytest.raises(TooLarge):
        _new_task(plain, _user(Part(text="x" * 500_000)))
