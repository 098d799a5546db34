"""The local stack's own OIDC issuer (`Auth=Jwt` without a JwtIssuer of your own).

A key pair made at start signs the tokens `keys token` asks for; discovery and JWKS are served
under `/_local/oidc`. The private key never leaves the process: a previous run's tokens are refused.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey

ALGORITHM = "ES256"
LOCAL_AUDIENCE = "a2a-local"
ISSUER_PATH = "/_local/oidc"
MAX_EXPIRES_IN = 24 * 3600
LIFETIME_CLAIMS = ("nbf", "exp")  # what a caller's extra claims may set (or leave out)


class LocalIssuer:
    """Signs tokens for `issuer`/`audience` with a key generated at start."""

    def __init__(self, issuer: str, audience: str) -> None:
        self.issuer = issuer.rstrip("/")
        self.audience = audience
        self.kid = f"local-{secrets.token_hex(6)}"
        self._key = ECKey.generate_key(
            "P-256", parameters={"kid": self.kid, "alg": ALGORITHM, "use": "sig"}, private=True
        )

    def discovery(self) -> dict[str, Any]:
        """`/.well-known/openid-configuration`: what an OIDC relying party reads."""
        return {
            "issuer": self.issuer,
            "jwks_uri": f"{self.issuer}/jwks.json",
            "token_endpoint": f"{self.issuer.split(ISSUER_PATH)[0]}/_local/tokens",
            "id_token_signing_alg_values_supported": [ALGORITHM],
            "response_types_supported": ["token"],
            "subject_types_supported": ["public"],
        }

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self._key.as_dict(private=False)]}

    def token(
        self,
        sub: str,
        scopes: list[str] | None = None,
        expires_in: int = 3600,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """A signed JWT for `sub`. Extra `claims` may not override the identity claims (`iss`,
        `aud`, `sub`, `iat`, `jti`); they may set the lifetime ones, `nbf` and `exp`, to an
        integer epoch second, or `null` to leave the claim out (to try how the authorizer
        treats a token not yet valid, expired or without an expiry)."""
        if not isinstance(sub, str) or not sub or len(sub) > 255:
            raise ValueError("sub must be a non-empty string of at most 255 characters")
        if not isinstance(expires_in, int) or not 1 <= expires_in <= MAX_EXPIRES_IN:
            raise ValueError(f"expiresIn must be 1..{MAX_EXPIRES_IN} seconds")
        extra = dict(claims or {})
        lifetime = {name: extra.pop(name) for name in LIFETIME_CLAIMS if name in extra}
        for name, value in lifetime.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"claims.{name} must be an integer epoch second or null")
        now = int(time.time())
        payload: dict[str, Any] = extra
        payload.update(
            {
                "iss": self.issuer,
                "aud": self.audience,
                "sub": sub,
                "iat": now,
                "nbf": now,
                "exp": now + expires_in,
                "jti": secrets.token_hex(8),
            }
        )
        payload.update(lifetime)
        for name in [name for name, value in lifetime.items() if value is None]:
            del payload[name]
        if scopes:
            payload["scope"] = " ".join(scopes)
        return jwt.encode({"alg": ALGORITHM, "kid": self.kid, "typ": "JWT"}, payload, self._key)
