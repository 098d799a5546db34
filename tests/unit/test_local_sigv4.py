"""SigV4 verification of the local Iam mode: requests signed by botocore's signer (as an AWS
SDK signs them) pass; tampering, a wrong secret, an old date or no signature do not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from a2a_serverless.local.sigv4 import IamUsers, MissingSignature, SignatureError, sign, verify

HOST = "127.0.0.1:8123"
BODY = b'{"message":{"role":"ROLE_USER","parts":[{"text":"hi"}]}}'


@pytest.fixture
def users() -> IamUsers:
    return IamUsers("123456789012")


def signed(
    users: IamUsers,
    user: str = "alice",
    *,
    method: str = "POST",
    path: str = "/message:send",
    query: str = "",
    body: bytes = BODY,
    secret: str | None = None,
    region: str = "us-east-1",
    service: str = "execute-api",
    headers: dict[str, str] | None = None,
) -> tuple[dict[str, Any], Any]:
    made = users.create(user)
    url = f"http://{HOST}{path}" + (f"?{query}" if query else "")
    sent = {"Content-Type": "application/json", **(headers or {})}
    request = AWSRequest(method=method, url=url, headers=sent, data=body)
    credentials = Credentials(made.access_key_id, secret or made.secret_access_key)
    SigV4Auth(credentials, service, region).add_auth(request)
    received = [(k, v) for k, v in request.headers.items()]
    received.append(("host", HOST))
    received.append(("user-agent", "test"))  # unsigned headers are ignored
    return {
        "method": method,
        "host": HOST,
        "raw_path": path,
        "query_string": query,
        "headers": received,
        "body": body,
        "users": users,
        "region": "us-east-1",
    }, made


def test_a_good_signature_names_the_user(users: IamUsers) -> None:
    kwargs, made = signed(users)
    user = verify(**kwargs)
    assert user.arn == "arn:aws:iam::123456789012:user/alice"
    assert user.access_key_id == made.access_key_id


def test_query_strings_and_get_requests_verify(users: IamUsers) -> None:
    kwargs, _ = signed(
        users, method="GET", path="/tasks", query="pageSize=5&contextId=c1", body=b""
    )
    verify(**kwargs)


def test_the_sign_helper_matches_what_verify_expects(users: IamUsers) -> None:
    made = users.create("bob")
    headers = sign(
        method="GET",
        url=f"http://{HOST}/tasks/abc",
        headers={},
        body=b"",
        access_key_id=made.access_key_id,
        secret_access_key=made.secret_access_key,
        region="us-east-1",
    )
    assert (
        verify(
            method="GET",
            host=HOST,
            raw_path="/tasks/abc",
            query_string="",
            headers=[*headers.items(), ("host", HOST)],
            body=b"",
            users=users,
            region="us-east-1",
        ).name
        == "bob"
    )


def test_a_tampered_body_is_refused(users: IamUsers) -> None:
    kwargs, _ = signed(users)
    kwargs["body"] = BODY.replace(b"hi", b"ho")
    with pytest.raises(SignatureError, match="does not match"):
        verify(**kwargs)


@pytest.mark.parametrize("change", ["path", "query", "method", "signed header"])
def test_other_tampering_is_refused(users: IamUsers, change: str) -> None:
    kwargs, _ = signed(users, method="GET", path="/tasks", query="pageSize=5", body=b"")
    if change == "path":
        kwargs["raw_path"] = "/tasks/other"
    elif change == "query":
        kwargs["query_string"] = "pageSize=6"
    elif change == "method":
        kwargs["method"] = "DELETE"
    else:
        kwargs["headers"] = [
            (k, "text/plain" if k.lower() == "content-type" else v) for k, v in kwargs["headers"]
        ]
    with pytest.raises(SignatureError):
        verify(**kwargs)


def test_a_wrong_secret_is_refused(users: IamUsers) -> None:
    kwargs, _ = signed(users, secret="not-the-secret-of-this-access-key-000000")
    with pytest.raises(SignatureError, match="does not match"):
        verify(**kwargs)


def test_an_unknown_access_key_is_refused(users: IamUsers) -> None:
    kwargs, _ = signed(users)
    kwargs["users"] = IamUsers("123456789012")  # another table: the key is unknown there
    with pytest.raises(SignatureError, match="security token"):
        verify(**kwargs)


@pytest.mark.parametrize("minutes", [6, -6])
def test_a_signature_more_than_5_minutes_off_is_refused(users: IamUsers, minutes: int) -> None:
    kwargs, _ = signed(users)
    now = datetime.now(UTC) + timedelta(minutes=minutes)
    with pytest.raises(SignatureError, match=r"Signature (expired|not yet current)"):
        verify(**kwargs, now=now)
    verify(**kwargs, now=datetime.now(UTC) + timedelta(minutes=minutes * 4 / 6))


def test_no_authorization_header_is_missing(users: IamUsers) -> None:
    kwargs, _ = signed(users)
    kwargs["headers"] = [(k, v) for k, v in kwargs["headers"] if k.lower() != "authorization"]
    with pytest.raises(MissingSignature):
        verify(**kwargs)


@pytest.mark.parametrize(
    "authorization",
    ["Bearer abc", "AWS4-HMAC-SHA256 Credential=x", "AWS4-HMAC-SHA256 Signature=zz"],
)
def test_malformed_authorization_is_refused(users: IamUsers, authorization: str) -> None:
    kwargs, _ = signed(users)
    kwargs["headers"] = [
        (k, authorization if k.lower() == "authorization" else v) for k, v in kwargs["headers"]
    ]
    with pytest.raises(SignatureError):
        verify(**kwargs)


@pytest.mark.parametrize(("region", "service"), [("eu-west-1", "execute-api"), ("us-east-1", "s3")])
def test_a_credential_scope_of_another_region_or_service_is_refused(
    users: IamUsers, region: str, service: str
) -> None:
    kwargs, _ = signed(users, region=region, service=service)
    with pytest.raises(SignatureError, match="scoped"):
        verify(**kwargs)


def test_a_content_hash_header_must_be_the_bodys(users: IamUsers) -> None:
    kwargs, _ = signed(users, "carol", headers={"X-Amz-Content-SHA256": "0" * 64})
    # botocore signed the declared hash, not the body: the declared hash is checked.
    with pytest.raises(SignatureError, match="x-amz-content-sha256"):
        verify(**kwargs)


def test_iam_user_names_are_checked(users: IamUsers) -> None:
    with pytest.raises(ValueError):
        users.create("bad name/with slash")
