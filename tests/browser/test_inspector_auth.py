"""The inspector with Auth=ApiKey: it asks for a credential and shows only the tasks of the
principal that credential names."""

from __future__ import annotations

from typing import Any

import httpx

from tests.browser.conftest import INSPECTOR, listed, stack_server, unique
from tests.e2e.conftest import DevServer

apikey_server = stack_server("browser-apikey", "--param", "Auth=ApiKey")


def make_key(server: DevServer, principal: str) -> str:
    response = httpx.post(f"{server.base_url}/_local/keys", json={"principal": principal})
    assert response.status_code == 201, response.text
    return str(response.json()["apiKey"])


def send(server: DevServer, key: str, text: str) -> dict[str, Any]:
    body = {"message": {"messageId": unique("m"), "role": "ROLE_USER", "parts": [{"text": text}]}}
    response = httpx.post(
        f"{server.base_url}/message:send",
        json=body,
        headers={"A2A-Version": "1.0", "X-API-Key": key},
        timeout=60.0,
    )
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def sign_in(page: Any, credential: str) -> None:
    page.locator("form#sign-in input[name=credential]").fill(credential)
    with page.expect_navigation():
        page.locator("form#sign-in input[name=credential]").press("Enter")


def test_with_auth_on_the_inspector_shows_only_the_signed_in_principals_tasks(
    apikey_server: DevServer, new_page: Any
) -> None:
    alice, bob = unique("alice"), unique("bob")
    keys = {name: make_key(apikey_server, name) for name in (alice, bob)}
    alices = send(apikey_server, keys[alice], "alice's secret plans")
    bobs = send(apikey_server, keys[bob], "bob's secret plans")
    tasks_url = f"{apikey_server.base_url}{INSPECTOR}"

    # Without a credential: asked for one, shown no task.
    page = new_page()
    response = page.goto(tasks_url)
    assert response is not None and response.status == 401
    assert page.locator("form#sign-in").is_visible()
    assert page.locator("tr.task").count() == 0
    for task in (alices, bobs):
        response = page.goto(f"{tasks_url}/tasks/{task['id']}")
        assert response is not None and response.status == 401
        assert page.locator("li.event").count() == 0
        assert "secret plans" not in page.content()
    page.goto(tasks_url)
    sign_in(page, "not-a-key")
    assert page.locator("form#sign-in").is_visible()
    assert page.locator("tr.task").count() == 0

    # With alice's key: her tasks, never bob's.
    sign_in(page, keys[alice])
    assert listed(page) == [alices["id"]]
    owners = page.locator("table#tasks td.owner").all_inner_texts()
    assert [owner.strip() for owner in owners] == [alice]
    # Asked for bob's tasks by name, the list is still alice's.
    page.goto(f"{tasks_url}?owner={bob}")
    assert listed(page) == [alices["id"]]
    response = page.goto(f"{tasks_url}/tasks/{bobs['id']}")
    assert response is not None and response.status == 404
    assert "bob's secret plans" not in page.content()
    response = page.goto(f"{tasks_url}/tasks/{alices['id']}")
    assert response is not None and response.status == 200
    assert "alice's secret plans" in page.locator("li.event.message .text").all_inner_texts()
    # The talk form sends with her credential: the new task is hers, and listed live.
    page.goto(tasks_url)
    page.locator("form#talk textarea[name=text]").fill("from the page")
    page.locator("button#send").click()
    page.wait_for_url(f"**{INSPECTOR}/tasks/*")
    sent = page.url.rsplit("/", 1)[1]
    page.goto(tasks_url)
    assert sorted(listed(page)) == sorted([alices["id"], sent])

    # A second browser signed in as bob sees bob's only.
    other = new_page()
    other.goto(tasks_url)
    sign_in(other, keys[bob])
    assert listed(other) == [bobs["id"]]
