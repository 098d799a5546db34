"""Agent Card signatures (spec §8.4): a detached JWS over the card's canonical JSON.

The signed bytes are what a verifier (the a2a-sdk's `a2a.utils.signing`) rebuilds: the served
card without `signatures` and empty values, in RFC 8785 canonical JSON. `cryptography` is
imported only when a key is configured (`LocalCardSigner`, aws/kms.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from decimal import Decimal
from typing import Any, Protocol

__all__ = [
    "ALGORITHM",
    "CardSigner",
    "CardSigningError",
    "LocalCardSigner",
    "canonical_card",
    "canonicalize",
    "jwks_url",
    "sign_card",
    "signature_for",
]

ALGORITHM = "ES256"  # ECDSA P-256 with SHA-256: KMS's ECC_NIST_P256 + ECDSA_SHA_256
JWKS_PATH = "/.well-known/jwks.json"
MAX_DEPTH = 128  # the a2a-sdk verifier's bound: a deeper card has no canonical form there
_P256_COORDINATE_BYTES = 32


class CardSigningError(ValueError):
    """The card has no canonical form (a value JSON cannot carry exactly, nesting too deep)."""


# -- RFC 8785 (JCS) ----------------------------------------------------------------------------


def canonicalize(value: Any) -> str:
    """The RFC 8785 canonical JSON text of `value` (encode it as UTF-8 to sign it)."""
    out: list[str] = []
    _write(value, out, 1)
    text = "".join(out)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate has no UTF-8 form
        raise CardSigningError("the card holds text that is not valid Unicode") from exc
    return text


def _write(value: Any, out: list[str], depth: int) -> None:
    if isinstance(value, dict | list | tuple) and depth > MAX_DEPTH:
        raise CardSigningError(f"the card nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        out.append("{")
        for index, (key, item) in enumerate(_sorted_items(value)):
            if index:
                out.append(",")
            out.append(_quote(key))
            out.append(":")
            _write(item, out, depth + 1)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    elif value is None:
        out.append("null")
    elif isinstance(value, bool):  # before int: bool is an int
        out.append("true" if value else "false")
    elif isinstance(value, int | float):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(_quote(value))
    else:
        raise CardSigningError(f"{type(value).__name__} has no JSON form")


def _sorted_items(value: dict[Any, Any]) -> list[tuple[str, Any]]:
    # RFC 8785 §3.2.3: keys ordered by their UTF-16 code units, which code point order (what
    # sorted() does on str) is not for characters above the BMP.
    if not all(isinstance(key, str) for key in value):
        raise CardSigningError("object keys must be strings")
    try:
        return sorted(value.items(), key=lambda item: item[0].encode("utf-16-be"))
    except UnicodeEncodeError as exc:
        raise CardSigningError("an object key is not valid Unicode") from exc


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_ESCAPES["\t"] = "\\t"
for _code in range(0x20):
    _ESCAPES.setdefault(chr(_code), f"\\u{_code:04x}")


def _quote(text: str) -> str:
    # RFC 8785 §3.2.2.2: escape `"`, `\` and C0 controls (short forms where JSON has them);
    # everything else is literal UTF-8 (never \u-escaped as json.dumps' default does).
    return '"' + "".join(_ESCAPES.get(char, char) for char in text) + '"'


def _number(value: float) -> str:
    """ECMAScript's Number::toString of the IEEE 754 double (RFC 8785 §3.2.2.3). An integer is
    formatted as the double a JSON parser reads it as: the verifier (the a2a-sdk's) parses the
    card into a protobuf, where every number inside a Struct (extension params) is a double."""
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        raise CardSigningError(f"{value} is not a JSON number")
    if number == 0:
        return "0"  # -0 too
    if number < 0:
        return "-" + _number(-number)
    # repr() is the shortest text that reads back as this double, as ECMAScript's digits are.
    sign, digit_tuple, exponent = Decimal(repr(number)).as_tuple()
    assert isinstance(exponent, int) and not sign
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent += len("".join(map(str, digit_tuple))) - len(digits)
    digits = digits.lstrip("0") or "0"
    k = len(digits)
    n = exponent + k  # the value is 0.<digits> x 10^n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"


# -- The signed payload ------------------------------------------------------------------------


def _without_empty(value: Any) -> Any:
    """Empty strings, lists and objects removed, recursively (None when nothing is left): the
    verifier's `_clean_empty`, which also drops what protobuf would not have serialised."""
    if isinstance(value, dict):
        kept = {k: v for k, item in value.items() if (v := _without_empty(item)) is not None}
        return kept or None
    if isinstance(value, list):
        items = [v for item in value if (v := _without_empty(item)) is not None]
        return items or None
    if isinstance(value, str) and not value:
        return None
    return value


# Top-level 0.3 fields (AGENT_CARD_V03_FIELDS): a 1.0 verifier drops them while it reads the
# card, so the signature never covers them.
V03_FIELDS = frozenset({"url", "preferredTransport", "protocolVersion"})


def canonical_card(card_json: dict[str, Any]) -> bytes:
    """The bytes a card's signature covers: the card without `signatures`, without the 0.3
    compatibility fields and without empty values, in RFC 8785 form."""
    body = {k: v for k, v in card_json.items() if k != "signatures" and k not in V03_FIELDS}
    return canonicalize(_without_empty(body)).encode("utf-8")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwks_url(base_url: str) -> str:
    """Where a verifier finds the public key (the protected header's `jku`)."""
    return base_url.rstrip("/") + JWKS_PATH


class CardSigner(Protocol):
    """Signs JWS signing inputs with one ES256 key."""

    @property
    def kid(self) -> str: ...
    @property
    def alg(self) -> str: ...
    def sign(self, data: bytes) -> bytes:
        """The raw JWS signature of `data` (for ES256: R || S, 32 bytes each)."""
        ...

    def public_jwk(self) -> dict[str, str]: ...


def signature_for(canonical: bytes, signer: CardSigner, jku: str) -> dict[str, str]:
    """One `AgentCardSignature` (protected header and signature, both base64url) over the
    canonical card bytes."""
    header = {"alg": signer.alg, "kid": signer.kid, "typ": "JOSE", "jku": jku}
    protected = b64url(json.dumps(header, separators=(",", ":"), sort_keys=True).encode())
    signing_input = f"{protected}.{b64url(canonical)}".encode("ascii")
    return {"protected": protected, "signature": b64url(signer.sign(signing_input))}


def sign_card(card_json: dict[str, Any], signer: CardSigner, base_url: str) -> dict[str, Any]:
    """The card with `signatures` set to one signature by `signer` (any earlier ones replaced:
    they covered another body)."""
    signature = signature_for(canonical_card(card_json), signer, jwks_url(base_url))
    return {**card_json, "signatures": [signature]}


# -- Keys --------------------------------------------------------------------------------------


def p256_jwk(public_key: Any) -> dict[str, str]:
    """The public JWK of an EC P-256 key (`cryptography` key object), with its RFC 7638
    thumbprint as `kid`."""
    from cryptography.hazmat.primitives.asymmetric import ec

    if not isinstance(public_key, ec.EllipticCurvePublicKey) or not isinstance(
        public_key.curve, ec.SECP256R1
    ):
        raise CardSigningError("the card signing key must be an EC P-256 key (ES256)")
    numbers = public_key.public_numbers()
    x = b64url(numbers.x.to_bytes(_P256_COORDINATE_BYTES, "big"))
    y = b64url(numbers.y.to_bytes(_P256_COORDINATE_BYTES, "big"))
    # RFC 7638: the required members only, lexicographic order, no whitespace.
    thumbprint_input = json.dumps(
        {"crv": "P-256", "kty": "EC", "x": x, "y": y}, separators=(",", ":"), sort_keys=True
    )
    kid = b64url(hashlib.sha256(thumbprint_input.encode()).digest())
    return {"kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": kid, "alg": ALGORITHM, "use": "sig"}


def der_to_raw(der_signature: bytes) -> bytes:
    """An ECDSA signature as DER (KMS, `cryptography`) -> R || S, as JWS ES256 wants it."""
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    r, s = decode_dss_signature(der_signature)
    return r.to_bytes(_P256_COORDINATE_BYTES, "big") + s.to_bytes(_P256_COORDINATE_BYTES, "big")


class LocalCardSigner:
    """An EC P-256 key made in this process (the local stack: `CARD_SIGNING_KEY=local`). A new
    key every process: a verifier must fetch the JWKS from the same server."""

    alg = ALGORITHM

    def __init__(self, private_key: Any = None) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self._key = (
            private_key if private_key is not None else ec.generate_private_key(ec.SECP256R1())
        )
        self._jwk = p256_jwk(self._key.public_key())

    @property
    def kid(self) -> str:
        return self._jwk["kid"]

    def sign(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        return der_to_raw(self._key.sign(data, ec.ECDSA(hashes.SHA256())))

    def public_jwk(self) -> dict[str, str]:
        return dict(self._jwk)
