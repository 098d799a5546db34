"""A2A 0.3 as a codec: 0.3 JSON <-> the 1.0 models, used by the JSON-RPC binding (0.3 methods)
and by the webhook sender (0.3 receivers).

0.3 differs in spelling, not meaning: `kind` discriminators (`task`, `message`, `text`,
`file`, `data`, `status-update`, `artifact-update`), lower-case kebab states, `user`/`agent`
roles, `file` parts with `bytes`/`uri`, `blocking` instead of `returnImmediately`, and a
`final` flag on status updates. Every task is the same task in both versions.
"""

from __future__ import annotations

import re
from typing import Any

from a2a_serverless.models.a2a import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    A2AModel,
    AgentCard,
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskStatus,
    format_timestamp,
)

# A 0.3 status update is `final` when the stream it belongs to ends.
_FINAL_STATES = TERMINAL_STATES | INTERRUPTED_STATES


class InvalidParamsError(ValueError):
    """0.3 params that cannot be translated; `violations` lists (field, description) pairs
    (the JSON-RPC binding answers them as an A2A InvalidParamsError). `partial` is the rest of
    the request, translated (the untranslatable values left out), so that the 1.0 checks can
    name their violations in the same answer."""

    def __init__(
        self, violations: list[tuple[str, str]], partial: dict[str, Any] | None = None
    ) -> None:
        self.violations = violations
        self.partial = partial
        super().__init__("; ".join(f"{field}: {why}" for field, why in violations))


Violations = list[tuple[str, str]]

# -- 0.3 -> 1.0 (requests) --------------------------------------------------------------------
# The translators collect every violation into `found`, so one answer names them all.

# Stands in for a part that cannot be translated: valid, so it adds no violation of its own.
_PLACEHOLDER_PART: dict[str, Any] = {"text": ""}


def _part_from_v03(part: Any, path: str, found: Violations) -> dict[str, Any]:
    if not isinstance(part, dict):
        found.append((path, "must be an object"))
        return dict(_PLACEHOLDER_PART)
    kind = part.get("kind") or next((k for k in ("text", "file", "data") if k in part), None)
    converted: dict[str, Any] = {}
    if part.get("metadata") is not None:
        converted["metadata"] = part["metadata"]
    if kind == "text":
        if not isinstance(part.get("text"), str):
            found.append((f"{path}.text", "is required and must be a string"))
            return dict(_PLACEHOLDER_PART)
        converted["text"] = part["text"]
    elif kind == "data":
        if "data" not in part:
            found.append((f"{path}.data", "is required"))
            return dict(_PLACEHOLDER_PART)
        converted["data"] = part["data"]
    elif kind == "file":
        file = part.get("file")
        if not isinstance(file, dict):
            found.append((f"{path}.file", "must be an object"))
            return dict(_PLACEHOLDER_PART)
        if "bytes" in file:
            converted["raw"] = file["bytes"]
        elif "uri" in file:
            converted["url"] = file["uri"]
        else:
            found.append((f"{path}.file", "must carry bytes or uri"))
            return dict(_PLACEHOLDER_PART)
        if file.get("mimeType"):
            converted["mediaType"] = file["mimeType"]
        if file.get("name"):
            converted["filename"] = file["name"]
    else:
        found.append((f"{path}.kind", "must be one of text, file, data"))
        return dict(_PLACEHOLDER_PART)
    return converted


def _message_from_v03(message: Any, path: str, found: Violations) -> dict[str, Any]:
    if not isinstance(message, dict):
        found.append((path, "is required and must be an object"))
        return {}
    keys = ("messageId", "contextId", "taskId", "metadata", "extensions", "referenceTaskIds")
    converted = {key: message[key] for key in keys if message.get(key) is not None}
    role = message.get("role")
    if role is not None:
        if isinstance(role, str):
            converted["role"] = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}.get(role, role)
        else:
            # A list or object would not even be a dict key (a TypeError, then a 500).
            found.append((f"{path}.role", "must be 'user' or 'agent'"))
    parts = message.get("parts")
    if isinstance(parts, list):
        converted["parts"] = [
            _part_from_v03(part, f"{path}.parts[{i}]", found) for i, part in enumerate(parts)
        ]
    elif parts is not None:
        found.append((f"{path}.parts", "must be an array"))
    return converted


def message_from_v03(message: Any, path: str = "message") -> dict[str, Any]:
    """A 0.3 Message as 1.0 proto-JSON (still to be validated by the 1.0 model)."""
    found: Violations = []
    converted = _message_from_v03(message, path, found)
    if found:
        raise InvalidParamsError(found, partial=converted)
    return converted


def send_params_from_v03(params: dict[str, Any]) -> dict[str, Any]:
    """0.3 MessageSendParams as a 1.0 SendMessageRequest body."""
    found: Violations = []
    request: dict[str, Any] = {
        "message": _message_from_v03(params.get("message"), "message", found)
    }
    config = params.get("configuration")
    if isinstance(config, dict):
        converted: dict[str, Any] = {}
        if config.get("acceptedOutputModes") is not None:
            converted["acceptedOutputModes"] = config["acceptedOutputModes"]
        if config.get("historyLength") is not None:
            converted["historyLength"] = config["historyLength"]
        if config.get("pushNotificationConfig") is not None:
            push = _push_body_from_v03(
                config["pushNotificationConfig"], "configuration.pushNotificationConfig", found
            )
            if push is not None:
                converted["taskPushNotificationConfig"] = push
        # 0.3 servers blocked unless told `blocking: false`.
        converted["returnImmediately"] = config.get("blocking") is False
        request["configuration"] = converted
    if params.get("metadata") is not None:
        request["metadata"] = params["metadata"]
    if found:
        raise InvalidParamsError(found, partial=request)
    return request


def _push_body_from_v03(config: Any, path: str, found: Violations) -> dict[str, Any] | None:
    if not isinstance(config, dict):
        found.append((path, "is required and must be an object"))
        return None
    converted = {k: config[k] for k in ("id", "url", "token") if config.get(k) is not None}
    auth = config.get("authentication")
    if isinstance(auth, dict):
        schemes = auth.get("schemes") or []
        if not isinstance(schemes, list) or not schemes:
            found.append((f"{path}.authentication.schemes", "must be a non-empty array of strings"))
            return None
        converted["authentication"] = {"scheme": schemes[0]}
        if auth.get("credentials") is not None:
            converted["authentication"]["credentials"] = auth["credentials"]
    return converted


def push_config_from_v03(params: dict[str, Any]) -> dict[str, Any]:
    """0.3 TaskPushNotificationConfig params as a 1.0 TaskPushNotificationConfig body."""
    found: Violations = []
    converted = _push_body_from_v03(
        params.get("pushNotificationConfig"), "pushNotificationConfig", found
    )
    if converted is None:
        raise InvalidParamsError(found)
    converted["taskId"] = params.get("taskId")
    return converted


def config_ids(params: dict[str, Any]) -> tuple[str, str | None]:
    """(task id, config id) of 0.3 get/list/delete params (`id`, `pushNotificationConfigId`)."""
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError(violations=[("id", "is required (the task id)")])
    config_id = params.get("pushNotificationConfigId")
    if config_id is not None and (not isinstance(config_id, str) or not config_id):
        raise InvalidParamsError(violations=[("pushNotificationConfigId", "must be a string")])
    return task_id, config_id


def push_config_to_v03(config: TaskPushNotificationConfig) -> dict[str, Any]:
    body: dict[str, Any] = {"url": config.url}
    if config.id:
        body["id"] = config.id
    if config.token:
        body["token"] = config.token
    if config.authentication is not None:
        auth: dict[str, Any] = {"schemes": [config.authentication.scheme]}
        if config.authentication.credentials:
            auth["credentials"] = config.authentication.credentials
        body["authentication"] = auth
    return {"taskId": config.task_id, "pushNotificationConfig": body}


# -- 1.0 -> 0.3 (responses) -------------------------------------------------------------------


def part_to_v03(part: Part) -> dict[str, Any]:
    converted: dict[str, Any]
    if part.text is not None:
        converted = {"kind": "text", "text": part.text}
    elif part.raw is not None or part.url is not None:
        file: dict[str, Any] = {"bytes": part.raw} if part.raw is not None else {"uri": part.url}
        if part.media_type:
            file["mimeType"] = part.media_type
        if part.filename:
            file["name"] = part.filename
        converted = {"kind": "file", "file": file}
    else:
        # 0.3 data parts carry an object; other JSON values are wrapped.
        data = part.data if isinstance(part.data, dict) else {"value": part.data}
        converted = {"kind": "data", "data": data}
    if part.metadata:
        converted["metadata"] = part.metadata
    return converted


def _present(model: A2AModel, *fields: str) -> dict[str, Any]:
    """The named fields of `model` that are set and non-empty, under their wire names (0.3
    omits empty ones too)."""
    values = ((type(model).model_fields[f].alias or f, getattr(model, f)) for f in fields)
    return {key: value for key, value in values if value}


def message_to_v03(message: Message) -> dict[str, Any]:
    return {
        "kind": "message",
        "messageId": message.message_id,
        "role": "user" if message.role is Role.USER else "agent",
        "parts": [part_to_v03(p) for p in message.parts],
        **_present(
            message, "context_id", "task_id", "metadata", "extensions", "reference_task_ids"
        ),
    }


def status_to_v03(status: TaskStatus) -> dict[str, Any]:
    state = status.state.short if status.state.name != "UNSPECIFIED" else "unknown"
    converted: dict[str, Any] = {"state": state}
    if status.message is not None:
        converted["message"] = message_to_v03(status.message)
    if status.timestamp is not None:
        converted["timestamp"] = format_timestamp(status.timestamp)
    return converted


# 1.0 method -> its 0.3 JSON-RPC method (0.3 spec §7; ListTasks has none over JSON-RPC).
METHODS_V03 = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
    "CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
    "GetTaskPushNotificationConfig": "tasks/pushNotificationConfig/get",
    "ListTaskPushNotificationConfigs": "tasks/pushNotificationConfig/list",
    "DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
    "GetExtendedAgentCard": "agent/getAuthenticatedExtendedCard",
}
# 1.0 part fields that live under `file` in 0.3, as they appear in a field path.
_FILE_FIELDS = {"raw": "bytes", "url": "uri", "mediaType": "mimeType", "filename": "name"}

_STATE_NAME = re.compile(r"\bTASK_STATE_([A-Z_]+)\b")
_ROLE_NAME = re.compile(r"(['\"]?)\bROLE_(USER|AGENT)\b(['\"]?)")
_METHOD_NAME = re.compile(rf"\b({'|'.join(METHODS_V03)})\b")
_FILE_FIELD = re.compile(rf"(\bparts\[\d+\])\.({'|'.join(_FILE_FIELDS)})\b")
_PUSH_FIELD = re.compile(r"\.taskPushNotificationConfig\b")
_SCHEME_FIELD = re.compile(r"\bauthentication\.scheme\b")  # 0.3: the first of `schemes`


def text_to_v03(text: str) -> str:
    """A human-readable text (an error message, a field path or description, an error's
    metadata value) as 0.3 spells it: states, roles, method names, and the field paths whose
    names differ (`parts[0].mediaType` is `parts[0].file.mimeType`)."""

    def state(match: re.Match[str]) -> str:
        name = match.group(1)
        return "unknown" if name == "UNSPECIFIED" else name.lower().replace("_", "-")

    def role(match: re.Match[str]) -> str:
        # Quoted as the 0.3 enum value it is, unless the text quotes it already.
        opened, name, closed = match.groups()
        quote = opened or closed or "'"
        return f"{opened or quote}{name.lower()}{closed or quote}"

    text = _STATE_NAME.sub(state, text)
    text = _ROLE_NAME.sub(role, text)
    text = _METHOD_NAME.sub(lambda m: METHODS_V03[m.group(1)], text)
    text = _FILE_FIELD.sub(lambda m: f"{m.group(1)}.file.{_FILE_FIELDS[m.group(2)]}", text)
    text = _SCHEME_FIELD.sub("authentication.schemes[0]", text)
    return _PUSH_FIELD.sub(".pushNotificationConfig", text)


def error_to_v03(error: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC error object (code, message, google.rpc details in `data`) as 0.3 spells
    it: `text_to_v03` on the message, ErrorInfo metadata values and every field violation."""
    out = dict(error)
    out["message"] = text_to_v03(str(error.get("message", "")))
    details = error.get("data")
    if isinstance(details, list):
        out["data"] = [_detail_to_v03(d) if isinstance(d, dict) else d for d in details]
    return out


def _detail_to_v03(detail: dict[str, Any]) -> dict[str, Any]:
    out = dict(detail)
    metadata = detail.get("metadata")
    if isinstance(metadata, dict):
        out["metadata"] = {
            k: text_to_v03(v) if isinstance(v, str) else v for k, v in metadata.items()
        }
    violations = detail.get("fieldViolations")
    if isinstance(violations, list):
        out["fieldViolations"] = [
            {k: text_to_v03(v) if isinstance(v, str) else v for k, v in violation.items()}
            if isinstance(violation, dict)
            else violation
            for violation in violations
        ]
    return out


def artifact_to_v03(artifact: Artifact) -> dict[str, Any]:
    return {
        "artifactId": artifact.artifact_id,
        "parts": [part_to_v03(p) for p in artifact.parts],
        **_present(artifact, "name", "description", "metadata", "extensions"),
    }


def task_to_v03(task: Task) -> dict[str, Any]:
    converted: dict[str, Any] = {
        "kind": "task",
        "id": task.id,
        "contextId": task.context_id,
        "status": status_to_v03(task.status),
    }
    if task.artifacts:
        converted["artifacts"] = [artifact_to_v03(a) for a in task.artifacts]
    if task.history:
        converted["history"] = [message_to_v03(m) for m in task.history]
    if task.metadata:
        converted["metadata"] = task.metadata
    return converted


def event_to_v03(event: StreamResponse) -> dict[str, Any]:
    """One stream event in 0.3 shape (`final` marks the event that ends the stream)."""
    if event.task is not None:
        return task_to_v03(event.task)
    if event.message is not None:
        return message_to_v03(event.message)
    if event.status_update is not None:
        update = event.status_update
        converted = {
            "kind": "status-update",
            "taskId": update.task_id,
            "contextId": update.context_id,
            "status": status_to_v03(update.status),
            "final": update.status.state in _FINAL_STATES,
        }
        if update.metadata:
            converted["metadata"] = update.metadata
        return converted
    chunk = event.artifact_update
    assert chunk is not None
    converted = {
        "kind": "artifact-update",
        "taskId": chunk.task_id,
        "contextId": chunk.context_id,
        "artifact": artifact_to_v03(chunk.artifact),
    }
    if chunk.append:
        converted["append"] = True
    if chunk.last_chunk:
        converted["lastChunk"] = True
    if chunk.metadata:
        converted["metadata"] = chunk.metadata
    return converted


# 1.0 SecurityScheme oneof member -> 0.3 (OpenAPI-style) `type` and the fields it keeps.
_SCHEME_TYPES = {
    "apiKeySecurityScheme": ("apiKey", {"location": "in", "name": "name"}),
    "httpAuthSecurityScheme": ("http", {"scheme": "scheme", "bearerFormat": "bearerFormat"}),
    "openIdConnectSecurityScheme": ("openIdConnect", {"openIdConnectUrl": "openIdConnectUrl"}),
    "mtlsSecurityScheme": ("mutualTLS", {}),
}


def _scheme_to_v03(scheme: dict[str, Any]) -> dict[str, Any] | None:
    for member, body in scheme.items():
        if member in _SCHEME_TYPES and isinstance(body, dict):
            kind, fields = _SCHEME_TYPES[member]
            out: dict[str, Any] = {"type": kind}
            out.update({new: body[old] for old, new in fields.items() if body.get(old)})
            if body.get("description"):
                out["description"] = body["description"]
            return out
    return None


def card_to_v03(card: AgentCard) -> dict[str, Any]:
    """An Agent Card as 0.3 spells it (the result of `agent/getAuthenticatedExtendedCard`):
    one `url` + `preferredTransport` (the first JSON-RPC interface), OpenAPI-style schemes."""
    body = card.wire()
    interface = next(
        (i for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"),
        card.supported_interfaces[0],
    )
    capabilities = dict(body.get("capabilities") or {})
    supports_extended = bool(capabilities.pop("extendedAgentCard", False))
    out: dict[str, Any] = {
        "name": card.name,
        "description": card.description,
        "url": interface.url,
        "preferredTransport": interface.protocol_binding,
        "protocolVersion": "0.3.0",
        "version": card.version,
        "capabilities": capabilities,
        "defaultInputModes": body["defaultInputModes"],
        "defaultOutputModes": body["defaultOutputModes"],
        "skills": body["skills"],
        "supportsAuthenticatedExtendedCard": supports_extended,
    }
    for key in ("provider", "documentationUrl", "iconUrl"):
        if body.get(key):
            out[key] = body[key]
    schemes = {
        name: converted
        for name, scheme in (card.security_schemes or {}).items()
        if (converted := _scheme_to_v03(scheme)) is not None
    }
    if schemes:
        out["securitySchemes"] = schemes
        out["security"] = [
            {
                name: list((scopes or {}).get("list") or [])
                for name, scopes in req["schemes"].items()
            }
            for req in card.security_requirements or []
            if isinstance(req.get("schemes"), dict)
        ]
    return out
