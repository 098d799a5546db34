"""Strict wire checks: every response body the suite sees is parsed with a2a-sdk's protobuf
types (unknown field or wrong enum spelling = failure), errors as google.rpc.Status, and SSE
bodies (spec §11.7) frame by frame as `StreamResponse`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from a2a import types as a2a_types
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

A2A_DOMAIN = "a2a-protocol.org"
_TASK_PATH = re.compile(r"^/tasks/[^/]+$")

EVENT_STREAM = "text/event-stream"
# A stream closes after one of these (spec §3.1.2, §11.7: terminal or interrupted).
TERMINAL_STATES = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
SETTLED_STATES = TERMINAL_STATES | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}

# Every response body the suite checked, for the closing count test.
CHECKED: list[tuple[str, str, int]] = []
# Every SSE body checked: (method, path, data frames, comment frames, read to the end).
SSE_CHECKED: list[tuple[str, str, int, int, bool]] = []


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


def is_stream_operation(method: str, path: str) -> bool:
    """SendStreamingMessage or SubscribeToTask: answered with SSE unless they fail up front."""
    path = path.split("?")[0].rstrip("/")
    return method == "POST" and (
        path == "/message:stream" or (path.startswith("/tasks/") and path.endswith(":subscribe"))
    )


def check_response(method: str, path: str, status: int, body: bytes | str) -> Any:
    """Check one HTTP+JSON response body strictly; returns the parsed proto or error dict."""
    CHECKED.append((method, path, status))
    if status == 304:
        assert not body, "304 must have no body"
        return None
    data = json.loads(body)
    if status >= 400:
        return check_status_error(data, status)
    assert not is_stream_operation(method, path), (
        f"{method} {path} answered {status} without {EVENT_STREAM}"
    )
    proto_type = proto_type_for(method, path)
    assert proto_type is not None, f"no wire type known for {method} {path}"
    return parse_strict(body, proto_type)


# -- Server-Sent Events (spec §11.7) -----------------------------------------------------------


@dataclass(frozen=True)
class SseFrame:
    """One SSE block: a `data:` line carrying a StreamResponse, or a `:` comment."""

    line: str
    payload: dict[str, Any] | None  # the JSON of a data frame; None for a comment
    event: a2a_types.StreamResponse | None

    @property
    def is_comment(self) -> bool:
        return self.payload is None

    @property
    def kind(self) -> str:
        """The StreamResponse member on the wire: task, message, statusUpdate, artifactUpdate."""
        assert self.payload is not None, "a comment has no kind"
        return next(iter(self.payload))

    @property
    def state(self) -> str | None:
        """The task state a task or statusUpdate frame carries."""
        if self.payload is None:
            return None
        member = self.payload.get("task") or self.payload.get("statusUpdate")
        return member["status"]["state"] if member else None


def parse_sse_block(block: str) -> SseFrame:
    """One block between blank lines: exactly one `data: {json}` line, or one `:` comment line."""
    assert "\n" not in block and "\r" not in block, f"one line per SSE frame expected: {block!r}"
    if block.startswith(":"):
        return SseFrame(block, None, None)
    assert block.startswith("data: "), f"SSE line is neither `data: ` nor a `:` comment: {block!r}"
    data = block[len("data: ") :]
    payload = json.loads(data)
    assert isinstance(payload, dict) and len(payload) == 1, f"one StreamResponse member: {data}"
    event = parse_strict(data, a2a_types.StreamResponse)
    assert isinstance(event, a2a_types.StreamResponse)
    assert event.WhichOneof("payload") is not None, data
    return SseFrame(block, payload, event)


def split_sse(body: bytes | str, *, complete: bool) -> list[SseFrame]:
    """Every frame of an SSE body. A body read to the end must end with a blank line; a body the
    client stopped reading may end inside a frame (that fragment is ignored)."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    blocks = text.split("\n\n")
    rest = blocks.pop()
    if complete:
        assert rest == "", f"stream ended inside a frame: {rest[:200]!r}"
    return [parse_sse_block(block) for block in blocks]


def check_sse_frames(
    body: bytes | str, *, complete: bool, method: str = "POST", path: str = ""
) -> list[SseFrame]:
    """Strict checks of one SSE response body (spec §3.1.2, §3.1.6, §11.7):

    - every block is `data: <StreamResponse JSON>` or a `:` comment, each ending in a blank line;
    - the first event is a Task (then status/artifact updates of that task only) or a Message
      (then nothing else);
    - no event follows a terminal or interrupted status (nor a snapshot already in one).

    `complete` says the body was read to its end (the server closed the stream): then it must
    have carried at least one event and not end inside a frame. A stream may end without a
    terminal event (it closes after STREAM_MAX_SECONDS so the client resubscribes).
    """
    frames = split_sse(body, complete=complete)
    events = [f for f in frames if not f.is_comment]
    SSE_CHECKED.append((method, path, len(events), len(frames) - len(events), complete))
    if complete:
        assert events, "a stream must carry at least one event"
    if not events:
        return frames
    first = events[0]
    assert first.kind in ("task", "message"), f"first event must be a Task or Message: {first.line}"
    if first.kind == "message":
        assert len(events) == 1, "a Message-only stream carries exactly one event"
        return frames
    assert first.payload is not None
    task = first.payload["task"]
    settled = first.state in SETTLED_STATES
    for frame in events[1:]:
        assert not settled, f"event after the stream should have closed: {frame.line}"
        assert frame.kind in ("statusUpdate", "artifactUpdate"), f"after the Task: {frame.line}"
        assert frame.payload is not None
        update = frame.payload[frame.kind]
        assert (update["taskId"], update["contextId"]) == (task["id"], task["contextId"]), (
            frame.line
        )
        settled = frame.state in SETTLED_STATES
    return frames
