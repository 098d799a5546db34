"""Browser fixtures: the system's headless Chromium driven by Playwright, against `scripts/dev`
servers started as the e2e suite starts them.

Without Chromium every test here is skipped with one plain reason (tests/browser/chromium.py
MISSING), printed once where the session ends; under CI (CI set) it is a failure instead.
A failed test leaves a screenshot of its page in .pytest-reports/browser/.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.browser.chromium import FLAGS, MISSING, find_chromium, required
from tests.conftest import REPORTS, hand_over
from tests.e2e.conftest import DevServer, dev_server_running

INSPECTOR = "/_local/inspector"
SCREENSHOTS = REPORTS / "browser"
TIMEOUT_MS = 15_000  # any one wait for the page (a send settles in well under a second)
_MISSED = pytest.StashKey[bool]()  # this process skipped tests for want of Chromium
_FAILED = pytest.StashKey[bool]()  # a test's call failed


@pytest.fixture(scope="session")
def chromium_path(request: pytest.FixtureRequest) -> str:
    path = find_chromium()
    if path is None:
        if required():
            pytest.fail(MISSING, pytrace=False)
        request.config.stash[_MISSED] = True
        pytest.skip(MISSING)
    return path


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    """One headless Chromium per module: Playwright's sync API runs an event loop of its own,
    kept out of the other modules' async tests."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path, headless=True, args=list(FLAGS)
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


@pytest.fixture
def new_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """Factory of pages, each in a context of its own (its own sessionStorage and cookies).
    An uncaught JavaScript error on any of them fails the test; a failed test leaves a
    screenshot of each."""
    contexts: list[Any] = []
    pages: list[Any] = []
    errors: list[str] = []

    def make() -> Any:
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
        pages.append(page)
        return page

    yield make
    try:
        if request.node.stash.get(_FAILED, False):
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^\w.-]+", "_", request.node.name)
            for index, page in enumerate(pages):
                page.screenshot(path=str(SCREENSHOTS / f"{name}-{index}.png"), full_page=True)
        assert not errors, f"JavaScript errors on the page: {errors}"
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def page(new_page: Callable[[], Any]) -> Any:
    """One page in a fresh browser context."""
    return new_page()


def stack_server(name: str, *args: str, scope: Any = "module") -> Any:
    """A fixture: a `scripts/dev` server with these arguments (its log in a temporary folder
    called `name`), stopped with SIGINT as the e2e suite stops its servers."""

    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
        with dev_server_running(tmp_path_factory.mktemp(name), args=args) as running:
            yield running

    return pytest.fixture(scope=scope)(server)


# The echo flow with Auth=None: the smoke test and the inspector's tests share it.
inspector_server = stack_server("browser-inspector", scope="session")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.stash.get(_MISSED, False):
        hand_over(session.config, "browser", MISSING)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def listed(page: Any) -> list[str]:
    """The ids of the tasks page's rows, in order."""
    ids: list[str] = page.locator("table#tasks tr.task").evaluate_all(
        "rows => rows.map(r => r.dataset.taskId)"
    )
    return ids
