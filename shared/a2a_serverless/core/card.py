"""The Agent Card: what this agent declares (spec §4.4, §8)."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from a2a_serverless.core.card_signing import canonical_card, jwks_url, signature_for
from a2a_serverless.core.errors import AuthenticationRequiredError, UnsupportedOperationError
from a2a_serverless.models import (
    A2AModel,
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Caller,
)
from a2a_serverless.settings import Settings

if TYPE_CHECKING:
    from a2a_serverless.core.card_signing import CardSigner

PROTOCOL_VERSION = "1.0"
# Signatures kept per (base URL, card body): a few bases at most (the API's own domains).
_SIGNATURE_CACHE_SIZE = 16


class AgentCardSignature(A2AModel):
    """A JWS over the card's canonical JSON (spec §4.4.7), detached: no payload."""

    protected: str
    signature: str
    header: dict[str, Any] | None = None


class SignedAgentCard(AgentCard):
    """An Agent Card with its `signatures` (spec §8.4)."""

    signatures: list[AgentCardSignature] | None = None


class AgentProfile(Protocol):
    """What the card declares about the agent's logic. A `flows.Flow` is one (the core knows
    flows only through this shape)."""

    # Read-only properties: a class attribute (Flow's) or a property both satisfy them.
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def skills(self) -> Sequence[AgentSkill]: ...
    @property
    def input_modes(self) -> Sequence[str]: ...
    @property
    def output_modes(self) -> Sequence[str]: ...


def _title_of(agent: AgentProfile) -> str:
    """The agent's display name: a flow's `title`, else its `name`."""
    return str(getattr(agent, "title", "") or agent.name)


def extended_skills_of(agent: AgentProfile) -> list[AgentSkill]:
    """Skills the agent shows only to authenticated callers (a flow's `extended_skills`)."""
    return list(getattr(agent, "extended_skills", None) or ())


def extensions_of(agent: AgentProfile) -> list[AgentExtension]:
    """Extensions the agent supports (a flow's `extensions`)."""
    return list(getattr(agent, "extensions", None) or ())


def security_of(settings: Settings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The card's `securitySchemes` and `securityRequirements` for the stack's Auth mode (the
    credential the authorizer checks; an a2a-sdk client's AuthInterceptor reads these)."""
    mode = settings.auth_mode
    if mode == "ApiKey":
        schemes = {
            "apiKey": {
                "apiKeySecurityScheme": {
                    "location": "header",
                    "name": "X-API-Key",
                    "description": "An API key issued by the agent's owner "
                    "(`a2a-serverless keys create`).",
                }
            }
        }
    elif mode == "Jwt":
        issuer = settings.jwt_issuer.rstrip("/")
        schemes = {
            "oidc": {
                "openIdConnectSecurityScheme": {
                    "openIdConnectUrl": f"{issuer}/.well-known/openid-configuration",
                    "description": "A bearer token (JWT) from this issuer, "
                    f"audience {settings.jwt_audience}, in Authorization: Bearer.",
                }
            }
        }
    elif mode == "Iam":
        schemes = {
            "sigv4": {
                "httpAuthSecurityScheme": {
                    "scheme": "AWS4-HMAC-SHA256",
                    "description": "AWS Signature Version 4 (service execute-api) with the "
                    "caller's IAM credentials; the caller's role needs execute-api:Invoke.",
                }
            }
        }
    else:
        return {}, []
    requirements: list[dict[str, Any]] = [{"schemes": {name: {"list": []}}} for name in schemes]
    return schemes, requirements


def _code_modified_at(agent: AgentProfile) -> datetime:
    """When the deployed code last changed: the same on every instance of one deployment."""
    paths = [Path(__file__).resolve().parent.parent / "__init__.py"]
    module = sys.modules.get(type(agent).__module__)
    module_file = getattr(module, "__file__", None) if module is not None else None
    if module_file:
        paths.append(Path(module_file))
    stamps = [p.stat().st_mtime for p in paths if p.exists()]
    return datetime.fromtimestamp(max(stamps), UTC).replace(microsecond=0)


class CardFactory:
    def __init__(
        self, settings: Settings, agent: AgentProfile, signer: CardSigner | None = None
    ) -> None:
        self.settings = settings
        self.agent = agent
        self.signer = signer
        self.modified_at = _code_modified_at(agent)
        # (jku, canonical card) -> its signatures: a warm function signs each card once, not
        # once per request (with KMS, a signature is a billed call of some tens of ms).
        self._signatures: OrderedDict[tuple[str, bytes], list[dict[str, str]]] = OrderedDict()
        self._signatures_lock = threading.Lock()  # the card app answers in a thread pool

    @property
    def offers_extended_card(self) -> bool:
        """An extended card needs callers who authenticate, and something to add."""
        return self.settings.auth_mode != "None" and bool(extended_skills_of(self.agent))

    def extended_card(self, base_url: str, caller: Caller) -> AgentCard:
        """The card an authenticated caller sees (spec §3.1.11): the public one plus the
        agent's extended skills."""
        if not self.offers_extended_card:
            raise UnsupportedOperationError(
                "This agent has no extended agent card (capabilities.extendedAgentCard is false)"
            )
        if not caller.authenticated:
            raise AuthenticationRequiredError("The extended agent card needs a credential")
        card = self.card(base_url)
        card.skills = [*card.skills, *extended_skills_of(self.agent)]
        if self.signer is None:
            return card
        signatures = self.signatures(card.wire(), base_url)
        return SignedAgentCard(
            **dict(card), signatures=[AgentCardSignature(**s) for s in signatures]
        )

    def base(self, base_url: str) -> str:
        """The base URL the card names (PUBLIC_BASE_URL, else the one the request came to)."""
        return (self.settings.public_base_url or base_url).rstrip("/")

    def signatures(self, body: dict[str, Any], base_url: str) -> list[dict[str, str]]:
        """The card body's signatures (spec §8.4), made once per body and base URL."""
        assert self.signer is not None
        jku = jwks_url(self.base(base_url))
        canonical = canonical_card(body)
        key = (jku, canonical)
        with self._signatures_lock:
            cached = self._signatures.get(key)
            if cached is not None:
                self._signatures.move_to_end(key)
                return cached
        # Signed outside the lock: two first requests may both sign; both results verify.
        made = [signature_for(canonical, self.signer, jku)]
        with self._signatures_lock:
            self._signatures[key] = made
            while len(self._signatures) > _SIGNATURE_CACHE_SIZE:
                self._signatures.popitem(last=False)
        return made

    def public_jwks(self) -> dict[str, Any] | None:
        """The JSON Web Key Set verifiers fetch from the signatures' `jku` (None: unsigned)."""
        return None if self.signer is None else {"keys": [self.signer.public_jwk()]}

    def card(self, base_url: str) -> AgentCard:
        settings = self.settings
        base = self.base(base_url)
        skills = list(self.agent.skills) or [
            AgentSkill(
                id=self.agent.name,
                name=self.agent.name,
                description=self.agent.description or self.agent.name,
                tags=[self.agent.name],
            )
        ]
        schemes, requirements = security_of(settings)
        tenant = settings.tenant or None
        provider = (
            AgentProvider(organization=settings.agent_provider_org, url=settings.agent_provider_url)
            if settings.agent_provider_org and settings.agent_provider_url
            else None
        )
        return AgentCard(
            name=settings.agent_name or _title_of(self.agent),
            description=settings.agent_description or self.agent.description or self.agent.name,
            # Preference order: JSON-RPC 1.0, HTTP+JSON 1.0, then 0.3, all on one URL (the
            # A2A-Version header picks). TENANT: the 1.0 interfaces declare it (spec §8.3.2).
            supported_interfaces=[
                AgentInterface(
                    url=base, protocol_binding="JSONRPC", tenant=tenant, protocol_version="1.0"
                ),
                AgentInterface(
                    url=base, protocol_binding="HTTP+JSON", tenant=tenant, protocol_version="1.0"
                ),
                AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="0.3"),
            ],
            provider=provider,
            version=settings.agent_version or str(getattr(self.agent, "version", "") or "0.1.0"),
            documentation_url=settings.agent_documentation_url or None,
            icon_url=settings.agent_icon_url or None,
            capabilities=AgentCapabilities(
                streaming=settings.streaming,
                push_notifications=settings.push_notifications,
                extensions=extensions_of(self.agent) or None,
                extended_agent_card=self.offers_extended_card,
            ),
            security_schemes=schemes or None,
            security_requirements=requirements or None,
            default_input_modes=list(self.agent.input_modes),
            default_output_modes=list(self.agent.output_modes),
            skills=skills,
        )

    def card_json(self, base_url: str) -> dict[str, Any]:
        """The card as served: signed when a signer is configured. Strictly 1.0 unless
        AGENT_CARD_V03_FIELDS adds the deprecated top-level fields that 0.3-only clients need
        to find the JSON-RPC endpoint."""
        card = self.card(base_url)
        body = card.wire()
        if self.signer is not None:
            # Over the 1.0 fields only: a 1.0 verifier drops the 0.3 ones below when it parses
            # the card (a2a-sdk: supportedInterfaces wins over url/preferredTransport).
            body["signatures"] = self.signatures(body, base_url)
        if self.settings.agent_card_v03_fields:
            body["url"] = card.supported_interfaces[0].url
            body["preferredTransport"] = "JSONRPC"
            body["protocolVersion"] = "0.3.0"
        return body

    @staticmethod
    def etag(body: dict[str, Any]) -> str:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return '"' + hashlib.sha256(canonical).hexdigest()[:32] + '"'

    def last_modified(self) -> str:
        return format_datetime(self.modified_at, usegmt=True)
