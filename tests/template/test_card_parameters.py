"""The Agent Card's provider, documentationUrl and iconUrl are template parameters: they reach
every function that builds the card (the card route and JSON-RPC's GetExtendedAgentCard), and
only http(s) URLs are accepted (a `javascript:` icon would be rendered by card viewers)."""

from __future__ import annotations

import re
from typing import Any

import pytest

PARAMETERS = {
    "AgentProviderOrganization": "AGENT_PROVIDER_ORG",
    "AgentProviderUrl": "AGENT_PROVIDER_URL",
    "AgentDocumentationUrl": "AGENT_DOCUMENTATION_URL",
    "AgentIconUrl": "AGENT_ICON_URL",
}
CARD_BUILDERS = ("AgentCardFunction", "StreamFunction")


@pytest.mark.parametrize("function", CARD_BUILDERS)
def test_card_parameters_reach_the_functions_that_build_the_card(
    sam: dict[str, Any], function: str
) -> None:
    variables = sam["Resources"][function]["Properties"]["Environment"]["Variables"]
    for parameter, variable in PARAMETERS.items():
        assert sam["Parameters"][parameter]["Default"] == ""
        assert variables[variable] == {"Ref": parameter}


@pytest.mark.parametrize("parameter", ["AgentProviderUrl", "AgentDocumentationUrl", "AgentIconUrl"])
def test_card_urls_must_be_http_or_https(sam: dict[str, Any], parameter: str) -> None:
    pattern = re.compile(sam["Parameters"][parameter]["AllowedPattern"])
    for good in ("", "https://example.org/icon.png", "http://localhost:8000/docs"):
        assert pattern.fullmatch(good), good
    for bad in ("javascript:alert(1)", "data:image/png;base64,AAAA", "https://a b", "example.org"):
        assert not pattern.fullmatch(bad), bad
