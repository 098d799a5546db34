"""Strict wire checks: every response body the suite sees is parsed with a2a-sdk's protobuf
types (unknown field or wrong enum spelling = failure), errors as google.rpc.Status."""

from __future__ import annotations

import json
import re
from typing import Any

from a2a import types as a2a_types
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

A2A_DOMAIN = "a2a-protocol.org"
_TASK_PATH = re.compile(r"^/tasks/[^/]+$")

# Every response body the suite checked, for the closing count test.
CHECKED: list[tuple[str, str, int]] = []


def parse_strict(
    body: str | bytes | dict[str, Any], proto_type: type[ProtoMessage]
) -> ProtoMessage:
    """Parse proto-JSON strictly; raises on unknown fields and bad enum names."""
    text = body if isinstance(body, str | bytes) else json.dumps(body)
    return json_format.Parse(text, proto_type(), ignore_unknown_fields=False)


def check_status_error(body: dict[str, Any], http_status: int) -> dict[str, Any]:
    """A google.rpc.Status error body (spec §11.6)."""
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == http_status, body
    assert isinstance(error["message"], str) and error["message"], body
    assert isinstance(error["status"], str) and error["status"].isupper(), body
    for detail in error.get("details", []):
        assert detail["@type"].startswith("type.googleapis.com/google.rpc."), detail
        if detail["@type"].endswith("ErrorInfo"):
            assert detail["domain"] == A2A_DOMAIN, detail
            assert re.fullmatch(r"[A-Z_]+", detail["reason"]), detail
        if detail["@type"].endswith("BadRequest"):
            for violation in detail["fieldViolations"]:
                assert violation["field"] and violation["description"], violation
    return error


def proto_type_for(method: str, path: str) -> type[ProtoMessage] | None:
    """The response type of an HTTP+JSON operation, by method and path."""
    path = path.split("?")[0].rstrip("/") or "/"
    if method == "GET" and path == "/.well-known/agent-card.json":
        return a2a_types.AgentCard
    if method == "POST" and path == "/message:send":
        return a2a_types.SendMessageResponse
    if method == "GET" and path == "/tasks":
        return a2a_types.ListTasksResponse
    if method == "GET" and _TASK_PATH.match(path):
        return a2a_types.Task
    if method == "POST" and path.startswith("/tasks/") and path.endswith(":cancel"):
        return a2a_types.Task
    return None


def check_response(method: str, path: str, status: int, body: bytes | str) -> Any:
    """Check one HTTP+JSON response body strictly; returns the parsed proto or error dict."""
    CHECKED.append((method, path, status))
    if status == 304:
        assert not body, "304 must have no body"
        return None
    data = json.loads(body)
    if status >= 400:
        return check_status_error(data, status)
    proto_type = proto_type_for(method, path)
    assert proto_type is not None, f"no wire type known for {method} {path}"
    return parse_strict(body, proto_type)
