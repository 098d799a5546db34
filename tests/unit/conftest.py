"""Every test under tests/unit runs code only: tests/unit/code_only.py refuses processes,
sockets, name lookups, moto and local stacks while any phase of a test here runs.

Each unit test also sees no EC2 instance metadata service and a template parser that parses
each text once (every caller gets its own copy)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from a2a_serverless.local import template
from tests.unit import code_only

code_only.install()


@pytest.fixture(autouse=True)
def _no_instance_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore asks the EC2 instance metadata service (HTTP) for credentials when none are set."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


_PARSED: dict[str, dict[str, Any]] = {}


@pytest.fixture(autouse=True)
def _template_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`load_template_text` memoised by text: many tests read the same template.yaml."""
    parse = template.load_template_text

    def parsed_once(text: str) -> dict[str, Any]:
        if text not in _PARSED:
            _PARSED[text] = parse(text)
        return copy.deepcopy(_PARSED[text])

    monkeypatch.setattr(template, "load_template_text", parsed_once)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with code_only.guarded():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with code_only.guarded():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with code_only.guarded():
        yield
