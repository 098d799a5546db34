"""The store contract (tests/contract/cases.py) on the in-memory fake: unit speed."""

from __future__ import annotations

import pytest

from tests.contract.cases import *  # noqa: F403 (the contract's test functions)
from tests.fakes import InMemoryTaskStore


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()
