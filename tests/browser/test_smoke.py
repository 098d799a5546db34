"""The browser drives a page the local stack serves: the Agent Card, opened as a person opens
it, and fetched by the page's own script."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import CARD_PATH, DevServer


def test_the_browser_opens_a_page_of_the_local_stack(
    inspector_server: DevServer, page: Any
) -> None:
    response = page.goto(inspector_server.base_url + CARD_PATH)
    assert response is not None and response.status == 200
    card = json.loads(page.inner_text("body"))
    assert card["name"] == "Echo Agent"
    fetched = page.evaluate("async (path) => (await (await fetch(path)).json()).name", CARD_PATH)
    assert fetched == "Echo Agent"
