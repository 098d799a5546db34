"""AWS Signature Version 4 verification for the local stack's `Auth=Iam` mode.

Recomputes the signature with botocore's signer over what the server received and the secret
from `IamUsers`; refuses a mismatch, an X-Amz-Date more than 5 minutes off, or a session token
(long-term keys only), as API Gateway does.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "execute-api"
# API Gateway refuses a signature dated more than this far from its clock (either way).
MAX_SKEW = timedelta(minutes=5)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256\s+"
    r"Credential=(?P<credential>[^,\s]+)\s*,\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+)\s*,\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})\s*$"
)


class SignatureError(Exception):
    """A request whose signature API Gateway would refuse (INVALID_SIGNATURE: 403 by default,
    401 with the SigV4 challenge by the template's gateway response), with its message."""


class MissingSignature(Exception):
    """No SigV4 Authorization header at all (API Gateway: MISSING_AUTHENTICATION_TOKEN)."""


@dataclass(frozen=True)
class IamUser:
    """An IAM user of the local credential table."""

    name: str
    access_key_id: str
    secret_access_key: str
    arn: str
    user_id: str
    account: str


class IamUsers:
    """In-memory IAM users and their access keys (local only: a deployed stack's callers
    are real IAM principals)."""

    def __init__(self, account: str) -> None:
        self.account = account
        self._by_key: dict[str, IamUser] = {}
        self._lock = threading.Lock()

    def create(self, name: str) -> IamUser:
        if not re.fullmatch(r"[\w+=,.@-]{1,64}", name):
            raise ValueError("an IAM user name is 1-64 characters of letters, digits and _+=,.@-")
        upper = string.ascii_uppercase + string.digits
        user = IamUser(
            name=name,
            access_key_id="AKIA" + "".join(secrets.choice(upper) for _ in range(16)),
            secret_access_key=secrets.token_urlsafe(30)[:40],
            arn=f"arn:aws:iam::{self.account}:user/{name}",
            user_id="AIDA" + "".join(secrets.choice(upper) for _ in range(17)),
            account=self.account,
        )
        with self._lock:
            self._by_key[user.access_key_id] = user
        return user

    def get(self, access_key_id: str) -> IamUser | None:
        with self._lock:
            return self._by_key.get(access_key_id)


class _ReceivedRequestSigner(SigV4Auth):
    """botocore's SigV4 signer over exactly the headers the client listed as signed (the
    default signer picks the request's headers itself and leaves some out)."""

    def __init__(self, credentials: Credentials, region: str, signed: list[str]) -> None:
        super().__init__(credentials, SERVICE, region)
        self._signed = signed

    def headers_to_sign(self, request: AWSRequest) -> Any:
        from botocore.compat import HTTPHeaders

        headers = HTTPHeaders()
        for name in self._signed:
            for value in request.headers.get_all(name) or []:
                headers[name] = value
        return headers


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def verify(
    *,
    method: str,
    host: str,
    raw_path: str,
    query_string: str,
    headers: list[tuple[str, str]],
    body: bytes,
    users: IamUsers,
    region: str,
    now: datetime | None = None,
) -> IamUser:
    """The IAM user whose valid SigV4 signature the request carries.

    Raises MissingSignature without an Authorization header, SignatureError (API Gateway's
    message) for a malformed header, an unknown key, a session token, a wrong scope, a date
    more than 5 minutes off or a signature that does not match.
    """
    authorization = _header(headers, "authorization")
    if not authorization:
        raise MissingSignature("Missing Authentication Token")
    match = _AUTHORIZATION.match(authorization.strip())
    if match is None:
        raise SignatureError(
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' "
            f"parameters of {ALGORITHM}"
        )
    parts = match["credential"].split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise SignatureError("Credential should be access-key/date/region/service/aws4_request")
    access_key_id, scope_date, scope_region, scope_service, _ = parts
    if scope_service != SERVICE:
        raise SignatureError(f"Credential should be scoped to correct service: '{SERVICE}'.")
    if scope_region != region:
        raise SignatureError(f"Credential should be scoped to a valid region: '{region}'.")
    amz_date = _header(headers, "x-amz-date")
    if not amz_date:
        raise SignatureError("Authorization header requires existence of an X-Amz-Date header")
    try:
        signed_at = datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError as exc:
        raise SignatureError(f"Invalid X-Amz-Date: {amz_date}") from exc
    if scope_date != amz_date[:8]:
        raise SignatureError("Credential date does not match X-Amz-Date")
    current = now or datetime.now(UTC)
    if abs(current - signed_at) > MAX_SKEW:
        raise SignatureError(
            f"Signature expired: {amz_date} is now earlier than "
            f"{(current - MAX_SKEW).strftime(_AMZ_DATE)} "
            f"({current.strftime(_AMZ_DATE)} - 5 min.)"
            if signed_at < current
            else f"Signature not yet current: {amz_date} is still later than "
            f"{(current + MAX_SKEW).strftime(_AMZ_DATE)} "
            f"({current.strftime(_AMZ_DATE)} + 5 min.)"
        )
    signed = match["signed"].split(";")
    if "host" not in signed or signed != sorted(signed):
        raise SignatureError("'Host' must be a signed header, and SignedHeaders sorted")
    body_hash = hashlib.sha256(body).hexdigest()
    declared_hash = _header(headers, "x-amz-content-sha256")
    # The signer signs this header's value in place of the body's hash: it must be the hash.
    if declared_hash is not None and not hmac.compare_digest(declared_hash, body_hash):
        raise SignatureError("The provided 'x-amz-content-sha256' header does not match")
    user = users.get(access_key_id)
    session_token = _header(headers, "x-amz-security-token")
    # A long-term key takes no session token; any token sent is one AWS never issued with it.
    if user is None or session_token is not None:
        raise SignatureError("The security token included in the request is invalid.")
    received = AWSRequest(
        method=method.upper(),
        url=f"http://{host}{raw_path}" + (f"?{query_string}" if query_string else ""),
        data=body,
    )
    for name, value in headers:
        if name.lower() in signed:
            received.headers[name.lower()] = value  # HTTPHeaders: repeated names kept
    received.context["timestamp"] = amz_date
    signer = _ReceivedRequestSigner(
        Credentials(user.access_key_id, user.secret_access_key), region, signed
    )
    canonical = signer.canonical_request(received)
    expected = signer.signature(signer.string_to_sign(received, canonical), received)
    if not hmac.compare_digest(expected, match["signature"]):
        raise SignatureError(
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method. Consult the service "
            "documentation for details."
        )
    return user


def sign(
    *,
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    access_key_id: str,
    secret_access_key: str,
    region: str,
) -> dict[str, str]:
    """The headers of a SigV4-signed request, as an AWS SDK client sends them (for tests
    and scripts/auth; botocore's signer)."""
    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    SigV4Auth(Credentials(access_key_id, secret_access_key), SERVICE, region).add_auth(request)
    return dict(request.headers.items())
