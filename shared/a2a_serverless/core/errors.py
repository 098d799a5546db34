"""Domain errors raised by core operations, and the ONE table that says how each is answered.

Spec §5.4 fixes, per A2A error, its JSON-RPC code, its HTTP status and google.rpc status name,
and its ErrorInfo reason; every binding (HTTP+JSON, JSON-RPC 1.0 and 0.3) renders from
`ERRORS`, so the bindings cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class A2AError(Exception):
    """An A2A protocol error (spec §3.3.2); how it is answered is its row in `ERRORS`."""

    def __init__(self, message: str | None = None, **metadata: Any) -> None:
        self.message = message or error_row(type(self)).default_message
        self.metadata = {k: str(v) for k, v in metadata.items() if v is not None}
        super().__init__(self.message)

    @property
    def reason(self) -> str:
        """The ErrorInfo reason."""
        return error_row(type(self)).reason


class TaskNotFoundError(A2AError):
    """No such task, or not the caller's (both answer alike: ids do not leak)."""


class TaskNotCancelableError(A2AError):
    """Cancel on a task that has already settled."""


class PushNotificationNotSupportedError(A2AError):
    """A push operation while push notifications are turned off."""


class UnsupportedOperationError(A2AError):
    """An operation this agent does not offer, or one the task's state forbids."""


class ContentTypeNotSupportedError(A2AError):
    """A part or an accepted output mode the flow cannot handle."""


class InvalidAgentResponseError(A2AError):
    """The flow produced something that is not valid A2A."""


class ExtendedAgentCardNotConfiguredError(A2AError):
    """GetExtendedAgentCard without an extended card."""


class ExtensionSupportRequiredError(A2AError):
    """A required extension the client did not declare."""


class VersionNotSupportedError(A2AError):
    """An A2A-Version the interface does not speak."""


class InvalidParamsError(A2AError):
    """Validation failure; `violations` lists (field, description) pairs."""

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
    """A request that is not a valid request at all (empty body, not JSON, wrong shape)."""


class AuthenticationRequiredError(A2AError):
    """No valid credential (HTTP 401; the binding adds WWW-Authenticate naming the scheme)."""


class PermissionDeniedError(A2AError):
    """An authenticated caller that may not do this (HTTP 403)."""


class TooManyConnectionsError(A2AError):
    """A long-lived connection (stream, subscription, blocking send) past the caller's bound
    (HTTP 429); `retry_after` (seconds) is the binding's Retry-After."""

    def __init__(self, message: str | None = None, retry_after: int = 1, **metadata: Any) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(message, **metadata)


class InternalError(A2AError):
    """Anything else: the client cannot fix it."""


@dataclass(frozen=True)
class ErrorRow:
    """How one A2A error is answered on every binding (spec §5.4)."""

    jsonrpc_code: int
    http_status: int
    grpc_status: str  # google.rpc.Code name: HTTP+JSON's `error.status`
    reason: str  # google.rpc.ErrorInfo reason
    default_message: str


_PRECONDITION = "FAILED_PRECONDITION"
_ARGUMENT = "INVALID_ARGUMENT"

ERRORS: dict[type[A2AError], ErrorRow] = {
    TaskNotFoundError: ErrorRow(
        -32001,
        404,
        "NOT_FOUND",
        "TASK_NOT_FOUND",
        "The specified task ID does not exist or is not accessible",
    ),
    TaskNotCancelableError: ErrorRow(
        -32002, 400, _PRECONDITION, "TASK_NOT_CANCELABLE", "The task is not in a cancelable state"
    ),
    PushNotificationNotSupportedError: ErrorRow(
        -32003,
        400,
        _PRECONDITION,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        "Push notifications are not supported by this agent",
    ),
    UnsupportedOperationError: ErrorRow(
        -32004, 400, _PRECONDITION, "UNSUPPORTED_OPERATION", "This operation is not supported"
    ),
    ContentTypeNotSupportedError: ErrorRow(
        -32005,
        400,
        _ARGUMENT,
        "CONTENT_TYPE_NOT_SUPPORTED",
        "A media type in the request is not supported by this agent",
    ),
    InvalidAgentResponseError: ErrorRow(
        -32006,
        500,
        "INTERNAL",
        "INVALID_AGENT_RESPONSE",
        "The agent produced a response that does not conform to the specification",
    ),
    ExtendedAgentCardNotConfiguredError: ErrorRow(
        -32007,
        400,
        _PRECONDITION,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        "No extended agent card is configured",
    ),
    ExtensionSupportRequiredError: ErrorRow(
        -32008,
        400,
        _PRECONDITION,
        "EXTENSION_SUPPORT_REQUIRED",
        "A required extension was not declared by the client",
    ),
    VersionNotSupportedError: ErrorRow(
        -32009,
        400,
        _PRECONDITION,
        "VERSION_NOT_SUPPORTED",
        "The requested A2A protocol version is not supported",
    ),
    InvalidParamsError: ErrorRow(-32602, 400, _ARGUMENT, "INVALID_PARAMS", "Invalid parameters"),
    InvalidRequestError: ErrorRow(
        -32600, 400, _ARGUMENT, "INVALID_REQUEST", "The request is not valid"
    ),
    # Not A2A-specific errors (spec §3.3.2 leaves their JSON-RPC code to the implementation):
    # codes outside JSON-RPC's reserved range, named after their HTTP status.
    AuthenticationRequiredError: ErrorRow(
        -31401, 401, "UNAUTHENTICATED", "UNAUTHENTICATED", "A valid credential is required"
    ),
    PermissionDeniedError: ErrorRow(
        -31403, 403, "PERMISSION_DENIED", "PERMISSION_DENIED", "This caller may not do this"
    ),
    # The spec files rate limits under system errors (its example: -32603); but -32603 says
    # the server failed, and this the client can fix by waiting: a code of its own, as above.
    TooManyConnectionsError: ErrorRow(
        -31429,
        429,
        "RESOURCE_EXHAUSTED",
        "RESOURCE_EXHAUSTED",
        "Too many open connections for this caller",
    ),
    InternalError: ErrorRow(-32603, 500, "INTERNAL", "INTERNAL_ERROR", "Internal error"),
}


def error_row(error: type[A2AError]) -> ErrorRow:
    """The row of an error class; a subclass without its own row answers as its parent, and
    the bare A2AError as InternalError."""
    for cls in error.__mro__:
        if cls in ERRORS:
            return ERRORS[cls]
    return ERRORS[InternalError]


def invalid_field(field: str, why: str) -> InvalidParamsError:
    return InvalidParamsError(violations=[(field, why)])


def streaming_unsupported(operation: str) -> UnsupportedOperationError:
    """The refusal of a stream method by an agent that does not stream."""
    return UnsupportedOperationError(
        f"{operation} is not supported: this agent does not stream "
        "(capabilities.streaming is false)"
    )
