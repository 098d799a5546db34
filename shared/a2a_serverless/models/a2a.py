"""A2A 1.0 data model as pydantic models, serialised exactly as proto-JSON.

Accept liberally (unknown fields ignored, both enum spellings), emit strictly:
camelCase names, enum names, empty/default fields omitted, UTC timestamps with `Z`.
"""

from __future__ import annotations

import base64
import binascii
import sys
import threading
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ForwardRef, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "INTERRUPTED_STATES",
    "TERMINAL_STATES",
    "A2AModel",
    "AgentCapabilities",
    "AgentCard",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "Artifact",
    "AuthenticationInfo",
    "ListTaskPushNotificationConfigsResponse",
    "ListTasksRequest",
    "ListTasksResponse",
    "Message",
    "Part",
    "Role",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "SendMessageResponse",
    "StreamResponse",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskPushNotificationConfig",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "Timestamp",
    "agent_message",
    "format_timestamp",
    "parse_task_state",
    "utcnow",
]


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """RFC 3339 UTC with millisecond precision and `Z`, as spec §5.6.1 asks."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _to_utc(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            # e.g. 0001-01-01T00:00:00+14:00 is before datetime.min in UTC.
            raise ValueError("is out of range once converted to UTC") from None
    return value


Timestamp = Annotated[
    datetime,
    AfterValidator(_to_utc),
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
]


# Reentrant: building one model can build another (nested models).
_BUILD_LOCK = threading.RLock()
_building: set[type] = set()  # models whose fields' models are being built (under the lock)


def _models_named_by(model: type[BaseModel]) -> list[type[A2AModel]]:
    """The A2A models a model's fields name (in lists, dicts, unions, Annotated), in order."""
    module = sys.modules.get(model.__module__)
    namespace: dict[str, Any] = vars(module) if module is not None else {}
    found: dict[type[A2AModel], None] = {}

    def walk(annotation: Any) -> None:
        if isinstance(annotation, str | ForwardRef):
            name = annotation if isinstance(annotation, str) else annotation.__forward_arg__
            annotation = namespace.get(name)
        if isinstance(annotation, type) and issubclass(annotation, A2AModel):
            found.setdefault(annotation)
            return
        for argument in get_args(annotation):
            walk(argument)

    for field in model.__pydantic_fields__.values():
        walk(field.annotation)
    return [named for named in found if named is not model]


class A2AModel(BaseModel):
    """Base: camelCase aliases, unknown fields ignored, proto-JSON output."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        use_enum_values=False,
        # Validators are built at first use, so a function builds only the models its requests use
        # (see model_rebuild).
        defer_build=True,
    )

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Any = None,
    ) -> bool | None:
        """Build a deferred model at its first use, one build at a time (pydantic's rebuild is not
        thread-safe before 2.14), building the models its fields name first so their schemas are
        reused instead of generated again."""
        with _BUILD_LOCK:
            if not cls.__pydantic_complete__ and cls not in _building:
                _building.add(cls)
                try:
                    for model in _models_named_by(cls):
                        if not model.__pydantic_complete__:
                            # One that cannot be built alone is left to this build.
                            model.model_rebuild(raise_errors=False)
                finally:
                    _building.discard(cls)
            return super().model_rebuild(
                force=force,
                raise_errors=raise_errors,
                # One frame more between the caller and pydantic's namespace lookup.
                _parent_namespace_depth=_parent_namespace_depth + 1
                if _parent_namespace_depth > 0
                else 0,
                _types_namespace=_types_namespace,
            )

    def wire(self) -> dict[str, Any]:
        """The proto-JSON dict of this object (defaults and empties omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)


class TaskState(StrEnum):
    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @property
    def short(self) -> str:
        """The 0.3 spelling (`input-required`)."""
        return self.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


TERMINAL_STATES = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
INTERRUPTED_STATES = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


def parse_task_state(value: Any) -> TaskState:
    """Both spellings: `TASK_STATE_INPUT_REQUIRED`, `input-required`, `INPUT_REQUIRED`."""
    if isinstance(value, TaskState):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        members = list(TaskState)  # declared in proto number order
        if 0 <= value < len(members):
            return members[value]
        raise ValueError(f"unknown task state number {value}")
    if not isinstance(value, str):
        raise ValueError("task state must be a string")
    text = value.strip().upper().replace("-", "_")
    if text == "CANCELLED":
        text = "CANCELED"
    if not text.startswith("TASK_STATE_"):
        text = "TASK_STATE_" + text
    try:
        return TaskState(text)
    except ValueError:
        names = ", ".join(s.value for s in TaskState if s is not TaskState.UNSPECIFIED)
        raise ValueError(f"unknown task state {value!r}; expected one of {names}") from None


class Role(StrEnum):
    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


def _parse_role(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip().upper()
        if not text.startswith("ROLE_"):
            text = "ROLE_" + text
        return text
    return value


def _parse_state_field(value: Any) -> Any:
    return parse_task_state(value)


StateField = Annotated[TaskState, BeforeValidator(_parse_state_field)]
RoleField = Annotated[Role, BeforeValidator(_parse_role)]


class Part(A2AModel):
    """One piece of content: exactly one of `text`, `raw` (base64), `url`, `data`."""

    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any = None
    metadata: dict[str, Any] | None = None
    filename: str | None = None
    media_type: str | None = None

    @field_validator("raw")
    @classmethod
    def _raw_is_base64(cls, value: str | None) -> str | None:
        if value is None:
            return value
        padded = value + "=" * (-len(value) % 4)
        try:
            # proto-JSON accepts standard and URL-safe base64.
            base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("raw must be base64-encoded bytes") from None
        return value

    @model_serializer(mode="wrap")
    def _keep_null_data(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A `data: null` part keeps its `data` (omitted, it would be a part with no content)."""
        out: dict[str, Any] = handler(self)
        if self.data is None and "data" in self.model_fields_set:
            out["data"] = None
        return out

    @model_validator(mode="after")
    def _exactly_one_content(self) -> Part:
        # `data` may be JSON null (the proto's Value allows it): set counts, not its value.
        present = [
            name
            for name in ("text", "raw", "url", "data")
            if getattr(self, name) is not None or (name == "data" and name in self.model_fields_set)
        ]
        if len(present) != 1:
            raise ValueError(
                "a part must set exactly one of text, raw, url, data"
                + (f" (got {', '.join(present)})" if present else " (got none)")
            )
        return self


class Message(A2AModel):
    message_id: str = Field(min_length=1)
    context_id: str | None = None
    task_id: str | None = None
    role: RoleField
    parts: list[Part] = Field(min_length=1)
    metadata: dict[str, Any] | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None

    @field_validator("role")
    @classmethod
    def _role_specified(cls, value: Role) -> Role:
        if value is Role.UNSPECIFIED:
            raise ValueError("role must be ROLE_USER or ROLE_AGENT")
        return value


def agent_message(content: str | list[Part], task_id: str | None, context_id: str) -> Message:
    """A message from the agent in a task (a text, or parts), with a fresh messageId (no
    task: a direct reply)."""
    parts = [Part(text=content)] if isinstance(content, str) else content
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.AGENT,
        parts=parts,
        task_id=task_id,
        context_id=context_id,
    )


class TaskStatus(A2AModel):
    state: StateField
    message: Message | None = None
    timestamp: Timestamp | None = None


class Artifact(A2AModel):
    artifact_id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    parts: list[Part] = Field(min_length=1)
    metadata: dict[str, Any] | None = None
    extensions: list[str] | None = None


class Task(A2AModel):
    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: dict[str, Any] | None = None


class TaskStatusUpdateEvent(A2AModel):
    task_id: str
    context_id: str
    status: TaskStatus
    metadata: dict[str, Any] | None = None


class TaskArtifactUpdateEvent(A2AModel):
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None


class _OneOf(A2AModel):
    """A proto oneof wrapper: exactly one field set."""

    @model_validator(mode="after")
    def _exactly_one(self) -> _OneOf:
        present = [n for n in type(self).model_fields if getattr(self, n) is not None]
        if len(present) != 1:
            raise ValueError(f"{type(self).__name__} must set exactly one payload")
        return self


class StreamResponse(_OneOf):
    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None


class SendMessageResponse(_OneOf):
    task: Task | None = None
    message: Message | None = None


class AuthenticationInfo(A2AModel):
    scheme: str = Field(min_length=1)
    credentials: str | None = None


class TaskPushNotificationConfig(A2AModel):
    tenant: str | None = None
    id: str | None = None
    task_id: str | None = None
    url: str = Field(min_length=1)
    token: str | None = None
    authentication: AuthenticationInfo | None = None
    # The A2A version whose payloads the webhook expects: set by the binding that created the
    # config (a 0.3 receiver expects the Task object), stored with it, never on the wire.
    _payload_version: str = PrivateAttr(default="1.0")
    # The task's last event when the config was made: it gets the events after it only
    # (a stream batch read after the config was made can still hold older ones). Stored.
    _after_seq: int = PrivateAttr(default=0)

    @property
    def payload_version(self) -> str:
        return self._payload_version

    @property
    def after_seq(self) -> int:
        return self._after_seq

    def for_payload_version(self, version: str) -> TaskPushNotificationConfig:
        return self._marked(_payload_version=version)

    def for_events_after(self, seq: int) -> TaskPushNotificationConfig:
        return self._marked(_after_seq=seq)

    def _marked(self, **stored: Any) -> TaskPushNotificationConfig:
        """A copy with stored-only attributes (never on the wire) set."""
        marked = self.model_copy()
        for name, value in stored.items():
            setattr(marked, name, value)
        return marked


class ListTaskPushNotificationConfigsResponse(A2AModel):
    configs: list[TaskPushNotificationConfig] | None = None
    next_page_token: str | None = None


class SendMessageConfiguration(A2AModel):
    accepted_output_modes: list[str] | None = None
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: int | None = Field(None, ge=0)
    return_immediately: bool = False


class SendMessageRequest(A2AModel):
    tenant: str | None = None
    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: dict[str, Any] | None = None


class ListTasksRequest(A2AModel):
    """ListTasks parameters (spec §3.1.4), whichever binding carried them; ranges are checked
    by the operation."""

    context_id: str | None = None
    status: TaskState | None = None
    page_size: int | None = None
    page_token: str | None = None
    history_length: int | None = None
    status_timestamp_after: Timestamp | None = None
    include_artifacts: bool = False

    @field_validator("status", mode="before")
    @classmethod
    def _state(cls, value: Any) -> Any:
        return None if value in (None, "") else parse_task_state(value)


class ListTasksResponse(A2AModel):
    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int


class AgentInterface(A2AModel):
    url: str
    protocol_binding: str
    tenant: str | None = None
    protocol_version: str


class AgentProvider(A2AModel):
    url: str
    organization: str


class AgentExtension(A2AModel):
    uri: str
    description: str | None = None
    required: bool = False
    params: dict[str, Any] | None = None


class AgentCapabilities(A2AModel):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] | None = None
    extended_agent_card: bool | None = None


class AgentSkill(A2AModel):
    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None


class AgentCard(A2AModel):
    name: str
    description: str
    supported_interfaces: list[AgentInterface]
    provider: AgentProvider | None = None
    version: str
    documentation_url: str | None = None
    capabilities: AgentCapabilities
    security_schemes: dict[str, dict[str, Any]] | None = None
    security_requirements: list[dict[str, Any]] | None = None
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    icon_url: str | None = None
