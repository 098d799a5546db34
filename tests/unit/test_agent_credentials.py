"""The headers for a remote agent, from its Secrets Manager secret (aws/secrets.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from a2a_serverless.aws.secrets import AgentCredentials

PREFIX = "my-stack/agents/"


class NotFound(Exception):
    pass


class StubSecrets:
    """Secrets Manager's GetSecretValue over a dict of name -> SecretString."""

    class exceptions:
        ResourceNotFoundException = NotFound

    def __init__(self, secrets: dict[str, str]) -> None:
        self.secrets = secrets
        self.reads: list[str] = []

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:
        self.reads.append(SecretId)
        if SecretId not in self.secrets:
            raise NotFound(SecretId)
        return {"Name": SecretId, "SecretString": self.secrets[SecretId]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def credentials(secrets: dict[str, str], clock: Clock | None = None) -> tuple[Any, StubSecrets]:
    stub = StubSecrets(secrets)
    return AgentCredentials(lambda: stub, PREFIX, ttl=300, clock=clock or Clock()), stub


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("https://agent.example/.well-known/agent-card.json", f"{PREFIX}agent.example"),
        ("https://Agent.Example/a2a", f"{PREFIX}agent.example"),
        ("http://127.0.0.1:8001/", f"{PREFIX}127.0.0.1:8001"),
        ("https://agent.example:8443/card", f"{PREFIX}agent.example:8443"),
        ("http://[::1]:9000/", f"{PREFIX}[::1]:9000"),
    ],
)
def test_the_secret_is_named_after_the_agents_host_and_port(url: str, secret: str) -> None:
    creds, stub = credentials({secret: json.dumps({"X-API-Key": "k1"})})
    assert creds.headers(url) == {"X-API-Key": "k1"}
    assert stub.reads == [secret]


def test_a_named_secret_wins_over_the_host() -> None:
    creds, stub = credentials({"shared/b": '{"Authorization": "Bearer t"}'})
    assert creds.headers("https://agent.example/", name="shared/b") == {"Authorization": "Bearer t"}
    assert stub.reads == ["shared/b"]


def test_no_secret_is_no_headers() -> None:
    creds, _ = credentials({})
    assert creds.headers("https://agent.example/") == {}


@pytest.mark.parametrize(
    "value", ["not json", '["X-API-Key", "k"]', '{"X-API-Key": 5}', '"k"', "null"]
)
def test_a_secret_that_is_not_an_object_of_strings_is_refused_without_its_value(
    value: str,
) -> None:
    creds, _ = credentials({f"{PREFIX}agent.example": value})
    with pytest.raises(ValueError, match=f"secret '{PREFIX}agent.example'") as refused:
        creds.headers("https://agent.example/")
    assert value not in str(refused.value)


def test_a_secret_is_read_once_per_ttl() -> None:
    clock = Clock()
    secret = f"{PREFIX}agent.example"
    creds, stub = credentials({secret: '{"X-API-Key": "old"}'}, clock)
    assert creds.headers("https://agent.example/a") == {"X-API-Key": "old"}
    stub.secrets[secret] = '{"X-API-Key": "new"}'  # rotated
    clock.now += 299
    assert creds.headers("https://agent.example/b") == {"X-API-Key": "old"}
    assert len(stub.reads) == 1
    clock.now += 2
    assert creds.headers("https://agent.example/") == {"X-API-Key": "new"}
    assert len(stub.reads) == 2


def test_a_missing_secret_is_remembered_too_and_the_answer_is_a_copy() -> None:
    creds, stub = credentials({f"{PREFIX}b.example": '{"X-API-Key": "k"}'})
    creds.headers("https://a.example/")
    creds.headers("https://a.example/")
    assert stub.reads == [f"{PREFIX}a.example"]
    first = creds.headers("https://b.example/")
    first["X-API-Key"] = "changed"
    assert creds.headers("https://b.example/") == {"X-API-Key": "k"}


def test_the_client_is_made_at_the_first_read() -> None:
    made: list[int] = []

    def factory() -> StubSecrets:
        made.append(1)
        return StubSecrets({})

    creds = AgentCredentials(factory, PREFIX)
    assert made == []
    creds.headers("https://a.example/")
    creds.headers("https://b.example/")
    assert made == [1]
