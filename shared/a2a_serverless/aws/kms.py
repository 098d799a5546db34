"""Card signatures by a KMS key that never leaves KMS."""

from __future__ import annotations

import hashlib
from typing import Any

from a2a_serverless.core.card_signing import (
    ALGORITHM,
    CardSigningError,
    der_to_raw,
    p256_jwk,
)

# KMS Sign takes a RAW message of at most 4096 bytes; a longer one is signed as its digest.
KMS_RAW_MAX_BYTES = 4096


class KmsCardSigner:
    """An asymmetric KMS key (KeySpec ECC_NIST_P256, KeyUsage SIGN_VERIFY) that never leaves
    KMS. Its public key is read once (kms:GetPublicKey) and kept; each signature is one
    kms:Sign call (the card factory caches signatures, so a warm function makes few)."""

    alg = ALGORITHM

    def __init__(self, kms_client: Any, key_id: str) -> None:
        self._kms = kms_client
        self.key_id = key_id
        self._jwk: dict[str, str] | None = None

    def public_jwk(self) -> dict[str, str]:
        if self._jwk is None:
            from cryptography.hazmat.primitives.serialization import load_der_public_key

            answer = self._kms.get_public_key(KeyId=self.key_id)
            if answer.get("KeySpec") not in (None, "ECC_NIST_P256"):
                raise CardSigningError(
                    f"KMS key {self.key_id} is {answer.get('KeySpec')}: card signatures need "
                    "an ECC_NIST_P256 key (ES256)"
                )
            self._jwk = p256_jwk(load_der_public_key(answer["PublicKey"]))
        return dict(self._jwk)

    @property
    def kid(self) -> str:
        # The key's thumbprint, not its ARN: stable for the key, and it names no account.
        return self.public_jwk()["kid"]

    def sign(self, data: bytes) -> bytes:
        if len(data) <= KMS_RAW_MAX_BYTES:
            message, message_type = data, "RAW"
        else:  # KMS signs the SHA-256 digest as ECDSA_SHA_256 would have made it
            message, message_type = hashlib.sha256(data).digest(), "DIGEST"
        answer = self._kms.sign(
            KeyId=self.key_id,
            Message=message,
            MessageType=message_type,
            SigningAlgorithm="ECDSA_SHA_256",
        )
        return der_to_raw(answer["Signature"])
