"""Storage of tasks and API keys: the interfaces the core uses (by concern) and the values
they exchange.

The DynamoDB implementation is in store/dynamodb/, its item layout in store/keys.py.
"""

from a2a_serverless.store.base import (
    ApiKeyRecord,
    ApiKeyStore,
    ConflictError,
    Dedupe,
    DeliveryStateStore,
    InvalidPageToken,
    LeaseGrant,
    LeaseStore,
    ListQuery,
    PushConfigStore,
    PushDelivery,
    StatusChange,
    TaskListing,
    TaskLogStore,
    TaskRecord,
    TaskSnapshot,
    TaskStore,
    TooLarge,
)
from a2a_serverless.store.keys import MAX_ID_BYTES, MAX_OWNER_BYTES, stream_event, utf8_size

__all__ = [
    "MAX_ID_BYTES",
    "MAX_OWNER_BYTES",
    "ApiKeyRecord",
    "ApiKeyStore",
    "ConflictError",
    "Dedupe",
    "DeliveryStateStore",
    "InvalidPageToken",
    "LeaseGrant",
    "LeaseStore",
    "ListQuery",
    "PushConfigStore",
    "PushDelivery",
    "StatusChange",
    "TaskListing",
    "TaskLogStore",
    "TaskRecord",
    "TaskSnapshot",
    "TaskStore",
    "TooLarge",
    "stream_event",
    "utf8_size",
]
