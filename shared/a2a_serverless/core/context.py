"""Who is asking, and what the request activated: the first argument of every send."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from a2a_serverless.models import Caller


@dataclass(frozen=True)
class RequestContext:
    """The authenticated caller (its `owner` scopes the tasks) and the extensions the request
    activated (`ModePolicy.activate`). A turn's flow steps see both."""

    caller: Caller
    extensions: tuple[str, ...] = ()
    # The stack's public base URL the request came in at ("" when unknown).
    base_url: str = ""

    @property
    def owner(self) -> str:
        return self.caller.owner

    @classmethod
    def of_owner(cls, owner: str, extensions: Sequence[str] = ()) -> RequestContext:
        """An anonymous caller of `owner` (tools and tests that name an owner only)."""
        return cls(Caller.of_owner(owner), tuple(extensions))
