"""Agent Card signatures with KMS on moto: the cards a KMS key signs verify with the a2a-sdk's
`create_signature_verifier`, an alias names the key, and a key that is not P-256 is refused."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from a2a.utils.signing import InvalidSignaturesError
from moto import mock_aws

from a2a_serverless.aws.kms import KmsCardSigner
from a2a_serverless.core.card import CardFactory
from a2a_serverless.core.card_signing import CardSigningError
from a2a_serverless.flows.echo import EchoFlow
from a2a_serverless.settings import Settings
from tests.helpers import fake_aws_env
from tests.unit.test_card_signing import BASE, RichFlow, rich_settings, verify


@pytest.fixture
def kms(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    fake_aws_env(monkeypatch)
    with mock_aws():
        yield boto3.client("kms", region_name="us-east-1")


def test_a_card_signed_with_kms_verifies(kms: Any) -> None:
    key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    signer = KmsCardSigner(kms, key["Arn"])
    factory = CardFactory(rich_settings(), RichFlow(), signer=signer)
    body = factory.card_json(BASE)
    verify(body, signer, jku=f"{BASE}/.well-known/jwks.json")
    tampered = {**body, "name": "Someone Else"}
    with pytest.raises(InvalidSignaturesError):
        verify(tampered, signer)
    # The JWK is the key's public key, and kid is its RFC 7638 thumbprint.
    jwk = signer.public_jwk()
    der = kms.get_public_key(KeyId=key["KeyId"])["PublicKey"]
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    numbers = load_der_public_key(der).public_numbers()
    assert base64.urlsafe_b64decode(jwk["x"] + "==") == numbers.x.to_bytes(32, "big")
    members = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
    thumbprint = base64.urlsafe_b64encode(hashlib.sha256(members.encode()).digest())
    assert jwk["kid"] == thumbprint.rstrip(b"=").decode()


def test_an_alias_names_the_kms_key(kms: Any) -> None:
    key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    kms.create_alias(AliasName="alias/card", TargetKeyId=key["KeyId"])
    signer = KmsCardSigner(kms, "alias/card")
    verify(CardFactory(Settings(), EchoFlow(), signer=signer).card_json(BASE), signer)


def test_a_kms_key_that_is_not_p256_is_refused(kms: Any) -> None:
    key = kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    with pytest.raises(CardSigningError, match=r"P-256|ECC_NIST_P256"):
        KmsCardSigner(kms, key["KeyId"]).public_jwk()
