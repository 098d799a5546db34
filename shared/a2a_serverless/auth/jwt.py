"""JWT from any OIDC issuer: RS256/ES256 only, key chosen by `kid` from the issuer's JWKS (the
token's `jku`/`jwk`/`x5u` are never followed); `iss`, `aud`, `exp`, `sub` required, 60 s
leeway. `Authenticated.expires_at` is the second from which the token is refused.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from a2a_serverless.models import Caller
from a2a_serverless.store import MAX_OWNER_BYTES, utf8_size

if TYPE_CHECKING:
    import httpx
    from joserfc.jwk import Key

from a2a_serverless.auth.common import Authenticated, Unauthenticated, header_value

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
    """The issuer's signing keys by `kid`, fetched with httpx (3 s timeout) from the configured JWKS
    URL or the one the issuer's OIDC discovery names. An unknown `kid` refetches at most once per
    JWKS_REFETCH_SECONDS; a failed fetch is Unauthenticated and keeps the keys already known."""

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
        import httpx  # here: API-key authorizers never fetch (their cold start)

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


@dataclass(eq=False)
class JwtAuthenticator:
    """`Authorization: Bearer <JWT>` from the configured issuer for the configured audience
    -> principal `{iss}|{sub}` with the token's claims and scopes."""

    scheme: ClassVar[str] = "jwt"

    issuer: str
    audience: str
    jwks: JwksCache
    _: KW_ONLY
    leeway: int = LEEWAY_SECONDS
    now: Callable[[], int] | None = None

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
        # Anything joserfc or json raise on hostile input is a bad token, never a 500.
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
        key = self.jwks.key(kid, alg)
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
            now=self.now,
            leeway=self.leeway,
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
        return Authenticated(caller, expires_at=math.ceil(claims["exp"]) + self.leeway)
