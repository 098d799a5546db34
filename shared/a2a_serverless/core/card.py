"""The Agent Card: what this agent declares (spec §4.4, §8)."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Protocol

from a2a_serverless.models import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
)
from a2a_serverless.settings import Settings

PROTOCOL_VERSION = "1.0"


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
    def __init__(self, settings: Settings, agent: AgentProfile) -> None:
        self.settings = settings
        self.agent = agent
        self.modified_at = _code_modified_at(agent)

    def card(self, base_url: str) -> AgentCard:
        settings = self.settings
        base = (settings.public_base_url or base_url).rstrip("/")
        skills = list(self.agent.skills) or [
            AgentSkill(
                id=self.agent.name,
                name=self.agent.name,
                description=self.agent.description or settings.agent_description,
                tags=[self.agent.name],
            )
        ]
        provider = (
            AgentProvider(organization=settings.agent_provider_org, url=settings.agent_provider_url)
            if settings.agent_provider_org and settings.agent_provider_url
            else None
        )
        return AgentCard(
            name=settings.agent_name,
            description=settings.agent_description,
            # Preference order: JSON-RPC 1.0, HTTP+JSON 1.0, then 0.3 compatibility. All on
            # one URL: the version a client sends in A2A-Version picks the semantics.
            supported_interfaces=[
                AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="1.0"),
                AgentInterface(url=base, protocol_binding="HTTP+JSON", protocol_version="1.0"),
                AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="0.3"),
            ],
            provider=provider,
            version=settings.agent_version,
            documentation_url=settings.agent_documentation_url or None,
            capabilities=AgentCapabilities(
                streaming=True,
                push_notifications=settings.push_notifications,
                extended_agent_card=False,
            ),
            default_input_modes=list(self.agent.input_modes),
            default_output_modes=list(self.agent.output_modes),
            skills=skills,
        )

    def card_json(self, base_url: str) -> dict[str, Any]:
        """The card as served. Strictly 1.0 unless AGENT_CARD_V03_FIELDS adds the deprecated
        top-level fields that 0.3-only clients need to find the JSON-RPC endpoint."""
        card = self.card(base_url)
        body = card.wire()
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
