"""Error rendering shared by the bindings: google.rpc details, and request validation failures
as InvalidParamsError. Which code/status an A2A error gets is core/errors.py's table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from a2a_serverless.core import errors
from a2a_serverless.models import SendMessageRequest

ERROR_DOMAIN = "a2a-protocol.org"
M = TypeVar("M", bound=BaseModel)


def error_details(
    reason: str | None,
    metadata: dict[str, str] | None = None,
    violations: list[tuple[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The `google.rpc` details of an A2A error: ErrorInfo (and BadRequest), as every binding
    carries them (HTTP+JSON in `error.details`, JSON-RPC in `error.data`)."""
    details: list[dict[str, Any]] = []
    if reason:
        info: dict[str, Any] = {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": ERROR_DOMAIN,
        }
        if metadata:
            info["metadata"] = metadata
        details.append(info)
    if violations:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [
                    {"field": field, "description": description}
                    for field, description in violations
                ],
            }
        )
    return details


def a2a_error_details(exc: errors.A2AError) -> list[dict[str, Any]]:
    """The details of an A2A error: its reason and metadata, its field violations if any."""
    violations = exc.violations if isinstance(exc, errors.InvalidParamsError) else None
    return error_details(exc.reason, exc.metadata, violations)


def retry_headers(exc: Exception) -> dict[str, str]:
    """Retry-After (seconds) for a refusal the client may retry later (HTTP 429)."""
    if isinstance(exc, errors.TooManyConnectionsError):
        return {"Retry-After": str(exc.retry_after)}
    return {}


def invalid_params_from(exc: ValidationError, prefix: str = "") -> errors.InvalidParamsError:
    """Pydantic errors as (field path, reason) pairs, e.g. `message.parts[0]`."""
    violations = []
    for error in exc.errors():
        path = prefix
        for part in error["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif part not in ("function-after[_exactly_one_content()]",):
                path += ("." if path else "") + str(part)
        description = "is required" if error["type"] == "missing" else error["msg"]
        description = description.removeprefix("Value error, ")
        violations.append((path or "(body)", description))
    return errors.InvalidParamsError(violations=violations)


def _send_request_violations(payload: Any) -> list[tuple[str, str]]:
    # The SEND path is imported by the functions that send only (cold start).
    from a2a_serverless.core.send import request_violations

    return request_violations(payload)


# Core's field checks by request model, run on the raw payload when the schema refuses it,
# so that one refusal names every violated field.
SEMANTIC_CHECKS: dict[type[BaseModel], Callable[[Any], list[tuple[str, str]]]] = {
    SendMessageRequest: _send_request_violations,
}


def merged(*groups: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Field violations of several checks, in order; a field already named (or one inside
    it: `message` covers `message.role`) is named once, by the first check that found it."""
    out: list[tuple[str, str]] = []
    for group in groups:
        for field, why in group:
            if not any(
                field == seen or field.startswith((f"{seen}.", f"{seen}[")) for seen, _ in out
            ):
                out.append((field, why))
    return out


def validated(model: type[M], payload: Any, known: Sequence[tuple[str, str]] = ()) -> M:
    """`payload` as `model`, or InvalidParamsError naming every offending field: the
    violations a translation already found in it (`known`: a 0.3 request's), the schema's,
    and the model's SEMANTIC_CHECKS when the schema refuses it."""
    schema: list[tuple[str, str]] = []
    try:
        parsed = model.model_validate(payload)
        if not known:
            return parsed  # core makes its own checks on what parses
    except ValidationError as exc:
        schema = invalid_params_from(exc).violations
    check = SEMANTIC_CHECKS.get(model)
    semantic = check(payload) if check is not None else []
    raise errors.InvalidParamsError(violations=merged(known, schema, semantic))
