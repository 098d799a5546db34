"""Authentication modes of the local stack, end to end: `scripts/dev --param Auth=ApiKey|Jwt|Iam`
runs the real authorizer (or SigV4 check) as API Gateway would, and credentials are made with
`scripts/auth`, run as a user runs it. Raw httpx: the checks here are the gateway's own answers
(401/403 bodies and headers), which no A2A binding's wire shape describes.

One server per mode, for the module; the open mode (Auth=None) is the session's server.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.e2e.conftest import CARD_PATH, ROOT, DevServer, server_fixture

pytestmark = pytest.mark.e2e

AUTH_SCRIPT = ROOT / "scripts" / "auth"
MODES = ["ApiKey", "Jwt", "Iam"]
CHALLENGE = {
    "ApiKey": 'ApiKey realm="a2a", header="X-API-Key"',
    "Jwt": 'Bearer realm="a2a"',
    "Iam": "AWS4-HMAC-SHA256",
}
CACHE_TTL_SECONDS = 1

apikey_server = server_fixture(
    "auth-apikey",
    args=("--param", "Auth=ApiKey", "--param", f"AuthCacheTtlSeconds={CACHE_TTL_SECONDS}"),
)
jwt_server = server_fixture("auth-jwt", args=("--param", "Auth=Jwt"))
iam_server = server_fixture("auth-iam", args=("--param", "Auth=Iam"))


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(mode: str, request: pytest.FixtureRequest) -> DevServer:
    found: DevServer = request.getfixturevalue(f"{mode.lower()}_server")
    return found


# -- credentials, made as a user makes them ---------------------------------------------------


def auth_command(base_url: str, *args: str) -> str:
    done = subprocess.run(
        [str(AUTH_SCRIPT), "--url", base_url, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"scripts/auth {' '.join(args)}: {done.stderr}"
    return done.stdout


class HeaderAuth(httpx.Auth):
    def __init__(self, name: str, value: str) -> None:
        self.name, self.value = name, value

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self.name] = self.value
        yield request


class BotocoreSigV4(httpx.Auth):
    """Signs each request as an AWS SDK client does (botocore's SigV4, service execute-api)."""

    requires_request_body = True

    def __init__(self, access_key_id: str, secret_access_key: str) -> None:
        self.credentials = Credentials(access_key_id, secret_access_key)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        signed = AWSRequest(
            method=request.method,
            url=str(request.url),
            headers={
                k: v
                for k, v in request.headers.items()
                if k.lower() in ("content-type", "a2a-version")
            },
            data=request.content,
        )
        SigV4Auth(self.credentials, "execute-api", "us-east-1").add_auth(signed)
        for name, value in signed.headers.items():
            request.headers[name] = value
        yield request


@dataclass
class Credential:
    principal: str  # the owner the stack must see
    auth: httpx.Auth
    secret: str  # the key / token / secret access key (to tamper with)
    key_id: str = ""


def credential(mode: str, server: DevServer, name: str) -> Credential:
    base = server.base_url
    if mode == "ApiKey":
        key = auth_command(base, "create-key", "--principal", name).strip()
        return Credential(name, HeaderAuth("X-API-Key", key), key, key.split("_")[1])
    if mode == "Jwt":
        token = auth_command(base, "token", "--sub", name, "--scope", "tasks").strip()
        return Credential(
            f"{base}/_local/oidc|{name}", HeaderAuth("Authorization", f"Bearer {token}"), token
        )
    exports = dict(
        line.removeprefix("export ").split("=", 1)
        for line in auth_command(base, "iam-credentials", "--user", name).splitlines()
    )
    access, secret = exports["AWS_ACCESS_KEY_ID"], exports["AWS_SECRET_ACCESS_KEY"]
    return Credential(
        f"arn:aws:iam::123456789012:user/{name}", BotocoreSigV4(access, secret), secret, access
    )


def client(server: DevServer, auth: httpx.Auth | None = None, **headers: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url,
        auth=auth,
        headers={"A2A-Version": "1.0", **headers},
        timeout=60.0,
    )


def message(text: str) -> dict[str, Any]:
    return {
        "message": {
            "messageId": f"msg-{uuid.uuid4().hex}",
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def assert_unauthenticated(response: httpx.Response, mode: str) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == CHALLENGE[mode]
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
    assert isinstance(error["message"], str) and error["message"]


PROTECTED = [
    ("GET", "/tasks", None),
    ("GET", "/tasks/some-task", None),
    ("POST", "/message:send", message("hi")),
    ("POST", "/", {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}),
    ("GET", "/extendedAgentCard", None),
]


# -- every mode --------------------------------------------------------------------------------


def test_no_credential_is_401_naming_the_scheme(mode: str, server: DevServer) -> None:
    with client(server) as http:
        for method, path, body in PROTECTED:
            assert_unauthenticated(http.request(method, path, json=body), mode)
    expected = {"ApiKey": "auth: ApiKey", "Jwt": "auth: Jwt", "Iam": "auth: Iam"}[mode]
    assert expected in server.output()


def test_the_public_card_needs_no_credential(mode: str, server: DevServer) -> None:
    with client(server) as http:
        assert http.get(CARD_PATH).status_code == 200
    with client(server, HeaderAuth("Authorization", "Bearer garbage")) as http:
        assert http.get(CARD_PATH).status_code == 200


def test_x_local_principal_alone_is_refused(mode: str, server: DevServer) -> None:
    with client(server, **{"X-Local-Principal": unique("alice")}) as http:
        assert_unauthenticated(http.get("/tasks"), mode)
        assert_unauthenticated(http.post("/message:send", json=message("hi")), mode)


def test_a_valid_credential_works_and_owns_its_tasks(mode: str, server: DevServer) -> None:
    alice_name, bob_name = unique("alice"), unique("bob")
    alice = credential(mode, server, alice_name)
    alice_again = credential(mode, server, alice_name)  # a second credential, same principal
    bob = credential(mode, server, bob_name)
    assert alice.secret != alice_again.secret
    # X-Local-Principal naming bob is ignored: the credential decides.
    with (
        client(server, alice.auth, **{"X-Local-Principal": bob.principal}) as as_alice,
        client(server, alice_again.auth) as as_alice_again,
        client(server, bob.auth) as as_bob,
    ):
        sent = as_alice.post("/message:send", json=message("hello"))
        assert sent.status_code == 200, sent.text
        task = sent.json()["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"

        got = as_alice.get(f"/tasks/{task['id']}")
        assert got.status_code == 200 and got.json()["id"] == task["id"]
        listed = as_alice_again.get("/tasks", params={"contextId": task["contextId"]})
        assert listed.status_code == 200
        assert [t["id"] for t in listed.json()["tasks"]] == [task["id"]]
        rpc = as_alice_again.post(
            "/",
            json={"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": task["id"]}},
        )
        assert rpc.status_code == 200 and rpc.json()["result"]["id"] == task["id"]

        # Another principal sees nothing of it.
        foreign = as_bob.get(f"/tasks/{task['id']}")
        assert foreign.status_code == 404, foreign.text
        assert as_bob.get("/tasks", params={"contextId": task["contextId"]}).json()["tasks"] == []
        bobs = as_bob.post("/message:send", json=message("bob's"))
        assert bobs.status_code == 200
        assert [t["id"] for t in as_bob.get("/tasks").json()["tasks"]] == [
            bobs.json()["task"]["id"]
        ]
        assert task["id"] in {t["id"] for t in as_alice.get("/tasks").json()["tasks"]}


def test_a_bad_credential_is_refused(mode: str, server: DevServer) -> None:
    good = credential(mode, server, unique("carol"))
    if mode == "ApiKey":
        tampered = good.secret[:-1] + ("A" if good.secret[-1] != "A" else "B")
        bad: list[httpx.Auth] = [
            HeaderAuth("X-API-Key", tampered),  # right key id, wrong secret
            HeaderAuth("X-API-Key", "a2a_" + "x" * 56),  # unknown key
            HeaderAuth("X-API-Key", "not-a-key"),
        ]
        expected = 401
    elif mode == "Jwt":
        header, payload, signature = good.secret.split(".")
        flipped = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
        bad = [
            HeaderAuth("Authorization", f"Bearer {header}.{flipped}.{signature}"),
            HeaderAuth("Authorization", "Bearer not-a-jwt"),
            HeaderAuth("Authorization", good.secret),  # no Bearer
        ]
        expected = 401
    else:
        bad = [
            BotocoreSigV4(good.key_id, "0" * 40),  # wrong secret
            BotocoreSigV4("AKIA" + "X" * 16, good.secret),  # unknown access key
        ]
        expected = 403
    for auth in bad:
        with client(server, auth) as http:
            response = http.get("/tasks")
            assert response.status_code == expected, response.text
            error = response.json()["error"]
            assert error["code"] == expected
            if expected == 401:
                assert response.headers["www-authenticate"] == CHALLENGE[mode]
    with client(server, good.auth) as http:
        assert http.get("/tasks").status_code == 200


# -- per mode ----------------------------------------------------------------------------------


def test_a_revoked_key_is_refused_after_the_cache_ttl(apikey_server: DevServer) -> None:
    key = credential("ApiKey", apikey_server, unique("dave"))
    listed = auth_command(apikey_server.base_url, "--json", "list-keys")
    assert key.key_id in listed and key.secret not in listed
    with client(apikey_server, key.auth) as http:
        assert http.get("/tasks").status_code == 200
        auth_command(apikey_server.base_url, "revoke-key", key.key_id)
        # Within the TTL API Gateway may reuse the authorizer's answer, but the key's usage
        # plan key is gone: never a 200.
        assert http.get("/tasks").status_code in (401, 403)
        time.sleep(CACHE_TTL_SECONDS + 0.5)
        assert_unauthenticated(http.get("/tasks"), "ApiKey")
        assert_unauthenticated(http.post("/message:send", json=message("x")), "ApiKey")


def test_admin_endpoints_of_other_modes_are_404(
    apikey_server: DevServer, jwt_server: DevServer
) -> None:
    with httpx.Client(base_url=apikey_server.base_url) as http:
        assert http.post("/_local/tokens", json={"sub": "x"}).status_code == 404
        assert http.post("/_local/iam/users", json={"user": "x"}).status_code == 404
    with httpx.Client(base_url=jwt_server.base_url) as http:
        assert http.post("/_local/keys", json={"principal": "x"}).status_code == 404
        jwks = http.get("/_local/oidc/jwks.json").json()
        assert [key["alg"] for key in jwks["keys"]] == ["ES256"]


def test_auth_none_is_open_with_x_local_principal(dev_server: DevServer) -> None:
    """The session's server runs without --param Auth: open, as the banner says."""
    assert "auth: none — open; name a principal with X-Local-Principal" in dev_server.output()
    erin, frank = unique("erin"), unique("frank")
    with (
        client(dev_server, **{"X-Local-Principal": erin}) as as_erin,
        client(dev_server, **{"X-Local-Principal": frank}) as as_frank,
    ):
        sent = as_erin.post("/message:send", json=message("open"))
        assert sent.status_code == 200
        task_id = sent.json()["task"]["id"]
        assert as_erin.get(f"/tasks/{task_id}").status_code == 200
        assert as_frank.get(f"/tasks/{task_id}").status_code == 404
        assert as_erin.post("/_local/keys", json={"principal": "x"}).status_code == 404
