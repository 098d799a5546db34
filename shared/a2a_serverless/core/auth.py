"""Who is calling, from the credential a request carries: API keys and OIDC tokens (JWT).

Used by the authorizer function (functions/authorizer/app.py), which API Gateway runs before
every protected route; its answer (the caller, and in ApiKey mode the usage plan key) is
cached by API Gateway per credential. Nothing here knows HTTP beyond header names.

- **API keys** look like `a2a_<keyId>_<secret>` (keyId: 12 of [a-z0-9]; secret: 32 random
  bytes, URL-safe base64 without padding, 43 characters). The table keeps only the SHA-256 of
  the whole key, compared with `hmac.compare_digest`; the key id finds the record in one read.
  Each key names its owner principal and an API Gateway API key of the usage plan (a random
  value of its own, never the client's secret) that throttles it.
- **JWT** (any OIDC issuer): RS256/ES256 only, verified by joserfc with a key of the issuer's
  JWKS chosen by `kid` (the token's own `jku`/`jwk`/`x5u` headers are never followed);
  `iss`, `aud`, `exp`, `sub` required, `exp`/`nbf`/`iat` honoured with 60 s leeway. A token is
  refused from `exp` + leeway on; `Authenticated.expires_at` is that second, which the
  authorizer passes on so the functions refuse the token then even while API Gateway still
  serves the cached answer.

Failures raise `Unauthenticated` with a reason for the logs; a reason never holds the
credential (fixed texts, error class names, HTTP statuses, key ids).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import string
import threading
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from a2a_serverless.models import Caller, format_timestamp
from a2a_serverless.settings import Settings
from a2a_serverless.store import MAX_OWNER_BYTES, ApiKeyRecord, ApiKeyStore, utf8_size

if TYPE_CHECKING:
    import httpx
    from joserfc.jwk import Key


class Unauthenticated(Exception):
    """The request carries no valid credential (HTTP 401). `reason` is for logs only."""

    def __init__(self, reason: str, key_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key_id = key_id


@dataclass(frozen=True)
class Authenticated:
    """Who the credential names, (ApiKey mode) the usage plan key that meters it, and the
    epoch second from which the authenticator refuses the credential (None: it never
    expires by itself)."""

    caller: Caller
    usage_key: str | None = None
    expires_at: int | None = None


def header_value(headers: Mapping[str, Any] | None, name: str) -> str | None:
    """A request header by case-insensitive name; a value may be a list (several headers of
    that name). Different values are ambiguous (which one would a proxy or API Gateway's
    cache key have used?): refused."""
    found: set[str] = set()
    for key, value in (headers or {}).items():
        if not isinstance(key, str) or key.lower() != name.lower():
            continue
        for one in value if isinstance(value, list | tuple) else [value]:
            if isinstance(one, str):
                found.add(one)
    if len(found) > 1:
        raise Unauthenticated(f"several {name} headers")
    return found.pop() if found else None


# -- API keys --------------------------------------------------------------------------------

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


# -- JWT -------------------------------------------------------------------------------------

AUTHORIZATION_HEADER = "Authorization"
ALGORITHMS = ("RS256", "ES256")
_KEY_TYPE = {"RS256": ("RSA", None), "ES256": ("EC", "P-256")}  # alg -> (kty, crv)
LEEWAY_SECONDS = 60
MAX_AUTHORIZATION_BYTES = 8192  # a bigger header is no token we issue or accept
MAX_CLAIMS_JSON_BYTES = 4096  # the authorizer context carries them as one string
# What is kept of claims whose JSON is too big: identity and lifetime, then identity only.
SAFE_CLAIMS = ("iss", "sub", "aud", "azp", "client_id", "exp", "nbf", "iat", "jti")
JWKS_REFETCH_SECONDS = 30.0
JWKS_TIMEOUT_SECONDS = 3.0
MAX_JWKS_BYTES = 256 * 1024
DISCOVERY_PATH = "/.well-known/openid-configuration"


def claims_json(claims: Mapping[str, Any]) -> str:
    """Claims as the authorizer context carries them (compact JSON)."""
    return json.dumps(claims, separators=(",", ":"), ensure_ascii=False, default=str)


def bounded_claims(claims: Mapping[str, Any]) -> dict[str, Any]:
    """The claims, or when their JSON exceeds MAX_CLAIMS_JSON_BYTES a safe subset of them."""
    candidates = (
        dict(claims),
        {k: claims[k] for k in SAFE_CLAIMS if k in claims},
        {k: claims[k] for k in ("iss", "sub") if k in claims},
    )
    for candidate in candidates:
        if utf8_size(claims_json(candidate)) <= MAX_CLAIMS_JSON_BYTES:
            return candidate
    return {}


def scopes_of(claims: Mapping[str, Any]) -> tuple[str, ...]:
    """`scope` (space-separated string, RFC 8693) or else `scp` (a list: Okta; a string:
    Entra ID)."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list):
        return tuple(s for s in value if isinstance(s, str) and s)
    return ()


class JwksCache:
    """The issuer's signing keys by `kid`, fetched with httpx (3 s timeout) from the
    configured JWKS URL or else the one the issuer's OIDC discovery document names.

    A `kid` not in the cache causes one refetch (keys rotate), at most one per
    JWKS_REFETCH_SECONDS whatever the outcome: tokens with made-up kids cannot make us
    hammer the issuer. A failed fetch (unreachable, timeout, non-200, not JSON, no usable
    key) is Unauthenticated and keeps the keys already known.
    """

    def __init__(
        self,
        issuer: str,
        jwks_url: str = "",
        *,
        client: httpx.Client | None = None,
        refetch_seconds: float = JWKS_REFETCH_SECONDS,
        timeout_seconds: float = JWKS_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self._jwks_url = jwks_url
        self._discovered_url = ""
        self._client = client
        self._refetch_seconds = refetch_seconds
        self._timeout = timeout_seconds
        self._clock = clock
        self._lock = threading.Lock()  # the local stack authorizes requests concurrently
        self._keys: list[Key] = []
        self._fetched_at: float | None = None
        self.fetches = 0  # JWKS documents requested (tests and logs)

    def key(self, kid: str | None, alg: str) -> Key:
        """The key that verifies a token with this `kid` and `alg`."""
        with self._lock:
            found = self._find(kid, alg)
            if found is not None:
                return found
            now = self._clock()
            if self._fetched_at is not None and now - self._fetched_at < self._refetch_seconds:
                raise Unauthenticated("unknown kid (JWKS fetched moments ago)")
            self._fetched_at = now
            self._keys = self._fetch()
            found = self._find(kid, alg)
            if found is None:
                raise Unauthenticated("unknown kid")
            return found

    def _find(self, kid: str | None, alg: str) -> Key | None:
        kty, crv = _KEY_TYPE[alg]
        if kid is None:
            candidates = [k for k in self._keys if k.key_type == kty]
            if len(candidates) != 1:  # without a kid only an unambiguous key will do
                return None
            found = candidates[0]
        else:
            by_kid = next((k for k in self._keys if k.kid == kid), None)
            if by_kid is None:
                return None
            found = by_kid
        if found.key_type != kty or (crv and found.get("crv") != crv):
            raise Unauthenticated(f"key {kid!r} cannot verify {alg}")
        if found.get("alg") not in (None, alg):
            raise Unauthenticated(f"key {kid!r} is for another algorithm")
        return found

    def _fetch(self) -> list[Key]:
        from joserfc import jwk

        self.fetches += 1
        url = self._jwks_url or self._discover()
        document = self._get_json(url, "JWKS")
        raw_keys = document.get("keys")
        if not isinstance(raw_keys, list):
            self._discovered_url = ""  # ask discovery again next time
            raise Unauthenticated("JWKS has no `keys` list")
        keys: list[Key] = []
        for raw in raw_keys:
            # Signing keys of the types we verify; anything else (enc keys, symmetric keys,
            # other curves, broken entries) is skipped, not fatal.
            if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":
                continue
            if raw.get("kty") not in ("RSA", "EC"):
                continue
            try:
                keys.append(jwk.import_key(raw))
            except Exception:  # joserfc raises several types for malformed key material
                continue
        if not keys:
            raise Unauthenticated("JWKS has no usable RSA/EC signing key")
        return keys

    def _discover(self) -> str:
        if not self._discovered_url:
            document = self._get_json(self.issuer.rstrip("/") + DISCOVERY_PATH, "discovery")
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                raise Unauthenticated("OIDC discovery document has no jwks_uri")
            self._discovered_url = jwks_uri
        return self._discovered_url

    def _get_json(self, url: str, what: str) -> dict[str, Any]:
        import httpx  # here: API-key authorizers never fetch (~45 ms of their cold start)

        if self._client is None:
            self._client = httpx.Client(timeout=self._timeout, follow_redirects=False)
        try:
            response = self._client.get(
                url, timeout=self._timeout, headers={"Accept": "application/json"}
            )
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise Unauthenticated(f"{what} unreachable ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise Unauthenticated(f"{what} answered HTTP {response.status_code}")
        if len(response.content) > MAX_JWKS_BYTES:
            raise Unauthenticated(f"{what} document too large")
        try:
            document = json.loads(response.content)
        except (ValueError, RecursionError):
            raise Unauthenticated(f"{what} is not JSON") from None
        if not isinstance(document, dict):
            raise Unauthenticated(f"{what} is not a JSON object")
        return document


class JwtAuthenticator:
    """`Authorization: Bearer <JWT>` from the configured issuer for the configured audience
    -> principal `{iss}|{sub}` with the token's claims and scopes."""

    scheme = "jwt"

    def __init__(
        self,
        issuer: str,
        audience: str,
        jwks: JwksCache,
        *,
        leeway: int = LEEWAY_SECONDS,
        now: Callable[[], int] | None = None,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self._jwks = jwks
        self._leeway = leeway
        self._now = now

    def authenticate(self, headers: Mapping[str, Any] | None) -> Authenticated:
        from joserfc import jws
        from joserfc.jwt import JWTClaimsRegistry

        value = header_value(headers, AUTHORIZATION_HEADER)
        if not value:
            raise Unauthenticated("no Authorization header")
        if utf8_size(value) > MAX_AUTHORIZATION_BYTES:
            raise Unauthenticated("Authorization header too large")
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("not a Bearer token")
        # Parsing and verifying caller-sent bytes: whatever joserfc or json raise on hostile
        # input (its own errors, ValueError, RecursionError on deep nesting, ...) is a bad
        # token, never a 500.
        try:
            signed = jws.extract_compact(token.encode("ascii"))
            header = signed.headers()
        except Exception:
            raise Unauthenticated("not a JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS:
            raise Unauthenticated(f"algorithm {str(alg)[:20]!r} refused")
        if kid is not None and not isinstance(kid, str):
            raise Unauthenticated("kid is not a string")
        key = self._jwks.key(kid, alg)
        try:
            valid = jws.validate_compact(signed, key, algorithms=[alg])
            claims = json.loads(signed.payload or b"")
        except Exception:
            raise Unauthenticated("signature not verified") from None
        if not valid:
            raise Unauthenticated("bad signature")
        if not isinstance(claims, dict):
            raise Unauthenticated("claims are not a JSON object")
        registry = JWTClaimsRegistry(
            now=self._now,
            leeway=self._leeway,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.audience},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(claims)
        except Exception as exc:  # joserfc's ClaimError family: expired, wrong iss/aud, ...
            raise Unauthenticated(f"claims refused ({type(exc).__name__})") from None
        principal = f"{claims['iss']}|{claims['sub']}"
        if utf8_size(principal) > MAX_OWNER_BYTES:
            raise Unauthenticated("subject too long to own tasks")
        caller = Caller(
            principal=principal,
            scheme="jwt",
            claims=bounded_claims(claims),
            scopes=scopes_of(claims),
        )
        return Authenticated(caller, expires_at=math.ceil(claims["exp"]) + self._leeway)


# -- configuration ---------------------------------------------------------------------------

Authenticator = ApiKeyAuthenticator | JwtAuthenticator


def authenticator_for(settings: Settings, store: ApiKeyStore) -> Authenticator | None:
    """The authenticator of the stack's Auth mode; None for modes API Gateway handles itself
    (Iam) or that have none (None)."""
    if settings.auth_mode == "ApiKey":
        return ApiKeyAuthenticator(store)
    if settings.auth_mode == "Jwt":
        if not settings.jwt_issuer or not settings.jwt_audience:
            raise ValueError("Auth=Jwt needs JWT_ISSUER and JWT_AUDIENCE")
        return JwtAuthenticator(
            settings.jwt_issuer,
            settings.jwt_audience,
            JwksCache(settings.jwt_issuer, settings.jwt_jwks_url),
        )
    return None
