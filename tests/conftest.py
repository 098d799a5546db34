"""Shared fixtures: the stack of template.yaml inside moto, in this process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from a2a_serverless.local.stack import LocalStack


@pytest.fixture
def local_stack() -> Iterator[LocalStack]:
    """A fresh in-process stack (table, queues, state machine, handlers) per test, without the
    event-source pollers: call budgets must see only the operation under test. Tests of the
    stream and queue mappings use `stack_with_event_sources`."""
    stack = LocalStack(event_sources=False).start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def stack_with_event_sources() -> Iterator[LocalStack]:
    """The stack as `scripts/dev` runs it: stream and queue mappings polled by threads."""
    stack = LocalStack().start()
    try:
        yield stack
    finally:
        stack.stop()
