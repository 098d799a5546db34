"""Connection leases on DynamoDB: pool `L#{pool}`, one item `slot#{i:04d}` per held slot with
`leaseId` and `expiresAt` (also the TTL attribute; an expired lease counts as free).

Acquire: a consistent Query of the pool, then a conditional PutItem on a free slot (tried in
random order, the Query repeated a few times if all were taken). Release: a DeleteItem
conditioned on the leaseId, so a late release never frees another's lease.
"""

from __future__ import annotations

import math
import random
from typing import Any

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.store.base import LeaseGrant
from a2a_serverless.store.dynamodb.keys import n, s
from a2a_serverless.store.dynamodb.table import DynamoDBTable

# Queries of a pool per acquire: each after every free slot it found was taken by a racer.
ACQUIRE_ROUNDS = 3
FREE_OR_EXPIRED = "attribute_not_exists(pk) OR #exp < :now"


class DynamoDBLeases(DynamoDBTable):
    """The LeaseStore on the table."""

    def acquire_lease(
        self, pool: str, slots: int, lease_id: str, expires_at: float, now: float
    ) -> LeaseGrant:
        now = math.floor(now)  # whole seconds, as `expiresAt` is stored
        held: dict[int, float] = {}
        for _ in range(ACQUIRE_ROUNDS):
            held = self._held_slots(pool, slots, now)
            free = [slot for slot in range(slots) if slot not in held]
            if not free:
                break
            random.shuffle(free)
            for slot in free:
                if self._take(pool, slot, lease_id, expires_at, now):
                    return LeaseGrant(slot)
        if held and len(held) >= slots:
            return LeaseGrant(None, min(held.values()))
        # Every free slot lost to a racer, every round: as full as can be told, briefly.
        return LeaseGrant(None, now + 1)

    def release_lease(self, pool: str, slot: int, lease_id: str) -> bool:
        try:
            self._db.delete_item(
                TableName=self._table,
                Key=keys.lease_key(pool, slot),
                ConditionExpression="#id = :id",
                ExpressionAttributeNames={"#id": keys.LEASE_ID},
                ExpressionAttributeValues={":id": s(lease_id)},
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def _held_slots(self, pool: str, slots: int, now: float) -> dict[int, float]:
        """slot -> expiry of the pool's live leases (slots below `slots` only)."""
        held: dict[int, float] = {}
        for item in self._query_all(
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": keys.lease_pk(pool)},
            ConsistentRead=True,
        ):
            slot = keys.lease_slot(item)
            expires = float(item.get(keys.EXPIRES, {}).get("N", "0"))
            if slot is not None and slot < slots and expires >= now:
                held[slot] = expires
        return held

    def _take(self, pool: str, slot: int, lease_id: str, expires_at: float, now: float) -> bool:
        item: dict[str, Any] = {
            **keys.lease_key(pool, slot),
            keys.LEASE_ID: s(lease_id),
            keys.EXPIRES: n(math.ceil(expires_at)),
        }
        try:
            self._db.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=FREE_OR_EXPIRED,
                ExpressionAttributeNames={"#exp": keys.EXPIRES},
                ExpressionAttributeValues={":now": n(int(now))},
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True
