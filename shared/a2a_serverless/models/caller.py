"""Who is calling: the principal that owns tasks, and what its credential says about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# How the caller was identified: an API key, an OIDC token, an AWS SigV4 signature, the local
# stack's X-Local-Principal header (development), or nobody (Auth=None).
Scheme = Literal["apiKey", "jwt", "iam", "local", "none"]

# Joins a principal and a tenant into one owner string (`scope_of`). A control character:
# tenants are URL path segments (never hold one), and core refuses a principal holding it.
TENANT_MARK = "\x1f"  # ASCII unit separator


def scope_of(principal: str, tenant: str = "") -> str:
    """The owner string of what `principal` does under `tenant` ("" = no tenant), which keys every
    task, push config, counter and retry record. Injective while neither part holds TENANT_MARK:
    (p, "") -> p; (p, t) -> p + TENANT_MARK + t."""
    return f"{principal}{TENANT_MARK}{tenant}" if tenant else principal


def unscope(owner: str) -> tuple[str, str]:
    """(principal, tenant) of an owner string made by `scope_of`."""
    principal, _, tenant = owner.partition(TENANT_MARK)
    return principal, tenant


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
    # The tenant the request named (`/{tenant}/...` or the `tenant` field; "" = none): with
    # the principal it scopes the request's tasks (`owner`); flows read it as ctx.caller.tenant.
    tenant: str = ""

    @property
    def owner(self) -> str:
        """The owner string of this caller's tasks: the principal, under its tenant."""
        return scope_of(self.principal, self.tenant)

    @classmethod
    def of_owner(cls, owner: str) -> Caller:
        """An anonymous caller for an owner string (the principal and tenant it scopes)."""
        principal, tenant = unscope(owner)
        return cls(principal, tenant=tenant)

    @property
    def authenticated(self) -> bool:
        """A credential named this caller (an anonymous caller of an open stack did not)."""
        return self.scheme not in ("none", "local")

    def wire(self) -> dict[str, Any]:
        """JSON form (Step Functions execution input, authorizer context)."""
        wire: dict[str, Any] = {
            "principal": self.principal,
            "scheme": self.scheme,
            "claims": self.claims,
            "scopes": list(self.scopes),
        }
        if self.tenant:  # absent without one: execution inputs from before tenants read alike
            wire["tenant"] = self.tenant
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Caller:
        scheme = data.get("scheme")
        return cls(
            principal=str(data["principal"]),
            scheme=scheme if scheme in ("apiKey", "jwt", "iam", "local", "none") else "none",
            claims=dict(data.get("claims") or {}),
            scopes=tuple(str(s) for s in data.get("scopes") or ()),
            tenant=str(data.get("tenant") or ""),
        )
