"""No credential is accepted after it expired, whatever API Gateway's authorizer cache holds,
and every refused credential is a 401 naming the scheme:

- a JWT's authenticator says from which second it refuses the token (`exp` + its leeway), the
  authorizer passes that second on (`expiresAt`), and the functions refuse a request from that
  second on (bindings/http.py `caller`), on HTTP+JSON and JSON-RPC alike;
- the local gateway keeps a revoked key's cached answer but refuses the key (its usage-plan
  key is gone): INVALID_API_KEY, which the template answers 401 with the ApiKey challenge, as
  it answers a bad or expired SigV4 signature (INVALID_SIGNATURE, EXPIRED_TOKEN);
- the local SigV4 check refuses a session token (it issues none) and the local issuer mints
  tokens with a chosen lifetime, for the end-to-end tests (tests/e2e/test_auth_modes.py).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from joserfc import jwt
from starlette.requests import Request

from a2a_serverless.auth import (
    LEEWAY_SECONDS,
    ApiKeyAdmin,
    ApiKeyAuthenticator,
    JwtAuthenticator,
    Unauthenticated,
)
from a2a_serverless.bindings.http import CHALLENGES, caller
from a2a_serverless.bindings.jsonrpc import jsonrpc_router
from a2a_serverless.bindings.rest import create_app, get_task_router
from a2a_serverless.core.errors import AuthenticationRequiredError
from a2a_serverless.local.authorizers import GatewayError, LocalUsagePlan
from a2a_serverless.local.issuer import LocalIssuer
from a2a_serverless.local.sigv4 import IamUsers, SignatureError, verify
from tests.fakes import InMemoryApiKeyStore
from tests.unit.test_auth_bindings import JWT_CONTEXT, OwnerEcho, auth_mode, call
from tests.unit.test_auth_jwt import AUDIENCE, ISSUER, Issuer
from tests.unit.test_authorizer_handler import CONTEXT, event
from tests.unit.test_local_authorizers import (
    StandIn,
    allowed,
    make_guard,
    request,
    template_responses,
)

__all__ = ["auth_mode"]  # the fixture, used here by name

EXP = 1_800_000_000


def authenticator(issuer: Issuer, now: int) -> JwtAuthenticator:
    return JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache(), now=lambda: now)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- the authenticator and the authorizer --------------------------------------------------


@pytest.mark.parametrize("exp", [EXP, EXP + 0.25])
def test_a_jwt_is_refused_from_expires_at_and_accepted_just_before(exp: float) -> None:
    issuer = Issuer()
    token = issuer.token(exp=exp, iat=EXP - 600, nbf=EXP - 600)
    expires_at = math.ceil(exp) + LEEWAY_SECONDS
    accepted = authenticator(issuer, expires_at - 1).authenticate(bearer(token))
    assert accepted.expires_at == expires_at
    with pytest.raises(Unauthenticated):  # the authenticator itself refuses it then
        authenticator(issuer, expires_at).authenticate(bearer(token))


def test_an_api_key_does_not_expire_by_itself() -> None:
    store = InMemoryApiKeyStore()
    issued = ApiKeyAdmin(store).create("alice")
    assert ApiKeyAuthenticator(store).authenticate({"X-API-Key": issued.api_key}).expires_at is None


def test_the_authorizer_passes_the_jwts_expiry_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import a2a_serverless.handlers.authorizer as app

    issuer = Issuer()
    exp = int(time.time()) + 600
    token = issuer.token(exp=exp)
    monkeypatch.setattr(
        app, "get_authenticator", lambda: JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache())
    )
    response = app.handler(event({"Authorization": f"Bearer {token}"}), CONTEXT)
    assert response["context"]["expiresAt"] == str(exp + LEEWAY_SECONDS)

    store = InMemoryApiKeyStore()
    issued = ApiKeyAdmin(store).create("alice")
    monkeypatch.setattr(app, "get_authenticator", lambda: ApiKeyAuthenticator(store))
    response = app.handler(event({"X-API-Key": issued.api_key}), CONTEXT)
    assert "expiresAt" not in response["context"]


# -- the functions: caller() ---------------------------------------------------------------


def http_request(authorizer: dict[str, Any]) -> Request:
    return Request(
        {
            "type": "http",
            "method": "GET",
            "path": "/tasks",
            "headers": [],
            "aws.event": {"requestContext": {"authorizer": authorizer}},
        }
    )


def test_the_caller_is_refused_from_expires_at_on() -> None:
    authorizer = {**JWT_CONTEXT["authorizer"], "expiresAt": "1000"}
    assert caller(http_request(authorizer), now=999.999).principal == authorizer["principal"]
    for now in (1000, 1000.5, 10**12):
        with pytest.raises(AuthenticationRequiredError):
            caller(http_request(authorizer), now=now)


@pytest.mark.parametrize("value", ["", "soon", "1e9", True, None, "12 34"])
def test_an_unreadable_expiry_is_refused(value: Any) -> None:
    authorizer = {**JWT_CONTEXT["authorizer"], "expiresAt": value}
    with pytest.raises(AuthenticationRequiredError):
        caller(http_request(authorizer), now=0)


def test_a_number_from_the_gateway_is_read_too() -> None:
    authorizer = {**JWT_CONTEXT["authorizer"], "expiresAt": 1000}
    assert caller(http_request(authorizer), now=999).principal
    with pytest.raises(AuthenticationRequiredError):
        caller(http_request(authorizer), now=1000)


def test_without_expires_at_nothing_expires() -> None:  # an API key, or an answer cached
    authorizer = {"principalId": "alice", "scheme": "apiKey"}  # before expiresAt existed
    assert caller(http_request(authorizer), now=10**12).principal == "alice"


@pytest.mark.parametrize("mode", ["Jwt", "ApiKey"])
def test_an_expired_credential_is_401_naming_the_scheme_on_both_bindings(
    auth_mode: Any, mode: str
) -> None:
    auth_mode(mode)
    expired = {"authorizer": {**JWT_CONTEXT["authorizer"], "expiresAt": "1"}}
    service = OwnerEcho()
    rest = create_app(get_task_router(service))  # type: ignore[arg-type]
    response = call(rest, "GET", "/tasks/t1", expired)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGES[mode]
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
    assert error["message"] == "The credential has expired"

    rpc = create_app(jsonrpc_router(service, object()))  # type: ignore[arg-type]
    body = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "t1"}}
    response = call(rpc, "POST", "/", expired, json=body)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGES[mode]
    assert response.json()["error"]["code"] == -31401
    assert service.owners == []  # nothing was read

    valid = {"authorizer": {**JWT_CONTEXT["authorizer"], "expiresAt": str(10**11)}}
    assert call(rest, "GET", "/tasks/t1", valid).status_code == 200


# -- the local gateway: revoked keys and the template's 401s -------------------------------


async def test_a_revoked_key_is_refused_while_its_answer_is_cached() -> None:
    plan = LocalUsagePlan()
    usage_id, usage_value = plan.create("a2a-x")
    stand_in = StandIn()
    stand_in.answer = allowed(usageIdentifierKey=usage_value)
    guard = make_guard(stand_in, ttl="300", plan=plan)
    keyed = request(path="/keyed", resource="/keyed")
    await guard.check(keyed)
    plan.delete(usage_id)  # ApiKeyAdmin.revoke deletes the usage-plan key
    with pytest.raises(GatewayError) as caught:
        await guard.check(keyed)
    assert len(stand_in.events) == 1  # the cached answer was used, and still refused
    assert caught.value.response_type == "INVALID_API_KEY"
    rendered = template_responses("ApiKey").render(caught.value.response_type, "Forbidden")
    assert rendered.status == 401
    assert dict(rendered.headers)["WWW-Authenticate"] == CHALLENGES["ApiKey"]
    assert json.loads(rendered.body)["error"]["status"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("response_type", ["INVALID_SIGNATURE", "EXPIRED_TOKEN", "INVALID_API_KEY"])
@pytest.mark.parametrize("auth", ["ApiKey", "Jwt", "Iam"])
def test_credentials_the_gateway_refuses_are_401_with_the_challenge(
    auth: str, response_type: str
) -> None:
    rendered = template_responses(auth).render(response_type, "Signature expired")
    assert rendered.status == 401
    assert dict(rendered.headers)["WWW-Authenticate"] == CHALLENGES[auth]
    assert json.loads(rendered.body) == {
        "error": {"code": 401, "status": "UNAUTHENTICATED", "message": "Signature expired"}
    }
    # An authenticated caller who is not allowed stays a 403, with no challenge.
    denied = template_responses(auth).render("ACCESS_DENIED", "no")
    assert denied.status == 403 and "WWW-Authenticate" not in dict(denied.headers)


# -- the local SigV4 check and the local issuer ---------------------------------------------


def test_a_session_token_is_refused_by_the_local_sigv4_check() -> None:
    users = IamUsers("123456789012")
    user = users.create("alice")
    url = "http://127.0.0.1:8123/tasks"

    def headers(token: str | None) -> list[tuple[str, str]]:
        signed = AWSRequest(method="GET", url=url, data=b"")
        credentials = Credentials(user.access_key_id, user.secret_access_key, token)
        SigV4Auth(credentials, "execute-api", "us-east-1").add_auth(signed)
        return [*signed.headers.items(), ("host", "127.0.0.1:8123")]

    kwargs: dict[str, Any] = {
        "method": "GET",
        "host": "127.0.0.1:8123",
        "raw_path": "/tasks",
        "query_string": "",
        "body": b"",
        "users": users,
        "region": "us-east-1",
    }
    assert verify(headers=headers(None), **kwargs) == user
    with pytest.raises(SignatureError, match="security token"):
        verify(headers=headers("FwoGZXIvYXdzEXAMPLE"), **kwargs)


def test_the_local_issuer_sets_or_leaves_out_the_lifetime_claims() -> None:
    issuer = LocalIssuer("http://127.0.0.1:1/_local/oidc", "a2a-local")

    def claims(**extra: Any) -> dict[str, Any]:
        token = issuer.token("alice", claims=extra)
        return dict(jwt.decode(token, issuer._key).claims)

    assert claims(exp=5, nbf=3)["exp"] == 5 and claims(exp=5, nbf=3)["nbf"] == 3
    assert "exp" not in claims(exp=None) and "nbf" not in claims(nbf=None)
    assert claims(sub="mallory", iss="x")["sub"] == "alice"  # identity stays the issuer's
    assert claims(iss="x")["iss"] == issuer.issuer
    for bad in ("5", 1.5, True):
        with pytest.raises(ValueError):
            issuer.token("alice", claims={"exp": bad})
