"""Strict wire checks: every response body the suite sees is parsed with a2a-sdk's protobuf
types (unknown field or wrong enum spelling = failure), errors as google.rpc.Status, and SSE
bodies (spec §11.7) frame by frame as `StreamResponse`.

JSON-RPC answers of `POST /` are checked by the version the request selected and the method in
its body: the envelope, 1.0 results and stream events parsed strictly as protobuf, 0.3 results
and events validated against the 0.3 JSON schema (with unknown fields refused), and error
objects with their `google.rpc` details. 0.3 bodies are also parsed with a2a-sdk's 0.3 compat
types (`a2a.compat.v0_3`), as 1.0 bodies are with its 1.0 protobuf types."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from a2a import types as a2a_types
from a2a.compat.v0_3 import types as v03_types
from google.protobuf import json_format
from google.protobuf.empty_pb2 import Empty
from google.protobuf.message import Message as ProtoMessage
from jsonschema import Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from a2a_serverless.cli import smoke

A2A_DOMAIN = "a2a-protocol.org"
_TASK_PATH = re.compile(r"^/tasks/[^/]+$")
_CONFIGS_PATH = re.compile(r"^/tasks/[^/]+/pushNotificationConfigs$")
_CONFIG_PATH = re.compile(r"^/tasks/[^/]+/pushNotificationConfigs/[^/]+$")

# A stream closes after one of SETTLED_STATES (spec §3.1.2, §11.7: terminal or interrupted).
EVENT_STREAM = smoke.EVENT_STREAM
TERMINAL_STATES = smoke.TERMINAL_STATES
SETTLED_STATES = smoke.SETTLED_STATES

# Every response body the suite checked, for the closing count test.
CHECKED: list[tuple[str, str, int]] = []
# Every SSE body checked: (method, path, data frames, comment frames, read to the end).
SSE_CHECKED: list[tuple[str, str, int, int, bool]] = []
# Every body checked that began with keep-alive bytes: (method, path or JSON-RPC method, count).
KEPT_ALIVE: list[tuple[str, str, int]] = []

# A blocking SendMessage that waits writes one newline per BLOCKING_KEEPALIVE_SECONDS before
# its JSON (bindings/keepalive.py): whitespace before a JSON value is valid JSON. Only those
# answers may begin with it; every other body starts with its JSON value.
KEEPALIVE = b"\n"


def split_keepalive(body: bytes | str) -> tuple[int, bytes]:
    """(number of leading keep-alive bytes, the body after them)."""
    raw = body.encode() if isinstance(body, str) else body
    rest = raw.lstrip(KEEPALIVE)
    assert not rest[:1].isspace(), f"only {KEEPALIVE!r} keep-alives may precede the JSON: {raw!r}"
    return len(raw) - len(rest), rest


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


# What follows a tenant segment: the first segment of every route with a tenant binding.
_TENANTED = ("tasks", "message:send", "message:stream", "extendedAgentCard")


def without_tenant(path: str) -> str:
    """`/{tenant}/tasks/x` -> `/tasks/x` (the proto's tenant bindings); other paths as they
    are. The same operation, answered with the same wire types."""
    segments = path.split("?")[0].split("/")
    if len(segments) > 2 and segments[1] not in _TENANTED and segments[2] in _TENANTED:
        return "/" + "/".join(segments[2:])
    return path


def proto_type_for(method: str, path: str) -> type[ProtoMessage] | None:
    """The response type of an HTTP+JSON operation, by method and path (under a tenant or not)."""
    path = without_tenant(path.split("?")[0]).rstrip("/") or "/"
    if method == "GET" and path in ("/.well-known/agent-card.json", "/extendedAgentCard"):
        return a2a_types.AgentCard
    if method == "POST" and path == "/message:send":
        return a2a_types.SendMessageResponse
    if method == "GET" and path == "/tasks":
        return a2a_types.ListTasksResponse
    if method == "GET" and _TASK_PATH.match(path) and not path.endswith(":subscribe"):
        return a2a_types.Task
    if method == "POST" and path.startswith("/tasks/") and path.endswith(":cancel"):
        return a2a_types.Task
    if _CONFIGS_PATH.match(path):
        if method == "POST":
            return a2a_types.TaskPushNotificationConfig
        if method == "GET":
            return a2a_types.ListTaskPushNotificationConfigsResponse
    if _CONFIG_PATH.match(path):
        if method == "GET":
            return a2a_types.TaskPushNotificationConfig
        if method == "DELETE":
            return Empty
    return None


def is_stream_operation(method: str, path: str) -> bool:
    """SendStreamingMessage or SubscribeToTask (POST, or GET: the proto's rule): answered
    with SSE unless they fail up front."""
    path = without_tenant(path.split("?")[0]).rstrip("/")
    if path.startswith("/tasks/") and path.endswith(":subscribe"):
        return method in ("GET", "POST")
    return method == "POST" and path == "/message:stream"


def check_response(method: str, path: str, status: int, body: bytes | str) -> Any:
    """Check one HTTP+JSON response body strictly; returns the parsed proto or error dict."""
    CHECKED.append((method, path, status))
    if status == 304:
        assert not body, "304 must have no body"
        return None
    kept_alive, body = split_keepalive(body)
    if kept_alive:
        assert status == 200 and proto_type_for(method, path) is a2a_types.SendMessageResponse, (
            f"{method} {path} -> {status}: leading whitespace outside a blocking SendMessage"
        )
        KEPT_ALIVE.append((method, path, kept_alive))
    data = json.loads(body)
    if status >= 400:
        return check_status_error(data, status)
    if kept_alive and "error" in data:
        # A failure during the wait, after the 200 status had gone out with the keep-alives:
        # the google.rpc.Status carries the code the error would have had.
        assert data["error"]["code"] >= 400, data
        return check_status_error(data, data["error"]["code"])
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


def sse_blocks(body: bytes | str, *, complete: bool) -> list[str]:
    """The frames of an SSE body, as text. A body read to the end must end with a blank line; a
    body the client stopped reading may end inside a frame (that fragment is ignored)."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    blocks = text.split("\n\n")
    rest = blocks.pop()
    if complete:
        assert rest == "", f"stream ended inside a frame: {rest[:200]!r}"
    return blocks


def split_sse(body: bytes | str, *, complete: bool) -> list[SseFrame]:
    """Every frame of an SSE body, parsed."""
    return [parse_sse_block(block) for block in sse_blocks(body, complete=complete)]


_INTERRUPTED_ANY = {
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
    "input-required",
    "auth-required",
}


def _stream_end(state: str | None, awaiting_work: bool) -> tuple[bool, bool]:
    """(closes here, still awaiting work) for an event of `state` (either spelling): a
    terminal status closes; an interrupted one closes unless the stream is a subscription
    opened at an interruption and no new work has started since (§7.6.1)."""
    if state is None:
        return False, awaiting_work
    if state in _INTERRUPTED_ANY:
        return not awaiting_work, awaiting_work
    if state in SETTLED_STATES or state in V03_SETTLED_STATES:
        return True, awaiting_work
    return False, False


_Event = TypeVar("_Event", "SseFrame", "RpcEvent")


def _opening_task_event(events: list[_Event], complete: bool) -> _Event | None:
    """A stream's first event when it is a Task (the rest must update it); None when there is
    no event (allowed only in an incomplete body) or it is a Message, alone in its stream."""
    if complete:
        assert events, "a stream must carry at least one event"
    if not events:
        return None
    first = events[0]
    assert first.kind in ("task", "message"), f"first event must be a Task or Message: {first.line}"
    if first.kind == "message":
        assert len(events) == 1, "a Message-only stream carries exactly one event"
        return None
    return first


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
    first = _opening_task_event(events, complete)
    if first is None:
        return frames
    assert first.payload is not None
    task = first.payload["task"]
    # A subscription opened at an interruption follows the turn the reply starts.
    awaiting = path.endswith(":subscribe") and first.state in _INTERRUPTED_ANY
    settled = first.state in SETTLED_STATES and not awaiting
    for frame in events[1:]:
        assert not settled, f"event after the stream should have closed: {frame.line}"
        assert frame.kind in ("statusUpdate", "artifactUpdate"), f"after the Task: {frame.line}"
        assert frame.payload is not None
        update = frame.payload[frame.kind]
        assert (update["taskId"], update["contextId"]) == (task["id"], task["contextId"]), (
            frame.line
        )
        settled, awaiting = _stream_end(frame.state, awaiting)
    return frames


# -- JSON-RPC on POST / (spec §9, §5.4; A2A 0.3 compatibility by JSON schema) -----------------

# The released A2A 0.3.0 JSON schema (a2a-protocol.org, Apache-2.0), vendored next to this file.
SCHEMA_V03_PATH = Path(__file__).resolve().parent / "a2a-v0.3.0.schema.json"
_SCHEMA_V03: dict[str, Any] = json.loads(SCHEMA_V03_PATH.read_text())


def _strict_definitions(definitions: dict[str, Any]) -> dict[str, Any]:
    """The 0.3 definitions with `additionalProperties: false` on every object definition: a
    field the 0.3 schema does not know is a failure (0.3 clients would drop it silently)."""
    strict = {}
    for name, definition in definitions.items():
        definition = dict(definition)
        if "properties" in definition and "additionalProperties" not in definition:
            definition["additionalProperties"] = False
        strict[name] = definition
    return strict


def _registry(definitions: dict[str, Any]) -> Registry:
    root = {"$schema": _SCHEMA_V03["$schema"], "definitions": definitions}
    return Registry().with_resource("urn:a2a-0.3", Resource.from_contents(root, DRAFT7))


_V03_LENIENT = _registry(_SCHEMA_V03["definitions"])
_V03_STRICT = _registry(_strict_definitions(_SCHEMA_V03["definitions"]))


def check_v03(instance: Any, definition: str, *, strict: bool = True) -> Any:
    """Validate against one definition of the 0.3 JSON schema (strict: no unknown fields)."""
    registry = _V03_STRICT if strict else _V03_LENIENT
    validator = Draft7Validator(
        {"$ref": f"urn:a2a-0.3#/definitions/{definition}"}, registry=registry
    )
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    assert not errors, f"not a 0.3 {definition}: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors[:5]
    )
    parse_v03_sdk(instance, definition, strict=strict)
    return instance


V03_SDK_PARSED: list[str] = []


def parse_v03_sdk(instance: Any, definition: str, *, strict: bool = True) -> Any:
    """Parse with a2a-sdk's 0.3 type of that name, as a 0.3 SDK client does. Strict: the
    parsed object dumps back to exactly the instance (the SDK ignores unknown fields, so a
    field it would drop or reshape fails here)."""
    model = getattr(v03_types, definition)
    parsed = model.model_validate(instance)
    V03_SDK_PARSED.append(definition)
    if strict:
        dumped = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
        assert dumped == instance, f"a2a-sdk 0.3 {definition} reads {dumped}, sent {instance}"
    return parsed


# The JSON-RPC responses checked: (version, method, status, "result" | "error" | "sse" | "").
RPC_CHECKED: list[tuple[str, str, int, str]] = []
# JSON-RPC SSE bodies checked: (version, method, data frames, comment frames, read to the end).
RPC_SSE_CHECKED: list[tuple[str, str, int, int, bool]] = []

RPC_V10_RESULT_TYPES: dict[str, type[ProtoMessage]] = {
    "SendMessage": a2a_types.SendMessageResponse,
    "GetTask": a2a_types.Task,
    "CancelTask": a2a_types.Task,
    "ListTasks": a2a_types.ListTasksResponse,
    "CreateTaskPushNotificationConfig": a2a_types.TaskPushNotificationConfig,
    "GetTaskPushNotificationConfig": a2a_types.TaskPushNotificationConfig,
    "ListTaskPushNotificationConfigs": a2a_types.ListTaskPushNotificationConfigsResponse,
    "DeleteTaskPushNotificationConfig": Empty,
    "GetExtendedAgentCard": a2a_types.AgentCard,
}
RPC_V10_STREAMS = {"SendStreamingMessage", "SubscribeToTask"}
# 0.3 result definitions by method (the result of a message/send is a Task or a Message).
RPC_V03_RESULTS: dict[str, tuple[str, ...]] = {
    "message/send": ("Task", "Message"),
    "tasks/get": ("Task",),
    "tasks/cancel": ("Task",),
    "tasks/pushNotificationConfig/set": ("TaskPushNotificationConfig",),
    "tasks/pushNotificationConfig/get": ("TaskPushNotificationConfig",),
    "agent/getAuthenticatedExtendedCard": ("AgentCard",),
}
RPC_V03_STREAMS = {"message/stream", "tasks/resubscribe"}
_V03_KIND_DEFINITION = {
    "task": "Task",
    "message": "Message",
    "status-update": "TaskStatusUpdateEvent",
    "artifact-update": "TaskArtifactUpdateEvent",
}
V03_SETTLED_STATES = {
    "completed",
    "failed",
    "canceled",
    "rejected",
    "input-required",
    "auth-required",
}
# JSON-RPC error codes and the ErrorInfo reason each must carry (spec §5.4, §9.5).
RESOURCE_EXHAUSTED_CODE = -31429
INVALID_REQUEST_CODE = -32600
RPC_ERROR_REASONS = {
    -32001: "TASK_NOT_FOUND",
    -32002: "TASK_NOT_CANCELABLE",
    -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED",
    -32006: "INVALID_AGENT_RESPONSE",
    -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    -32008: "EXTENSION_SUPPORT_REQUIRED",
    -32009: "VERSION_NOT_SUPPORTED",
    # Not the spec's: this implementation's bound on a caller's long-lived connections
    # (core/errors.py), answered with HTTP 429 too.
    RESOURCE_EXHAUSTED_CODE: "RESOURCE_EXHAUSTED",
}


def is_jsonrpc_call(method: str, path: str) -> bool:
    """`POST /` (the interface URL, with or without trailing slash) is the JSON-RPC endpoint."""
    return method == "POST" and (path.split("?")[0].rstrip("/") == "")


@dataclass(frozen=True)
class RpcRequest:
    """What the hook knows of a JSON-RPC request: the version it selected and its envelope."""

    version: str  # "1.0", "0.3", or the unsupported value sent
    payload: Any  # the decoded body, or None when it was not JSON
    parsed: bool

    @property
    def is_object(self) -> bool:
        return isinstance(self.payload, dict)

    @property
    def has_id(self) -> bool:
        return self.is_object and "id" in self.payload

    @property
    def id(self) -> Any:
        return self.payload.get("id") if self.is_object else None

    @property
    def method(self) -> str:
        method = self.payload.get("method") if self.is_object else None
        return method if isinstance(method, str) else ""


def rpc_version(header: str | None, query: str | None) -> str:
    """The version a request selected, as the server reads it (header, else query; empty = 0.3;
    the patch number does not count)."""
    raw = header if header is not None else query
    raw = (raw or "").strip()
    return "0.3" if not raw else ".".join(raw.split(".")[:2])


def rpc_request(body: bytes, version: str) -> RpcRequest:
    try:
        return RpcRequest(version, json.loads(body), True)
    except (ValueError, UnicodeDecodeError):
        return RpcRequest(version, None, False)


def check_rpc_error(error: Any, *, version: str) -> dict[str, Any]:
    """A JSON-RPC error object: code int, message str, data = google.rpc details with an
    ErrorInfo of domain a2a-protocol.org (spec §9.5)."""
    assert isinstance(error, dict) and set(error) <= {"code", "message", "data"}, error
    code, message = error.get("code"), error.get("message")
    assert isinstance(code, int) and not isinstance(code, bool), error
    assert isinstance(message, str) and message, error
    assert code in RPC_ERROR_REASONS or code in (-32700, -32600, -32601, -32602, -32603), error
    data = error.get("data")
    assert isinstance(data, list) and data, f"data must be an array of details: {error}"
    infos = [d for d in data if d.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo"]
    assert len(infos) == 1, error
    for detail in data:
        assert isinstance(detail, dict), error
        assert detail["@type"].startswith("type.googleapis.com/google.rpc."), detail
        if detail["@type"].endswith(".BadRequest"):
            assert detail["fieldViolations"], detail
            for violation in detail["fieldViolations"]:
                assert set(violation) == {"field", "description"}, violation
                assert violation["field"] and violation["description"], violation
    info = infos[0]
    assert info["domain"] == A2A_DOMAIN, info
    assert re.fullmatch(r"[A-Z][A-Z0-9_]*", info["reason"]), info
    assert set(info) <= {"@type", "reason", "domain", "metadata"}, info
    if code in RPC_ERROR_REASONS:
        assert info["reason"] == RPC_ERROR_REASONS[code], (code, info)
    if code == -32602:
        assert any(d["@type"].endswith(".BadRequest") for d in data), error
    if version == "0.3":
        check_v03(error, "JSONRPCError")
    return error


def _check_envelope(payload: Any, request: RpcRequest) -> str:
    """{"jsonrpc": "2.0", "id": <echoed>, "result" | "error"}; returns which member it has."""
    assert isinstance(payload, dict), payload
    members = set(payload) - {"jsonrpc", "id"}
    assert payload.get("jsonrpc") == "2.0" and "id" in payload, payload
    assert members in ({"result"}, {"error"}), f"exactly one of result/error: {payload}"
    kind = members.pop()
    id_ = payload["id"]
    assert id_ is None or (isinstance(id_, str | int | float) and not isinstance(id_, bool)), (
        payload
    )
    if kind == "error" and payload["error"].get("code") == -32700:
        assert id_ is None, f"a parse error must carry id null: {payload}"
    elif kind == "error" and payload["error"].get("code") in (-32600, -32005):
        # The id may be undetectable in an invalid request (JSON-RPC 2.0 §5), and a body of a
        # content type the server does not take is not read: null or echoed.
        assert id_ is None or (request.has_id and id_ == request.id), payload
    else:
        assert request.has_id, f"a notification must not be answered: {payload}"
        assert id_ == request.id and type(id_) is type(request.id), (request.id, payload)
    return kind


def _check_v10_result(method: str, result: Any) -> Any:
    proto_type = RPC_V10_RESULT_TYPES.get(method)
    assert proto_type is not None, f"no 1.0 result type known for {method}"
    assert isinstance(result, dict), result
    parsed = parse_strict(result, proto_type)
    if method == "SendMessage":
        assert len(result) == 1 and parsed.WhichOneof("payload"), result
    return parsed


def _check_v03_result(method: str, result: Any) -> Any:
    if method == "tasks/pushNotificationConfig/list":
        assert isinstance(result, list), result
        return [check_v03(item, "TaskPushNotificationConfig") for item in result]
    if method == "tasks/pushNotificationConfig/delete":
        assert result is None, result
        return result
    definitions = RPC_V03_RESULTS.get(method)
    assert definitions is not None, f"no 0.3 result type known for {method}"
    if method == "agent/getAuthenticatedExtendedCard":
        return check_v03(result, "AgentCard", strict=False)
    if len(definitions) > 1:
        assert isinstance(result, dict) and result.get("kind") in ("task", "message"), result
        return check_v03(result, _V03_KIND_DEFINITION[result["kind"]])
    check_v03(result, definitions[0])
    if definitions[0] == "Task":
        assert result["kind"] == "task", result
    return result


def _rpc_code(body: bytes | str) -> Any:
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def check_jsonrpc_response(request: RpcRequest, status: int, body: bytes | str) -> Any:
    """Check one non-SSE answer of `POST /`; returns the result (parsed) or the error object."""
    if status == 204:
        RPC_CHECKED.append((request.version, request.method, status, ""))
        assert not body, "204 must have no body"
        assert request.has_id is False and request.is_object, "only a notification gets 204"
        return None
    # A refusal for too many open connections says so to HTTP too (429, Retry-After), as does
    # a body past the limit (413, as API Gateway and HTTP+JSON answer it).
    assert (
        status == 200
        or (status == 429 and _rpc_code(body) == RESOURCE_EXHAUSTED_CODE)
        or (status == 413 and _rpc_code(body) == INVALID_REQUEST_CODE)
    ), f"JSON-RPC answers HTTP 200 (got {status}): {body[:300]!r}"
    kept_alive, body = split_keepalive(body)
    if kept_alive:
        assert (request.version, request.method) in (
            ("1.0", "SendMessage"),
            ("0.3", "message/send"),
        ), f"leading whitespace outside a blocking send: {request.version} {request.method}"
        KEPT_ALIVE.append(("POST", f"{request.version} {request.method}", kept_alive))
    payload = json.loads(body)
    kind = _check_envelope(payload, request)
    RPC_CHECKED.append((request.version, request.method, status, kind))
    if kind == "error":
        error = check_rpc_error(payload["error"], version=request.version)
        if request.version == "0.3":
            check_v03(payload, "JSONRPCErrorResponse")
        return error
    method = request.method
    assert method not in RPC_V10_STREAMS | RPC_V03_STREAMS or request.version not in (
        "1.0",
        "0.3",
    ), f"{method} succeeded without {EVENT_STREAM}"
    if request.version == "1.0":
        return _check_v10_result(method, payload["result"])
    assert request.version == "0.3", f"a result under unsupported version {request.version}"
    return _check_v03_result(method, payload["result"])


@dataclass(frozen=True)
class RpcEvent:
    """One JSON-RPC SSE event normalised for the sequence rules: 1.0 or 0.3 spelling."""

    line: str
    envelope: dict[str, Any]
    kind: str  # task, message, status, artifact
    task_id: str | None
    context_id: str | None
    state: str | None  # in the version's spelling
    settled: bool
    final: bool | None  # the 0.3 `final` flag of a status update


def _rpc_event(block: str, request: RpcRequest) -> RpcEvent:
    assert block.startswith("data: "), f"SSE line is neither `data: ` nor a `:` comment: {block!r}"
    envelope = json.loads(block[len("data: ") :])
    kind = _check_envelope(envelope, request)
    assert kind == "result", f"a stream event must be a result, not an error: {block}"
    result = envelope["result"]
    if request.version == "1.0":
        event = parse_strict(result, a2a_types.StreamResponse)
        member = event.WhichOneof("payload")
        assert member and len(result) == 1, block
        body = result[next(iter(result))]
        short = {"task": "task", "message": "message", "status_update": "status"}.get(
            member, "artifact"
        )
        task_id = body.get("id") if short == "task" else body.get("taskId")
        state = body["status"]["state"] if short in ("task", "status") else None
        settled = state in SETTLED_STATES
        return RpcEvent(
            block, envelope, short, task_id, body.get("contextId"), state, settled, None
        )
    kind_03 = result.get("kind") if isinstance(result, dict) else None
    assert kind_03 in _V03_KIND_DEFINITION, f"0.3 stream event without a known kind: {block}"
    check_v03(result, _V03_KIND_DEFINITION[kind_03])
    check_v03(envelope, "SendStreamingMessageSuccessResponse", strict=False)
    short = {"task": "task", "message": "message", "status-update": "status"}.get(
        kind_03, "artifact"
    )
    task_id = result.get("id") if short == "task" else result.get("taskId")
    state = result["status"]["state"] if short in ("task", "status") else None
    settled = state in V03_SETTLED_STATES
    final = result.get("final") if short == "status" else None
    if short == "status":
        assert final is settled, f"`final` must be true exactly on the closing update: {block}"
    return RpcEvent(block, envelope, short, task_id, result.get("contextId"), state, settled, final)


def check_jsonrpc_sse(
    body: bytes | str, *, complete: bool, request: RpcRequest
) -> list[RpcEvent | None]:
    """Strict checks of a JSON-RPC SSE body (spec §9.4.2): every `data:` is a JSON-RPC success
    response with the request's id whose result is a StreamResponse (1.0) or a 0.3 event with
    its `kind`; the same ordering rules as the HTTP+JSON streams (first a Task or a Message,
    then updates of that task only, nothing after a terminal or interrupted status); in 0.3,
    `final` is true exactly on the status update that closes the stream. Comments are None."""
    items: list[RpcEvent | None] = []
    for block in sse_blocks(body, complete=complete):
        assert "\n" not in block and "\r" not in block, f"one line per SSE frame: {block!r}"
        items.append(None if block.startswith(":") else _rpc_event(block, request))
    events = [e for e in items if e is not None]
    RPC_SSE_CHECKED.append(
        (request.version, request.method, len(events), len(items) - len(events), complete)
    )
    assert request.method in (RPC_V10_STREAMS if request.version == "1.0" else RPC_V03_STREAMS)
    first = _opening_task_event(events, complete)
    if first is None:
        return items
    awaiting = (
        request.method in ("SubscribeToTask", "tasks/resubscribe")
        and first.state in _INTERRUPTED_ANY
    )
    settled = first.settled and not awaiting
    for event in events[1:]:
        assert not settled, f"event after the stream should have closed: {event.line}"
        assert event.kind in ("status", "artifact"), f"after the Task: {event.line}"
        assert (event.task_id, event.context_id) == (first.task_id, first.context_id), event.line
        settled, awaiting = _stream_end(event.state, awaiting)
    return items


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """Run checks without leaving records: the e2e coverage check (tests/e2e/coverage.py)
    compares these records with the responses the e2e clients saw, so checks of bodies that
    did not come through those clients (fuzz, in-process samples) must not count."""
    lists: tuple[list[Any], ...] = (CHECKED, SSE_CHECKED, KEPT_ALIVE, RPC_CHECKED, RPC_SSE_CHECKED)
    sizes = [len(records) for records in lists]
    try:
        yield
    finally:
        for records, size in zip(lists, sizes, strict=True):
            del records[size:]
