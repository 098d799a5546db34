"""Shared fixtures: the stack of template.yaml inside moto, in this process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from a2a_serverless.local.stack import LocalStack


@pytest.fixture
def local_stack() -> Iterator[LocalStack]:
    """A fresh in-process stack (table, state machine, handlers) per test."""
    stack = LocalStack().start()
    try:
        yield stack
    finally:
        stack.stop()
