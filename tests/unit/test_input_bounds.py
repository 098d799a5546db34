"""Every caller-chosen value that is stored or sent on has a bound (models/limits.py, README
"Input bounds"): just over it is InvalidParams naming the field and nothing is stored; at it
the request goes through. Checked in core, so every binding answers alike."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.core.errors import InvalidParamsError
from a2a_serverless.core.push import PushService, config_violations
from a2a_serverless.core.query import TaskQueries
from a2a_serverless.core.send import MessageSender, ModePolicy, WaitPolicy, request_violations
from a2a_serverless.models import (
    ListTasksRequest,
    SendMessageRequest,
    TaskPushNotificationConfig,
    limits,
)
from a2a_serverless.models.v03 import text_to_v03
from a2a_serverless.store.dynamodb.keys import MAX_CONFIG_ID_BYTES, MAX_ID_BYTES, MAX_OWNER_BYTES
from tests.fakes import InMemoryTaskStore
from tests.unit.test_send_path import RecordingExecutor

PUBLIC = "https://93.184.216.34/"  # an IP literal: vetted without a DNS lookup


def url_of(size: int, base: str = PUBLIC) -> str:
    """A URL of exactly `size` bytes."""
    return base + "a" * (size - len(base))


def push(store: InMemoryTaskStore | None = None) -> PushService:
    return PushService(store or InMemoryTaskStore(), True, EgressPolicy())


def config(**fields: Any) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig.model_validate({"url": PUBLIC + "hook", **fields})


def refused_fields(error: pytest.ExceptionInfo[InvalidParamsError]) -> list[str]:
    return [field for field, _ in error.value.violations]


def test_the_store_key_bounds_come_from_the_limits_module() -> None:
    assert MAX_ID_BYTES == limits.MAX_ID_BYTES
    assert MAX_OWNER_BYTES == limits.MAX_OWNER_BYTES
    assert MAX_CONFIG_ID_BYTES == 4 * limits.MAX_PUSH_CONFIG_ID_CHARS == 512


# -- push configs ------------------------------------------------------------------------------

L = limits
AUTH = "authentication"
PUSH_BOUNDS = [
    (
        "id",
        {"id": "i" * L.MAX_PUSH_CONFIG_ID_CHARS},
        {"id": "i" * (L.MAX_PUSH_CONFIG_ID_CHARS + 1)},
    ),
    ("url", {"url": url_of(L.MAX_PUSH_URL_BYTES)}, {"url": url_of(L.MAX_PUSH_URL_BYTES + 1)}),
    (
        "token",
        {"token": "t" * L.MAX_PUSH_TOKEN_BYTES},
        {"token": "t" * (L.MAX_PUSH_TOKEN_BYTES + 1)},
    ),
    (
        f"{AUTH}.scheme",
        {AUTH: {"scheme": "s" * L.MAX_AUTH_SCHEME_BYTES}},
        {AUTH: {"scheme": "s" * (L.MAX_AUTH_SCHEME_BYTES + 1)}},
    ),
    (
        f"{AUTH}.credentials",
        {AUTH: {"scheme": "Bearer", "credentials": "c" * L.MAX_AUTH_CREDENTIALS_BYTES}},
        {AUTH: {"scheme": "Bearer", "credentials": "c" * (L.MAX_AUTH_CREDENTIALS_BYTES + 1)}},
    ),
    ("tenant", {"tenant": "t" * L.MAX_TENANT_CHARS}, {"tenant": "t" * (L.MAX_TENANT_CHARS + 1)}),
]


@pytest.mark.parametrize(("field", "at", "over"), PUSH_BOUNDS, ids=[b[0] for b in PUSH_BOUNDS])
@pytest.mark.parametrize("prefix", ["", "configuration.taskPushNotificationConfig"])
def test_a_push_config_field_over_its_bound_is_refused_and_at_it_accepted(
    field: str, at: dict[str, Any], over: dict[str, Any], prefix: str
) -> None:
    service = push()
    assert service.prepared(config(**at), "t1", prefix).task_id == "t1"
    with pytest.raises(InvalidParamsError) as refused:
        service.prepared(config(**over), "t1", prefix)
    assert refused_fields(refused) == [f"{prefix}.{field}" if prefix else field]


def head_config(credentials: int) -> TaskPushNotificationConfig:
    """url and token at their bounds, scheme `Bearer`, credentials of `credentials` bytes."""
    return config(
        url=url_of(L.MAX_PUSH_URL_BYTES),
        token="t" * L.MAX_PUSH_TOKEN_BYTES,
        authentication={"scheme": "Bearer", "credentials": "c" * credentials},
    )


def test_url_and_header_values_together_stay_within_what_servers_accept() -> None:
    """Each within its bound, together over MAX_WEBHOOK_HEAD_BYTES: refused on credentials."""
    room = L.MAX_WEBHOOK_HEAD_BYTES - L.MAX_PUSH_URL_BYTES - L.MAX_PUSH_TOKEN_BYTES - len("Bearer ")
    assert 0 < room < L.MAX_AUTH_CREDENTIALS_BYTES
    assert push().prepared(head_config(room), "t1").authentication is not None
    with pytest.raises(InvalidParamsError) as refused:
        push().prepared(head_config(room + 1), "t1")
    assert refused_fields(refused) == [f"{AUTH}.credentials"]
    assert f"at most {L.MAX_WEBHOOK_HEAD_BYTES} bytes" in refused.value.violations[0][1]


def test_every_push_bound_is_named_at_once_before_the_host_is_resolved() -> None:
    too_long = config(
        url=url_of(L.MAX_PUSH_URL_BYTES + 1, "https://hooks.example.com/"),
        authentication={"scheme": "Bearer", "credentials": "c" * 200_000},
    )
    violations = config_violations(too_long.wire(), "p.")
    assert [field for field, _ in violations] == ["p.url", f"p.{AUTH}.credentials"]
    with pytest.raises(InvalidParamsError) as refused:
        PushService(InMemoryTaskStore(), True, EgressPolicy()).prepared(too_long, "t1")
    assert refused_fields(refused) == ["url", f"{AUTH}.credentials"]
    assert all("at most" in why for _, why in refused.value.violations)  # not a DNS answer


def test_a_refused_config_stores_nothing() -> None:
    store = InMemoryTaskStore()
    sender = make_sender(store)
    task_id = sender.enter(RequestContext.of_owner("alice"), send_request()).task_id
    service = push(store)
    with pytest.raises(InvalidParamsError):
        service.create("alice", task_id, config(url=url_of(200_000)))
    with pytest.raises(InvalidParamsError):
        service.create(
            "alice", task_id, config(authentication={"scheme": "B", "credentials": "c" * 200_000})
        )
    assert service.list("alice", task_id).configs is None
    assert service.create("alice", task_id, config(url=url_of(L.MAX_PUSH_URL_BYTES))).id


# -- messages ----------------------------------------------------------------------------------


def make_sender(store: InMemoryTaskStore) -> MessageSender:
    wait = WaitPolicy()
    executor = RecordingExecutor()
    queries = TaskQueries(store, executor, wait.poll)
    return MessageSender(store, executor, queries, ModePolicy(), wait, push(store))


def send_request(part: dict[str, Any] | None = None, **message: Any) -> SendMessageRequest:
    body = {
        "messageId": "m1",
        "role": "ROLE_USER",
        "parts": [part or {"text": "hi"}],
        **message,
    }
    return SendMessageRequest.model_validate(
        {"message": body, "configuration": {"returnImmediately": True}}
    )


def ids(count: int, size: int = 8) -> list[str]:
    return [f"{i:0{size}d}" for i in range(count)]


MEDIA = "text/plain; x="  # accepted by the default input modes whatever follows
MESSAGE_BOUNDS = [
    (
        "message.referenceTaskIds",
        {"referenceTaskIds": ids(L.MAX_REFERENCE_TASK_IDS)},
        {"referenceTaskIds": ids(L.MAX_REFERENCE_TASK_IDS + 1)},
    ),
    (
        "message.referenceTaskIds[1]",
        {"referenceTaskIds": ["a", "r" * L.MAX_ID_BYTES]},
        {"referenceTaskIds": ["a", "r" * (L.MAX_ID_BYTES + 1)]},
    ),
    (
        "message.extensions",
        {"extensions": ids(L.MAX_MESSAGE_EXTENSIONS)},
        {"extensions": ids(L.MAX_MESSAGE_EXTENSIONS + 1)},
    ),
    (
        "message.extensions[0]",
        {"extensions": [url_of(L.MAX_EXTENSION_URI_BYTES)]},
        {"extensions": [url_of(L.MAX_EXTENSION_URI_BYTES + 1)]},
    ),
    (
        "message.parts[0].url",
        {"part": {"url": url_of(L.MAX_PART_URL_BYTES)}},
        {"part": {"url": url_of(L.MAX_PART_URL_BYTES + 1)}},
    ),
    (
        "message.parts[0].filename",
        {"part": {"text": "x", "filename": "é" * (L.MAX_PART_FILENAME_BYTES // 2)}},
        {"part": {"text": "x", "filename": "é" * (L.MAX_PART_FILENAME_BYTES // 2) + "a"}},
    ),
    (
        "message.parts[0].mediaType",
        {"part": {"text": "x", "mediaType": url_of(L.MAX_PART_MEDIA_TYPE_BYTES, MEDIA)}},
        {"part": {"text": "x", "mediaType": url_of(L.MAX_PART_MEDIA_TYPE_BYTES + 1, MEDIA)}},
    ),
    (
        "message",  # what stays in the item however much content is stored
        {"metadata": {"k": "m" * (L.MAX_MESSAGE_FRAME_BYTES - 1024)}},
        {"metadata": {"k": "m" * L.MAX_MESSAGE_FRAME_BYTES}},
    ),
    (
        "message",
        {"part": {"text": "x", "metadata": {"k": "m" * (L.MAX_MESSAGE_FRAME_BYTES - 1024)}}},
        {"part": {"text": "x", "metadata": {"k": "m" * L.MAX_MESSAGE_FRAME_BYTES}}},
    ),
    (
        "message.parts[0].url",
        {"part": {"url": "https://example.com/a2a-content:raw.x"}},
        {"part": {"url": "a2a-content:raw.x"}},
    ),
]


@pytest.mark.parametrize(
    ("field", "at", "over"), MESSAGE_BOUNDS, ids=[b[0] for b in MESSAGE_BOUNDS]
)
def test_a_message_field_over_its_bound_is_refused_and_stores_nothing(
    field: str, at: dict[str, Any], over: dict[str, Any]
) -> None:
    store = InMemoryTaskStore()
    sender = make_sender(store)

    def request(fields: dict[str, Any]) -> SendMessageRequest:
        message = {key: value for key, value in fields.items() if key != "part"}
        return send_request(fields.get("part"), **message)

    with pytest.raises(InvalidParamsError) as refused:
        sender.enter(RequestContext.of_owner("alice"), request(over))
    assert refused_fields(refused) == [field]
    assert store.tasks == {}
    assert sender.enter(RequestContext.of_owner("alice"), request(at)).task_id in store.tasks


def test_an_inline_push_config_is_bounded_with_the_message_in_one_answer() -> None:
    store = InMemoryTaskStore()
    request = SendMessageRequest.model_validate(
        {
            "message": {
                "messageId": "m1",
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
                "referenceTaskIds": ["r" * 300],
            },
            "configuration": {"taskPushNotificationConfig": {"url": url_of(3000)}},
        }
    )
    with pytest.raises(InvalidParamsError) as refused:
        make_sender(store).enter(RequestContext.of_owner("alice"), request)
    assert refused_fields(refused) == [
        "message.referenceTaskIds[0]",
        "configuration.taskPushNotificationConfig.url",
    ]
    assert store.tasks == {}


def test_the_same_bounds_run_on_a_request_its_schema_refused() -> None:
    """What a binding merges into the schema's violations (one answer names every field)."""
    payload = {
        "message": {
            "role": "user",
            "messageId": 7,  # the schema's to name
            "parts": [{"url": url_of(9000), "filename": 3}, "not a part"],
            "extensions": ["e"] * 40,
        },
        "configuration": {
            "taskPushNotificationConfig": {
                "url": "https://h/",
                "authentication": {"scheme": "s" * 65},
            }
        },
    }
    assert [field for field, _ in request_violations(payload)] == [
        "message.extensions",
        "message.parts[0].url",
        "configuration.taskPushNotificationConfig.authentication.scheme",
    ]


# -- queries -----------------------------------------------------------------------------------


def padded_token(token: str, size: int) -> str:
    """`token` (one the store issued) re-encoded, its JSON padded with spaces, to `size` bytes:
    the same position, still a token the store reads."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    body = json.dumps(json.loads(raw))
    plain = (size * 3) // 4  # bytes whose base64 (unpadded) is `size` characters
    padded = base64.urlsafe_b64encode((body + " " * (plain - len(body))).encode())
    encoded = padded.decode().rstrip("=")
    assert len(encoded) == size
    return encoded


def test_a_page_token_over_its_bound_is_refused_before_it_is_read() -> None:
    store = InMemoryTaskStore()
    sender = make_sender(store)
    for n in range(2):
        sender.enter(RequestContext.of_owner("alice"), send_request(messageId=f"m{n}"))
    queries = TaskQueries(store, RecordingExecutor(), WaitPolicy().poll)
    first = queries.list_tasks("alice", ListTasksRequest(page_size=1))
    assert first.next_page_token and len(first.next_page_token) < 200
    at = padded_token(first.next_page_token, L.MAX_PAGE_TOKEN_BYTES)
    rest = queries.list_tasks("alice", ListTasksRequest(page_size=1, page_token=at))
    assert len(rest.tasks) == 1 and rest.tasks[0].id != first.tasks[0].id
    over = padded_token(first.next_page_token, L.MAX_PAGE_TOKEN_BYTES + 2)
    with pytest.raises(InvalidParamsError) as refused:
        queries.list_tasks("alice", ListTasksRequest(page_size=1, page_token=over))
    assert refused.value.violations == [
        ("pageToken", f"must be at most {L.MAX_PAGE_TOKEN_BYTES} bytes")
    ]


# -- 0.3 spellings -----------------------------------------------------------------------------


def test_v03_names_the_scheme_as_the_first_of_schemes() -> None:
    assert (
        text_to_v03("pushNotificationConfig.authentication.scheme: must be at most 64 bytes")
        == "pushNotificationConfig.authentication.schemes[0]: must be at most 64 bytes"
    )
    assert text_to_v03("authentication.schemes") == "authentication.schemes"
    assert text_to_v03("message.parts[2].url") == "message.parts[2].file.uri"
