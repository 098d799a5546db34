"""Agent Card signatures (spec §8.4): our canonical bytes are the a2a-sdk verifier's, and the
cards we sign in process verify with its `create_signature_verifier` (with KMS on moto:
tests/integration/test_card_signing_kms.py)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.utils._jcs import CanonicalizationError
from a2a.utils._jcs import canonicalize as sdk_canonicalize
from a2a.utils.signing import (
    InvalidSignaturesError,
    NoSignatureError,
    _canonicalize_agent_card,
    create_signature_verifier,
)
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, encode_dss_signature
from hypothesis import given, settings
from hypothesis import strategies as st
from jwt import PyJWK

from a2a_serverless import wiring
from a2a_serverless.aws.kms import KMS_RAW_MAX_BYTES, KmsCardSigner
from a2a_serverless.bindings.rest import card_router, create_app
from a2a_serverless.core.card import CardFactory, SignedAgentCard
from a2a_serverless.core.card_signing import (
    CardSigner,
    CardSigningError,
    LocalCardSigner,
    canonical_card,
    canonicalize,
    der_to_raw,
    sign_card,
)
from a2a_serverless.flows.echo import EchoFlow
from a2a_serverless.models import AgentExtension, AgentSkill, Caller
from a2a_serverless.settings import Settings
from tests.asgi_client import AsgiClient
from tests.helpers import fake_aws_env

BASE = "https://agent.example/prod"


def verifier_for(signer: CardSigner, jku: str | None = None) -> Any:
    """The a2a-sdk's verifier, with a key provider that knows only this signer's key."""

    def key_provider(kid: str | None, header_jku: str | None) -> PyJWK:
        jwk = signer.public_jwk()
        assert kid == jwk["kid"]
        if jku is not None:
            assert header_jku == jku
        return PyJWK(jwk)

    return create_signature_verifier(key_provider, ["ES256"])


def verify(card_json: dict[str, Any], signer: CardSigner, jku: str | None = None) -> None:
    """As a client does: parse the served JSON into the proto card, then verify."""
    verifier_for(signer, jku)(parse_agent_card(copy.deepcopy(card_json)))


class RichFlow(EchoFlow):
    """A card with every kind of value: non-ASCII text, extension params with numbers, nesting,
    nulls and empty values, extended skills."""

    name = "rich"
    skills = (
        AgentSkill(
            id="échos",
            name="Échos 🔊 ✓",
            description='Quotes " and \\ and a tab\there, a line\nbreak, \u0001 and \u2028.',
            tags=["a", "😀", "z"],
            examples=["", "one"],
        ),
    )
    extended_skills = (
        AgentSkill(id="secret", name="Secret", description="Signed-in callers", tags=["x"]),
    )
    extensions = (
        AgentExtension(
            uri="https://example.com/ext/v1",
            description="params of every JSON kind",
            required=False,
            params={
                "int": 3,
                "float": 0.1,
                "big": 1e21,
                "small": 1e-7,
                "neg": -2.5,
                "zero": 0,
                "flag": False,
                "none": None,
                "empty": "",
                "emptyList": [],
                "emptyObject": {"inner": {}},
                "nested": {"\U0001f600": 1, "\uffff": 2, "b": [1, "", {"c": ""}]},
            },
        ),
    )


def rich_settings(**more: Any) -> Settings:
    return Settings(
        agent_name="Agent ✓",
        agent_icon_url="https://agent.example/icon.png",
        agent_documentation_url="https://agent.example/docs",
        agent_provider_org="Example Org",
        agent_provider_url="https://example.org",
        auth_mode="ApiKey",
        **more,
    )


@pytest.fixture(scope="module")
def signer() -> LocalCardSigner:
    return LocalCardSigner()


# -- RFC 8785 ----------------------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES)
def test_canonical_json_is_the_sdks(value: Any) -> None:
    try:
        expected = sdk_canonicalize(value)
    except CanonicalizationError:  # lone surrogates: neither side has a form for them
        with pytest.raises(CardSigningError):
            canonicalize(value)
        return
    assert canonicalize(value) == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (2**60, "1152921504606847000"),  # as the double a JSON parser reads it as
        ({"\U0001f600": 1, "\uffff": 2}, '{"\U0001f600":1,"\uffff":2}'),  # UTF-16 order
        ("é\u0007\u2028", '"é\\u0007\u2028"'),
    ],
)
def test_canonical_json_known_answers(value: Any, text: str) -> None:
    assert canonicalize(value) == text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1: "x"}, b"bytes", "\ud800"])
def test_values_without_a_canonical_form_are_refused(value: Any) -> None:
    with pytest.raises(CardSigningError):
        canonicalize(value)


def test_nesting_deeper_than_the_verifier_accepts_is_refused() -> None:
    deep: Any = "x"
    for _ in range(130):
        deep = [deep]
    with pytest.raises(CardSigningError):
        canonicalize(deep)


@pytest.mark.parametrize("v03_fields", [False, True])
def test_the_signed_bytes_are_those_the_sdk_verifier_checks(v03_fields: bool) -> None:
    factory = CardFactory(rich_settings(agent_card_v03_fields=v03_fields), RichFlow())
    body = factory.card_json(BASE)
    assert ("url" in body) is v03_fields
    card = parse_agent_card(copy.deepcopy(body))
    assert canonical_card(body) == _canonicalize_agent_card(card).encode("utf-8")
    # The empty values (and nulls) are not part of it; false and 0 are.
    text = canonical_card(body).decode()
    for dropped in ('"emptyList"', '"emptyObject"', '"empty"', '"none"', '"c"'):
        assert dropped not in text, dropped
    assert '"flag":false' in text and '"zero":0' in text and '"b":[1]' in text


# -- Signing and verifying ---------------------------------------------------------------------


def test_a_signed_card_verifies_with_the_sdk_verifier(signer: LocalCardSigner) -> None:
    factory = CardFactory(rich_settings(), RichFlow(), signer=signer)
    body = factory.card_json(BASE)
    (signature,) = body["signatures"]
    assert set(signature) == {"protected", "signature"}
    header = json.loads(base64.urlsafe_b64decode(signature["protected"] + "=="))
    assert header == {
        "alg": "ES256",
        "kid": signer.kid,
        "typ": "JOSE",
        "jku": f"{BASE}/.well-known/jwks.json",
    }
    assert len(base64.urlsafe_b64decode(signature["signature"] + "==")) == 64  # R || S
    verify(body, signer, jku=f"{BASE}/.well-known/jwks.json")
    assert body["iconUrl"] == "https://agent.example/icon.png"
    assert body["documentationUrl"] == "https://agent.example/docs"
    assert body["provider"] == {"organization": "Example Org", "url": "https://example.org"}


@pytest.mark.parametrize(
    "tamper",
    [
        lambda card: card.update(name="Someone Else"),
        lambda card: card["skills"][0].update(description="changed"),
        lambda card: card["capabilities"]["extensions"][0]["params"].update(int=4),
        lambda card: card.update(iconUrl="https://evil.example/icon.png"),
        lambda card: card["supportedInterfaces"][0].update(url="https://evil.example"),
    ],
)
def test_a_tampered_card_fails_verification(signer: LocalCardSigner, tamper: Any) -> None:
    body = CardFactory(rich_settings(), RichFlow(), signer=signer).card_json(BASE)
    tampered = copy.deepcopy(body)
    tamper(tampered)
    with pytest.raises(InvalidSignaturesError):
        verify(tampered, signer)


def test_another_key_does_not_verify(signer: LocalCardSigner) -> None:
    body = CardFactory(rich_settings(), RichFlow(), signer=LocalCardSigner()).card_json(BASE)
    other = LocalCardSigner()
    verifier = create_signature_verifier(lambda kid, jku: PyJWK(other.public_jwk()), ["ES256"])
    with pytest.raises(InvalidSignaturesError):
        verifier(parse_agent_card(body))


def test_the_0_3_fields_are_outside_the_signature(signer: LocalCardSigner) -> None:
    body = CardFactory(rich_settings(agent_card_v03_fields=True), RichFlow(), signer).card_json(
        BASE
    )
    assert body["protocolVersion"] == "0.3.0" and body["signatures"]
    verify(body, signer)


def test_sign_card_replaces_earlier_signatures(signer: LocalCardSigner) -> None:
    body = CardFactory(rich_settings(), RichFlow()).card_json(BASE)
    signed = sign_card({**body, "signatures": [{"protected": "x", "signature": "y"}]}, signer, BASE)
    assert len(signed["signatures"]) == 1
    verify(signed, signer)


def test_the_extended_card_is_signed_too(signer: LocalCardSigner) -> None:
    factory = CardFactory(rich_settings(), RichFlow(), signer=signer)
    card = factory.extended_card(BASE, Caller("alice", "apiKey"))
    assert isinstance(card, SignedAgentCard)
    body = card.wire()
    assert [s["id"] for s in body["skills"]] == ["échos", "secret"]
    verify(body, signer)
    # ... and is not the public card's signature.
    assert body["signatures"] != factory.card_json(BASE)["signatures"]


class CountingSigner:
    def __init__(self) -> None:
        self.inner = LocalCardSigner()
        self.alg = self.inner.alg
        self.kid = self.inner.kid
        self.calls = 0

    def sign(self, data: bytes) -> bytes:
        self.calls += 1
        return self.inner.sign(data)

    def public_jwk(self) -> dict[str, str]:
        return self.inner.public_jwk()


def test_signatures_are_made_once_per_card_and_base() -> None:
    signer = CountingSigner()
    factory = CardFactory(rich_settings(), RichFlow(), signer=signer)
    first = factory.card_json(BASE)
    assert factory.card_json(BASE) == first
    assert signer.calls == 1
    other = factory.card_json("https://other.example")
    assert signer.calls == 2
    verify(other, signer, jku="https://other.example/.well-known/jwks.json")
    extended = factory.extended_card(BASE, Caller("a", "apiKey"))
    factory.extended_card(BASE, Caller("b", "apiKey"))
    assert signer.calls == 3  # one body, whoever asks
    verify(extended.wire(), signer)
    for index in range(20):  # the cache is bounded
        factory.card_json(f"https://h{index}.example")
    assert len(factory._signatures) <= 16


def test_unsigned_when_no_key_is_configured() -> None:
    factory = CardFactory(rich_settings(), RichFlow())
    body = factory.card_json(BASE)
    assert "signatures" not in body
    assert factory.public_jwks() is None
    extended = factory.extended_card(BASE, Caller("a", "apiKey"))
    assert "signatures" not in extended.wire()
    with pytest.raises(NoSignatureError):
        verifier_for(LocalCardSigner())(parse_agent_card(body))
    assert wiring.card_signer(Settings()) is None
    assert "iconUrl" not in CardFactory(Settings(), EchoFlow()).card_json(BASE)


# -- KMS ---------------------------------------------------------------------------------------


class DigestKms:
    """KMS's Sign as documented for MessageType (moto signs every message as RAW): RAW hashes
    the message; DIGEST signs the 32-byte SHA-256 digest given. Records the requests."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.requests: list[dict[str, Any]] = []

    def sign(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        assert request["SigningAlgorithm"] == "ECDSA_SHA_256"
        if request["MessageType"] == "RAW":
            assert len(request["Message"]) <= KMS_RAW_MAX_BYTES
            algorithm: Any = hashes.SHA256()
        else:
            assert len(request["Message"]) == 32
            algorithm = Prehashed(hashes.SHA256())
        return {"Signature": self.key.sign(request["Message"], ec.ECDSA(algorithm))}

    def get_public_key(self, **request: Any) -> dict[str, Any]:
        from cryptography.hazmat.primitives import serialization

        der = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return {"PublicKey": der, "KeySpec": "ECC_NIST_P256"}


def test_a_card_over_4096_bytes_is_signed_as_its_digest() -> None:
    kms = DigestKms()
    signer = KmsCardSigner(kms, "key")
    small = CardFactory(Settings(), EchoFlow(), signer=signer).card_json(BASE)
    verify(small, signer)
    big_settings = Settings(agent_description="A long description. " * 300)
    big = CardFactory(big_settings, EchoFlow(), signer=signer).card_json(BASE)
    verify(big, signer)
    assert [r["MessageType"] for r in kms.requests] == ["RAW", "DIGEST"]


def test_der_signatures_become_fixed_width_r_and_s() -> None:
    # Small R and S: DER drops leading zero bytes, JWS keeps 32 bytes each.
    raw = der_to_raw(encode_dss_signature(1, 2**255 + 7))
    assert raw == (1).to_bytes(32, "big") + (2**255 + 7).to_bytes(32, "big")


# -- Wiring and the JWKS route -----------------------------------------------------------------


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials and a region in the environment, as a function has them (no AWS call)."""
    fake_aws_env(monkeypatch)


def test_the_configured_key_picks_the_signer(aws_env: None) -> None:
    assert isinstance(wiring.card_signer(Settings(card_signing_key="local")), LocalCardSigner)
    arn = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    made = wiring.card_signer(Settings(card_signing_key=arn))
    assert isinstance(made, KmsCardSigner) and made.key_id == arn
    with pytest.raises(ValueError, match="local stack"):
        wiring.card_signer(Settings(card_signing_key="local", lambda_task_root="/var/task"))


def test_the_jwks_route_serves_the_signers_key(signer: LocalCardSigner) -> None:
    factory = CardFactory(rich_settings(), RichFlow(), signer=signer)
    client = AsgiClient(create_app(card_router(factory)), base_url="https://agent.example")
    jwks = client.get("/.well-known/jwks.json")
    assert jwks.status_code == 200
    assert jwks.headers["cache-control"] == "public, max-age=300"
    assert jwks.json() == {"keys": [signer.public_jwk()]}
    assert "d" not in jwks.json()["keys"][0]  # public members only
    card = client.get("/.well-known/agent-card.json").json()

    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        assert jku == "https://agent.example/.well-known/jwks.json"
        (key,) = [k for k in jwks.json()["keys"] if k["kid"] == kid]
        return PyJWK(key)

    create_signature_verifier(key_provider, ["ES256"])(parse_agent_card(card))


def test_the_jwks_route_is_404_when_unsigned() -> None:
    factory = CardFactory(Settings(), EchoFlow())
    answer = AsgiClient(create_app(card_router(factory))).get("/.well-known/jwks.json")
    assert answer.status_code == 404
    assert answer.json()["error"]["status"] == "NOT_FOUND"
