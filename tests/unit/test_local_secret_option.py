"""`--secret NAME=VALUE` of scripts/dev and `a2a-serverless dev`: the secrets the local stack
holds from its start (a remote agent's headers for a delegating flow)."""

from __future__ import annotations

import argparse
import sys
import types
from typing import Any

import pytest

from a2a_serverless.local.__main__ import add_stack_arguments, parse_params, serve

SECRET = "a2a-serverless-local/agents/127.0.0.1:8001"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_stack_arguments(parser)
    return parser.parse_args(list(argv))


class Started(Exception):
    pass


def test_the_secrets_reach_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    given: dict[str, Any] = {}

    class FakeStack:
        def __init__(self, **kwargs: Any) -> None:
            given.update(kwargs)

        def start(self) -> FakeStack:
            raise Started

    fake = types.ModuleType("a2a_serverless.local.stack")
    fake.LocalStack = FakeStack  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "a2a_serverless.local.stack", fake)
    monkeypatch.setitem(sys.modules, "uvicorn", types.ModuleType("uvicorn"))
    # What serve() sets for the process, restored after the test.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setattr(sys, "path", list(sys.path))
    args = _args(
        "--secret",
        f'{SECRET}={{"X-API-Key": "k=1"}}',
        "--secret",
        "other=plain",
        "--param",
        "Auth=ApiKey",
    )
    with pytest.raises(Started):
        serve(args)
    assert given["secrets"] == {SECRET: '{"X-API-Key": "k=1"}', "other": "plain"}
    assert given["parameters"] == {"Auth": "ApiKey"}


def test_no_secret_option_is_no_secrets() -> None:
    assert _args().secret == []
    assert parse_params([], "--secret") == {}


def test_a_secret_without_its_name_is_refused_without_echoing_it() -> None:
    with pytest.raises(SystemExit) as refused:
        parse_params(['{"X-API-Key": "hunter2"}'], "--secret")
    assert "--secret takes NAME=VALUE" in str(refused.value)
    assert "hunter2" not in str(refused.value)
    with pytest.raises(SystemExit, match="--param takes NAME=VALUE, got 'Auth'"):
        parse_params(["Auth"])
