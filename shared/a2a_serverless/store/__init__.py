"""Storage of tasks and API keys: the interfaces the core uses (by concern) and the values
they exchange.

The DynamoDB implementation and its item layout (keys.py) are in store/dynamodb/.
"""

from a2a_serverless.models.limits import MAX_ID_BYTES, MAX_OWNER_BYTES, utf8_size
from a2a_serverless.store.base import (
    ApiKeyRecord,
    ApiKeyStore,
    ConflictError,
    Dedupe,
    DelegationRecord,
    DelegationState,
    DelegationStore,
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
    round_of_key,
    status_update,
)

__all__ = [
    "MAX_ID_BYTES",
    "MAX_OWNER_BYTES",
    "ApiKeyRecord",
    "ApiKeyStore",
    "ConflictError",
    "Dedupe",
    "DelegationRecord",
    "DelegationState",
    "DelegationStore",
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
    "round_of_key",
    "status_update",
    "utf8_size",
]
