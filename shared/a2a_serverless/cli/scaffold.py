"""`a2a-serverless new DIR`: an agent project of the user's own, deployed with this package.

The project has the same resources as this repository's template (the packaged copy, with the
flow and the layer's source changed), one `functions/<name>/` folder per function whose app.py
only binds `a2a_serverless.functions.<name>` (the entry code lives once, in the package), and a
layer built by its Makefile from a wheel of this package in `vendor/` (this package is not on
PyPI; its dependencies come from PyPI as manylinux aarch64 wheels, any local Python >= 3.11).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import keyword
import re
import shutil
import zipfile
from pathlib import Path

import a2a_serverless

PACKAGE_DIR = Path(a2a_serverless.__file__).resolve().parent
# The layer's dependencies pinned to the tested versions (scripts/pin_layer.py writes it).
LAYER_CONSTRAINTS = "layer-constraints.txt"
DISTRIBUTION = "a2a-serverless"

# functions/<name>/ -> what its app.py binds of `a2a_serverless.functions.<name>.create()`:
# Mangum functions an app and its handler, Web Adapter functions an app (run.sh serves it with
# a2a_serverless.functions.loopback_server), plain functions a handler.
ENTRY_POINTS: dict[str, str] = {
    "agent_card": "app, handler",
    "authorizer": "handler",
    "flow_worker": "handler",
    "get_task": "app",
    "list_tasks": "app, handler",
    "push_config": "app, handler",
    "send_message": "app",
    "stream": "app",
    "webhook_sender": "handler",
}

RUN_SH = """#!/bin/sh
# Started by the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap). This is a plain
# process, not the Python bootstrap, so the layer (/opt/python) must be put on the path here.
# Unbuffered: stdout is a pipe, and a log line or EMF blob left in Python's buffer when the
# invocation ends would reach CloudWatch late (or, at shutdown, never).
PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python:${LAMBDA_RUNTIME_DIR:-}" \\
  exec python -m a2a_serverless.functions.loopback_server \\
  --host 127.0.0.1 --port "${PORT:-8080}" app:app
"""


def app_py(name: str) -> str:
    """functions/<name>/app.py: the function's entry point, bound from the package."""
    return (
        f'"""Lambda entry point: the code is a2a_serverless.functions.{name}."""\n'
        "\n"
        f"from a2a_serverless.functions.{name} import create\n"
        "\n"
        f"{ENTRY_POINTS[name]} = create()\n"
    )


def packaged_template() -> str:
    return (PACKAGE_DIR / "cli" / "template.yaml").read_text()


def write_functions(root: Path) -> None:
    """functions/<name>/app.py (and run.sh of the Web Adapter functions) under `root`."""
    for name, binds in ENTRY_POINTS.items():
        folder = root / "functions" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "app.py").write_text(app_py(name))
        if binds == "app":
            run_sh = folder / "run.sh"
            run_sh.write_text(RUN_SH)
            run_sh.chmod(0o755)


def write_stack(root: Path) -> None:
    """The packaged stack (template.yaml + the functions' entry files): what `dev` and
    `invoke` serve outside a project."""
    (root / "template.yaml").write_text(packaged_template())
    write_functions(root)


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:  # the packaged template changed: the scaffold must follow
        raise RuntimeError(f"template.yaml: expected {old!r} once")
    return text.replace(old, new)


def project_template(package: str) -> str:
    """The packaged template for a project: its flow, and the layer built from the project."""
    text = packaged_template()
    text = _replace_once(
        text, "Default: a2a_serverless.flows.echo:flow", f"Default: {package}.flow:flow"
    )
    text = _replace_once(
        text,
        "      ContentUri: shared/\n",
        "      ContentUri: ./ # Makefile: vendor/ wheel + its dependencies + the agent package\n",
    )
    return text


def vendor_wheel(folder: Path) -> Path:
    """A wheel of the installed a2a-serverless (its metadata and package files) in `folder`,
    made here so the project builds without this package on PyPI and without a source tree.
    The local stack and the command ride along (a wheel is the whole package); the layer's
    Makefile leaves them out."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    version = dist.version
    info = f"a2a_serverless-{version}.dist-info"
    wheel = folder / f"a2a_serverless-{version}-py3-none-any.whl"
    # METADATA of an installed wheel, PKG-INFO of a source checkout on PYTHONPATH (egg-info):
    # the same fields, Requires-Dist included (what the layer's pip install follows).
    metadata = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if not metadata or "Requires-Dist:" not in metadata:
        raise SystemExit(f"{DISTRIBUTION} {version}: its metadata names no dependencies")
    files: dict[str, bytes] = {}
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[f"a2a_serverless/{path.relative_to(PACKAGE_DIR).as_posix()}"] = path.read_bytes()
    files[f"{info}/METADATA"] = metadata.encode()
    # The `a2a-serverless` command of a pip install from the wheel.
    files[f"{info}/entry_points.txt"] = (
        dist.read_text("entry_points.txt") or "[console_scripts]\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: a2a-serverless new\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return wheel


def package_name(directory: Path, name: str | None) -> str:
    """The agent's Python package: --name, else the folder's name made an identifier."""
    candidate = name or re.sub(r"\W+", "_", directory.resolve().name).strip("_").lower()
    if not candidate.isidentifier() or keyword.iskeyword(candidate):
        raise SystemExit(f"not a Python package name: {candidate!r} (use --name)")
    if candidate in ("a2a_serverless", "functions", "tests", "vendor"):
        raise SystemExit(f"{candidate!r} is taken in the project (use --name)")
    return candidate


FLOW_PY = '''"""{title}: the flow a2a-serverless serves (template.yaml, parameter Flow).

A flow is a Flow subclass (or instance) whose `step` gets the turn's context and returns an
Outcome: completed, input_required, failed, ... Replies stream as artifact chunks
(`ctx.artifact`); progress as status messages (`ctx.status`). The Agent Card's name,
description, version and skills come from the class attributes.
"""

from __future__ import annotations

from a2a_serverless.flows.base import Flow, Outcome, StepContext
from a2a_serverless.models import AgentSkill


class {cls}(Flow):
    name = "{package}"
    title = "{title}"
    description = "Greets you and counts the words you send."
    version = "0.1.0"
    skills = [
        AgentSkill(
            id="greet",
            name="Greet",
            description="Replies with a greeting and the number of words in your message.",
            tags=["example"],
            examples=["hello there"],
        )
    ]
    # The longest one step may run, in seconds: over 150 needs WorkflowType=STANDARD
    # (samconfig.toml's parameter_overrides); an EXPRESS stack refuses to start otherwise.
    max_step_seconds = 30

    def step(self, ctx: StepContext) -> Outcome:
        words = len(ctx.text.split())
        ctx.status("counting")
        ctx.artifact(f"Hello! You sent {{words}} word{{'' if words == 1 else 's'}}.")
        return Outcome.completed()


flow = {cls}()
'''

TEST_PY = '''"""The agent on the local stack (moto, in this process, no Docker, no AWS): one
message, through the same API, functions and state machine as deployed. Needs
`pip install "a2a-serverless[local]"` (from the wheel in vendor/) and pytest."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the agent package, as the layer puts it on Lambda's path

from a2a_serverless.local.stack import LocalStack  # noqa: E402


def send(gateway: Any, text: str) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://local") as client:
            return await client.post(
                "/message:send",
                headers={{"A2A-Version": "1.0", "X-Local-Principal": "alice"}},
                json={{
                    "message": {{
                        "messageId": "m-1",
                        "role": "ROLE_USER",
                        "parts": [{{"text": text}}],
                    }},
                    "configuration": {{"returnImmediately": False}},
                }},
                timeout=60,
            )

    return asyncio.run(call())


def test_the_agent_answers_a_message() -> None:
    with LocalStack(root=ROOT, parameters={{"Flow": "{package}.flow:flow"}}) as stack:
        response = send(stack.gateway(), "hello there agent")
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    text = "".join(p.get("text", "") for a in task["artifacts"] for p in a["parts"])
    assert text == "Hello! You sent 3 words."
'''

MAKEFILE = """# `sam build` runs this for SharedLayer (template.yaml: BuildMethod: makefile), any
# local Python >= 3.11: the a2a-serverless wheel in vendor/ and its dependencies, installed
# for the Lambda runtime (CPython 3.13, arm64; manylinux wheels from PyPI), without the
# package's dev-only parts (the local stack, the command), plus the agent package `{package}`.
# Then the whole tree is compiled to bytecode: Lambda extracts the layer to /opt, read-only, so
# Python cannot write __pycache__ there and would compile every module it imports from source
# at every cold start. Bytecode is version-specific (cpython-313), so only a Python 3.13 (PYTHON
# if it is one, else python3.13 on PATH) compiles it; hash-based and unchecked, because the
# layer never changes and zip extraction does not keep the mtimes a timestamp check compares.
# The paths recorded in it are /opt/python's (-s, -p): the same bytes from any build folder.
# Before that, botocore's endpoints.json is cut to the services the functions call, and their
# service models to what botocore reads of them (a2a_serverless/botocore_endpoints.py: 30-40
# ms and 3-7 ms a client less CPU per cold start).
# The dependencies are the versions a2a-serverless was tested with (vendor/layer-constraints.txt).
# Messages go to stdout: `sam build` shows make's stderr only when the build fails.
PYTHON ?= python3
LAMBDA_TARGET := --platform manylinux2014_aarch64 --implementation cp --python-version 3.13 \\
\t--only-binary=:all:
LAYER_PYTHON_DIR := /opt/python

build-SharedLayer:
\t$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile $(LAMBDA_TARGET) \\
\t\t--target "$(ARTIFACTS_DIR)/python" vendor/a2a_serverless-*-py3-none-any.whl \\
\t\t-c vendor/layer-constraints.txt
\trm -rf "$(ARTIFACTS_DIR)/python/a2a_serverless/local" \\
\t\t"$(ARTIFACTS_DIR)/python/a2a_serverless/cli"
\ttar -cf - --exclude=__pycache__ --exclude='*.pyc' {package} \\
\t\t| tar -xf - -C "$(ARTIFACTS_DIR)/python"
\tPYTHONPATH="$(ARTIFACTS_DIR)/python" $(PYTHON) -B -m a2a_serverless.botocore_endpoints \\
\t\t"$(ARTIFACTS_DIR)/python" || echo "note: botocore's endpoints not cut: the functions \\
read all of them (~30 ms more CPU per cold start)"
\t@py=; for candidate in "$(PYTHON)" python3.13; do \\
\t\ttag=$$("$$candidate" -c 'import sys; print(sys.implementation.cache_tag)' 2>/dev/null); \\
\t\tif [ "$$tag" = cpython-313 ]; then py=$$candidate; break; fi; \\
\tdone; \\
\tif [ -z "$$py" ]; then \\
\t\techo "WARNING: no Python 3.13 (PYTHON=$(PYTHON), python3.13): the layer ships without \\
bytecode, so every cold start compiles its modules from source (twice the import time); \\
put python3.13 on PATH or run 'sam build --use-container'"; \\
\telse \\
\t\t"$$py" -m compileall -q -j 0 --invalidation-mode unchecked-hash \\
\t\t\t-s "$(ARTIFACTS_DIR)/python" -p "$(LAYER_PYTHON_DIR)" "$(ARTIFACTS_DIR)/python" \\
\t\t\t|| echo "note: the files listed above did not compile (templates shipped as .py); \\
they are never imported"; \\
\tfi
"""

SAMCONFIG = """# SAM CLI defaults (`sam build`, `sam validate`, `sam deploy`). Region and
# credentials come from your AWS profile or environment. `sam deploy --guided` may save
# parameters here.
version = 0.1

[default.global.parameters]
stack_name = "{stack}"

[default.build.parameters]
cached = true
parallel = true

[default.validate.parameters]
lint = true

[default.deploy.parameters]
capabilities = "CAPABILITY_IAM"
confirm_changeset = true
resolve_s3 = true
s3_prefix = "{stack}"
fail_on_empty_changeset = false
# parameter_overrides = "Auth=None"   # the default, Auth=ApiKey, asks for an X-API-Key
"""

README = """# {title}

An A2A 1.0 agent on AWS serverless (API Gateway, Lambda, Step Functions, DynamoDB), served by
[a2a-serverless](vendor/). Your code is `{package}/flow.py`; everything else is the stack.

```sh
python -m venv .venv && . .venv/bin/activate
pip install "$(ls vendor/a2a_serverless-*.whl)[local]" -c vendor/layer-constraints.txt pytest
pytest                                   # the agent on the local stack, in-process
a2a-serverless dev                       # http://127.0.0.1:8000 (add --reload while editing)
a2a-serverless invoke SendMessageFunction EVENT.json  # one function, one event, no Docker
sam build && sam deploy --guided          # any Python >= 3.11; no Docker
```

`sam build` needs any Python >= 3.11; with a `python3.13` on `PATH` as well, it also compiles
the layer to bytecode, which Lambda cannot write in its read-only `/opt` (without it every
cold start compiles the imported modules from source; the build says so in a `WARNING` line).

- `template.yaml` (parameter `Flow`, default `{package}.flow:flow`) deploys the same resources
  as a2a-serverless; the `Makefile` builds the layer from `vendor/` and `{package}/`.
- `functions/*/app.py` bind the package's entry points; leave them as they are.
- `vendor/layer-constraints.txt` pins the layer's packages (pydantic, starlette, ...) to the
  versions a2a-serverless was tested with; the `pip install` above uses it too, so your tests
  run what you deploy. A dependency of your own that needs another version: edit its line.
- To upgrade a2a-serverless, replace the wheel and `layer-constraints.txt` in `vendor/`
  (`a2a-serverless new` writes fresh ones) and rebuild.
"""

GITIGNORE = ".aws-sam/\n.venv/\n__pycache__/\n"


def scaffold(directory: Path, name: str | None = None) -> list[Path]:
    """Write the project into `directory` (new or empty); the files written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise SystemExit(f"{directory} exists and is not empty: choose a new folder")
    package = package_name(directory, name)
    title = " ".join(w.capitalize() for w in package.split("_")) + " Agent"
    cls = "".join(w.capitalize() for w in package.split("_")) + "Flow"
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        f"{package}/__init__.py": f'"""{title}."""\n',
        f"{package}/flow.py": FLOW_PY.format(package=package, title=title, cls=cls),
        "tests/test_agent.py": TEST_PY.format(package=package),
        "template.yaml": project_template(package),
        "Makefile": MAKEFILE.format(package=package),
        "samconfig.toml": SAMCONFIG.format(stack=package.replace("_", "-")),
        "README.md": README.format(title=title, package=package),
        ".gitignore": GITIGNORE,
    }
    for relative, text in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    write_functions(directory)
    vendor_wheel(directory / "vendor")
    # The layer's pins, beside the wheel: the Makefile's pip and the local install read them.
    shutil.copyfile(PACKAGE_DIR / LAYER_CONSTRAINTS, directory / "vendor" / LAYER_CONSTRAINTS)
    return sorted(p for p in directory.rglob("*") if p.is_file())


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    written = scaffold(directory, args.name)
    print(f"a2a-serverless: created {directory} ({len(written)} files)")
    print(
        f"  next: cd {directory} && pip install "
        f'"$(ls vendor/*.whl)[local]" -c vendor/{LAYER_CONSTRAINTS} pytest && pytest'
    )
    return 0
