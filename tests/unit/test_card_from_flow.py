"""The card describes the flow it serves: name, description, version and skills come from the
flow unless AgentName / AgentDescription (settings) say otherwise."""

from __future__ import annotations

from a2a_serverless.core.card import CardFactory
from a2a_serverless.flows import Flow, Outcome, StepContext
from a2a_serverless.flows.echo import EchoFlow
from a2a_serverless.settings import Settings


class Summariser(Flow):
    name = "summariser"
    description = "Summarises what you send."
    version = "2.3.0"

    def step(self, ctx: StepContext) -> Outcome:  # pragma: no cover - not run here
        return Outcome.completed()


def card(settings: Settings, flow: Flow) -> dict[str, object]:
    return CardFactory(settings, flow).card_json("https://agent.example")


def test_the_card_is_the_flows_by_default() -> None:
    body = card(Settings(), Summariser())
    assert (body["name"], body["description"], body["version"]) == (
        "summariser",
        "Summarises what you send.",
        "2.3.0",
    )
    assert [s["id"] for s in body["skills"]] == ["summariser"]  # type: ignore[index]
    echo = card(Settings(), EchoFlow())
    assert echo["name"] == "Echo Agent"  # a flow's title wins over its name


def test_settings_override_the_flow() -> None:
    settings = Settings(agent_name="Acme", agent_description="Ours", agent_version="9")
    body = card(settings, Summariser())
    assert (body["name"], body["description"], body["version"]) == ("Acme", "Ours", "9")
