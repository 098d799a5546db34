"""What every authenticator answers: who the credential names, or why it names no one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a_serverless.models import Caller

if TYPE_CHECKING:
    pass


class Unauthenticated(Exception):
    """The request carries no valid credential (HTTP 401). `reason` is for logs only."""

    def __init__(self, reason: str, key_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key_id = key_id


@dataclass(frozen=True)
class Authenticated:
    """Who the credential names, (ApiKey mode) the usage plan key that meters it, and the
    epoch second from which the authenticator refuses the credential (None: it never
    expires by itself)."""

    caller: Caller
    usage_key: str | None = None
    expires_at: int | None = None


def header_value(headers: Mapping[str, Any] | None, name: str) -> str | None:
    """A request header by case-insensitive name; a value may be a list (several headers of
    that name). Different values are ambiguous (which one would a proxy or API Gateway's
    cache key have used?): refused."""
    found: set[str] = set()
    for key, value in (headers or {}).items():
        if not isinstance(key, str) or key.lower() != name.lower():
            continue
        for one in value if isinstance(value, list | tuple) else [value]:
            if isinstance(one, str):
                found.add(one)
    if len(found) > 1:
        raise Unauthenticated(f"several {name} headers")
    return found.pop() if found else None
