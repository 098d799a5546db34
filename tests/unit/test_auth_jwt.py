"""JWT verification: the attack matrix, the accepted tokens, and the JWKS cache.

Key pairs are generated here; the issuer's discovery document and JWKS are served over HTTP
by an httpx MockTransport (the transport is the network, our code runs unchanged). The
unreachable cases over real sockets are in tests/integration/test_jwks_network.py."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from joserfc import jwk, jws, jwt
from joserfc.jwk import ECKey, RSAKey

from a2a_serverless.auth import (
    Authenticated,
    JwksCache,
    JwtAuthenticator,
    Unauthenticated,
    authenticator_for,
    claims_json,
)
from a2a_serverless.auth.jwt import MAX_CLAIMS_JSON_BYTES
from a2a_serverless.settings import Settings
from tests.fakes import InMemoryApiKeyStore

ISSUER = "https://issuer.example.com/tenant"
AUDIENCE = "api://a2a-agent"
DISCOVERY = f"{ISSUER}/.well-known/openid-configuration"
JWKS_URL = "https://keys.example.com/tenant/jwks.json"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def b64json(value: Any) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


@functools.cache
def issuer_keys() -> tuple[RSAKey, ECKey]:
    """The issuer's key pairs, made once: RSA generation is slow and no test changes a key."""
    rsa: RSAKey = jwk.generate_key("RSA", 2048, parameters={"kid": "rsa-1"})
    ec: ECKey = jwk.generate_key("EC", "P-256", parameters={"kid": "ec-1"})
    return rsa, ec


class Issuer:
    """An OIDC issuer over a MockTransport: its keys, what it was asked, how it fails."""

    def __init__(self) -> None:
        self.rsa, self.ec = issuer_keys()
        self.published: list[Any] = [self.rsa, self.ec]
        self.requests: list[str] = []
        self.failure: str | None = None  # "500", "not-json", "refused", "timeout", "no-keys"
        self.now = 1000.0  # the cache's monotonic clock

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.as_dict(private=False) for key in self.published]}

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(str(request.url))
        if self.failure == "refused":
            raise httpx.ConnectError("connection refused", request=request)
        if self.failure == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        if self.failure == "500":
            return httpx.Response(500, text="internal error")
        if self.failure == "not-json":
            return httpx.Response(200, text="<html>not json</html>")
        if str(request.url) == DISCOVERY:
            return httpx.Response(200, json={"issuer": ISSUER, "jwks_uri": JWKS_URL})
        if str(request.url) == JWKS_URL:
            if self.failure == "no-keys":
                return httpx.Response(200, json={"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})
            return httpx.Response(200, json=self.jwks())
        return httpx.Response(404)

    def jwks_fetches(self) -> int:
        return self.requests.count(JWKS_URL)

    def cache(self, jwks_url: str = "") -> JwksCache:
        client = httpx.Client(transport=httpx.MockTransport(self.handle))
        return JwksCache(ISSUER, jwks_url, client=client, clock=lambda: self.now)

    def token(
        self,
        key: Any = None,
        alg: str = "RS256",
        kid: str | None = "rsa-1",
        drop: tuple[str, ...] = (),
        header: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "sub": "user-1",
            "aud": AUDIENCE,
            "exp": now + 600,
            "iat": now,
            "nbf": now,
            **claims,
        }
        for name in drop:
            body.pop(name)
        head = {"alg": alg, **({"kid": kid} if kid is not None else {}), **(header or {})}
        return jwt.encode(head, body, key or self.rsa, algorithms=[alg])


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def auth(issuer: Issuer) -> JwtAuthenticator:
    return JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache())


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def refused(auth: JwtAuthenticator, headers: dict[str, Any]) -> str:
    with pytest.raises(Unauthenticated) as raised:
        auth.authenticate(headers)
    return raised.value.reason


def forge(token: str, header: dict[str, Any] | None = None, **claims: Any) -> str:
    """The token with its header and/or claims replaced, the original signature kept."""
    head, payload, signature = token.split(".")
    if header is not None:
        head = b64json(header)
    if claims:
        body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        payload = b64json({**body, **claims})
    return f"{head}.{payload}.{signature}"


# -- accepted ------------------------------------------------------------------------------


def test_rs256_token_is_accepted(auth: JwtAuthenticator, issuer: Issuer) -> None:
    token = issuer.token(scope="tasks:read tasks:write", email="u@example.com")
    found = auth.authenticate(bearer(token))
    assert isinstance(found, Authenticated) and found.usage_key is None
    assert found.caller.principal == f"{ISSUER}|user-1"
    assert found.caller.scheme == "jwt"
    assert found.caller.scopes == ("tasks:read", "tasks:write")
    assert found.caller.claims["email"] == "u@example.com"
    assert found.caller.claims["aud"] == AUDIENCE


def test_es256_token_with_scp_list_and_audience_list(
    auth: JwtAuthenticator, issuer: Issuer
) -> None:
    token = issuer.token(
        issuer.ec, "ES256", "ec-1", aud=["other", AUDIENCE], scp=["a", "b"], sub="bob"
    )
    found = auth.authenticate({"authorization": f"bearer {token}"})  # any case
    assert found.caller.principal == f"{ISSUER}|bob"
    assert found.caller.scopes == ("a", "b")


def test_scp_as_a_string_and_no_scopes(auth: JwtAuthenticator, issuer: Issuer) -> None:
    assert auth.authenticate(bearer(issuer.token(scp="x y"))).caller.scopes == ("x", "y")
    assert auth.authenticate(bearer(issuer.token())).caller.scopes == ()


def test_clock_skew_within_the_leeway_is_accepted(auth: JwtAuthenticator, issuer: Issuer) -> None:
    now = int(time.time())
    assert auth.authenticate(bearer(issuer.token(exp=now - 30)))
    assert auth.authenticate(bearer(issuer.token(nbf=now + 30, iat=now + 30)))


def test_big_claims_are_cut_to_a_safe_subset(auth: JwtAuthenticator, issuer: Issuer) -> None:
    token = issuer.token(groups=[f"group-{i:04d}" for i in range(400)], jti="j1")
    claims = auth.authenticate(bearer(token)).caller.claims
    assert "groups" not in claims
    assert claims["sub"] == "user-1" and claims["iss"] == ISSUER and claims["jti"] == "j1"
    assert len(claims_json(claims).encode()) <= MAX_CLAIMS_JSON_BYTES


def test_a_rotated_key_is_fetched_once(auth: JwtAuthenticator, issuer: Issuer) -> None:
    auth.authenticate(bearer(issuer.token()))
    assert issuer.jwks_fetches() == 1
    auth.authenticate(bearer(issuer.token()))
    assert issuer.jwks_fetches() == 1  # cached
    new = jwk.generate_key("RSA", 2048, parameters={"kid": "rsa-2"})
    issuer.published = [new]
    issuer.now += 31
    assert auth.authenticate(bearer(issuer.token(new, kid="rsa-2")))
    assert issuer.jwks_fetches() == 2
    # The old key left the JWKS: its tokens are refused from now on.
    refused(auth, bearer(issuer.token()))


def test_discovery_is_used_without_a_jwks_url(issuer: Issuer) -> None:
    auth = JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache())
    auth.authenticate(bearer(issuer.token()))
    assert issuer.requests == [DISCOVERY, JWKS_URL]
    configured = JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache(jwks_url=JWKS_URL))
    issuer.requests.clear()
    configured.authenticate(bearer(issuer.token()))
    assert issuer.requests == [JWKS_URL]


# -- the attack matrix ---------------------------------------------------------------------


def alg_none(issuer: Issuer) -> str:
    valid = issuer.token()
    payload = valid.split(".")[1]
    return f"{b64json({'alg': 'none', 'kid': 'rsa-1', 'typ': 'JWT'})}.{payload}."


def hs256_with_public_pem(issuer: Issuer) -> str:
    pem = issuer.rsa.as_pem(private=False)
    head = b64json({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"})
    payload = issuer.token().split(".")[1]
    signature = hmac.new(pem, f"{head}.{payload}".encode(), hashlib.sha256).digest()
    return f"{head}.{payload}.{b64(signature)}"


def tampered(issuer: Issuer) -> str:
    return forge(issuer.token(sub="user-1"), sub="admin")


def embedded_jwk(issuer: Issuer) -> str:
    """Signed by the attacker's key, which the header carries (and claims the real kid)."""
    attacker = jwk.generate_key("EC", "P-256")
    return issuer.token(attacker, "ES256", "ec-1", header={"jwk": attacker.as_dict(private=False)})


def foreign_key_same_kid(issuer: Issuer) -> str:
    return issuer.token(jwk.generate_key("RSA", 2048, parameters={"kid": "rsa-1"}))


def signed_list_payload(issuer: Issuer) -> str:
    return jws.serialize_compact({"alg": "RS256", "kid": "rsa-1"}, b"[1]", issuer.rsa)


def now() -> int:
    return int(time.time())


# attack -> (token maker, the refusal reason it must get: refused for the right reason)
ATTACKS: dict[str, tuple[Callable[[Issuer], str], str]] = {
    "alg none": (alg_none, "algorithm 'none' refused"),
    "HS256 keyed with the public PEM": (hs256_with_public_pem, "algorithm 'HS256' refused"),
    "expired": (lambda i: i.token(exp=now() - 120), "ExpiredTokenError"),
    "not yet valid": (lambda i: i.token(nbf=now() + 120), "InvalidClaimError"),
    "issued in the future": (lambda i: i.token(iat=now() + 120), "InvalidClaimError"),
    "wrong iss": (lambda i: i.token(iss="https://evil.example.com/tenant"), "InvalidClaim"),
    "iss with a trailing slash": (lambda i: i.token(iss=ISSUER + "/"), "InvalidClaimError"),
    "wrong aud": (lambda i: i.token(aud="api://another-agent"), "InvalidClaimError"),
    "aud list without ours": (lambda i: i.token(aud=["x", "y"]), "InvalidClaimError"),
    "tampered payload": (tampered, "bad signature"),
    "tampered header alg": (
        lambda i: forge(i.token(), header={"alg": "ES256", "kid": "rsa-1"}),
        "cannot verify ES256",
    ),
    "RS256 header on the EC key": (
        lambda i: forge(i.token(), header={"alg": "RS256", "kid": "ec-1"}),
        "cannot verify RS256",
    ),
    "ES256 signed, RS256 claimed": (
        lambda i: forge(i.token(i.ec, "ES256", "ec-1"), header={"alg": "RS256", "kid": "rsa-1"}),
        "bad signature",
    ),
    "PS256": (lambda i: forge(i.token(), header={"alg": "PS256", "kid": "rsa-1"}), "PS256"),
    "embedded jwk header": (embedded_jwk, "bad signature"),
    "another key, same kid": (foreign_key_same_kid, "bad signature"),
    "missing sub": (lambda i: i.token(drop=("sub",)), "MissingClaimError"),
    "empty sub": (lambda i: i.token(sub=""), "InvalidClaimError"),
    "sub not a string": (lambda i: i.token(sub=42), "InvalidClaimError"),
    "missing exp": (lambda i: i.token(drop=("exp",)), "MissingClaimError"),
    "exp not a number": (lambda i: i.token(exp="tomorrow"), "InvalidClaimError"),
    "missing aud": (lambda i: i.token(drop=("aud",)), "MissingClaimError"),
    "missing iss": (lambda i: i.token(drop=("iss",)), "MissingClaimError"),
    "subject too long to own tasks": (lambda i: i.token(sub="s" * 400), "too long"),
    "payload not an object": (signed_list_payload, "not a JSON object"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_is_refused(auth: JwtAuthenticator, issuer: Issuer, attack: str) -> None:
    make, reason = ATTACKS[attack]
    assert reason in refused(auth, bearer(make(issuer)))


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer    "},
        {"Authorization": "not-a-jwt"},
        {"Authorization": "Bearer not-a-jwt"},
        {"Authorization": "Bearer a.b.c"},
        {"Authorization": "Bearer ....."},
        {"Authorization": "Bearer e30.e30.e30.e30.e30"},  # five parts: JWE shape
        {"Authorization": "Bearer " + b64json({"alg": "RS256"}) + ".%%%.!!!"},
        {"Authorization": "Bearer " + "[" * 5000},
        {"Authorization": "Bearer " + b64(b"[" * 3000) + ".e30.e30"},  # deep JSON header
        {"Authorization": "Bearer é.é.é"},
        {"Authorization": "Bearer " + "a" * 20_000},  # huge header
        {"Authorization": None},
        {"Authorization": ["Bearer a", "Bearer b"]},
    ],
)
def test_malformed_authorization_is_refused(
    auth: JwtAuthenticator, headers: dict[str, Any]
) -> None:
    refused(auth, headers)


def test_token_without_bearer_or_with_another_scheme(
    auth: JwtAuthenticator, issuer: Issuer
) -> None:
    token = issuer.token()
    refused(auth, {"Authorization": token})
    refused(auth, {"Authorization": f"Basic {token}"})
    refused(auth, {"X-Token": f"Bearer {token}"})
    assert auth.authenticate(bearer(token))


def test_kid_less_token_needs_an_unambiguous_key(issuer: Issuer) -> None:
    auth = JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache())
    assert auth.authenticate(bearer(issuer.token(kid=None)))  # one RSA key published
    issuer.published.append(jwk.generate_key("RSA", 2048, parameters={"kid": "rsa-9"}))
    issuer.now += 31
    other = JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache())
    refused(other, bearer(issuer.token(kid=None)))


# -- unknown kid: one refetch, rate-limited --------------------------------------------------


def test_unknown_kid_refetches_once_then_is_rate_limited(
    auth: JwtAuthenticator, issuer: Issuer
) -> None:
    auth.authenticate(bearer(issuer.token()))
    assert issuer.jwks_fetches() == 1
    stranger = jwk.generate_key("RSA", 2048, parameters={"kid": "unknown"})
    issuer.now += 31
    assert "unknown kid" in refused(auth, bearer(issuer.token(stranger, kid="unknown")))
    assert issuer.jwks_fetches() == 2  # one refetch
    for offset in (1, 10, 29):
        issuer.now += offset / 10
        refused(auth, bearer(issuer.token(stranger, kid=f"unknown-{offset}")))
    assert issuer.jwks_fetches() == 2  # no refetch within 30 s
    issuer.now += 31
    refused(auth, bearer(issuer.token(stranger, kid="unknown-later")))
    assert issuer.jwks_fetches() == 3
    assert auth.authenticate(bearer(issuer.token()))  # known keys still work


# -- JWKS unreachable ----------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["refused", "timeout", "500", "not-json", "no-keys"])
def test_jwks_failures_are_unauthenticated(issuer: Issuer, failure: str) -> None:
    issuer.failure = failure
    auth = JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache(jwks_url=JWKS_URL))
    refused(auth, bearer(issuer.token()))
    issuer.failure = None
    refused(auth, bearer(issuer.token()))  # within 30 s of the failed fetch: not asked again
    assert issuer.jwks_fetches() == 1
    issuer.now += 31
    assert auth.authenticate(bearer(issuer.token()))  # recovered


@pytest.mark.parametrize("failure", ["refused", "500", "not-json"])
def test_discovery_failures_are_unauthenticated(issuer: Issuer, failure: str) -> None:
    issuer.failure = failure
    refused(JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache()), bearer(issuer.token()))


# -- configuration -------------------------------------------------------------------------


def test_authenticator_for_each_mode() -> None:
    store = InMemoryApiKeyStore()
    jwt_settings = Settings(auth_mode="Jwt", jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    assert isinstance(authenticator_for(jwt_settings, store), JwtAuthenticator)
    assert authenticator_for(Settings(auth_mode="Iam"), store) is None
    assert authenticator_for(Settings(auth_mode="None"), store) is None
    assert type(authenticator_for(Settings(auth_mode="ApiKey"), store)).__name__ == (
        "ApiKeyAuthenticator"
    )
    with pytest.raises(ValueError, match="JWT_ISSUER"):
        authenticator_for(Settings(auth_mode="Jwt", jwt_issuer=ISSUER), store)
