"""Integration fixtures: the in-process stack, left idle (no execution running) at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from a2a_serverless.local.stack import LocalStack
from tests.conftest import SHARED
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


# Template parameters that only set a function's environment variable: a variant of them runs
# on the shared stack with the variable set (wiring and handlers are rebuilt from it).
SETTING_PARAMETERS = {"Flow": "FLOW"}


@pytest.fixture
def make_stack(
    _fast_blocking_polls: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., LocalStack]]:
    """A stack with template parameters (e.g. {"Flow": "module:attr"}): the shared stack
    with the setting for a parameter that is one (when the test changed no variable but
    settings), else a stack of its own."""
    stacks: list[LocalStack] = []

    def make(**parameters: str) -> LocalStack:
        if set(parameters) <= set(SETTING_PARAMETERS) and SHARED.only_settings_changed():
            for name, value in parameters.items():
                monkeypatch.setenv(SETTING_PARAMETERS[name], value)
            stack = SHARED.refresh()
        else:
            SHARED.set_aside()  # its resources have the names this stack's will have
            stack = LocalStack(parameters=parameters, event_sources=False).start()
        stacks.append(stack)
        return stack

    yield make
    try:
        for stack in stacks:  # every stack idle before any stops: stacks nest (LocalStack)
            wait_idle(stack)
    finally:
        for stack in reversed(stacks):
            if stack is not SHARED.stack:
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
