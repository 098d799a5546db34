"""Webhook configs on DynamoDB: items `P#{configId}` in the task's partition."""

from __future__ import annotations

from collections.abc import Iterable

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.models import TaskPushNotificationConfig
from a2a_serverless.store.dynamodb.keys import s
from a2a_serverless.store.dynamodb.table import DynamoDBTable


class DynamoDBPushConfigs(DynamoDBTable):
    """The PushConfigStore on the table."""

    def put_push_config(self, config: TaskPushNotificationConfig) -> None:
        """Create or replace one config (its id already assigned). The task's header is marked first
        (`keys.HOOKS`), so the sender never misses a config. Past `limits.MAX_ITEM_BYTES`: TooLarge,
        nothing written."""
        task_id = config.task_id or ""
        item = keys.checked(self._expiring(keys.push_item(config)), "the push notification config")
        if keys.key_fits(keys.task_key(task_id, keys.HEADER)):
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=keys.task_key(task_id, keys.HEADER),
                    UpdateExpression="SET #hooks = :true",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeNames={"#hooks": keys.HOOKS},
                    ExpressionAttributeValues={":true": {"BOOL": True}},
                )
            except self._db.exceptions.ConditionalCheckFailedException:
                pass  # no header to mark: the sender queries such a task's configs
        self._db.put_item(TableName=self._table, Item=item)

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

    def push_configs_of(
        self, task_ids: Iterable[str]
    ) -> dict[str, list[tuple[TaskPushNotificationConfig, bool]]]:
        """`list_push_configs` of each task of a stream batch: the headers' marks in one consistent
        BatchGetItem, then a Query only for each task whose header does not rule configs out."""
        wanted = list(dict.fromkeys(task_ids))
        headers = self._batch_get(
            [keys.task_key(task_id, keys.HEADER) for task_id in wanted], (keys.HOOKS,)
        )
        without = {
            item["pk"]["S"].removeprefix(keys.TASK_PREFIX)
            for item in headers
            if item.get(keys.HOOKS) == {"BOOL": False}
        }
        return {
            task_id: [] if task_id in without else self.list_push_configs(task_id)
            for task_id in wanted
        }

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        key = keys.push_key(task_id, config_id)
        if keys.key_fits(key):  # a longer id names no config: already gone
            self._db.delete_item(TableName=self._table, Key=key)
