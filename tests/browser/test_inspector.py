"""The local inspector (`/_local/inspector`) in a real browser, against `scripts/dev` serving the
echo flow: the tasks list, a task's timeline following live, the talk form (send on each
binding, continue an input-required task, cancel), webhook deliveries, raw JSON, and text from
a task rendered as text. The selectors are the pages' DOM contract (the ids, classes and data
attributes local/inspector's templates keep for these tests).

Every wait has a deadline (the page's default timeout); no sleep is an assertion.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser.conftest import INSPECTOR, listed, unique
from tests.e2e.conftest import ROOT, DevServer
from tests.integration.webhooks import Webhooks, always

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
# `A2A_WRITE_SCREENSHOT=1 scripts/test tests/browser -k screenshot` writes the README's picture.
SCREENSHOT = ROOT / "docs" / "inspector.png"
SCREENSHOT_ENV = "A2A_WRITE_SCREENSHOT"
SCREENSHOT_HEIGHT = 1240  # the header, the talk form, the timeline and the history
PAGE_SIZE = 25  # rows of a tasks page
# How long the echo spreads a reply watched live over (about two chunks a second): long enough
# that the page is open before most of them, on a loaded machine too.
LIVE_SECONDS = 6

# Each event the page shows (the timeline's, then the history's messages) as data: what the
# DOM contract names, read in one call.
EVENTS_JS = """() => [...document.querySelectorAll('li.event')].map(li => ({
    list: li.closest('ol')?.id ?? null,
    seq: li.dataset.seq ?? null,
    message: li.classList.contains('message'),
    kind: li.querySelector('.kind')?.textContent.trim() ?? null,
    state: li.querySelector('.state')?.textContent.trim() ?? null,
    text: li.querySelector('.text')?.textContent ?? '',
}))"""


@pytest.fixture
def principal() -> str:
    return unique("browser")


@pytest.fixture
def api(inspector_server: DevServer, principal: str) -> Iterator[httpx.Client]:
    """The A2A API as `principal` (HTTP+JSON)."""
    with httpx.Client(
        base_url=inspector_server.base_url,
        headers={"A2A-Version": "1.0", "X-Local-Principal": principal},
        timeout=60.0,
    ) as client:
        yield client


def send(api: httpx.Client, text: str, task_id: str = "", **configuration: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": unique("m"),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    body: dict[str, Any] = {"message": message}
    if configuration:
        body["configuration"] = configuration
    response = api.post("/message:send", json=body)
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def get_task(api: httpx.Client, task_id: str) -> dict[str, Any]:
    response = api.get(f"/tasks/{task_id}")
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def events(page: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(EVENTS_JS)
    return found


def artifacts(page: Any) -> list[str]:
    return [e["text"] for e in events(page) if e["kind"] == "artifact"]


def wait_for_state(page: Any, state: str) -> None:
    """Until a status event of the timeline shows `state`."""
    page.wait_for_function(
        """(state) => [...document.querySelectorAll('#timeline li.event .state')]
            .some(e => e.textContent.trim() === state)""",
        arg=state,
    )


def open_task(page: Any, server: DevServer, task_id: str) -> None:
    response = page.goto(f"{server.base_url}{INSPECTOR}/tasks/{task_id}")
    assert response is not None and response.status == 200, response and response.status


def talk(page: Any, text: str, *, mode: str, binding: str = "rest", principal: str = "") -> None:
    """Fill the talk form and send."""
    form = page.locator("form#talk")
    form.locator("textarea[name=text]").fill(text)
    form.locator("select[name=binding]").select_option(binding)
    form.locator("select[name=mode]").select_option(mode)
    if principal:
        form.locator("input[name=principal]").fill(principal)
    page.locator("button#send").click()


def send_from_tasks_page(
    page: Any, server: DevServer, principal: str, text: str, *, mode: str, binding: str = "rest"
) -> str:
    """Send from the tasks page; it opens the new task's page, whose id is returned."""
    page.goto(f"{server.base_url}{INSPECTOR}?owner={principal}")
    talk(page, text, mode=mode, binding=binding, principal=principal)
    page.wait_for_url(f"**{INSPECTOR}/tasks/*")
    return str(page.url.rsplit("/", 1)[1])


def no_markup_from_tasks(page: Any) -> None:
    """Nothing of XSS became markup: no script ran, no inline script or image is in the page
    (the inspector has neither of its own)."""
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("script:not([src])").count() == 0
    assert page.locator("img").count() == 0


# -- the tasks list --------------------------------------------------------------------------


def test_tasks_page_lists_filters_and_follows_the_tasks(
    inspector_server: DevServer, api: httpx.Client, principal: str, page: Any
) -> None:
    done = send(api, "first")
    asked = send(api, "second [input]")
    page.goto(f"{inspector_server.base_url}{INSPECTOR}?owner={principal}")
    assert sorted(listed(page)) == sorted([done["id"], asked["id"]])
    row = page.locator(f"tr.task[data-task-id='{done['id']}']")
    assert row.locator("td.owner").inner_text().strip() == principal
    assert row.locator("td.context").inner_text().strip() == done["contextId"]
    assert row.locator("td.state").inner_text().strip() == "TASK_STATE_COMPLETED"
    assert row.locator("td.updated").inner_text().strip()
    asked_state = page.locator(f"tr.task[data-task-id='{asked['id']}'] td.state")
    assert asked_state.inner_text().strip() == "TASK_STATE_INPUT_REQUIRED"

    # Live: a new task and a state change appear without a reload.
    later = send(api, "third")
    page.locator(f"tr.task[data-task-id='{later['id']}']").wait_for()
    send(api, "an answer", task_id=asked["id"])
    page.wait_for_function(
        """(id) => document.querySelector(`tr.task[data-task-id="${id}"] td.state`)
            ?.textContent.trim() === 'TASK_STATE_COMPLETED'""",
        arg=asked["id"],
    )

    # The filter form narrows the list as ListTasks does.
    page.locator("form#filters select[name=status]").select_option("TASK_STATE_INPUT_REQUIRED")
    with page.expect_navigation():
        page.locator("form#filters input[name=contextId]").press("Enter")
    assert listed(page) == []
    page.locator("form#filters select[name=status]").select_option("TASK_STATE_COMPLETED")
    page.locator("form#filters input[name=contextId]").fill(done["contextId"])
    with page.expect_navigation():
        page.locator("form#filters input[name=contextId]").press("Enter")
    assert listed(page) == [done["id"]]

    # Each row opens its task's page.
    page.locator(f"tr.task[data-task-id='{done['id']}'] a.task-link").click()
    page.wait_for_url(f"**{INSPECTOR}/tasks/{done['id']}")
    assert artifacts(page), events(page)


def test_tasks_page_pages_through_many_tasks(
    inspector_server: DevServer, api: httpx.Client, principal: str, page: Any
) -> None:
    made = {send(api, f"task {n}", returnImmediately=True)["id"] for n in range(PAGE_SIZE + 1)}
    page.goto(f"{inspector_server.base_url}{INSPECTOR}?owner={principal}")
    first = listed(page)
    assert len(first) == PAGE_SIZE
    with page.expect_navigation():
        page.locator("a.next-page").click()
    second = listed(page)
    assert set(first) | set(second) == made and len(second) == 1
    assert page.locator("a.next-page").count() == 0


# -- the talk form ---------------------------------------------------------------------------


def test_a_streamed_send_opens_the_task_and_its_chunks_arrive_live(
    inspector_server: DevServer, api: httpx.Client, principal: str, page: Any
) -> None:
    text = f"watch the chunks [slow={LIVE_SECONDS}]"
    task_id = send_from_tasks_page(page, inspector_server, principal, text, mode="stream")
    page.locator("#timeline li.event").first.wait_for()
    at_load = artifacts(page)
    wait_for_state(page, "TASK_STATE_COMPLETED")
    chunks = artifacts(page)
    assert len(chunks) > max(1, len(at_load)), (at_load, chunks)  # most came after the load
    assert "".join(chunks) == artifact_text(get_task(api, task_id)) == f"Echo: {text}"
    seqs = [int(e["seq"]) for e in events(page) if e["list"] == "timeline"]
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # every event once, in order


@pytest.mark.parametrize("binding", ["rest", "jsonrpc", "jsonrpc-0.3"])
def test_a_blocking_send_on_each_binding_completes(
    inspector_server: DevServer, api: httpx.Client, principal: str, page: Any, binding: str
) -> None:
    text = f"blocking on {binding}"
    task_id = send_from_tasks_page(
        page, inspector_server, principal, text, mode="blocking", binding=binding
    )
    wait_for_state(page, "TASK_STATE_COMPLETED")
    task = get_task(api, task_id)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(artifacts(page)) == artifact_text(task) == f"Echo: {text}"


def test_an_input_required_task_is_continued_from_its_page(
    inspector_server: DevServer, api: httpx.Client, principal: str, page: Any
) -> None:
    task_id = send_from_tasks_page(
        page, inspector_server, principal, "ask me [input]", mode="stream"
    )
    wait_for_state(page, "TASK_STATE_INPUT_REQUIRED")
    assert page.locator("form#talk input[name=taskId]").input_value() == task_id
    # The answer goes as the task's owner by default.
    assert page.locator("form#talk input[name=principal]").input_value() == principal
    talk(page, "the rest", mode="stream")
    wait_for_state(page, "TASK_STATE_COMPLETED")
    task = get_task(api, task_id)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(artifacts(page)) == artifact_text(task) == "Echo: ask me [input] + the rest"
    # The history follows live too (no reload): the question and the answer appear.
    expected = ["ask me [input]", "What should I add to the echo?", "the rest"]
    page.wait_for_function(
        "n => document.querySelectorAll('ol#history li.event').length >= n", arg=3, timeout=15000
    )
    assert [e["text"] for e in events(page) if e["message"]] == expected
    page.reload()
    assert [e["text"] for e in events(page) if e["message"]] == expected
    # One execution per turn, and the flow state after each.
    statuses = page.locator("table#executions tr.execution td.status").all_inner_texts()
    assert [s.strip() for s in statuses] == ["SUCCEEDED", "SUCCEEDED"]
    turns = page.locator("table#flow-states tr.flow-state td.turn").all_inner_texts()
    assert [t.strip() for t in turns] == ["1", "2"]


@pytest.mark.parametrize("binding", ["rest", "jsonrpc-0.3"])
def test_a_file_is_sent_from_the_talk_form(
    inspector_server: DevServer,
    api: httpx.Client,
    principal: str,
    page: Any,
    tmp_path: Any,
    binding: str,
) -> None:
    document = tmp_path / "notes.txt"
    document.write_bytes(b"the file's own bytes\n" * 100)
    page.goto(f"{inspector_server.base_url}{INSPECTOR}?owner={principal}")
    page.locator("form#talk input[name=file]").set_input_files(str(document))
    talk(page, "with a file", mode="blocking", binding=binding, principal=principal)
    page.wait_for_url(f"**{INSPECTOR}/tasks/*")
    task_id = str(page.url.rsplit("/", 1)[1])
    wait_for_state(page, "TASK_STATE_COMPLETED")
    # The agent got the file: the task's first message holds it, named and typed.
    task = api.get(f"/tasks/{task_id}", params={"historyLength": 1}).json()
    (file_part,) = [p for p in task["history"][0]["parts"] if "text" not in p]
    assert file_part["filename"] == "notes.txt"
    assert file_part["mediaType"].startswith("text/plain")
    raw = page.locator("ol#history li.event details.raw pre").first.text_content() or ""
    assert "notes.txt" in raw


def test_cancel_from_the_task_page(
    inspector_server: DevServer, api: httpx.Client, principal: str, page: Any
) -> None:
    task = send(api, "a long one [slow=60]", returnImmediately=True)
    open_task(page, inspector_server, task["id"])
    wait_for_state(page, "TASK_STATE_WORKING")
    page.locator("button#cancel").click()  # as the task's owner, the form's default
    wait_for_state(page, "TASK_STATE_CANCELED")
    assert get_task(api, task["id"])["status"]["state"] == "TASK_STATE_CANCELED"


# -- what a task page shows ------------------------------------------------------------------


def test_a_webhook_delivery_appears_with_its_payload(
    inspector_server: DevServer, api: httpx.Client, page: Any
) -> None:
    receiver = Webhooks()
    try:
        url = receiver.hook("inspector", always(200))
        task = send(api, "tell my webhook", taskPushNotificationConfig={"url": url})
        open_task(page, inspector_server, task["id"])
        page.locator("table#webhooks", has_text=url).wait_for()
        delivered = page.locator("table#deliveries tr.delivery", has_text="delivered")
        delivered.first.wait_for()
        row = delivered.first
        assert row.locator("td.outcome").inner_text().strip() == "delivered"
        assert row.locator("td.status-code").inner_text().strip() == "200"
        assert row.locator("td.attempt").inner_text().strip() == "1"
        assert row.locator("td.latency").inner_text().strip().endswith("ms")
        assert row.locator("td.time").inner_text().strip()
        payload = json.loads(row.locator("details.payload > pre").text_content() or "")
        assert payload in receiver.delivered("inspector"), payload
    finally:
        receiver.close()


def test_text_from_a_task_renders_as_text(
    inspector_server: DevServer, api: httpx.Client, page: Any
) -> None:
    text = f"{XSS} [slow={LIVE_SECONDS}]"
    task = send(api, text, returnImmediately=True)
    open_task(page, inspector_server, task["id"])
    at_load = artifacts(page)
    wait_for_state(page, "TASK_STATE_COMPLETED")
    # Chunks added by the page's script, then the same events rendered by the server.
    assert len(artifacts(page)) > len(at_load)
    for rendered_by in ("script", "server"):
        if rendered_by == "server":
            page.reload()
        assert "".join(artifacts(page)) == f"Echo: {text}", rendered_by
        messages = [e["text"] for e in events(page) if e["message"]]
        assert messages == [text], rendered_by
        assert page.get_by_text(text, exact=True).is_visible()
        no_markup_from_tasks(page)
        raw = page.locator("li.event.message details.raw > pre").first.text_content() or ""
        assert json.loads(raw)["parts"][0]["text"] == text


def test_a_tasks_cost_is_shown(inspector_server: DevServer, api: httpx.Client, page: Any) -> None:
    task = send(api, "what did I cost")
    open_task(page, inspector_server, task["id"])
    rows = page.locator("table#cost tr.unit")
    services = [s.strip() for s in rows.locator("td.service").all_inner_texts()]
    assert {"apigateway", "lambda", "stepfunctions", "dynamodb"} <= set(services), services
    usd = dict(zip(services, rows.locator("td.usd").all_inner_texts(), strict=True))
    assert all(float(value.strip().lstrip("$")) >= 0 for value in usd.values()), usd
    assert float(usd["dynamodb"].strip().lstrip("$")) > 0, usd
    dynamodb = rows.filter(has=page.locator("td.service", has_text="dynamodb"))
    assert dynamodb.locator("td.units").inner_text().strip(), "no DynamoDB units shown"


def test_an_events_raw_json_is_one_click_away(
    inspector_server: DevServer, api: httpx.Client, page: Any
) -> None:
    task = send(api, "raw please")
    open_task(page, inspector_server, task["id"])
    event = page.locator("#timeline li.event.artifact").first
    raw = event.locator("details.raw")
    assert not raw.locator("pre").is_visible()
    raw.locator("summary").click()
    assert raw.locator("pre").is_visible()
    shown = json.loads(raw.locator("pre").inner_text())
    assert shown["artifactUpdate"]["taskId"] == task["id"], shown


# -- the README's picture --------------------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_timeline_screenshot(inspector_server: DevServer, api: httpx.Client, page: Any) -> None:
    """A task's page as the README shows it; written to docs/inspector.png when
    A2A_WRITE_SCREENSHOT is set."""
    receiver = Webhooks()
    try:
        url = receiver.hook("readme", always(200))
        task = send(api, "plan my trip [input]", taskPushNotificationConfig={"url": url})
        send(api, "to Lisbon, in May", task_id=task["id"])
        open_task(page, inspector_server, task["id"])
        wait_for_state(page, "TASK_STATE_COMPLETED")
        page.locator("table#deliveries tr.delivery").first.wait_for()
        clip = {"x": 0, "y": 0, "width": 1200, "height": SCREENSHOT_HEIGHT}
        data = page.screenshot(full_page=True, clip=clip)
    finally:
        receiver.close()
    assert png_size(data) == (1200, SCREENSHOT_HEIGHT)
    if os.environ.get(SCREENSHOT_ENV):
        SCREENSHOT.write_bytes(data)
