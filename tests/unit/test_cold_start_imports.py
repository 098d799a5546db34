"""Cold start: what importing each function (its Lambda init) loads, and the SnapStart restore
hook. Each import runs in a fresh interpreter (a Lambda init is one)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless import functions, wiring

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
sys.path.insert(0, ".")
import app
print(json.dumps(sorted(sys.modules)))
"""

# Never needed by any function's init: test/dev tools, and the X-Ray SDK outside Lambda.
# (httpx imports rich and pygments for its CLI where they are installed, as in this venv; the
# layer has neither.)
# Nor FastAPI, pydantic.v1 and pydantic-settings: bindings/routing.py routes on plain Starlette,
# settings.py reads the environment itself (they cost an HTTP function's init ~0.2 s of CPU).
NEVER = {"moto", "pytest", "yaml", "aws_xray_sdk", "fastapi", "pydantic_settings", "pydantic.v1"}
# Parts a function must not load when it has no use for them.
NOT_LOADED = {
    # Plain handlers: no web framework, no card, no HTTP service.
    "flow_worker": {
        "starlette",
        "mangum",
        "httpx",
        "a2a_serverless.core.card",
        "a2a_serverless.core.service",
        "a2a_serverless.core.push",
        "a2a_serverless.push.sender",
        "a2a_serverless.bindings.rest",
    },
    "webhook_sender": {
        "mangum",
        "a2a_serverless.core.card",
        "a2a_serverless.core.service",
        "a2a_serverless.bindings.rest",
    },
    "authorizer": {
        "mangum",
        "a2a_serverless.core.card",
        "a2a_serverless.core.service",
        "a2a_serverless.push.sender",
        "a2a_serverless.bindings.rest",
    },
    # The unsigned card makes no AWS call: no boto3 (its client would cost ~0.2 s).
    "agent_card": {"boto3", "s3transfer", "httpx", "a2a_serverless.push.sender"},
    # Web Adapter functions are served by uvicorn, not Mangum.
    "send_message": {"mangum", "httpx", "a2a_serverless.push.sender"},
    "stream": {"mangum", "httpx", "a2a_serverless.push.sender"},
    "get_task": {"mangum", "httpx", "a2a_serverless.push.sender"},
    "list_tasks": {"httpx", "a2a_serverless.push.sender"},
    "push_config": {"httpx", "a2a_serverless.push.sender"},
}


def _loaded(function: str) -> set[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT / "shared"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "TABLE_NAME": "tasks",
        "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:flow",
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT / "functions" / function,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _top_level(modules: set[str]) -> set[str]:
    return modules | {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("function", sorted(NOT_LOADED))
def test_a_function_init_loads_only_what_it_uses(function: str) -> None:
    loaded = _top_level(_loaded(function))
    assert "a2a_serverless.functions" in loaded  # the probe imported the real function
    assert not (NOT_LOADED[function] | NEVER) & loaded


def test_every_function_is_checked() -> None:
    dirs = {p.parent.name for p in (ROOT / "functions").glob("*/app.py")}
    assert dirs == set(NOT_LOADED)


# -- SnapStart -------------------------------------------------------------------------------


class _Client:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_after_restore_reseeds_random_and_drops_pooled_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clients = [_Client(), _Client()]
    monkeypatch.setattr(wiring, "_clients", clients)
    # Two environments resumed from one snapshot start with the same `random` state.
    random.seed(1234)
    snapshot = random.getstate()
    shared_next = random.random()
    random.setstate(snapshot)
    functions.after_restore()
    assert random.random() != shared_next
    assert [c.closed for c in clients] == [1, 1]


def test_the_hook_is_registered_once_where_the_runtime_offers_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered: list[Any] = []
    fake = types.ModuleType("snapshot_restore_py")
    fake.register_after_restore = registered.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    monkeypatch.setattr(functions, "_hooked", False)
    functions.register_snapstart_hooks()
    functions.register_snapstart_hooks()  # a second create() in the same process
    assert registered == [functions.after_restore]


def test_without_the_runtime_library_nothing_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails
    monkeypatch.setattr(functions, "_hooked", False)
    functions.register_snapstart_hooks()
    assert functions._hooked is False


def test_aws_clients_made_by_wiring_are_tracked_for_the_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(wiring, "_clients", [])
    client = wiring.aws_client("dynamodb", wiring.get_settings())
    assert wiring._clients == [client]
    wiring.close_aws_connections()  # a real client stays usable after close()
    assert client.meta.service_model.service_name == "dynamodb"
