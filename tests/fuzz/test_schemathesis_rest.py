"""Schemathesis over the published OpenAPI description (docs/openapi.yaml) against the local
stack: for every operation, requests that follow the description (positive) and requests that
break it (negative: wrong types, missing or extra fields, bad `A2A-Version`), with path ids
now and then replaced by real ones (the fuzzer's own tasks and configs, and another owner's).

Every answer passes the suite's oracles (tests/fuzz/conftest.py: no 5xx, no hang, strict
wire checks) and schemathesis's own checks that the description is true: the status is one
it documents, the media type too, and the body matches the documented schema.

Requests are sent by the suite's client (`case.as_transport_kwargs`), not schemathesis's,
so SSE answers are read with the same window as everywhere else.
"""

from __future__ import annotations

import datetime
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok

from tests.e2e.conftest import DevServer
from tests.fuzz.conftest import (
    Bystanders,
    assert_after_the_run,
    client_for,
    exchange,
    fuzz_settings,
    own_tasks,
)

pytestmark = pytest.mark.e2e

OPENAPI = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
SCHEMA = schemathesis.openapi.from_path(OPENAPI)
OPERATIONS = {
    result.ok().label: result.ok()
    for result in SCHEMA.get_all_operations()
    if isinstance(result, Ok)  # the others fail test_every_operation_loads
}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SHARE = 0.20  # of A2A_FUZZ_EXAMPLES, split evenly between the operations
# Headers schemathesis adds for its own client; ours sends what the case says.
DROPPED_HEADERS = {"user-agent", "accept-encoding", "connection", "x-schemathesis-testcaseid"}


def _strategy(operation: schemathesis.APIOperation) -> st.SearchStrategy[Any]:
    positive = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
    # An operation with nothing to break (the public card) has no negative cases.
    parts = (operation.path_parameters, operation.query, operation.headers, operation.body)
    if not any(parts):
        return positive
    return st.one_of(positive, operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))


@dataclass
class Fuzzer:
    client: httpx.Client
    ids: dict[str, list[str]]  # real values of the path parameters `id` and `configId`


@pytest.fixture(scope="module")
def fuzzer(fuzz_server: DevServer, bystanders: Bystanders) -> Iterator[Fuzzer]:
    """The fuzzing owner's client, and real path ids to draw: its own tasks and configs
    (`own_tasks`), and the bystanders'."""
    with client_for(fuzz_server, f"schemathesis-{uuid.uuid4().hex}") as client:
        task_ids, config_ids = own_tasks(client)
        yield Fuzzer(
            client,
            {
                "id": [*task_ids, *bystanders.task_ids],
                "configId": [*config_ids, *bystanders.config_ids],
            },
        )


def _sendable(value: str) -> str:
    """A header value HTTP/1.1 can carry (the client refuses control characters, blanks at
    either end and characters past ASCII; the gateway would never pass them on)."""
    text = value.encode("ascii", "replace").decode("ascii")
    return re.sub(r"[\x00-\x1f\x7f]", "", text).strip(" \t")


def _call(client: httpx.Client, case: Any) -> None:
    kwargs = case.as_transport_kwargs(base_url=str(client.base_url).rstrip("/"))
    headers = {
        name: _sendable(value)
        for name, value in kwargs["headers"].items()
        if name.lower() not in DROPPED_HEADERS
    }
    if "json" in kwargs:
        content: bytes | None = json.dumps(kwargs["json"]).encode()
        headers.setdefault("Content-Type", case.media_type or "application/json")
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        content = data if isinstance(data, bytes) else str(data).encode()
    else:
        content = None
    url = httpx.URL(kwargs["url"])
    params = kwargs.get("params") or None
    outcome = exchange(
        client,
        "rest-schemathesis",
        kwargs["method"],
        url.raw_path.decode("ascii"),
        content=content,
        headers=headers,
        params=params,
    )
    request = client.build_request(
        kwargs["method"], url, headers=headers, content=content, params=params
    )
    response = httpx.Response(
        outcome.status, headers=outcome.headers, content=outcome.body, request=request
    )
    response.elapsed = datetime.timedelta(seconds=outcome.seconds)
    case.validate_response(response, checks=CHECKS)


def test_every_operation_loads() -> None:
    results = list(SCHEMA.get_all_operations())
    assert len(OPERATIONS) == len(results) >= 12, [r for r in results if not isinstance(r, Ok)]


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_operation(fuzzer: Fuzzer, label: str) -> None:
    operation = OPERATIONS[label]
    real_ids = {name: st.sampled_from(values) for name, values in fuzzer.ids.items()}

    @st.composite
    def cases(draw: st.DrawFn) -> Any:
        case = draw(_strategy(operation))
        for name, values in real_ids.items():
            if name in (case.path_parameters or {}) and draw(st.booleans()):
                case.path_parameters[name] = quote(draw(values), safe="")
        return case

    @fuzz_settings(SHARE / len(OPERATIONS))
    @given(case=cases())
    def prop(case: Any) -> None:
        _call(fuzzer.client, case)

    prop()


def test_after_the_run(fuzz_server: DevServer, bystanders: Bystanders, fuzzer: Fuzzer) -> None:
    """Runs after the operations above (module order): every task the fuzz made settled, the
    other owner's tasks read back byte for byte as before, the service still works."""
    assert assert_after_the_run(fuzz_server, bystanders, fuzzer.client) >= 2
