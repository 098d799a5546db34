"""The LeaseStore contract (store/base.py): what the in-memory fake and the DynamoDB store must
both do. Test functions over a `lease_store` fixture, imported by
tests/unit/test_store_contract.py and tests/integration/test_store_contract.py. Every case uses
a fresh pool, so one table serves a whole module.
"""

from __future__ import annotations

import threading
import time
import uuid

from a2a_serverless.store import LeaseStore

NOW = 1_900_000_000.0  # a fixed clock: the cases pass `now` explicitly


def _pool() -> str:
    return f"P#contract-{uuid.uuid4().hex[:12]}"


def _id() -> str:
    return uuid.uuid4().hex


def test_a_pool_grants_as_many_leases_as_it_has_slots(lease_store: LeaseStore) -> None:
    pool = _pool()
    grants = [lease_store.acquire_lease(pool, 3, _id(), NOW + 100, NOW) for _ in range(3)]
    assert sorted(g.slot for g in grants if g.slot is not None) == [0, 1, 2]
    refused = lease_store.acquire_lease(pool, 3, _id(), NOW + 200, NOW)
    assert refused.slot is None
    # The earliest held lease's end: when a slot frees itself at the latest.
    assert refused.retry_at == NOW + 100


def test_pools_are_independent(lease_store: LeaseStore) -> None:
    first, second = _pool(), _pool()
    assert lease_store.acquire_lease(first, 1, _id(), NOW + 100, NOW).slot == 0
    assert lease_store.acquire_lease(second, 1, _id(), NOW + 100, NOW).slot == 0
    assert lease_store.acquire_lease(first, 1, _id(), NOW + 100, NOW).slot is None


def test_a_released_slot_is_granted_again(lease_store: LeaseStore) -> None:
    pool, lease = _pool(), _id()
    slot = lease_store.acquire_lease(pool, 1, lease, NOW + 100, NOW).slot
    assert slot is not None
    assert lease_store.release_lease(pool, slot, lease) is True
    assert lease_store.release_lease(pool, slot, lease) is False  # idempotent
    assert lease_store.acquire_lease(pool, 1, _id(), NOW + 100, NOW).slot == slot


def test_an_expired_lease_frees_its_slot(lease_store: LeaseStore) -> None:
    pool, stale = _pool(), _id()
    assert lease_store.acquire_lease(pool, 1, stale, NOW + 10, NOW).slot == 0
    assert lease_store.acquire_lease(pool, 1, _id(), NOW + 100, NOW + 5).slot is None
    taken = _id()
    assert lease_store.acquire_lease(pool, 1, taken, NOW + 100, NOW + 20).slot == 0
    # The expired lease's late release frees nothing: the slot is another's now.
    assert lease_store.release_lease(pool, 0, stale) is False
    assert lease_store.acquire_lease(pool, 1, _id(), NOW + 100, NOW + 20).slot is None
    assert lease_store.release_lease(pool, 0, taken) is True


def test_a_lowered_bound_counts_only_its_slots(lease_store: LeaseStore) -> None:
    pool = _pool()
    for _ in range(3):
        assert lease_store.acquire_lease(pool, 3, _id(), NOW + 100, NOW).slot is not None
    # Bound 2 now: slots 0 and 1 are held, slot 2 is beyond it.
    assert lease_store.acquire_lease(pool, 2, _id(), NOW + 100, NOW).slot is None
    assert lease_store.acquire_lease(pool, 4, _id(), NOW + 100, NOW).slot == 3


def test_concurrent_acquirers_never_share_a_slot(lease_store: LeaseStore) -> None:
    pool, slots, callers = _pool(), 3, 12
    now = time.time()
    results: list[int | None] = []
    lock, start = threading.Lock(), threading.Barrier(callers)

    def acquire() -> None:
        start.wait()
        grant = lease_store.acquire_lease(pool, slots, _id(), now + 100, now)
        with lock:
            results.append(grant.slot)

    threads = [threading.Thread(target=acquire) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    granted = [slot for slot in results if slot is not None]
    assert sorted(granted) == list(range(slots)), results
