"""Pure helpers of the core: page tokens, media types, retry hashing, execution names."""

from __future__ import annotations

import base64
import json

import pytest

from a2a_serverless.core.errors import InvalidParamsError
from a2a_serverless.core.executor import execution_name
from a2a_serverless.core.query import TaskQueries
from a2a_serverless.core.send import _media_match, content_hash
from a2a_serverless.core.tail import PollPolicy
from a2a_serverless.models import ListTasksRequest, Message
from a2a_serverless.store import ListQuery, TaskRecord
from a2a_serverless.store.dynamodb.keys import decode_page_token, encode_page_token


class _TokenCheckingStore:
    """Just enough store for ListTasks: it judges page tokens the way the DynamoDB store does."""

    def list_tasks(self, query: ListQuery) -> tuple[list[TaskRecord], str | None]:
        if query.page_token:
            decode_page_token(query.page_token)
        return [], None

    def count_tasks(self, query: ListQuery) -> int:
        return 0


def decode_cursor(token: str) -> None:
    """What a client sees for a page token: ListTasks refuses forgeries as InvalidParams."""
    queries = TaskQueries(_TokenCheckingStore(), None, PollPolicy())  # type: ignore[arg-type]
    queries.list_tasks("alice", ListTasksRequest(page_token=token))


def test_cursor_round_trip_and_rejects_forgeries() -> None:
    cursor = {"k": "2025-01-01T00:00:00.000Z#t1", "id": "t1"}
    assert decode_page_token(encode_page_token(cursor)) == cursor
    decode_cursor(encode_page_token(cursor))  # a real token is accepted
    forged = [
        "!!!",
        base64.urlsafe_b64encode(b"[1,2]").decode(),
        base64.urlsafe_b64encode(json.dumps({"k": "x"}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"k": "x", "id": 3}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"k": "x", "id": "y", "pk": "z"}).encode()).decode(),
    ]
    for token in forged:
        with pytest.raises(InvalidParamsError) as info:
            decode_cursor(token)
        assert info.value.violations[0][0] == "pageToken"


@pytest.mark.parametrize(
    ("offered", "accepted", "match"),
    [
        ("text/plain", "text/plain", True),
        ("text/plain", "text/*", True),
        ("text/plain", "*/*", True),
        ("text/plain; charset=utf-8", "TEXT/PLAIN", True),
        ("image/png", "text/*", False),
        ("application/json", "application/xml", False),
    ],
)
def test_media_match(offered: str, accepted: str, match: bool) -> None:
    assert _media_match(offered, accepted) is match


def test_content_hash_depends_on_content_not_key_order() -> None:
    a = Message.model_validate({"messageId": "m", "role": "user", "parts": [{"text": "a"}]})
    b = Message.model_validate({"parts": [{"text": "a"}], "role": "ROLE_USER", "messageId": "m"})
    c = Message.model_validate({"messageId": "m", "role": "user", "parts": [{"text": "b"}]})
    assert content_hash(a) == content_hash(b) != content_hash(c)


def test_execution_names() -> None:
    # One execution per step; a turn's first keeps the turn's name (the header records it).
    assert execution_name("t-1", 3) == execution_name("t-1", 3, 0) == "t-1-3"
    assert execution_name("t-1", 3, 2) == "t-1-3-2"
