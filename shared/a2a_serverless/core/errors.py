"""Domain errors raised by core operations; every binding maps them once."""

from __future__ import annotations

from typing import Any


class A2AError(Exception):
    """An A2A protocol error (spec §3.3.2). `reason` is the ErrorInfo reason."""

    reason: str = "INTERNAL_ERROR"
    default_message: str = "Internal error"

    def __init__(self, message: str | None = None, **metadata: Any) -> None:
        self.message = message or self.default_message
        self.metadata = {k: str(v) for k, v in metadata.items() if v is not None}
        super().__init__(self.message)


class TaskNotFoundError(A2AError):
    reason = "TASK_NOT_FOUND"
    default_message = "The specified task ID does not exist or is not accessible"


class TaskNotCancelableError(A2AError):
    reason = "TASK_NOT_CANCELABLE"
    default_message = "The task is not in a cancelable state"


class PushNotificationNotSupportedError(A2AError):
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    default_message = "Push notifications are not supported by this agent"


class UnsupportedOperationError(A2AError):
    reason = "UNSUPPORTED_OPERATION"
    default_message = "This operation is not supported"


class ContentTypeNotSupportedError(A2AError):
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    default_message = "A media type in the request is not supported by this agent"


class InvalidAgentResponseError(A2AError):
    reason = "INVALID_AGENT_RESPONSE"
    default_message = "The agent produced a response that does not conform to the specification"


class ExtendedAgentCardNotConfiguredError(A2AError):
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    default_message = "No extended agent card is configured"


class ExtensionSupportRequiredError(A2AError):
    reason = "EXTENSION_SUPPORT_REQUIRED"
    default_message = "A required extension was not declared by the client"


class VersionNotSupportedError(A2AError):
    reason = "VERSION_NOT_SUPPORTED"
    default_message = "The requested A2A protocol version is not supported"


class InvalidParamsError(A2AError):
    """Validation failure; `violations` lists (field, description) pairs."""

    reason = "INVALID_PARAMS"
    default_message = "Invalid parameters"

    def __init__(
        self,
        message: str | None = None,
        violations: list[tuple[str, str]] | None = None,
        **metadata: Any,
    ) -> None:
        self.violations = violations or []
        if message is None and self.violations:
            message = "; ".join(f"{field}: {why}" for field, why in self.violations)
        super().__init__(message, **metadata)


class InvalidRequestError(A2AError):
    reason = "INVALID_REQUEST"
    default_message = "The request is not valid"


class InternalError(A2AError):
    reason = "INTERNAL_ERROR"
    default_message = "Internal error"


def invalid_field(field: str, why: str) -> InvalidParamsError:
    return InvalidParamsError(violations=[(field, why)])
