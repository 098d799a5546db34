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

from a2a_serverless import handlers, wiring
from tests.function_probe import run_in_function

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import gc, json, sys
sys.path.insert(0, ".")
import app
state = {"gc": gc.isenabled(), "frozen": gc.get_freeze_count()}
wiring = sys.modules.get("a2a_serverless.wiring")
clients = [c.meta.service_model.service_name for c in wiring._clients] if wiring else []
print(json.dumps({"modules": sorted(sys.modules), "clients": clients, **state}))
"""

# Never needed by any function's init: test/dev tools, and the X-Ray SDK outside Lambda.
# Nor uvicorn (and click, which it imports) when the function is imported: run.sh's server
# loads it before the app (test_a_web_adapter_function_init_as_run_sh_starts_it).
# (httpx imports rich and pygments for its CLI where they are installed, as in this venv; the
# layer has neither.)
# Nor pydantic.v1.
NEVER = {
    "moto",
    "pytest",
    "yaml",
    "aws_xray_sdk",
    "pydantic.v1",
    "uvicorn",
    "click",
}
READ_ONLY_NEVER = {
    "a2a_serverless.flows",
    "a2a_serverless.core.send",
    "a2a_serverless.core.push",
    "a2a_serverless.core.egress",
}
# Parts a function must not load when it has no use for them.
NOT_LOADED = {
    # Plain handlers: no web framework, no card, no HTTP service.
    "flow_worker": {
        "fastapi",
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
        "fastapi",
        "mangum",
        # The first POST imports it (push/delivery.py), not the init.
        "httpx",
        # Powertools' batch utility imports its parser's pydantic event models when pydantic
        # is loaded before it (functions/webhook_sender.py imports it first).
        "aws_lambda_powertools.utilities.parser",
        "a2a_serverless.core.card",
        "a2a_serverless.core.service",
        "a2a_serverless.bindings.rest",
    },
    "authorizer": {
        "fastapi",
        "mangum",
        "httpx",  # only a JWT authorizer fetching its JWKS loads it (auth/jwt.py)
        "a2a_serverless.core.card",
        "a2a_serverless.core.service",
        "a2a_serverless.push.sender",
        "a2a_serverless.bindings.rest",
        # No flow, no executions, no webhooks: wiring imports these in the getters using them.
        "a2a_serverless.flows",
        "a2a_serverless.core.executor",
        "a2a_serverless.core.egress",
    },
    # The unsigned card makes no AWS call: no boto3 (its client would cost ~0.2 s).
    "agent_card": {"boto3", "s3transfer", "httpx", "a2a_serverless.push.sender"},
    # Web Adapter functions are served by uvicorn, not Mangum.
    # The card module only where a route serves the card (bindings/rest.py types it only).
    "send_message": {"mangum", "httpx", "a2a_serverless.push.sender", "a2a_serverless.core.card"},
    "stream": {"mangum", "httpx", "a2a_serverless.push.sender"},
    # The functions that only read tasks never load the flow, the SEND path or the push
    # service (wiring.get_read_service).
    "get_task": {
        "mangum",
        "httpx",
        "a2a_serverless.push.sender",
        "a2a_serverless.core.card",
        *READ_ONLY_NEVER,
    },
    "list_tasks": {
        "httpx",
        "a2a_serverless.push.sender",
        "a2a_serverless.core.card",
        *READ_ONLY_NEVER,
    },
    "push_config": {
        "httpx",
        "a2a_serverless.push.sender",
        "a2a_serverless.core.card",
        "a2a_serverless.flows",
    },
    # A remote agent's notification: the task's records and the next step's start, never the
    # flow, the webhook sender or an outgoing HTTP client.
    "delegation_receiver": {
        "httpx",
        "a2a_serverless.push.sender",
        "a2a_serverless.core.card",
        "a2a_serverless.flows",
    },
}


def _init(function: str, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """The modules loaded by the function's init, its AWS clients, and the GC's state after
    it."""
    return run_in_function(function, _PROBE, extra_env=extra_env)


# The AWS clients each function's init makes: the HTTP functions' services hold the store's;
# the plain handlers and the Step Functions client make theirs at first use (wiring.py).
CLIENTS = {
    "agent_card": [],
    "authorizer": [],
    "flow_worker": [],
    "get_task": ["dynamodb"],
    "list_tasks": ["dynamodb"],
    "push_config": ["dynamodb"],
    "send_message": ["dynamodb"],
    "stream": ["dynamodb"],
    "webhook_sender": [],
    "delegation_receiver": ["dynamodb"],
}


@pytest.mark.parametrize("function", sorted(CLIENTS))
def test_a_function_init_makes_only_the_clients_it_uses(function: str) -> None:
    env = {"AUTH_MODE": "ApiKey"} if function == "authorizer" else {}
    assert sorted(_init(function, env)["clients"]) == CLIENTS[function]


# A user's agent is imported by the functions that run it or describe it, and by no other:
# an a2a-sdk executor's imports alone can take as long as a whole function's init.
NOT_SERVING_THE_FLOW = (
    "authorizer",
    "get_task",
    "list_tasks",
    "push_config",
    "webhook_sender",
    "delegation_receiver",
)
SERVES_THE_FLOW = ("agent_card", "flow_worker", "send_message", "stream")


def _with_agent(tmp_path: Path) -> dict[str, str]:
    """FLOW naming a module that fails when imported (a heavy agent, seen from outside)."""
    (tmp_path / "heavy_agent.py").write_text("raise RuntimeError('the agent was imported')\n")
    return {"FLOW": "heavy_agent:flow", "PYTHONPATH": f"{ROOT / 'shared'}:{tmp_path}"}


def test_every_function_is_said_to_serve_the_flow_or_not() -> None:
    assert sorted(NOT_SERVING_THE_FLOW + SERVES_THE_FLOW) == sorted(CLIENTS)


@pytest.mark.parametrize("function", NOT_SERVING_THE_FLOW)
def test_a_function_that_does_not_serve_the_flow_never_imports_the_agent(
    function: str, tmp_path: Path
) -> None:
    init = _init(function, _with_agent(tmp_path))
    assert "heavy_agent" not in init["modules"]
    assert "a2a_serverless.handlers." + function in init["modules"]


@pytest.mark.parametrize("function", SERVES_THE_FLOW)
def test_a_function_that_serves_the_flow_loads_it_at_init(function: str, tmp_path: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _init(function, _with_agent(tmp_path))
    assert "FlowLoadError" in failed.value.stderr
    assert "the agent was imported" in failed.value.stderr


def _loaded(function: str) -> set[str]:
    return set(_init(function)["modules"])


def _top_level(modules: set[str]) -> set[str]:
    return modules | {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("function", sorted(NOT_LOADED))
def test_a_function_init_loads_only_what_it_uses(function: str) -> None:
    loaded = _top_level(_loaded(function))
    assert "a2a_serverless.handlers" in loaded  # the probe imported the real function
    assert not (NOT_LOADED[function] | NEVER) & loaded


# The Web Adapter functions (run.sh): `python -m a2a_serverless.serve` first, then `app` through
# its uvicorn.
WEB_ADAPTER = ("get_task", "send_message", "stream")
_SERVED_PROBE = """
import gc, json, sys
start = set(sys.modules)  # the interpreter's own (site, __main__, ...)
import a2a_serverless.serve
before = sorted(set(sys.modules) - start)
from uvicorn.config import Config
config = Config("app:app", **a2a_serverless.serve.OPTIONS)
config.load()
print(json.dumps({
    "before": before,
    "modules": sorted(sys.modules),
    "stdlib": sorted(sys.stdlib_module_names),
    "gc": gc.isenabled(),
    "frozen": gc.get_freeze_count(),
}))
"""


@pytest.mark.parametrize("function", WEB_ADAPTER)
def test_a_web_adapter_function_init_as_run_sh_starts_it(function: str) -> None:
    init = run_in_function(function, _SERVED_PROBE)
    # uvicorn brings its CLI (click) before the app, nothing of the function's...
    outside = {m.split(".")[0] for m in init["before"]} - set(init["stdlib"])
    assert {"uvicorn", "click"} <= outside, outside
    assert not {"starlette", "fastapi", "pydantic", "botocore"} & outside
    ours = {m for m in init["before"] if m.split(".")[0] == "a2a_serverless"}
    assert ours == {"a2a_serverless", "a2a_serverless.serve"}, ours
    # ...and the app, imported as `app`, makes the function.
    loaded = _top_level(set(init["modules"]))
    assert "a2a_serverless.handlers." + function in loaded
    assert not (NOT_LOADED[function] | NEVER - {"uvicorn", "click"}) & loaded
    assert init["gc"] is True
    assert init["frozen"] > 10_000  # the init pause ran: `app` was recognised


@pytest.mark.parametrize("function", sorted(NOT_LOADED))
def test_a_function_init_leaves_the_gc_on_and_freezes_what_it_made(function: str) -> None:
    after = _init(function)
    assert after["gc"] is True  # a create() not returning through init_done() leaves it off
    assert after["frozen"] > 10_000  # every function's init: its objects out of later collections


def test_importing_a_function_outside_its_init_leaves_the_gc_alone() -> None:
    # A test, a tool or the local stack importing a function module: no `app` being
    # imported, so no pause (nothing would end it) and nothing frozen.
    code = (
        "import gc, json\n"
        "import a2a_serverless.handlers.webhook_sender as m\n"
        "import a2a_serverless.handlers.send_message\n"
        "m.create()\n"
        "print(json.dumps([gc.isenabled(), gc.get_freeze_count()]))\n"
    )
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT / "shared")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, 0]


def test_clients_are_made_from_boto3_s_default_session() -> None:
    """As `boto3.client` makes them, on Lambda too: hooks registered on that session (the
    local stack's call recorder, moto) see their calls."""
    code = (
        "import boto3\n"
        "from a2a_serverless import wiring\n"
        "class Seen(Exception): pass\n"
        "def hook(**kwargs): raise Seen()\n"  # before any request leaves
        "boto3._get_default_session().events.register('before-call.dynamodb', hook)\n"
        "client = wiring.aws_client('dynamodb', wiring.get_settings())\n"
        "try:\n"
        "    client.describe_table(TableName='t')\n"
        "except Seen:\n"
        "    print('seen')\n"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT / "shared"),
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["seen"]


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
    handlers.after_restore()
    assert random.random() != shared_next
    assert [c.closed for c in clients] == [1, 1]


def test_the_hook_is_registered_once_where_the_runtime_offers_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered: list[Any] = []
    fake = types.ModuleType("snapshot_restore_py")
    fake.register_after_restore = registered.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    monkeypatch.setattr(handlers, "_hooked", False)
    handlers.register_snapstart_hooks()
    handlers.register_snapstart_hooks()  # a second create() in the same process
    assert registered == [handlers.after_restore]


def test_without_the_runtime_library_nothing_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails
    monkeypatch.setattr(handlers, "_hooked", False)
    handlers.register_snapstart_hooks()
    assert handlers._hooked is False


def test_aws_clients_made_by_wiring_are_tracked_for_the_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(wiring, "_clients", [])
    client = wiring.aws_client("dynamodb", wiring.get_settings())
    assert wiring._clients == [client]
    wiring.close_aws_connections()  # a real client stays usable after close()
    assert client.meta.service_model.service_name == "dynamodb"


def test_the_service_executor_makes_its_client_on_the_first_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[tuple[Any, ...]] = []

    class Recording:
        def start(self, task_id: str, turn: int, context: Any = None, step: int = 0) -> str:
            started.append((task_id, turn, context, step))
            return f"{task_id}-{turn}"

    made: list[Recording] = []

    def get_executor() -> Recording:
        made.append(Recording())
        return made[-1]

    monkeypatch.setattr(wiring, "get_executor", get_executor)
    executor = wiring._ExecutorOnFirstStart()
    assert made == []
    assert executor.start("t1", 2, None, 1) == "t1-2"
    assert started == [("t1", 2, None, 1)] and len(made) == 1
