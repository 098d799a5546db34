"""The authorizer function's handler (functions/authorizer/app.py) on API Gateway REQUEST
authorizer events: the contract's response shape, `Exception("Unauthorized")` for every bad
credential (and nothing else), and no credential in its logs.

The authenticators are the real ones over the in-memory key store and a JWKS served by an
httpx MockTransport (tests/unit/test_auth_jwt.py); only `get_authenticator` is replaced
(the wiring that would build them on DynamoDB and the network)."""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.auth import (
    API_KEY_HEADER,
    ApiKeyAdmin,
    ApiKeyAuthenticator,
    IssuedKey,
    JwtAuthenticator,
    new_api_key,
)
from a2a_serverless.local.resources import LambdaContext
from tests.fakes import InMemoryApiKeyStore
from tests.unit.test_auth_api_keys import RecordingUsageKeys
from tests.unit.test_auth_jwt import ATTACKS, AUDIENCE, ISSUER, Issuer
from tests.unit.test_observability import captured_logs

ROOT = Path(__file__).resolve().parents[2]
EVENT = json.loads((ROOT / "events" / "authorizer_request.json").read_text())
STAGE_RESOURCE = "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/*/*"
CONTEXT = LambdaContext("a2a-AuthorizerFunction")


@pytest.fixture(scope="module")
def app() -> Any:
    # The handler's code (functions/authorizer/app.py binds it): patched where it looks names up.
    return importlib.import_module("a2a_serverless.handlers.authorizer")


@pytest.fixture
def use(app: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], None]:
    def install(authenticator: Any) -> None:
        monkeypatch.setattr(app, "get_authenticator", lambda: authenticator)

    return install


@pytest.fixture
def keys(use: Callable[[Any], None]) -> Iterator[tuple[InMemoryApiKeyStore, ApiKeyAdmin]]:
    store = InMemoryApiKeyStore()
    use(ApiKeyAuthenticator(store))
    yield store, ApiKeyAdmin(store, RecordingUsageKeys())


@pytest.fixture
def issuer(use: Callable[[Any], None]) -> Issuer:
    issuer = Issuer()
    use(JwtAuthenticator(ISSUER, AUDIENCE, issuer.cache()))
    return issuer


def event(headers: dict[str, Any] | None, **changes: Any) -> dict[str, Any]:
    """The sample event with these headers (single- and multi-value forms)."""
    sample = copy.deepcopy(EVENT)
    sample["headers"] = headers
    sample["multiValueHeaders"] = (
        {k: [v] for k, v in headers.items()} if headers is not None else None
    )
    sample.update(changes)
    return sample


def unauthorized(app: Any, sample: dict[str, Any]) -> None:
    with pytest.raises(Exception) as raised:  # the exact type is checked below
        app.handler(sample, CONTEXT)
    assert type(raised.value) is Exception and str(raised.value) == "Unauthorized"


def check_shape(response: dict[str, Any], principal: str, scheme: str) -> dict[str, Any]:
    assert response["principalId"] == principal
    assert response["policyDocument"] == {
        "Version": "2012-10-17",
        "Statement": [
            {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": STAGE_RESOURCE}
        ],
    }
    context = response["context"]
    # A JWT's context also says when it expires (an API key does not expire by itself).
    expiring = {"expiresAt"} if scheme == "jwt" else set()
    assert set(context) == {"principal", "scheme", "claims", "scopes"} | expiring
    assert all(isinstance(value, str) for value in context.values())
    assert context["principal"] == principal and context["scheme"] == scheme
    claims = json.loads(context["claims"])
    assert isinstance(claims, dict) and len(context["claims"].encode()) <= 4096
    return claims


# -- ApiKey mode ---------------------------------------------------------------------------


def test_api_key_allows_the_stage_with_the_usage_key(
    app: Any, keys: tuple[InMemoryApiKeyStore, ApiKeyAdmin]
) -> None:
    store, admin = keys
    issued = admin.create("alice#1")
    response = app.handler(event({API_KEY_HEADER: issued.api_key}), CONTEXT)
    assert set(response) == {"principalId", "policyDocument", "context", "usageIdentifierKey"}
    claims = check_shape(response, "alice#1", "apiKey")
    assert claims == {"keyId": issued.key_id}
    assert response["context"]["scopes"] == ""
    assert response["usageIdentifierKey"] == store.keys[issued.key_id].usage_key
    assert response["usageIdentifierKey"] not in issued.api_key


def test_any_method_and_path_gives_the_whole_stage(
    app: Any, keys: tuple[InMemoryApiKeyStore, ApiKeyAdmin]
) -> None:
    issued = keys[1].create("alice")
    for method_arn in (
        "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/GET/tasks/t-1",
        "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/GET/",
        "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/POST/a/b/c:cancel",
    ):
        response = app.handler(event({"x-api-key": issued.api_key}, methodArn=method_arn), CONTEXT)
        assert response["policyDocument"]["Statement"][0]["Resource"] == STAGE_RESOURCE


def test_api_key_refusals_are_unauthorized(
    app: Any, keys: tuple[InMemoryApiKeyStore, ApiKeyAdmin]
) -> None:
    admin = keys[1]
    good, revoked = admin.create("alice"), admin.create("alice")
    admin.revoke(revoked.key_id)
    for headers in (
        {API_KEY_HEADER: revoked.api_key},
        {API_KEY_HEADER: new_api_key()[1]},
        {API_KEY_HEADER: good.api_key[:-1] + ("B" if good.api_key[-1] != "B" else "C")},
        {API_KEY_HEADER: good.api_key[:-1]},
        {API_KEY_HEADER: "zzz" + good.api_key[3:]},
        {API_KEY_HEADER: ""},
        {API_KEY_HEADER: "x" * 10_000},
        {"Authorization": f"Bearer {good.api_key}"},
        {},
        None,
    ):
        unauthorized(app, event(headers))
    # The same header twice with different values (multi-value form): ambiguous.
    twice = event({API_KEY_HEADER: good.api_key})
    twice["multiValueHeaders"] = {API_KEY_HEADER: [good.api_key, new_api_key()[1]]}
    unauthorized(app, twice)


# -- Jwt mode ------------------------------------------------------------------------------


def test_jwt_allows_the_stage_without_a_usage_key(app: Any, issuer: Issuer) -> None:
    token = issuer.token(scope="read write", name="Ada")
    response = app.handler(event({"authorization": f"Bearer {token}"}), CONTEXT)
    assert set(response) == {"principalId", "policyDocument", "context"}
    claims = check_shape(response, f"{ISSUER}|user-1", "jwt")
    assert claims["name"] == "Ada" and claims["sub"] == "user-1"
    assert response["context"]["scopes"] == "read write"


def test_big_claims_stay_under_4_kb_in_the_context(app: Any, issuer: Issuer) -> None:
    token = issuer.token(groups=["g" * 50] * 100)
    response = app.handler(event({"Authorization": f"Bearer {token}"}), CONTEXT)
    claims = check_shape(response, f"{ISSUER}|user-1", "jwt")
    assert "groups" not in claims and claims["sub"] == "user-1"


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_jwt_attacks_are_unauthorized(app: Any, issuer: Issuer, attack: str) -> None:
    make, _ = ATTACKS[attack]
    unauthorized(app, event({"Authorization": f"Bearer {make(issuer)}"}))


@pytest.mark.parametrize("failure", ["refused", "timeout", "500", "not-json"])
def test_jwks_unreachable_is_unauthorized(app: Any, issuer: Issuer, failure: str) -> None:
    issuer.failure = failure
    unauthorized(app, event({"Authorization": f"Bearer {issuer.token()}"}))


def test_malformed_authorization_is_unauthorized(app: Any, issuer: Issuer) -> None:
    for value in ("", "Bearer", issuer.token(), "Bearer x.y", "Bearer " + "a" * 12_000):
        unauthorized(app, event({"Authorization": value}))
    unauthorized(app, event({"Authorization": 7}))


# -- modes without an authenticator --------------------------------------------------------


def test_a_mode_without_authenticator_refuses_everyone(
    app: Any, use: Callable[[Any], None]
) -> None:
    use(None)
    unauthorized(app, event({API_KEY_HEADER: new_api_key()[1]}))


# -- logs ----------------------------------------------------------------------------------


def test_logs_name_reason_and_key_id_never_the_credential(
    app: Any, keys: tuple[InMemoryApiKeyStore, ApiKeyAdmin]
) -> None:
    admin = keys[1]
    good: IssuedKey = admin.create("alice")
    wrong = good.api_key[:-3] + ("AAA" if not good.api_key.endswith("AAA") else "BBB")
    with captured_logs() as lines:
        app.handler(event({API_KEY_HEADER: good.api_key}), CONTEXT)
        unauthorized(app, event({API_KEY_HEADER: wrong}))
    text = json.dumps(lines)
    for secret in (good.api_key, good.api_key[17:], wrong, wrong[17:]):
        assert secret not in text
    refusal = next(line for line in lines if line.get("message") == "credential refused")
    assert refusal["reason"] == "wrong API key secret" and refusal["key_id"] == good.key_id
    assert refusal["correlation_id"] == EVENT["requestContext"]["requestId"]
    accepted = next(line for line in lines if line.get("message") == "credential accepted")
    assert accepted["key_id"] == good.key_id


def test_jwt_logs_carry_no_token(app: Any, issuer: Issuer) -> None:
    good = issuer.token()
    bad = issuer.token(aud="someone-else")
    with captured_logs() as lines:
        app.handler(event({"Authorization": f"Bearer {good}"}), CONTEXT)
        unauthorized(app, event({"Authorization": f"Bearer {bad}"}))
    text = json.dumps(lines)
    assert lines and good not in text and bad not in text
    for token in (good, bad):
        assert token.split(".")[2] not in text and token.split(".")[1] not in text
