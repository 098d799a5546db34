"""Who is calling: the principal that owns tasks, and what its credential says about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# How the caller was identified: an API key, an OIDC token, an AWS SigV4 signature, the local
# stack's X-Local-Principal header (development), or nobody (Auth=None).
Scheme = Literal["apiKey", "jwt", "iam", "local", "none"]


@dataclass(frozen=True)
class Caller:
    """The authenticated principal of a request.

    `principal` scopes every task, push config and counter; `claims` and `scopes` are what the
    credential asserted (a token's claims, an IAM caller's account), passed on to flows.
    """

    principal: str
    scheme: Scheme = "none"
    claims: dict[str, Any] = field(default_factory=dict)
    scopes: tuple[str, ...] = ()

    @property
    def authenticated(self) -> bool:
        """A credential named this caller (an anonymous caller of an open stack did not)."""
        return self.scheme not in ("none", "local")

    def wire(self) -> dict[str, Any]:
        """JSON form (Step Functions execution input, authorizer context)."""
        return {
            "principal": self.principal,
            "scheme": self.scheme,
            "claims": self.claims,
            "scopes": list(self.scopes),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Caller:
        scheme = data.get("scheme")
        return cls(
            principal=str(data["principal"]),
            scheme=scheme if scheme in ("apiKey", "jwt", "iam", "local", "none") else "none",
            claims=dict(data.get("claims") or {}),
            scopes=tuple(str(s) for s in data.get("scopes") or ()),
        )
