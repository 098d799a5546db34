"""The DynamoDB store: one class per concern on one table, composed into DynamoDBTaskStore.

table.py holds what they share (client, table, TTL, transactions, paging); the item layout
is in keys.py (with the decoding of the table's stream records).
"""

from __future__ import annotations

from a2a_serverless.store.dynamodb.api_keys import DynamoDBApiKeys
from a2a_serverless.store.dynamodb.delegations import DynamoDBDelegations
from a2a_serverless.store.dynamodb.deliveries import DynamoDBDeliveries
from a2a_serverless.store.dynamodb.leases import DynamoDBLeases
from a2a_serverless.store.dynamodb.listing import DynamoDBTaskListing
from a2a_serverless.store.dynamodb.push_configs import DynamoDBPushConfigs
from a2a_serverless.store.dynamodb.table import DynamoDBTable
from a2a_serverless.store.dynamodb.tasks import DynamoDBTaskLog


class DynamoDBTaskStore(
    DynamoDBDelegations,  # a DynamoDBTaskLog too (it saves the flow state as the log does)
    DynamoDBTaskLog,
    DynamoDBTaskListing,
    DynamoDBPushConfigs,
    DynamoDBDeliveries,
    DynamoDBApiKeys,
    DynamoDBLeases,
):
    """The whole TaskStore on one table (see template.yaml `TasksTable`), and the ApiKeyStore
    and LeaseStore on the same table: every concern's class shares the constructor
    `(client, table_name, retention_days=30, content=None, inline_state_bytes=32768)`."""


__all__ = [
    "DynamoDBApiKeys",
    "DynamoDBDelegations",
    "DynamoDBDeliveries",
    "DynamoDBLeases",
    "DynamoDBPushConfigs",
    "DynamoDBTable",
    "DynamoDBTaskListing",
    "DynamoDBTaskLog",
    "DynamoDBTaskStore",
]
