"""Webhook delivery state on DynamoDB: attributes of the config item `P#{configId}`
(`parked`, `queuedThrough`, `failures`), moved by conditional updates so concurrent senders
agree on whether an event goes directly or through the ordered retry queue."""

from __future__ import annotations

from typing import Any

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.store.base import PushDelivery
from a2a_serverless.store.dynamodb.table import DynamoDBTable

PARKED_AT = {":t": {"BOOL": True}}


class DynamoDBDeliveries(DynamoDBTable):
    """The DeliveryStateStore on the table."""

    def _update_push(self, task_id: str, config_id: str, **update: Any) -> dict[str, Any] | None:
        """One conditional update of a config item: the response, or None when its condition
        failed (the config was deleted, or its queue state moved on)."""
        key = keys.push_key(task_id, config_id)
        if not keys.key_fits(key):  # names no config
            return None
        try:
            return self._db.update_item(TableName=self._table, Key=key, **update)
        except self._db.exceptions.ConditionalCheckFailedException:
            return None

    def get_push_delivery(self, task_id: str, config_id: str) -> PushDelivery | None:
        """A config with its queue state: failed attempts of the current queued delivery and
        the last event queued (one read)."""
        item = self._get(keys.push_key(task_id, config_id))
        if not item:
            return None
        return PushDelivery(
            config=keys.push_config_of(item),
            failures=keys.failures_of(item),
            queued_through=keys.queued_through_of(item),
        )

    def count_push_failure(self, task_id: str, config_id: str) -> int | None:
        """One more failed attempt of the config's current delivery; the new count, or None
        when the config was deleted meanwhile."""
        result = self._update_push(
            task_id,
            config_id,
            UpdateExpression="ADD failures :one",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":one": keys.n(1)},
            ReturnValues="UPDATED_NEW",
        )
        return keys.failures_of(result["Attributes"]) if result else None

    def reset_push_failures(self, task_id: str, config_id: str) -> None:
        """The current delivery is done with: the next one starts with a clean count."""
        self._update_push(
            task_id,
            config_id,
            UpdateExpression="REMOVE failures",
            ConditionExpression="attribute_exists(pk)",
        )

    def park_push_config(self, task_id: str, config_id: str, seq: int) -> None:
        """From now on this config's deliveries go through the ordered retry queue; `seq` is
        the first event queued. (A deleted config stays deleted: nothing more to deliver.)"""
        self._update_push(
            task_id,
            config_id,
            UpdateExpression="SET parked = :t, queuedThrough = :seq",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={**PARKED_AT, ":seq": keys.n(seq)},
        )

    def queue_behind(self, task_id: str, config_id: str, seq: int) -> bool:
        """Record that event `seq` goes through the queue too, if the config is still parked
        (True); False once the queue has drained and the config was unparked (deliver it
        directly) or deleted."""
        key = keys.push_key(task_id, config_id)
        if not keys.key_fits(key):  # names no config
            return False
        try:
            self._db.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="SET queuedThrough = :seq",
                ConditionExpression="parked = :t AND queuedThrough < :seq",
                ExpressionAttributeValues={**PARKED_AT, ":seq": keys.n(seq)},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._db.exceptions.ConditionalCheckFailedException as exc:
            # Still parked with a later event queued (a retried batch): queue it again (the
            # queue drops the copy); unparked or deleted: not queued.
            return keys.is_parked(exc.response.get("Item") or {})
        return True

    def unpark_if_drained(self, task_id: str, config_id: str, seq: int) -> bool:
        """Done with event `seq` on the queue: if it was the last one queued, later events
        go directly again."""
        result = self._update_push(
            task_id,
            config_id,
            UpdateExpression="REMOVE parked, queuedThrough, failures",
            ConditionExpression="parked = :t AND queuedThrough = :seq",
            ExpressionAttributeValues={**PARKED_AT, ":seq": keys.n(seq)},
        )
        return result is not None
