"""Who is calling, from the credential a request carries: API keys and OIDC tokens (JWT).

Used by the authorizer function (handlers/authorizer.py); nothing here knows HTTP beyond
header names.
- API keys: `a2a_<keyId>_<secret>`; the table keeps only the key's SHA-256 (api_keys.py).
- JWT: RS256/ES256, the issuer's JWKS key chosen by `kid`, `iss`/`aud`/`exp`/`sub` required,
  60 s leeway; `Authenticated.expires_at` is when the token stops being accepted (jwt.py).
Failures raise `Unauthenticated` with a reason for the logs that never holds the credential.
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
