"""The store contract (tests/contract/cases.py) on DynamoDBTaskStore and the template's table
in moto (one stack for the module: every case uses fresh ids)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from a2a_serverless.local.stack import LocalStack
from a2a_serverless.store.dynamodb import DynamoDBTaskStore
from tests.contract.cases import *  # noqa: F403 (the contract's test functions)
from tests.integration.harness import ddb


@pytest.fixture(scope="module")
def table_stack() -> Iterator[LocalStack]:
    with LocalStack(event_sources=False) as stack:
        yield stack


@pytest.fixture
def store(table_stack: LocalStack) -> DynamoDBTaskStore:
    return DynamoDBTaskStore(ddb(), table_stack.env["TABLE_NAME"])


@pytest.fixture
def api_key_store(store: DynamoDBTaskStore) -> DynamoDBTaskStore:
    """The task store is the ApiKeyStore too (one table, see store/dynamodb/api_keys.py)."""
    return store
