"""Pure helpers of the core: cursors, media types, retry hashing, execution names."""

from __future__ import annotations

import base64
import json

import pytest

from a2a_serverless.core.errors import InvalidParamsError
from a2a_serverless.core.executor import StepFunctionsExecutor, execution_name
from a2a_serverless.core.service import _media_match, content_hash, decode_cursor, encode_cursor
from a2a_serverless.models import Message


def test_cursor_round_trip_and_rejects_forgeries() -> None:
    cursor = {"k": "2025-01-01T00:00:00.000Z#t1", "id": "t1"}
    assert decode_cursor(encode_cursor(cursor)) == cursor
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


def test_execution_names_and_arns() -> None:
    assert execution_name("t-1", 3) == "t-1-3"
    executor = StepFunctionsExecutor(None, "arn:aws:states:us-east-1:1:stateMachine:Flow")
    assert executor._execution_arn("t-1-3") == "arn:aws:states:us-east-1:1:execution:Flow:t-1-3"
