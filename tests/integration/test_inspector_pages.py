"""The inspector's pages served by the local stack's gateway (local/inspector/app.py): the tasks
list and a task's page render what the stack holds, escaped; its JSON and SSE feeds follow the
task; it answers loopback requests only; with Auth on it shows only the signed-in principal's
tasks and nothing without a credential the stack accepts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import A2A

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
PAGE = "/_local/inspector"


def get(
    stack: LocalStack,
    path: str,
    *,
    gateway: Any = None,
    client: tuple[str, int] = ("127.0.0.1", 50000),
    cookies: dict[str, str] | None = None,
    method: str = "GET",
    data: dict[str, str] | None = None,
) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=gateway or stack.gateway(), client=client)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000", cookies=cookies
        ) as http:
            return await http.request(method, path, data=data, timeout=30)

    return asyncio.run(call())


def test_the_pages_show_a_task_with_its_text_escaped(local_stack: LocalStack) -> None:
    task_id = A2A(local_stack, "mallory").send(XSS).task["id"]
    listing = get(local_stack, PAGE)
    assert listing.status_code == 200
    assert f'data-task-id="{task_id}"' in listing.text
    page = get(local_stack, f"{PAGE}/tasks/{task_id}")
    assert page.status_code == 200
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page.text
    assert "<script>window.__xss" not in page.text and "<img src=x" not in page.text
    assert 'class="event artifact"' in page.text and "TASK_STATE_COMPLETED" in page.text
    panels = get(local_stack, f"{PAGE}/tasks/{task_id}/panels.json").json()
    assert panels["state"] == "TASK_STATE_COMPLETED"
    assert [e["status"] for e in panels["executions"]] == ["SUCCEEDED"]
    rows = get(local_stack, f"{PAGE}/tasks.json?owner=mallory").json()["rows"]
    assert [r["task_id"] for r in rows] == [task_id]


def test_the_timeline_feed_sends_the_events_after_the_one_named(local_stack: LocalStack) -> None:
    task_id = A2A(local_stack).send("follow me").task["id"]

    async def first_events() -> list[str]:
        transport = httpx.ASGITransport(app=local_stack.gateway(), client=("127.0.0.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            url = f"{PAGE}/tasks/{task_id}/events?after=2"
            async with http.stream("GET", url, timeout=30) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                ids: list[str] = []
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        ids.append(line[4:])
                    if len(ids) == 3:
                        return ids
        return ids

    assert asyncio.run(first_events()) == ["3", "4", "5"]


def test_only_loopback_requests_are_answered(local_stack: LocalStack) -> None:
    refused = get(local_stack, PAGE, client=("203.0.113.9", 40000))
    assert refused.status_code == 403
    assert "PERMISSION_DENIED" in refused.text


def test_missing_tasks_and_bad_filters_are_plain_answers(local_stack: LocalStack) -> None:
    assert get(local_stack, f"{PAGE}/tasks/no-such-task").status_code == 404
    assert get(local_stack, f"{PAGE}?status=TASK_STATE_NONSENSE").status_code == 400
    assert get(local_stack, f"{PAGE}?pageToken=forged").status_code == 400


def test_with_api_keys_only_the_signed_in_principals_tasks_are_shown(
    make_stack: Callable[..., LocalStack],
) -> None:
    stack = make_stack(Auth="ApiKey")
    gateway = stack.gateway()  # one usage plan for the keys and the requests
    keys = {}
    for principal in ("alice", "bob"):
        made = asyncio.run(gateway.admin.dispatch("POST", "/_local/keys", {"principal": principal}))
        keys[principal] = made[1]["apiKey"]
    tasks = {p: _send_with_key(gateway, keys[p], f"hi from {p}") for p in ("alice", "bob")}

    def page(path: str, **options: Any) -> httpx.Response:
        return get(stack, path, gateway=gateway, **options)

    assert page(PAGE).status_code == 401  # no credential: the sign-in page
    assert 'id="sign-in"' in page(PAGE).text
    assert page(f"{PAGE}/tasks/{tasks['alice']}").status_code == 401
    wrong = page(f"{PAGE}/sign-in", method="POST", data={"credential": "a2a_nope_nope"})
    assert wrong.status_code == 401
    signed = page(f"{PAGE}/sign-in", method="POST", data={"credential": keys["alice"]})
    assert signed.status_code == 303
    cookie = {"a2a_inspector_credential": signed.cookies["a2a_inspector_credential"]}
    listing = page(PAGE, cookies=cookie)
    assert tasks["alice"] in listing.text and tasks["bob"] not in listing.text
    assert page(f"{PAGE}?owner=bob", cookies=cookie).text.count('tr class="task"') == 1
    assert page(f"{PAGE}/tasks/{tasks['bob']}", cookies=cookie).status_code == 404
    assert page(f"{PAGE}/tasks/{tasks['alice']}", cookies=cookie).status_code == 200


def _send_with_key(gateway: Any, key: str, text: str) -> str:
    body: dict[str, Any] = {
        "message": {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}
    }

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=gateway, client=("127.0.0.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            headers = {"X-API-Key": key, "A2A-Version": "1.0"}
            return await http.post("/message:send", json=body, headers=headers, timeout=30)

    response = asyncio.run(call())
    assert response.status_code == 200, response.text
    return str(response.json()["task"]["id"])
