"""API keys: their format, the authenticator (constant-time hash comparison, refusals) and the
admin that issues and revokes them, on the in-memory ApiKeyStore."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import astuple
from typing import Any

import pytest

from a2a_serverless.auth import (
    API_KEY_HEADER,
    ApiKeyAdmin,
    ApiKeyAuthenticator,
    Unauthenticated,
    hash_api_key,
    new_api_key,
    parse_api_key,
)
from a2a_serverless.store import ApiKeyRecord, ConflictError
from tests.fakes import InMemoryApiKeyStore

KEY_SHAPE = re.compile(r"a2a_[a-z0-9]{12}_[A-Za-z0-9_-]{43}")


class RecordingUsageKeys:
    """UsageKeys that remembers what exists (the API Gateway one is tested in integration)."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.deleted: list[str] = []

    def create(self, name: str) -> tuple[str, str]:
        usage_key_id = f"uk{len(self.keys) + len(self.deleted)}"
        self.keys[usage_key_id] = f"usage-value-{name}-0123456789abcdefghij"
        return usage_key_id, self.keys[usage_key_id]

    def delete(self, usage_key_id: str) -> None:
        self.keys.pop(usage_key_id, None)
        self.deleted.append(usage_key_id)


@pytest.fixture
def store() -> InMemoryApiKeyStore:
    return InMemoryApiKeyStore()


@pytest.fixture
def usage() -> RecordingUsageKeys:
    return RecordingUsageKeys()


@pytest.fixture
def admin(store: InMemoryApiKeyStore, usage: RecordingUsageKeys) -> ApiKeyAdmin:
    return ApiKeyAdmin(store, usage)


def authenticate(store: InMemoryApiKeyStore, key: str, header: str = API_KEY_HEADER) -> Any:
    return ApiKeyAuthenticator(store).authenticate({header: key})


def refused(store: InMemoryApiKeyStore, headers: dict[str, Any]) -> Unauthenticated:
    with pytest.raises(Unauthenticated) as raised:
        ApiKeyAuthenticator(store).authenticate(headers)
    return raised.value


# -- format --------------------------------------------------------------------------------


def test_new_keys_have_the_contract_shape_and_are_unique() -> None:
    issued = [new_api_key() for _ in range(200)]
    for key_id, key in issued:
        assert KEY_SHAPE.fullmatch(key), key
        assert key.startswith(f"a2a_{key_id}_") and len(key) == 60
        assert parse_api_key(key) == key_id
    assert len({key for _, key in issued}) == len({key_id for key_id, _ in issued}) == 200


def test_hash_is_sha256_hex_of_the_whole_key() -> None:
    _, key = new_api_key()
    assert hash_api_key(key) == hashlib.sha256(key.encode()).hexdigest()
    assert len(hash_api_key(key)) == 64


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a2a_",
        "a2a_abcdefghijkl_" + "A" * 42,  # secret one short
        "a2a_abcdefghijkl_" + "A" * 44,  # one long
        "a2b_abcdefghijkl_" + "A" * 43,  # prefix
        "A2A_abcdefghijkl_" + "A" * 43,
        "a2a_ABCDEFGHIJKL_" + "A" * 43,  # key id alphabet
        "a2a_abcdefghijk!_" + "A" * 43,
        "a2a_abcdefghijkl-" + "A" * 43,  # separator
        "a2a_abcdefghijkl_" + "A" * 42 + "=",  # padding is not part of the alphabet
        "a2a_abcdefghijkl_" + "A" * 42 + "é",
        "a2a_abcdefghijkl_" + "A" * 42 + "\n",
        "a2a_abcdefghijkl_" + "A" * 43 + "x" * 100_000,
    ],
)
def test_malformed_keys_parse_to_none(key: str) -> None:
    assert parse_api_key(key) is None


# -- authenticating ------------------------------------------------------------------------


def test_a_valid_key_names_its_principal_and_usage_key(
    store: InMemoryApiKeyStore, admin: ApiKeyAdmin, usage: RecordingUsageKeys
) -> None:
    issued = admin.create("alice", "laptop")
    for header in (API_KEY_HEADER, "x-api-key", "X-API-KEY"):
        found = authenticate(store, issued.api_key, header)
        assert found.caller.principal == "alice"
        assert found.caller.scheme == "apiKey"
        assert found.caller.claims == {"keyId": issued.key_id}
        assert found.usage_key == usage.keys[store.keys[issued.key_id].usage_key_id]


def test_each_refusal(store: InMemoryApiKeyStore, admin: ApiKeyAdmin) -> None:
    good = admin.create("alice")
    revoked = admin.create("alice")
    assert admin.revoke(revoked.key_id) is True
    _, unknown = new_api_key()
    wrong_secret = good.api_key[:-5] + ("AAAAA" if not good.api_key.endswith("AAAAA") else "BBBBB")
    cases = {
        "revoked API key": revoked.api_key,
        "unknown API key": unknown,
        "wrong API key secret": wrong_secret,
    }
    for reason, key in cases.items():
        error = refused(store, {API_KEY_HEADER: key})
        assert error.reason == reason
        assert error.key_id == parse_api_key(key)
    malformed = {
        "wrong length": good.api_key + "A",
        "wrong prefix": "xyz_" + good.api_key[4:],
        "empty": "",
        "spaces": "   ",
        "not a string": None,
    }
    for what, key in malformed.items():
        error = refused(store, {API_KEY_HEADER: key})
        assert error.key_id is None, what
    refused(store, {})
    refused(store, {"Authorization": f"Bearer {good.api_key}"})  # the wrong header
    # Two spellings of the header with different values: ambiguous.
    ambiguous = refused(store, {API_KEY_HEADER: good.api_key, "x-api-key": unknown})
    assert "several" in ambiguous.reason
    assert authenticate(store, good.api_key).caller.principal == "alice"


def test_comparison_is_compare_digest_over_full_hashes(
    store: InMemoryApiKeyStore, admin: ApiKeyAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, Any]] = []
    original = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    issued = admin.create("alice")
    authenticate(store, issued.api_key)
    wrong = issued.api_key[:-1] + ("A" if issued.api_key[-1] != "A" else "Q")
    with pytest.raises(Unauthenticated):
        authenticate(store, wrong)
    with pytest.raises(Unauthenticated):
        authenticate(store, new_api_key()[1])  # unknown id: compared all the same
    assert len(calls) == 3
    stored = store.keys[issued.key_id].secret_hash.encode()
    assert calls[0] == (hash_api_key(issued.api_key).encode(), stored)
    assert calls[1] == (hash_api_key(wrong).encode(), stored)
    assert all(len(a) == len(b) == 64 for a, b in calls)


def test_the_store_never_holds_the_key(store: InMemoryApiKeyStore, admin: ApiKeyAdmin) -> None:
    issued = [admin.create(f"user{i}", "desc") for i in range(5)]
    stored = repr([astuple(record) for record in store.keys.values()])
    for key in issued:
        secret = key.api_key[17:]
        assert key.api_key not in stored and secret not in stored
        assert hash_api_key(key.api_key) in stored
    assert all(key.api_key not in repr(key) for key in issued)  # IssuedKey hides it


# -- the admin -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "principal",
    ["", "x" * 129, "ali\x00ce", "bob\n", "\u202eevil", " alice", "alice ", "😀" * 97],
)
def test_bad_principals_are_refused(admin: ApiKeyAdmin, principal: str) -> None:
    with pytest.raises(ValueError, match="principal"):
        admin.create(principal)


def test_odd_but_valid_principals(store: InMemoryApiKeyStore, admin: ApiKeyAdmin) -> None:
    for principal in ("x" * 128, "alice2#proj", "%23", "ünïcode user", "arn:aws:iam::1:user/a"):
        issued = admin.create(principal)
        assert authenticate(store, issued.api_key).caller.principal == principal


def test_bad_descriptions_are_refused(admin: ApiKeyAdmin) -> None:
    for description in ("x" * 257, "line\nbreak"):
        with pytest.raises(ValueError, match="description"):
            admin.create("alice", description)


def test_revoke_deletes_the_usage_key_and_is_idempotent(
    store: InMemoryApiKeyStore, admin: ApiKeyAdmin, usage: RecordingUsageKeys
) -> None:
    issued = admin.create("alice")
    usage_key_id = store.keys[issued.key_id].usage_key_id
    assert usage_key_id in usage.keys
    assert admin.revoke(issued.key_id) is True
    assert usage_key_id not in usage.keys
    assert admin.revoke(issued.key_id) is True  # still revoked; deleting again is harmless
    assert admin.revoke("nosuchkey123") is False
    assert [(k.key_id, k.revoked) for k in admin.list("alice")] == [(issued.key_id, True)]


def test_list_by_principal(admin: ApiKeyAdmin) -> None:
    alice = {admin.create("alice").key_id for _ in range(2)}
    bob = admin.create("bob").key_id
    assert {k.key_id for k in admin.list("alice")} == alice
    assert {k.key_id for k in admin.list()} == alice | {bob}


def test_a_failed_store_write_leaves_no_usage_key(usage: RecordingUsageKeys) -> None:
    class Full(InMemoryApiKeyStore):
        def put_api_key(self, record: ApiKeyRecord) -> None:
            raise ConflictError("taken", ("apiKey",))

    with pytest.raises(ConflictError):
        ApiKeyAdmin(Full(), usage).create("alice")
    assert usage.keys == {} and len(usage.deleted) == 1


def test_without_a_usage_plan_keys_have_no_usage_key(store: InMemoryApiKeyStore) -> None:
    issued = ApiKeyAdmin(store).create("alice")
    assert authenticate(store, issued.api_key).usage_key is None
