"""Runtime, architecture, handlers, adapters, layers and code paths of every function."""

from __future__ import annotations

import ast
import os
import re
import stat
from typing import Any

import pytest

from tests.template.sam import ROOT, resources_of_type

# GetTaskFunction streams `GET /tasks/{id}:subscribe` (the gateway's `GET /tasks/{id}` route).
WEB_ADAPTER = {"SendMessageFunction", "StreamFunction", "GetTaskFunction"}
# The Web Adapter functions that start turns (GetTask only reads).
STARTS_TURNS = {"SendMessageFunction", "StreamFunction"}
MANGUM = {
    "AgentCardFunction",
    "ListTasksFunction",
    "PushConfigFunction",
    "DelegationReceiverFunction",
}
PLAIN = {"AuthorizerFunction", "FlowWorkerFunction", "WebhookSenderFunction"}
ALL = WEB_ADAPTER | MANGUM | PLAIN

LWA_LAYER = {
    "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:753240598075:layer:"
    "LambdaAdapterLayerArm64:${LambdaWebAdapterLayerVersion}"
}
LWA_ENV = {"AWS_LAMBDA_EXEC_WRAPPER", "AWS_LWA_INVOKE_MODE", "PORT"}
COMMON_ENV = {
    "TABLE_NAME": {"Ref": "TasksTable"},
    "FLOW": {"Ref": "Flow"},
    "RETENTION_DAYS": {"Ref": "RetentionDays"},
    "AGENT_NAME": {"Ref": "AgentName"},
    "AGENT_DESCRIPTION": {"Ref": "AgentDescription"},
    "POWERTOOLS_SERVICE_NAME": "a2a-serverless",
    "LOG_LEVEL": "INFO",
}


def _function(cfn: dict[str, Any], name: str) -> dict[str, Any]:
    resource = cfn["Resources"][name]
    assert resource["Type"] == "AWS::Lambda::Function"
    return resource["Properties"]


def _shared_layer(cfn: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """SAM renames the layer SharedLayer<hash>; there is exactly one."""
    layers = resources_of_type(cfn, "AWS::Lambda::LayerVersion")
    assert len(layers) == 1, list(layers)
    ((logical_id, layer),) = layers.items()
    assert logical_id.startswith("SharedLayer")
    return logical_id, layer


def _module_names(path: Any) -> set[str]:
    """Names bound at the top level of a module, read without importing it."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:  # `handler = ...` or `app, handler = create()`
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                names |= {t.id for t in elements if isinstance(t, ast.Name)}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
    return names


def test_the_function_set_is_known(cfn: dict[str, Any]) -> None:
    assert set(resources_of_type(cfn, "AWS::Lambda::Function")) == ALL


@pytest.mark.parametrize("name", sorted(ALL))
def test_runtime_and_architecture(cfn: dict[str, Any], name: str) -> None:
    props = _function(cfn, name)
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    # Tracing=Disabled by default: tests/template/test_first_deploy.py (both values).
    assert "TracingConfig" not in props
    env = props["Environment"]["Variables"]
    assert {k: env[k] for k in COMMON_ENV} == COMMON_ENV


@pytest.mark.parametrize("name", sorted(WEB_ADAPTER))
def test_web_adapter_functions(cfn: dict[str, Any], sam: dict[str, Any], name: str) -> None:
    props = _function(cfn, name)
    assert props["Handler"] == "run.sh"
    env = props["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    if name in STARTS_TURNS:
        assert env["STATE_MACHINE_ARN"] == {"Ref": "FlowStateMachine"}
    else:
        assert "STATE_MACHINE_ARN" not in env  # a reader is given nothing to start
    shared, _ = _shared_layer(cfn)
    assert len(props["Layers"]) == 2
    assert {"Ref": shared} in props["Layers"]
    assert LWA_LAYER in props["Layers"]

    code = ROOT / sam["Resources"][name]["Properties"]["CodeUri"]
    run = code / "run.sh"
    assert run.is_file()
    assert run.stat().st_mode & stat.S_IXUSR and os.access(run, os.X_OK), f"{run} not executable"
    script = run.read_text()
    assert script.startswith("#!/bin/sh\n")
    # The adapter proxies to the port the app listens on (a2a_serverless.serve, whose uvicorn
    # options tests/unit/test_serve.py checks; tests/integration/test_web_adapter_server.py
    # runs this script): app.py's `app`, the server exec'd so the adapter's SIGTERM reaches it.
    assert re.search(r"exec python -m a2a_serverless\.serve app:app\n", script), script
    assert env["PORT"] == "8080"
    assert "app" in _module_names(code / "app.py")


@pytest.mark.parametrize("name", sorted(MANGUM | PLAIN))
def test_buffered_functions_use_app_handler(
    cfn: dict[str, Any], sam: dict[str, Any], name: str
) -> None:
    props = _function(cfn, name)
    assert props["Handler"] == "app.handler"
    assert not LWA_ENV & set(props["Environment"]["Variables"])
    shared, _ = _shared_layer(cfn)
    assert props["Layers"] == [{"Ref": shared}]
    code_uri = sam["Resources"][name]["Properties"]["CodeUri"]
    app = ROOT / code_uri / "app.py"
    assert app.is_file()
    assert "handler" in _module_names(app)
    if name in MANGUM:
        # app.py binds the package's entry point, where the Mangum adapter is made.
        module = code_uri.rstrip("/").rsplit("/", 1)[-1]
        code = ROOT / "shared/a2a_serverless/handlers" / f"{module}.py"
        assert "mangum_handler" in code.read_text()


@pytest.mark.parametrize("name", sorted(ALL))
def test_code_uri_is_a_function_directory(sam: dict[str, Any], name: str) -> None:
    code_uri = sam["Resources"][name]["Properties"]["CodeUri"]
    assert re.fullmatch(r"functions/[a-z_]+/", code_uri), code_uri
    assert (ROOT / code_uri).is_dir()


def test_shared_layer(cfn: dict[str, Any], sam: dict[str, Any]) -> None:
    layer = _shared_layer(cfn)[1]["Properties"]
    assert layer["CompatibleRuntimes"] == ["python3.13"]
    assert layer["CompatibleArchitectures"] == ["arm64"]
    source = sam["Resources"]["SharedLayer"]
    # shared/Makefile installs for python3.13/arm64 from any local Python (tests/template/
    # test_layer_build.py).
    assert source["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    content = ROOT / source["Properties"]["ContentUri"]
    # `sam build` installs requirements.txt into python/ next to the package.
    assert (content / "requirements.txt").is_file()
    assert (content / "a2a_serverless" / "__init__.py").is_file()


def test_timeouts_cover_the_long_lived_work(cfn: dict[str, Any]) -> None:
    wait = int(cfn["Parameters"]["BlockingMaxWaitSeconds"]["Default"])
    assert _function(cfn, "SendMessageFunction")["Timeout"] > wait
    assert _function(cfn, "StreamFunction")["Timeout"] == 900
    assert _function(cfn, "GetTaskFunction")["Timeout"] == 900  # GET subscriptions
    # One flow step: Lambda's 900 s under STANDARD, inside EXPRESS's 5 minutes otherwise
    # (tests/template/test_step_executions.py adds up that budget).
    assert _function(cfn, "FlowWorkerFunction")["Timeout"] == {"Fn::If": ["IsExpress", 150, 900]}


def test_every_allowed_blocking_wait_fits_the_send_timeout(cfn: dict[str, Any]) -> None:
    longest = int(cfn["Parameters"]["BlockingMaxWaitSeconds"]["MaxValue"])
    assert _function(cfn, "SendMessageFunction")["Timeout"] > longest


@pytest.mark.parametrize("name", sorted(WEB_ADAPTER))
def test_run_sh_can_import_the_shared_layer(sam: dict[str, Any], name: str) -> None:
    script = (ROOT / sam["Resources"][name]["Properties"]["CodeUri"] / "run.sh").read_text()
    assert re.search(r"PYTHONPATH=[^\n]*/opt/python", script), script
