"""scripts/dev and `a2a-serverless dev` meter each task's AWS units (the inspector's cost)
unless `--no-meter`."""

from __future__ import annotations

import argparse
import sys
import types
from typing import Any

import pytest

from a2a_serverless.local.__main__ import add_stack_arguments, serve


class Started(Exception):
    pass


def _stack_arguments(monkeypatch: pytest.MonkeyPatch, *argv: str) -> dict[str, Any]:
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
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setattr(sys, "path", list(sys.path))
    parser = argparse.ArgumentParser()
    add_stack_arguments(parser)
    with pytest.raises(Started):
        serve(parser.parse_args(list(argv)))
    return given


def test_the_dev_stack_is_metered_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _stack_arguments(monkeypatch)["meter"] is True


def test_no_meter_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _stack_arguments(monkeypatch, "--no-meter")["meter"] is False
