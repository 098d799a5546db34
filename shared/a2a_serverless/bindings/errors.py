"""Error rendering shared by the bindings: google.rpc details, and request validation failures
as InvalidParamsError. Which code/status an A2A error gets is core/errors.py's table."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from a2a_serverless.core import errors

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


def validated(model: type[M], payload: Any) -> M:
    """`payload` as `model`, or InvalidParamsError naming the offending fields."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise invalid_params_from(exc) from None
