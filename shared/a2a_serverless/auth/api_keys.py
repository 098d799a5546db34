"""API keys: `a2a_<keyId>_<secret>` (keyId: 12 of [a-z0-9]; secret: 32 random bytes, URL-safe
base64). The table keeps only the SHA-256 of the whole key, compared in constant time; each
key names its owner and its own API Gateway API key in the usage plan.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from a2a_serverless.models import Caller, format_timestamp
from a2a_serverless.store import MAX_OWNER_BYTES, ApiKeyRecord, ApiKeyStore, utf8_size

if TYPE_CHECKING:
    pass

from a2a_serverless.auth.common import Authenticated, Unauthenticated, header_value

API_KEY_HEADER = "X-API-Key"
API_KEY_PREFIX = "a2a_"
KEY_ID_LENGTH = 12
KEY_ID_ALPHABET = string.ascii_lowercase + string.digits
SECRET_BYTES = 32
SECRET_LENGTH = 43  # base64 of 32 bytes without its one `=` of padding
API_KEY_LENGTH = len(API_KEY_PREFIX) + KEY_ID_LENGTH + 1 + SECRET_LENGTH
_API_KEY = re.compile(
    rf"{API_KEY_PREFIX}([a-z0-9]{{{KEY_ID_LENGTH}}})_[A-Za-z0-9_-]{{{SECRET_LENGTH}}}", re.ASCII
)
# Compared when the key id names no key, so an unknown id costs what a known one does.
_NO_KEY_HASH = hashlib.sha256(b"no such key").hexdigest()
MAX_PRINCIPAL_CHARS = 128
MAX_DESCRIPTION_CHARS = 256


def new_api_key() -> tuple[str, str]:
    """A fresh (key id, full key) from the OS's CSPRNG."""
    key_id = "".join(secrets.choice(KEY_ID_ALPHABET) for _ in range(KEY_ID_LENGTH))
    return key_id, f"{API_KEY_PREFIX}{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"


def hash_api_key(key: str) -> str:
    """What the table stores of a key: SHA-256 hex of the whole key (the secret has 256 bits
    of entropy, so no salt or slow hash is needed to resist guessing)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def parse_api_key(key: str) -> str | None:
    """The key id of a well-formed key, None otherwise (format only: nothing is looked up)."""
    if len(key) != API_KEY_LENGTH:  # first: no pattern runs over an oversized header
        return None
    match = _API_KEY.fullmatch(key)
    return match.group(1) if match else None


class ApiKeyAuthenticator:
    """`X-API-Key: a2a_<keyId>_<secret>` -> the key's principal and usage plan key."""

    scheme = "apiKey"

    def __init__(self, store: ApiKeyStore) -> None:
        self._store = store

    def authenticate(self, headers: Mapping[str, Any] | None) -> Authenticated:
        key = (header_value(headers, API_KEY_HEADER) or "").strip()
        if not key:
            raise Unauthenticated("no API key")
        key_id = parse_api_key(key)
        if key_id is None:
            raise Unauthenticated("malformed API key")
        record = self._store.get_api_key(key_id)
        expected = record.secret_hash if record is not None else _NO_KEY_HASH
        # Constant time over the full hex digests (bytes: a corrupt stored value cannot make
        # compare_digest raise as a non-ASCII str would).
        matches = hmac.compare_digest(hash_api_key(key).encode(), expected.encode())
        if record is None:
            raise Unauthenticated("unknown API key", key_id)
        if not matches:
            raise Unauthenticated("wrong API key secret", key_id)
        if record.revoked:
            raise Unauthenticated("revoked API key", key_id)
        caller = Caller(principal=record.principal, scheme="apiKey", claims={"keyId": key_id})
        return Authenticated(caller, record.usage_key or None)


# -- issuing and revoking keys ---------------------------------------------------------------


class UsageKeys(Protocol):
    """Where a key's throttling lives (API Gateway usage plan keys: core/usage_plans.py)."""

    def create(self, name: str) -> tuple[str, str]:
        """A new enabled usage key in the plan: (its id, its value)."""
        ...

    def delete(self, usage_key_id: str) -> None:
        """Remove it (already gone: nothing to do)."""
        ...


@dataclass(frozen=True)
class IssuedKey:
    """A key just created: the only time its full value exists outside the client."""

    key_id: str
    api_key: str = field(repr=False)  # never in a log line or traceback
    principal: str


def validate_principal(principal: str) -> str:
    """A principal an operator may name: 1-128 characters, none of them control or format
    characters, no surrounding spaces, and small enough to own tasks (MAX_OWNER_BYTES)."""
    if not isinstance(principal, str) or not 1 <= len(principal) <= MAX_PRINCIPAL_CHARS:
        raise ValueError(f"principal must be 1 to {MAX_PRINCIPAL_CHARS} characters")
    if principal != principal.strip():
        raise ValueError("principal must not start or end with whitespace")
    if any(unicodedata.category(c).startswith("C") for c in principal):
        raise ValueError("principal must not contain control, format or unassigned characters")
    if utf8_size(principal) > MAX_OWNER_BYTES:
        raise ValueError(f"principal must be at most {MAX_OWNER_BYTES} bytes in UTF-8")
    return principal


def _validate_description(description: str) -> str:
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        raise ValueError(f"description must be at most {MAX_DESCRIPTION_CHARS} characters")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in description):
        raise ValueError("description must not contain control characters")
    return description


class ApiKeyAdmin:
    """Issue, revoke and list keys (the operator's command; never an API route)."""

    def __init__(self, store: ApiKeyStore, usage_keys: UsageKeys | None = None) -> None:
        # usage_keys None: a stack without a usage plan (keys are not throttled).
        self._store = store
        self._usage_keys = usage_keys

    def create(self, principal: str, description: str = "") -> IssuedKey:
        principal = validate_principal(principal)
        description = _validate_description(description)
        key_id, api_key = new_api_key()
        usage_key_id, usage_key = (
            self._usage_keys.create(f"a2a-{key_id}") if self._usage_keys else ("", "")
        )
        record = ApiKeyRecord(
            key_id=key_id,
            principal=principal,
            secret_hash=hash_api_key(api_key),
            usage_key_id=usage_key_id,
            usage_key=usage_key,
            description=description,
            created_at=format_timestamp(datetime.now(UTC)),
        )
        try:
            self._store.put_api_key(record)
        except BaseException:
            if self._usage_keys and usage_key_id:  # no orphan key left in the usage plan
                self._usage_keys.delete(usage_key_id)
            raise
        return IssuedKey(key_id, api_key, principal)

    def revoke(self, key_id: str) -> bool:
        """Refused by the authorizer from now on (API Gateway may serve its cached answer for
        up to the cache TTL); its usage plan key is deleted. False: no such key."""
        record = self._store.get_api_key(key_id)
        if record is None or not self._store.revoke_api_key(key_id):
            return False
        if self._usage_keys and record.usage_key_id:
            self._usage_keys.delete(record.usage_key_id)
        return True

    def list(self, principal: str | None = None) -> list[ApiKeyRecord]:
        return self._store.list_api_keys(principal)
