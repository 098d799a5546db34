"""Task storage: the interface the core uses and its DynamoDB implementation."""

from a2a_serverless.store.base import (
    ConflictError,
    Dedupe,
    ListQuery,
    PushDelivery,
    StatusChange,
    TaskRecord,
    TaskSnapshot,
    TaskStore,
)

__all__ = [
    "ConflictError",
    "Dedupe",
    "ListQuery",
    "PushDelivery",
    "StatusChange",
    "TaskRecord",
    "TaskSnapshot",
    "TaskStore",
]
