"""Presigned download URLs of the local stack's buckets, served as S3 serves them (local only).

`GET` and `HEAD /_s3/{bucket}/{key}?X-Amz-...`: the URLs the functions sign for
CONTENT_URL_ENDPOINT (`{public URL}/_s3`, path style). The query's SigV4 signature is
recomputed with the credentials the stack's functions sign with; an expired URL, a wrong
signature (another key, a changed parameter) or a missing object gets S3's status and XML
error. The object is streamed from moto's store in pieces, with `Range` honoured (206).
"""

from __future__ import annotations

import hmac
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, unquote
from xml.sax.saxutils import escape

from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

PREFIX = "/_s3/"
ALGORITHM = "AWS4-HMAC-SHA256"
# S3 refuses a presigned URL valid for longer than 7 days.
MAX_EXPIRES = 604_800
# Bytes read from the object and sent per message: a large object is never held whole.
CHUNK_BYTES = 1024 * 1024
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_QUERY_AUTH = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)
# Headers a signed URL may set on the response (S3's response-* overrides).
_OVERRIDES = {
    "response-content-type": "content-type",
    "response-content-disposition": "content-disposition",
    "response-content-encoding": "content-encoding",
    "response-content-language": "content-language",
    "response-cache-control": "cache-control",
    "response-expires": "expires",
}
# Object metadata S3 returns as response headers.
_STORED_HEADERS = (
    "content-type",
    "content-disposition",
    "content-encoding",
    "content-language",
    "cache-control",
    "expires",
)


class S3Error(Exception):
    """An answer S3 gives as an XML error document."""

    def __init__(self, status: int, code: str, message: str, **details: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


@dataclass(frozen=True)
class Found:
    """An object of moto's store, and the bytes of it a request asks for."""

    key: Any  # moto's FakeKey
    size: int
    start: int
    end: int  # inclusive; start > end for an empty object
    partial: bool


class ObjectUrls:
    """The ASGI app behind `/_s3/`: presigned GET and HEAD of moto's objects.

    `credentials` gives (access key id, secret key, session token): what the functions sign
    with; `account` and `region` name moto's backend; `clock` gives the time in seconds."""

    def __init__(
        self,
        credentials: Callable[[], tuple[str, str, str | None]],
        *,
        account: str,
        region: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.credentials = credentials
        self.account = account
        self.region = region
        self.clock = clock

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request_id = uuid.uuid4().hex[:16].upper()
        head = scope["method"] == "HEAD"
        try:
            if scope["method"] not in ("GET", "HEAD"):
                raise S3Error(
                    405,
                    "MethodNotAllowed",
                    "The specified method is not allowed against this resource.",
                )
            raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
            bucket, _, quoted_key = raw_path[len(PREFIX) :].partition("/")
            key = unquote(quoted_key)
            query = (scope.get("query_string") or b"").decode("latin-1")
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
            self.authorize(bucket, key, query, headers)
            found = self.find(bucket, key, _header(headers, "range"))
        except S3Error as error:
            await _send_error(send, error, request_id, head)
            return
        params = dict(parse_qsl(query, keep_blank_values=True))
        await self._send_object(send, found, params, request_id, head)

    # -- the signature ----------------------------------------------------------------------

    def authorize(self, bucket: str, key: str, query: str, headers: list[tuple[str, str]]) -> None:
        """Raises S3Error unless the query carries an unexpired SigV4 signature of this
        bucket and key by the stack's credentials."""
        pairs = parse_qsl(query, keep_blank_values=True)
        params = dict(pairs)
        if not any(name in params for name in _QUERY_AUTH):
            raise S3Error(403, "AccessDenied", "Access Denied")  # anonymous: a private bucket
        if not all(params.get(name) for name in _QUERY_AUTH) or (
            params["X-Amz-Algorithm"] != ALGORITHM
        ):
            raise S3Error(
                400,
                "AuthorizationQueryParametersError",
                "Query-string authentication version 4 requires the X-Amz-Algorithm, "
                "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and "
                "X-Amz-Expires parameters.",
            )
        amz_date = params["X-Amz-Date"]
        try:
            expires = int(params["X-Amz-Expires"])
            signed_at = datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=UTC).timestamp()
        except ValueError as exc:
            raise S3Error(
                400,
                "AuthorizationQueryParametersError",
                "X-Amz-Expires should be a number and X-Amz-Date an ISO 8601 basic timestamp",
            ) from exc
        if not 0 < expires <= MAX_EXPIRES:
            raise S3Error(
                400,
                "AuthorizationQueryParametersError",
                "X-Amz-Expires must be less than a week (in seconds) that is 604800",
            )
        now = self.clock()
        if now > signed_at + expires:
            raise S3Error(
                403,
                "AccessDenied",
                "Request has expired",
                **{
                    "X-Amz-Expires": str(expires),
                    "Expires": _iso(signed_at + expires),
                    "ServerTime": _iso(now),
                },
            )
        credentials = Credentials(*self.credentials())
        access_key_id, _, scope = params["X-Amz-Credential"].partition("/")
        scope_date, _, rest = scope.partition("/")
        if rest != f"{self.region}/s3/aws4_request" or scope_date != amz_date[:8]:
            raise S3Error(
                400,
                "AuthorizationQueryParametersError",
                f"Error parsing the X-Amz-Credential parameter; expecting "
                f"<access key>/{amz_date[:8]}/{self.region}/s3/aws4_request",
            )
        if access_key_id != credentials.access_key:
            raise S3Error(
                403,
                "InvalidAccessKeyId",
                "The AWS Access Key Id you provided does not exist in our records.",
            )
        if params.get("X-Amz-Security-Token") != credentials.token:
            raise S3Error(
                400, "InvalidToken", "The provided token is malformed or otherwise invalid."
            )
        expected = self._signature(credentials, bucket, key, pairs, headers, expires)
        if not hmac.compare_digest(expected, params["X-Amz-Signature"]):
            raise S3Error(
                403,
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you "
                "provided. Check your key and signing method.",
            )

    def _signature(
        self,
        credentials: Credentials,
        bucket: str,
        key: str,
        pairs: list[tuple[str, str]],
        headers: list[tuple[str, str]],
        expires: int,
    ) -> str:
        """The signature S3 computes: the canonical request over this path and query (each
        part encoded as SigV4 encodes it) and the signed headers, by botocore's signer."""
        signed = _param(pairs, "X-Amz-SignedHeaders").split(";")
        host = _header(headers, "host") or ""
        path = quote(f"{PREFIX}{bucket}/{key}", safe="/~")
        query = "&".join(
            f"{quote(name, safe='-_.~')}={quote(value, safe='-_.~')}"
            for name, value in sorted(pairs)
            if name != "X-Amz-Signature"
        )
        request = AWSRequest(method="GET", url=f"http://{host}{path}?{query}")
        for name, value in headers:
            if name.lower() in signed and name.lower() != "host":
                request.headers[name.lower()] = value
        request.context["timestamp"] = _param(pairs, "X-Amz-Date")
        signer = S3SigV4QueryAuth(credentials, "s3", self.region, expires=expires)
        canonical = signer.canonical_request(request)
        return str(signer.signature(signer.string_to_sign(request, canonical), request))

    # -- the object ---------------------------------------------------------------------------

    def find(self, bucket: str, key: str, byte_range: str | None) -> Found:
        """The object in moto's store, and the range asked for."""
        from moto.s3.exceptions import MissingBucket
        from moto.s3.models import s3_backends

        backend = s3_backends[self.account]["aws"]
        try:
            backend.get_bucket(bucket)
        except MissingBucket as exc:
            raise S3Error(
                404, "NoSuchBucket", "The specified bucket does not exist", BucketName=bucket
            ) from exc
        found = backend.get_object(bucket, key)
        if found is None:
            raise S3Error(404, "NoSuchKey", "The specified key does not exist.", Key=key)
        size = int(found.size)
        if byte_range is None:
            return Found(found, size, 0, size - 1, partial=False)
        start, end = _range(byte_range, size)
        return Found(found, size, start, end, partial=True)

    async def _send_object(
        self, send: Any, found: Found, params: dict[str, str], request_id: str, head: bool
    ) -> None:
        key = found.key
        length = found.end - found.start + 1
        headers = {
            "content-type": "binary/octet-stream",
            **{
                name: str(value)
                for name, value in key.metadata.items()
                if name.lower() in _STORED_HEADERS or name.lower().startswith("x-amz-meta-")
            },
            "content-length": str(length),
            "etag": key.etag,
            "last-modified": key.last_modified_RFC1123,
            "accept-ranges": "bytes",
            "x-amz-request-id": request_id,
        }
        if key.encryption:
            headers["x-amz-server-side-encryption"] = str(key.encryption)
        if found.partial:
            headers["content-range"] = f"bytes {found.start}-{found.end}/{found.size}"
        for name, header in _OVERRIDES.items():
            if name in params:
                headers[header] = params[name]
        await send(
            {
                "type": "http.response.start",
                "status": 206 if found.partial else 200,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
            }
        )
        if head or length <= 0:
            await send({"type": "http.response.body", "body": b""})
            return
        position = found.start
        while position <= found.end:
            piece = _read(key, position, min(CHUNK_BYTES, found.end + 1 - position))
            if not piece:
                break
            position += len(piece)
            await send(
                {"type": "http.response.body", "body": piece, "more_body": position <= found.end}
            )
        if position <= found.end:  # the object went away mid-stream: end the body short
            await send({"type": "http.response.body", "body": b""})


def _param(pairs: list[tuple[str, str]], name: str) -> str:
    return next((value for key, value in pairs if key == name), "")


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _range(value: str, size: int) -> tuple[int, int]:
    """`bytes=a-b`, `bytes=a-` or `bytes=-n` as (start, end inclusive); S3's 416 when it
    starts past the end (a header it cannot parse, or several ranges: the whole object)."""
    unit, _, spec = value.strip().partition("=")
    first, dash, last = spec.partition("-")
    if unit.strip() != "bytes" or not dash or "," in spec:
        return 0, size - 1
    try:
        if first.strip() == "":
            start, end = max(size - int(last), 0), size - 1
        else:
            start = int(first)
            end = min(int(last), size - 1) if last.strip() else size - 1
    except ValueError:
        return 0, size - 1
    if start >= size or start > end:
        raise S3Error(416, "InvalidRange", "The requested range is not satisfiable")
    return start, end


def _read(key: Any, position: int, size: int) -> bytes:
    """`size` bytes of a moto object from `position`, without reading the rest of it (moto
    keeps an object in a spooled file; its `value` would copy it whole)."""
    buffer = getattr(key, "_value_buffer", None)
    lock = getattr(key, "lock", None)
    if buffer is None or lock is None:  # another moto: correct, not economical
        return bytes(key.value[position : position + size])
    try:
        with lock:
            buffer.seek(position)
            return bytes(buffer.read(size))
    except ValueError:  # closed: the object was replaced or deleted meanwhile
        return b""


async def _send_error(send: Any, error: S3Error, request_id: str, head: bool) -> None:
    details = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in error.details.items())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{error.code}</Code><Message>{escape(error.message)}</Message>"
        f"{details}<RequestId>{request_id}</RequestId></Error>"
    ).encode()
    headers = [(b"x-amz-request-id", request_id.encode())]
    if not head:  # S3 answers a HEAD with the status and no body
        headers += [(b"content-type", b"application/xml"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})
