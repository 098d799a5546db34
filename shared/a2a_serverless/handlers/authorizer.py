"""AuthorizerFunction: API Gateway's REQUEST authorizer for ApiKey and Jwt modes (plain handler).

Allows the whole stage for the credential's principal (API Gateway caches the answer per
credential), passing the caller in the context (strings only), the usage plan key in ApiKey
mode, and `expiresAt` for an expiring credential (bindings/http.py `caller` enforces it).
Any credential problem is exactly `Exception("Unauthorized")` (API Gateway answers 401).
Logs name the reason and the key id, never a credential.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a_serverless.auth import Authenticated, Unauthenticated, claims_json
from a2a_serverless.handlers import init_done
from a2a_serverless.observability import instrumented_handler
from a2a_serverless.wiring import get_authenticator

logger = logging.getLogger("a2a_serverless.authorizer")


def _request_id(event: dict[str, Any]) -> Any:
    return (event.get("requestContext") or {}).get("requestId")


def _headers(event: dict[str, Any]) -> dict[str, list[str]]:
    """Every value of every header (single- and multi-value forms): a credential header
    sent twice with different values is refused as ambiguous."""
    headers: dict[str, list[str]] = {}
    for name, value in (event.get("headers") or {}).items():
        headers.setdefault(str(name), []).append(value)
    for name, values in (event.get("multiValueHeaders") or {}).items():
        if isinstance(values, list):
            headers.setdefault(str(name), []).extend(values)
    return headers


def _stage_resource(method_arn: str) -> str:
    """`arn:...:{apiId}/{stage}/{METHOD}/{path}` -> `arn:...:{apiId}/{stage}/*/*`."""
    api, _, rest = method_arn.partition("/")
    stage = rest.partition("/")[0]
    if not api.startswith("arn:") or not stage:
        raise ValueError("methodArn is not an execute-api ARN")
    return f"{api}/{stage}/*/*"


def _allow(authenticated: Authenticated, method_arn: str) -> dict[str, Any]:
    caller = authenticated.caller
    response: dict[str, Any] = {
        "principalId": caller.principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow",
                    "Resource": _stage_resource(method_arn),
                }
            ],
        },
        "context": {
            "principal": caller.principal,
            "scheme": caller.scheme,
            "claims": claims_json(caller.claims),
            "scopes": " ".join(caller.scopes),
        },
    }
    if authenticated.expires_at is not None:
        response["context"]["expiresAt"] = str(authenticated.expires_at)
    if authenticated.usage_key:
        response["usageIdentifierKey"] = authenticated.usage_key
    return response


@instrumented_handler(correlation_id=_request_id)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    authenticator = get_authenticator()
    if authenticator is None:  # wired in a mode without an authorizer: refuse everyone
        logger.error("authorizer invoked but AUTH_MODE has no authenticator")
        raise Exception("Unauthorized")
    try:
        authenticated = authenticator.authenticate(_headers(event))
    except Unauthenticated as refused:
        logger.info(
            "credential refused",
            extra={
                "reason": refused.reason,
                "key_id": refused.key_id,
                "scheme": authenticator.scheme,
            },
        )
        raise Exception("Unauthorized") from None
    response = _allow(authenticated, str(event.get("methodArn") or ""))
    logger.info(
        "credential accepted",
        extra={
            "scheme": authenticated.caller.scheme,
            "key_id": authenticated.caller.claims.get("keyId"),
        },
    )
    return response


def create() -> Any:
    """The handler (its authenticator is built by the first request)."""
    return init_done(handler)
