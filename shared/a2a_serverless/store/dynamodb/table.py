"""What every DynamoDB store class shares: the client, the table, the TTL and the write and
paging helpers."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.store.base import ConflictError
from a2a_serverless.store.content import ContentRule

TRANSACTION_ATTEMPTS = 6
BATCH_GET_KEYS = 100  # DynamoDB's limit per BatchGetItem call
BATCH_GET_ATTEMPTS = 8


class DynamoDBTable:
    """One table (see template.yaml `TasksTable`) through a low-level boto3 client; part
    content and flow states over their inline bounds go where `content` says (the content
    bucket)."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        retention_days: int = 30,
        content: ContentRule | None = None,
        inline_state_bytes: int = 32_768,
    ) -> None:
        self._db = client
        self._table = table_name
        self._ttl_seconds = retention_days * 86400
        self.content = content if content is not None else ContentRule(None)
        self._inline_state_bytes = inline_state_bytes
        # botocore builds a new paginator class at every `get_paginator`: one per table, made
        # by the first query.
        self._query_paginator: Any = None

    def _expires(self, margin_seconds: int = 0) -> dict[str, str]:
        return keys.n(int(time.time()) + self._ttl_seconds + margin_seconds)

    def _expiring(self, item: dict[str, Any]) -> dict[str, Any]:
        """The item with its TTL: every item of a task goes with the task."""
        return {**item, keys.EXPIRES: self._expires()}

    def _put(self, item: dict[str, Any], condition: str | None = None) -> dict[str, Any]:
        """A transaction Put of an expiring item."""
        put: dict[str, Any] = {"TableName": self._table, "Item": self._expiring(item)}
        if condition is not None:
            put["ConditionExpression"] = condition
        return {"Put": put}

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        if not keys.key_fits(key):  # no item has it; DynamoDB would refuse the request
            return None
        return self._db.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item")

    def _pages(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every page of a Query (boto3's paginator follows LastEvaluatedKey; a paginator keeps
        no state between `paginate` calls)."""
        if self._query_paginator is None:
            self._query_paginator = self._db.get_paginator("query")
        yield from self._query_paginator.paginate(TableName=self._table, **kwargs)

    def _query_all(self, **kwargs: Any) -> list[dict[str, Any]]:
        return [item for page in self._pages(**kwargs) for item in page.get("Items", [])]

    def _transact(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Write (role, item) pairs atomically; a failed condition names the roles.

        A conflict with a concurrent transaction on a shared item (the counters) is not a
        lost race: it is retried with jittered backoff.
        """
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                self._db.transact_write_items(TransactItems=[item for _, item in items])
                return
            except self._db.exceptions.TransactionCanceledException as exc:
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                failed = tuple(
                    role
                    for (role, _), code in zip(items, reasons, strict=False)
                    if code == "ConditionalCheckFailed"
                )
                if failed:
                    raise ConflictError(f"condition failed on {', '.join(failed)}", failed) from exc
                if "TransactionConflict" not in reasons or attempt == TRANSACTION_ATTEMPTS - 1:
                    raise
            time.sleep(random.uniform(0, 0.02 * 2**attempt))

    def _batch_get(
        self, item_keys: list[dict[str, Any]], attributes: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """The items of these keys that exist, in any order (BatchGetItem, 100 keys a call,
        unprocessed keys retried with jittered backoff). With `attributes`, only those and the
        keys come back."""
        wanted = [key for key in item_keys if keys.key_fits(key)]
        found: list[dict[str, Any]] = []
        ask: dict[str, Any] = {"ConsistentRead": True}
        if attributes:
            names = {f"#a{i}": name for i, name in enumerate(("pk", "sk", *attributes))}
            ask["ProjectionExpression"] = ", ".join(names)
            ask["ExpressionAttributeNames"] = names
        for start in range(0, len(wanted), BATCH_GET_KEYS):
            batch = wanted[start : start + BATCH_GET_KEYS]
            pending: dict[str, Any] = {self._table: {"Keys": batch, **ask}}
            for attempt in range(BATCH_GET_ATTEMPTS):
                page = self._db.batch_get_item(RequestItems=pending)
                found.extend(page.get("Responses", {}).get(self._table, []))
                pending = page.get("UnprocessedKeys") or {}
                if not pending:
                    break
                # Throttled, or past 16 MB in one answer: the rest after a pause.
                time.sleep(random.uniform(0, 0.02 * 2**attempt))
            else:
                raise RuntimeError(f"BatchGetItem left keys unread after {attempt + 1} attempts")
        return found
