"""The store contract (tests/contract/cases.py) on the in-memory fakes: unit speed.

The API key cases are also run against deliberately broken fakes, each of which must fail the
case that pins what it breaks: the cases can fail."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from a2a_serverless.store import ApiKeyRecord, LeaseGrant
from tests.contract import cases, lease_cases
from tests.contract.cases import *  # noqa: F403 (the contract's test functions)
from tests.contract.lease_cases import *  # noqa: F403 (the LeaseStore's)
from tests.fakes import InMemoryApiKeyStore, InMemoryLeaseStore, InMemoryTaskStore


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()


@pytest.fixture
def expire(store: InMemoryTaskStore) -> Callable[[str], dict[str, Any]]:
    return store.expire


@pytest.fixture
def api_key_store() -> InMemoryApiKeyStore:
    return InMemoryApiKeyStore()


@pytest.fixture
def lease_store() -> InMemoryLeaseStore:
    return InMemoryLeaseStore()


# -- broken API key stores: each must fail a contract case -----------------------------------


class Overwrites(InMemoryApiKeyStore):
    """Puts replace an existing key (a revoked key could be revived by a new put)."""

    def put_api_key(self, record: ApiKeyRecord) -> None:
        self.keys[record.key_id] = record


class RevokesAgain(InMemoryApiKeyStore):
    """Each revocation rewrites the revocation time."""

    revocations = 0

    def revoke_api_key(self, key_id: str) -> bool:
        record = self.keys.get(key_id)
        if record is None:
            return False
        self.revocations += 1
        stamp = f"2026-01-01T00:00:{self.revocations:02d}.000Z"
        self.keys[key_id] = dataclasses.replace(record, revoked_at=stamp)
        return True


class RevokesUnknown(InMemoryApiKeyStore):
    """Says an unknown key was revoked."""

    def revoke_api_key(self, key_id: str) -> bool:
        super().revoke_api_key(key_id)
        return True


class PrefixPrincipal(InMemoryApiKeyStore):
    """Lists by principal prefix: `alice2`'s keys show in `alice`'s list."""

    def list_api_keys(self, principal: str | None = None) -> list[ApiKeyRecord]:
        return [r for r in super().list_api_keys() if r.principal.startswith(principal or "")]


class HidesRevoked(InMemoryApiKeyStore):
    """Leaves revoked keys out of listings."""

    def list_api_keys(self, principal: str | None = None) -> list[ApiKeyRecord]:
        return [r for r in super().list_api_keys(principal) if not r.revoked]


class DropsDescription(InMemoryApiKeyStore):
    """Loses a field on the way in."""

    def put_api_key(self, record: ApiKeyRecord) -> None:
        super().put_api_key(dataclasses.replace(record, description=""))


class RefusesLongIds(InMemoryApiKeyStore):
    """Fails (as DynamoDB would, on a key over its limit) instead of answering "none"."""

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        if len(key_id.encode()) > 1024:
            raise ValueError("key too long")
        return super().get_api_key(key_id)


# -- broken lease stores: each must fail a contract case ---------------------------------------


class NeverExpires(InMemoryLeaseStore):
    """An expired lease keeps its slot (a crashed instance's lease would leak forever)."""

    def acquire_lease(
        self, pool: str, slots: int, lease_id: str, expires_at: float, now: float
    ) -> LeaseGrant:
        return super().acquire_lease(pool, slots, lease_id, expires_at, 0.0)


class ReleasesAnyLease(InMemoryLeaseStore):
    """A release frees the slot whoever holds it (a late release frees another's lease)."""

    def release_lease(self, pool: str, slot: int, lease_id: str) -> bool:
        return self.leases.pop((pool, slot), None) is not None


class IgnoresTheBound(InMemoryLeaseStore):
    """Slots past `slots` are granted (a bound that bounds nothing)."""

    def acquire_lease(
        self, pool: str, slots: int, lease_id: str, expires_at: float, now: float
    ) -> LeaseGrant:
        return super().acquire_lease(pool, slots + 1, lease_id, expires_at, now)


# -- each broken store fails the case that pins what it breaks ----------------------------------


@pytest.mark.parametrize(
    ("broken", "case"),
    [
        (Overwrites, cases.test_api_key_put_never_overwrites),
        (RevokesAgain, cases.test_api_key_revoke_is_idempotent),
        (RevokesUnknown, cases.test_api_key_revoke_is_idempotent),
        (PrefixPrincipal, cases.test_api_keys_list_by_exact_principal),
        (HidesRevoked, cases.test_api_keys_list_by_exact_principal),
        (DropsDescription, cases.test_api_key_round_trips_and_unknown_is_none),
        (RefusesLongIds, cases.test_api_key_ids_no_key_can_hold_name_nothing),
        (NeverExpires, lease_cases.test_an_expired_lease_frees_its_slot),
        (ReleasesAnyLease, lease_cases.test_an_expired_lease_frees_its_slot),
        (IgnoresTheBound, lease_cases.test_a_pool_grants_as_many_leases_as_it_has_slots),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_a_broken_store_fails_the_contract(
    broken: type[InMemoryApiKeyStore | InMemoryLeaseStore], case: Callable[[Any], Any]
) -> None:
    fails: tuple[type[BaseException], ...] = (AssertionError,)
    if issubclass(broken, InMemoryApiKeyStore):
        # Or by the store's own error, or a `pytest.raises` block that saw nothing raised.
        fails += (ValueError, pytest.fail.Exception)
    with pytest.raises(fails):
        case(broken())
