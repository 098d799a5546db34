"""Who is calling, from the credential a request carries: API keys and OIDC tokens (JWT).

Used by the authorizer function (handlers/authorizer.py), which API Gateway runs before
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

from a2a_serverless.auth.api_keys import (
    API_KEY_HEADER,
    ApiKeyAdmin,
    ApiKeyAuthenticator,
    IssuedKey,
    UsageKeys,
    hash_api_key,
    new_api_key,
    parse_api_key,
    validate_principal,
)
from a2a_serverless.auth.common import Authenticated, Unauthenticated, header_value
from a2a_serverless.auth.jwt import (
    AUTHORIZATION_HEADER,
    LEEWAY_SECONDS,
    JwksCache,
    JwtAuthenticator,
    bounded_claims,
    claims_json,
    scopes_of,
)
from a2a_serverless.settings import Settings
from a2a_serverless.store import ApiKeyStore

__all__ = [
    "API_KEY_HEADER",
    "AUTHORIZATION_HEADER",
    "LEEWAY_SECONDS",
    "ApiKeyAdmin",
    "ApiKeyAuthenticator",
    "Authenticated",
    "Authenticator",
    "IssuedKey",
    "JwksCache",
    "JwtAuthenticator",
    "Unauthenticated",
    "UsageKeys",
    "authenticator_for",
    "bounded_claims",
    "claims_json",
    "hash_api_key",
    "header_value",
    "new_api_key",
    "parse_api_key",
    "scopes_of",
    "validate_principal",
]

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
