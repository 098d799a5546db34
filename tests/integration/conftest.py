"""Integration fixtures: the in-process stack, left idle (no execution running) at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import A2A, wait_idle


@pytest.fixture(autouse=True)
def _fast_blocking_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocking sends tail the event log at most every 50 ms (setting POLL_MAX_MS) so the
    suite does not idle; the stack reads settings when it starts."""
    monkeypatch.setenv("POLL_MAX_MS", "50")


@pytest.fixture
def local_stack(_fast_blocking_polls: None, local_stack: LocalStack) -> Iterator[LocalStack]:
    """The shared fixture, but teardown waits for running executions (their worker threads
    must not outlive moto)."""
    yield local_stack
    wait_idle(local_stack)


@pytest.fixture
def make_stack() -> Iterator[Callable[..., LocalStack]]:
    """A stack with template parameters (e.g. {"Flow": "module:attr"}); one per test."""
    stacks: list[LocalStack] = []

    def make(**parameters: str) -> LocalStack:
        stack = LocalStack(parameters=parameters, event_sources=False).start()
        stacks.append(stack)
        return stack

    yield make
    try:
        for stack in stacks:  # every stack idle before any stops: stacks nest (LocalStack)
            wait_idle(stack)
    finally:
        for stack in reversed(stacks):
            stack.stop()


@pytest.fixture
def alice(local_stack: LocalStack) -> A2A:
    return A2A(local_stack, "alice")


@pytest.fixture
def dedupe_window(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Sends deduplicated within 10 minutes (DEDUPE_WINDOW_SECONDS; off by default): a test
    of retried sends asks for it. Wiring is rebuilt from the environment either way."""
    from a2a_serverless import wiring

    monkeypatch.setenv("DEDUPE_WINDOW_SECONDS", "600")
    wiring.reset()
    yield
    monkeypatch.delenv("DEDUPE_WINDOW_SECONDS")
    wiring.reset()
