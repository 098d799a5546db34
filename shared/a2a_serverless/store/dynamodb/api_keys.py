"""API keys on DynamoDB: item `APIKEY#{keyId}` / `APIKEY` per key (what the authorizer reads:
one GetItem, on a partition of its own, so authorizer reads spread over partitions) and its
copy `APIKEYS` / `{keyId}` in the listing partition (a Query lists the keys without scanning
the tasks). Both are written in one transaction; neither expires."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.models import format_timestamp
from a2a_serverless.store.base import ApiKeyRecord, ConflictError
from a2a_serverless.store.dynamodb.keys import s
from a2a_serverless.store.dynamodb.table import DynamoDBTable

NEW_ITEM = "attribute_not_exists(pk)"
EXISTING_ITEM = "attribute_exists(pk)"


class DynamoDBApiKeys(DynamoDBTable):
    """The ApiKeyStore on the table."""

    def put_api_key(self, record: ApiKeyRecord) -> None:
        attributes = keys.api_key_attributes(record)
        self._transact(
            [
                (
                    "apiKey",
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": {**keys.api_key_key(record.key_id), **attributes},
                            "ConditionExpression": NEW_ITEM,
                        }
                    },
                ),
                (
                    "listing",
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": {**keys.api_key_list_key(record.key_id), **attributes},
                            "ConditionExpression": NEW_ITEM,
                        }
                    },
                ),
            ]
        )

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        item = self._get(keys.api_key_key(key_id))
        return keys.api_key_of(item) if item else None

    def revoke_api_key(self, key_id: str) -> bool:
        if not keys.key_fits(keys.api_key_key(key_id)):
            return False
        now = format_timestamp(datetime.now(UTC))

        def revoke(key: dict[str, Any]) -> dict[str, Any]:
            return {
                "Update": {
                    "TableName": self._table,
                    "Key": key,
                    # The first revocation time stays: revoking twice changes nothing.
                    "UpdateExpression": "SET revokedAt = if_not_exists(revokedAt, :now)",
                    "ConditionExpression": EXISTING_ITEM,
                    "ExpressionAttributeValues": {":now": s(now)},
                }
            }

        try:
            self._transact(
                [
                    ("apiKey", revoke(keys.api_key_key(key_id))),
                    ("listing", revoke(keys.api_key_list_key(key_id))),
                ]
            )
        except ConflictError:
            return False  # no such key
        return True

    def list_api_keys(self, principal: str | None = None) -> list[ApiKeyRecord]:
        query: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(keys.API_KEY_LIST_PK)},
            "ConsistentRead": True,
        }
        if principal is not None:
            query["FilterExpression"] = "principal = :principal"
            query["ExpressionAttributeValues"][":principal"] = s(principal)
        return [keys.api_key_of(item) for item in self._query_all(**query)]
