"""The local gateway as an ASGI app (stand-in function apps and authorizer): X-Local-Principal
only in Auth=None, gateway responses on refusal, the request context a function receives,
SigV4 with the body replayed to the function, and the /_local/ admin endpoints per mode."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from a2a_serverless.local.__main__ import auth_banner
from a2a_serverless.local.admin import LocalAdmin
from a2a_serverless.local.authorizers import GatewayResponses, Guard
from a2a_serverless.local.gateway import Gateway
from a2a_serverless.local.issuer import LocalIssuer
from a2a_serverless.local.sigv4 import IamUsers, sign

URI = "arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/arn:fn/invocations"
RESPONSES = {
    "UNAUTHORIZED": {
        "StatusCode": 401,
        "ResponseParameters": {"Headers": {"WWW-Authenticate": "'Bearer realm=\"a2a\"'"}},
        "ResponseTemplates": {
            "application/json": '{"error":{"code":401,"status":"UNAUTHENTICATED",'
            '"message":$context.error.messageString}}'
        },
    }
}


def definition(scheme: str) -> dict[str, Any]:
    schemes = {
        "custom": {
            "type": "apiKey",
            "name": "Authorization",
            "in": "header",
            "x-amazon-apigateway-authtype": "custom",
            "x-amazon-apigateway-authorizer": {
                "type": "request",
                "identitySource": "method.request.header.Authorization",
                "authorizerUri": URI,
                "authorizerResultTtlInSeconds": 0,
            },
        },
        "sigv4": {
            "type": "apiKey",
            "name": "Authorization",
            "in": "header",
            "x-amazon-apigateway-authtype": "awsSigv4",
        },
    }
    return {
        "components": {"securitySchemes": schemes},
        "paths": {
            "/tasks/{id}": {"post": {"security": [{scheme: []}]}},
            "/card": {"get": {}},
        },
    }


async def echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A stand-in function: answers with the request context and the body it received."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    payload = {
        "context": json.loads(headers.get("x-amzn-request-context", "{}")),
        "localPrincipal": headers.get("x-local-principal"),
        "body": body.decode(),
    }
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def authorizer(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event["headers"].get("authorization") != "Bearer good":
        raise Exception("Unauthorized")
    return {
        "principalId": "https://issuer|alice",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow",
                    "Resource": "arn:aws:execute-api:us-east-1:123456789012:local/prod/*/*",
                }
            ],
        },
        "context": {"principal": "https://issuer|alice", "scheme": "jwt", "scopes": "a b"},
    }


def gateway(auth_mode: str, scheme: str = "custom", **admin: Any) -> Gateway:
    iam_users = admin.get("iam_users")
    guard = Guard(
        definition(scheme),
        region="us-east-1",
        account="123456789012",
        api_id="local",
        handler_for_uri=lambda uri: (authorizer, None),
        iam_users=iam_users,
    )
    return Gateway(
        [("POST", "/tasks/{id}", echo_app), ("GET", "/card", echo_app)],
        auth_mode=auth_mode,
        guard=guard if auth_mode != "None" else None,
        responses=GatewayResponses(RESPONSES),
        admin=LocalAdmin(auth_mode, **admin),
    )


def client(app: Gateway, base_url: str = "http://testserver") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


async def test_auth_none_passes_the_local_principal_as_the_authorizer() -> None:
    async with client(gateway("None")) as http:
        response = await http.post("/tasks/abc", headers={"X-Local-Principal": "bob"})
    assert response.status_code == 200
    context = response.json()["context"]
    assert context["authorizer"] == {"principalId": "bob", "scheme": "local"}
    assert context["resourcePath"] == "/tasks/{id}"
    assert response.json()["localPrincipal"] is None  # the function never sees the header


async def test_auth_mode_refuses_without_credential_and_ignores_the_local_principal() -> None:
    async with client(gateway("Jwt")) as http:
        response = await http.post("/tasks/abc", headers={"X-Local-Principal": "bob"})
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Bearer realm="a2a"'
        assert response.json() == {
            "error": {"code": 401, "status": "UNAUTHENTICATED", "message": "Unauthorized"}
        }
        bad = await http.post("/tasks/abc", headers={"Authorization": "Bearer bad"})
        assert bad.status_code == 401
        good = await http.post(
            "/tasks/abc",
            headers={"Authorization": "Bearer good", "X-Local-Principal": "bob"},
        )
        assert good.status_code == 200
        context = good.json()["context"]
        assert context["authorizer"]["principalId"] == "https://issuer|alice"
        assert context["authorizer"]["scheme"] == "jwt"
        assert good.json()["localPrincipal"] is None
        # A route without security passes without a credential, and without a principal.
        card = await http.get("/card", headers={"X-Local-Principal": "bob"})
        assert card.status_code == 200 and "authorizer" not in card.json()["context"]


async def test_a_forged_request_context_header_is_dropped() -> None:
    forged = json.dumps({"authorizer": {"principalId": "mallory"}})
    async with client(gateway("Jwt")) as http:
        response = await http.get("/card", headers={"x-amzn-request-context": forged})
    assert "authorizer" not in response.json()["context"]


async def test_sigv4_admits_a_signed_request_and_replays_its_body() -> None:
    users = IamUsers("123456789012")
    made = users.create("alice")
    app = gateway("Iam", "sigv4", iam_users=users)
    body = b'{"x": 1}'
    headers = sign(
        method="POST",
        url="http://testserver/tasks/abc?x=1",
        headers={"content-type": "application/json"},
        body=body,
        access_key_id=made.access_key_id,
        secret_access_key=made.secret_access_key,
        region="us-east-1",
    )
    async with client(app) as http:
        good = await http.post("/tasks/abc?x=1", content=body, headers=headers)
        tampered = await http.post("/tasks/abc?x=1", content=b'{"x": 2}', headers=headers)
        unsigned = await http.post("/tasks/abc?x=1", content=body)
    assert good.status_code == 200, good.text
    assert good.json()["body"] == '{"x": 1}'
    identity = good.json()["context"]["identity"]
    assert identity["userArn"] == "arn:aws:iam::123456789012:user/alice"
    assert identity["accessKey"] == made.access_key_id
    assert identity["accountId"] == "123456789012"
    assert identity["caller"].startswith("AIDA") and identity["sourceIp"]
    assert tampered.status_code == 403
    assert "signature" in tampered.json()["message"]
    assert unsigned.status_code == 403  # no template entry: API Gateway's own 403
    assert unsigned.json() == {"message": "Missing Authentication Token"}


async def test_unknown_routes_answer_missing_authentication_token() -> None:
    async with client(gateway("None")) as http:
        response = await http.get("/nope")
    assert response.status_code == 403  # API Gateway's default (the template makes it 404)


# -- /_local/ admin ----------------------------------------------------------------------------


async def test_admin_endpoints_of_other_modes_are_404() -> None:
    async with client(gateway("None")) as http:
        for method, path in [
            ("POST", "/_local/keys"),
            ("GET", "/_local/keys"),
            ("POST", "/_local/tokens"),
            ("GET", "/_local/oidc/jwks.json"),
            ("POST", "/_local/iam/users"),
            ("GET", "/_local/anything"),
        ]:
            response = await http.request(method, path, json={})
            assert response.status_code == 404, (method, path)
            assert response.json()["error"]["status"] == "NOT_FOUND"


async def test_local_issuer_tokens_verify_against_its_jwks() -> None:
    issuer = LocalIssuer("http://127.0.0.1/_local/oidc", "a2a-local")
    async with client(gateway("Jwt", issuer=issuer), "http://127.0.0.1") as http:
        discovery = (await http.get("/_local/oidc/.well-known/openid-configuration")).json()
        assert discovery["issuer"] == "http://127.0.0.1/_local/oidc"
        assert discovery["jwks_uri"] == "http://127.0.0.1/_local/oidc/jwks.json"
        jwks = (await http.get("/_local/oidc/jwks.json")).json()
        assert all("d" not in key for key in jwks["keys"])  # public keys only
        made = await http.post(
            "/_local/tokens", json={"sub": "alice", "scopes": ["a", "b"], "expiresIn": 60}
        )
        assert made.status_code == 200
        refused = await http.post("/_local/tokens", json={"sub": "alice", "expiresIn": "x"})
        assert refused.status_code == 400
        assert (await http.post("/_local/keys", json={"principal": "a"})).status_code == 404
    token = jwt.decode(made.json()["token"], KeySet.import_key_set(jwks))
    assert token.header["alg"] == "ES256" and token.header["kid"] == issuer.kid
    claims = token.claims
    assert (claims["iss"], claims["aud"], claims["sub"]) == (issuer.issuer, "a2a-local", "alice")
    assert claims["scope"] == "a b"
    assert claims["exp"] - claims["iat"] == 60


async def test_iam_users_endpoint() -> None:
    users = IamUsers("123456789012")
    async with client(gateway("Iam", "sigv4", iam_users=users), "http://127.0.0.1") as http:
        made = await http.post("/_local/iam/users", json={"user": "alice"})
        bad = await http.post("/_local/iam/users", json={"user": "a b/c"})
        not_json = await http.post(
            "/_local/iam/users", content=b"{", headers={"Content-Type": "application/json"}
        )
    assert made.status_code == 201
    body = made.json()
    assert body["arn"] == "arn:aws:iam::123456789012:user/alice"
    user = users.get(body["accessKeyId"])
    assert user is not None and user.secret_access_key == body["secretAccessKey"]
    assert bad.status_code == 400 and not_json.status_code == 400


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("None", "X-Local-Principal"),
        ("ApiKey", "a2a-serverless keys create"),
        ("Jwt", "a2a-serverless keys token"),
        ("Iam", "a2a-serverless keys iam-credentials"),
    ],
)
def test_banner_says_the_mode_and_the_command(mode: str, needle: str) -> None:
    parameters = {"Auth": mode, "JwtIssuer": "http://127.0.0.1:8000/_local/oidc"}
    text = "\n".join(auth_banner(parameters, "http://127.0.0.1:8000"))
    assert needle in text
    assert text.startswith(f"auth: {'none' if mode == 'None' else mode}")
    other = "\n".join(auth_banner(parameters, "http://127.0.0.1:9999"))
    assert mode == "None" or "--url http://127.0.0.1:9999" in other
