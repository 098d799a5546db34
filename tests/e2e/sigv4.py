"""Requests signed as an AWS caller signs them for execute-api (the stack's Auth=Iam)."""

from __future__ import annotations

from collections.abc import Generator

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

REGION = "us-east-1"  # the local stack's region (a SigV4 scope names it)
SIGNED_HEADERS = ("host", "content-type", "a2a-version")


class SigV4(httpx.Auth):
    """Signs each request with botocore's SigV4 (service execute-api), as an AWS SDK does."""

    requires_request_body = True

    def __init__(
        self, access_key_id: str, secret_access_key: str, token: str | None = None
    ) -> None:
        self.credentials = Credentials(access_key_id, secret_access_key, token)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        signed = AWSRequest(
            method=request.method,
            url=str(request.url),
            data=request.content,
            headers={k: v for k, v in request.headers.items() if k.lower() in SIGNED_HEADERS},
        )
        SigV4Auth(self.credentials, "execute-api", REGION).add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in signed.headers:
                request.headers[name] = signed.headers[name]
        yield request
