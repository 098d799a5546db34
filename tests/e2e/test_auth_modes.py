"""Authentication modes of the local stack, end to end: `scripts/dev --param Auth=ApiKey|Jwt|Iam`
runs the real authorizer (or SigV4 check) as API Gateway would, and credentials are made with
`scripts/auth`, run as a user runs it. Raw httpx: the checks here are the gateway's own answers
(401/403 bodies and headers), which no A2A binding's wire shape describes. A credential is
never accepted once expired or revoked, whatever the authorizer cache holds (the variants per
mode are at the end).

One server per mode, for the module; the open mode (Auth=None) is the session's server.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import httpx
import pytest

from tests.e2e.conftest import CARD_PATH, ROOT, DevServer, server_fixture
from tests.e2e.sigv4 import SigV4

pytestmark = pytest.mark.e2e

AUTH_SCRIPT = ROOT / "scripts" / "auth"
MODES = ["ApiKey", "Jwt", "Iam"]
CHALLENGE = {
    "ApiKey": 'ApiKey realm="a2a", header="X-API-Key"',
    "Jwt": 'Bearer realm="a2a"',
    "Iam": "AWS4-HMAC-SHA256",
}
CACHE_TTL_SECONDS = 5  # the ApiKey server's: long enough to revoke a key while cached

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
        f"arn:aws:iam::123456789012:user/{name}", SigV4(access, secret), secret, access
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
    elif mode == "Jwt":
        header, payload, signature = good.secret.split(".")
        flipped = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
        bad = [
            HeaderAuth("Authorization", f"Bearer {header}.{flipped}.{signature}"),
            HeaderAuth("Authorization", "Bearer not-a-jwt"),
            HeaderAuth("Authorization", good.secret),  # no Bearer
        ]
    else:
        # API Gateway's INVALID_SIGNATURE: the template answers it 401 with the challenge.
        bad = [
            SigV4(good.key_id, "0" * 40),  # wrong secret
            SigV4("AKIA" + "X" * 16, good.secret),  # unknown access key
        ]
    for auth in bad:
        with client(server, auth) as http:
            assert_unauthenticated(http.get("/tasks"), mode)
    with client(server, good.auth) as http:
        assert http.get("/tasks").status_code == 200


@pytest.mark.parametrize("mode", ["ApiKey", "Jwt"])
def test_two_different_credentials_in_one_request_are_refused(
    mode: str, request: pytest.FixtureRequest
) -> None:
    """Whichever value API Gateway's cache is keyed by, and whether or not that value's answer
    is cached (the first is, here): 401, as the authorizer answers when it is asked."""
    server: DevServer = request.getfixturevalue(f"{mode.lower()}_server")
    first, second = (credential(mode, server, unique(n)) for n in ("erin", "frank"))
    name = "X-API-Key" if mode == "ApiKey" else "Authorization"
    values = [
        (first.secret if mode == "ApiKey" else f"Bearer {first.secret}"),
        (second.secret if mode == "ApiKey" else f"Bearer {second.secret}"),
    ]
    with client(server, first.auth) as http:
        assert http.get("/tasks").status_code == 200  # the first credential's answer cached
    for pair in (values, values[::-1]):
        response = httpx.get(
            server.base_url + "/tasks",
            headers=[("A2A-Version", "1.0"), (name, pair[0]), (name, pair[1])],
        )
        assert_unauthenticated(response, mode)


# -- per mode ----------------------------------------------------------------------------------


def test_a_revoked_key_is_refused_at_once_and_after_the_cache_ttl(
    apikey_server: DevServer,
) -> None:
    key = credential("ApiKey", apikey_server, unique("dave"))
    listed = auth_command(apikey_server.base_url, "--json", "list-keys")
    assert key.key_id in listed and key.secret not in listed
    with client(apikey_server, key.auth) as http:
        cached_from = time.monotonic()
        assert http.get("/tasks").status_code == 200
        auth_command(apikey_server.base_url, "revoke-key", key.key_id)
        # Within the TTL API Gateway reuses the authorizer's answer, but the key's usage plan
        # key is gone (INVALID_API_KEY, "Forbidden"): the same 401 as after it.
        still_cached = time.monotonic() - cached_from < CACHE_TTL_SECONDS - 0.5
        response = http.get("/tasks")
        assert_unauthenticated(response, "ApiKey")
        if still_cached:  # revoking took most of the TTL on a loaded machine: not this path
            assert response.json()["error"]["message"] == "Forbidden"
        time.sleep(CACHE_TTL_SECONDS + 0.5)
        for response in (http.get("/tasks"), http.post("/message:send", json=message("x"))):
            assert_unauthenticated(response, "ApiKey")
            assert response.json()["error"]["message"] == "Unauthorized"  # the authorizer's
    assert EXPIRY_VARIANTS["ApiKey"] == [
        "revoked, answer still cached",
        "revoked, after the cache TTL",
    ]


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


# -- no acceptance after expiry ----------------------------------------------------------------
#
# The variants per mode (the count the report quotes is the number of `EXPIRY_VARIANTS` rows
# each mode's tests try): a Jwt server caches the authorizer's answer for the template's 300 s,
# so a token accepted once is still in the cache when it expires; the functions refuse it from
# the authorizer's `expiresAt` on. SigV4 has no cache: API Gateway checks X-Amz-Date (5 min
# either way) and the session token on every request.

EXPIRY_VARIANTS = {
    "Jwt": [
        "expired at first use",
        "expired while cached: GET /tasks",
        "expired while cached: GET /tasks/{id}",
        "expired while cached: POST /message:send",
        "expired while cached: JSON-RPC POST /",
        "expired while cached: SSE POST /message:stream",
        "nbf in the future",
        "no exp",
    ],
    "Iam": [
        "X-Amz-Date 6 min old",
        "X-Amz-Date 16 min old",
        "X-Amz-Date 6 min ahead",
        "X-Amz-Date 16 min ahead",
        "a session token the stack never issued",
    ],
    "ApiKey": ["revoked, answer still cached", "revoked, after the cache TTL"],
}
# The functions' refusal; the gateway's (the authorizer refused) is "Unauthorized".
EXPIRED_MESSAGE = "The credential has expired"
CACHED_WINDOW_SECONDS = 20  # how long the token below stays valid once minted


def mint(server: DevServer, sub: str, **lifetime: int | None) -> str:
    """A token of the local issuer with its `nbf`/`exp` set (None: left out)."""
    response = httpx.post(
        f"{server.base_url}/_local/tokens",
        json={"sub": sub, "scopes": ["tasks"], "claims": lifetime},
        timeout=60.0,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["token"])


def bearer(token: str) -> httpx.Auth:
    return HeaderAuth("Authorization", f"Bearer {token}")


def assert_refused(response: httpx.Response, mode: str, message: str | None = None) -> None:
    """401 naming the scheme: the gateway's google.rpc body, or a function's (HTTP+JSON, or
    the JSON-RPC error of `POST /`)."""
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == CHALLENGE[mode]
    body = response.json()
    if "jsonrpc" in body:
        assert body["error"]["code"] == -31401, body
        text = body["error"]["message"]
    else:
        assert_unauthenticated(response, mode)
        text = body["error"]["message"]
    if message is not None:
        assert text == message, body


def test_a_jwt_is_never_accepted_after_it_expired(jwt_server: DevServer) -> None:
    from a2a_serverless.auth import LEEWAY_SECONDS

    name = unique("erin")
    now = int(time.time())
    # Past `exp` but within the authorizer's leeway: accepted, and cached for 300 s; refused
    # by the authorizer (and so by the functions) from exp + leeway = now + the window on.
    expires_at = now + CACHED_WINDOW_SECONDS
    cached = mint(jwt_server, name, exp=expires_at - LEEWAY_SECONDS, nbf=now - 5)
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    with client(jwt_server, bearer(cached)) as http:
        sent = http.post("/message:send", json=message("before"))
        assert sent.status_code == 200, sent.text
        task_id = sent.json()["task"]["id"]
        assert http.get("/tasks").status_code == 200
        assert http.get(f"/tasks/{task_id}").status_code == 200
        assert http.post("/", json=rpc).json()["result"]["tasks"]
        with http.stream("POST", "/message:stream", json=message("stream")) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            stream.read()
        assert time.time() < expires_at, "the valid requests took longer than the window"

        time.sleep(max(0.0, expires_at - time.time()) + 1.0)
        # Still within the cache TTL: refused by the functions, not the authorizer.
        refusals = {
            "GET /tasks": http.get("/tasks"),
            "GET /tasks/{id}": http.get(f"/tasks/{task_id}"),
            "POST /message:send": http.post("/message:send", json=message("after")),
            "JSON-RPC POST /": http.post("/", json=rpc),
            "SSE POST /message:stream": http.post("/message:stream", json=message("after")),
        }
    for route, response in refusals.items():
        assert f"expired while cached: {route}" in EXPIRY_VARIANTS["Jwt"]
        assert_refused(response, "Jwt", EXPIRED_MESSAGE)

    # Refused by the authorizer itself: expired before its first use, not yet valid, no exp.
    for lifetime in (
        {"exp": now - LEEWAY_SECONDS - 5},
        {"nbf": now + LEEWAY_SECONDS + 300},
        {"exp": None},
    ):
        with client(jwt_server, bearer(mint(jwt_server, name, **lifetime))) as http:
            assert_refused(http.get("/tasks"), "Jwt", "Unauthorized")
            assert_refused(http.post("/", json=rpc), "Jwt", "Unauthorized")


class SkewedSigV4(SigV4):
    """Signs as an SDK on a clock `skew` off would, optionally with a session token."""

    def __init__(self, access: str, secret: str, skew: timedelta, token: str | None = None):
        super().__init__(access, secret, token)
        self.skew = skew

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        skewed = datetime.now(UTC).replace(tzinfo=None) + self.skew
        with mock.patch("botocore.auth.get_current_datetime", lambda: skewed):
            yield from super().auth_flow(request)


def test_a_stale_or_future_signature_or_unknown_session_token_is_refused(
    iam_server: DevServer,
) -> None:
    good = credential("Iam", iam_server, unique("frank"))
    variants = {
        "X-Amz-Date 6 min old": (timedelta(minutes=-6), None, "Signature expired"),
        "X-Amz-Date 16 min old": (timedelta(minutes=-16), None, "Signature expired"),
        "X-Amz-Date 6 min ahead": (timedelta(minutes=6), None, "Signature not yet current"),
        "X-Amz-Date 16 min ahead": (timedelta(minutes=16), None, "Signature not yet current"),
        "a session token the stack never issued": (
            timedelta(0),
            "FwoGZXIvYXdzEXAMPLE",
            "The security token included in the request is invalid.",
        ),
    }
    assert list(variants) == EXPIRY_VARIANTS["Iam"]
    for skew, token, reason in variants.values():
        with client(iam_server, SkewedSigV4(good.key_id, good.secret, skew, token)) as http:
            for method, path, body in PROTECTED[:4]:
                response = http.request(method, path, json=body)
                assert_refused(response, "Iam")
                assert response.json()["error"]["message"].startswith(reason), response.text
    # Within the window (a clock 4 minutes off) the same signer is accepted.
    near = SkewedSigV4(good.key_id, good.secret, timedelta(minutes=-4))
    with client(iam_server, near) as http:
        assert http.get("/tasks").status_code == 200
