"""Webhook configs on DynamoDB: items `P#{configId}` in the task's partition."""

from __future__ import annotations

from a2a_serverless.models import TaskPushNotificationConfig
from a2a_serverless.store import keys
from a2a_serverless.store.dynamodb.table import DynamoDBTable
from a2a_serverless.store.keys import s


class DynamoDBPushConfigs(DynamoDBTable):
    """The PushConfigStore on the table."""

    def put_push_config(self, config: TaskPushNotificationConfig) -> None:
        """Create or replace one config (its id is already assigned)."""
        self._db.put_item(TableName=self._table, Item=self._expiring(keys.push_item(config)))

    def get_push_config(self, task_id: str, config_id: str) -> TaskPushNotificationConfig | None:
        item = self._get(keys.push_key(task_id, config_id))
        return keys.push_config_of(item) if item else None

    def list_push_configs(self, task_id: str) -> list[tuple[TaskPushNotificationConfig, bool]]:
        """Every config of a task, with whether its deliveries are parked on the retry queue."""
        if not keys.key_fits(keys.task_key(task_id, keys.HEADER)):
            return []
        items = self._query_all(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.task_pk(task_id), ":p": s(keys.PUSH_PREFIX)},
            ConsistentRead=True,
        )
        return [(keys.push_config_of(i), keys.is_parked(i)) for i in items]

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        key = keys.push_key(task_id, config_id)
        if keys.key_fits(key):  # a longer id names no config: already gone
            self._db.delete_item(TableName=self._table, Key=key)
