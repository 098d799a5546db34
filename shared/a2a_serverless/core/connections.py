"""Bounds on long-lived connections (SSE streams, subscriptions, blocking sends), enforced
across function instances with leases in the store (store/base.py LeaseStore).

Each principal (tenants share their principal's bound) holds at most `per_principal` at once;
GET subscriptions are also bounded all together (`get_subscriptions`). A lease lasts as long
as its connection may, so a crashed instance's lease frees itself; an ended one is released.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from a2a_serverless.core.errors import TooManyConnectionsError
from a2a_serverless.store import LeaseStore

logger = logging.getLogger(__name__)

PRINCIPAL_POOL = "P#"  # + the principal: its connections of every kind
GET_SUBSCRIPTION_POOL = "G#get"  # every principal's GET subscriptions
# A lease outlives its connection's longest life by this much: the function's timeout is
# 900 s, streams and waits end by 840 s.
LEASE_MARGIN_SECONDS = 60.0
# Retry-After: when the earliest held slot expires, at most this: connections usually end long
# before their lease does.
RETRY_AFTER_CAP_SECONDS = 30


class ConnectionKind(StrEnum):
    STREAM = "stream"  # SendStreamingMessage, SubscribeToTask by POST (and JSON-RPC)
    GET_SUBSCRIPTION = "get-subscription"  # SubscribeToTask by GET (on GetTaskFunction)
    BLOCKING = "blocking"  # SendMessage waiting for its task to settle


@dataclass(frozen=True)
class ConnectionLimits:
    """`per_principal`: connections one principal may hold (0: no bound). `get_subscriptions`:
    GET subscriptions of all principals together (None: no bound; 0: none at all)."""

    per_principal: int = 0
    get_subscriptions: int | None = None
    stream_seconds: float = 840.0
    blocking_seconds: float = 840.0


@dataclass
class Connection:
    """A connection's leases, held until `release()` (idempotent, never raises: a lease that
    cannot be released expires)."""

    leases: list[tuple[str, int, str]] = field(default_factory=list)  # (pool, slot, id)
    store: LeaseStore | None = None

    def release(self) -> None:
        leases, self.leases = self.leases, []
        for pool, slot, lease_id in leases:
            if self.store is None:
                return
            try:
                self.store.release_lease(pool, slot, lease_id)
            except Exception:
                logger.warning("lease %s of %s not released: it expires", slot, pool, exc_info=True)


def unbounded() -> Connection:
    """A connection that holds no lease (no bound applies)."""
    return Connection()


class ConnectionLimiter:
    """Admits long-lived connections within `limits`."""

    def __init__(
        self,
        store: LeaseStore,
        limits: ConnectionLimits,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock

    def open(self, principal: str, kind: ConnectionKind) -> Connection:
        """The leases of a new connection of `principal`, or TooManyConnectionsError (nothing
        held) when a bound is reached."""
        connection = Connection(store=self.store)
        lifetime = (
            self.limits.blocking_seconds
            if kind is ConnectionKind.BLOCKING
            else self.limits.stream_seconds
        )
        try:
            if self.limits.per_principal > 0:
                self._take(
                    connection,
                    PRINCIPAL_POOL + principal,
                    self.limits.per_principal,
                    lifetime,
                    lambda after: (
                        f"This caller already holds {self.limits.per_principal} open "
                        "connections (streams, subscriptions, blocking sends), its bound; "
                        f"close one or retry after {after} s"
                    ),
                )
            shared = self.limits.get_subscriptions
            if kind is ConnectionKind.GET_SUBSCRIPTION and shared is not None:
                self._take(
                    connection,
                    GET_SUBSCRIPTION_POOL,
                    shared,
                    lifetime,
                    lambda after: (
                        f"GET subscriptions are bounded to {shared} at a time on this agent "
                        "(they share GetTask's executions); subscribe with "
                        "POST /tasks/{id}:subscribe instead, or retry after "
                        f"{after} s"
                    ),
                )
        except BaseException:
            connection.release()
            raise
        return connection

    def _take(
        self,
        connection: Connection,
        pool: str,
        slots: int,
        lifetime: float,
        refusal: Callable[[int], str],
    ) -> None:
        now = self.clock()
        lease_id = uuid.uuid4().hex
        grant = (
            self.store.acquire_lease(
                pool, slots, lease_id, now + lifetime + LEASE_MARGIN_SECONDS, now
            )
            if slots > 0
            else None
        )
        if grant is None or grant.slot is None:
            retry_at = grant.retry_at if grant is not None else now + RETRY_AFTER_CAP_SECONDS
            after = min(RETRY_AFTER_CAP_SECONDS, max(1, round(retry_at - now)))
            raise TooManyConnectionsError(refusal(after), retry_after=after)
        connection.leases.append((pool, grant.slot, lease_id))
