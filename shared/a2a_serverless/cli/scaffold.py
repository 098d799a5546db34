"""`a2a-serverless new DIR`: an agent project of the user's own, deployed with this package.

Writes the packaged template (flow and layer source changed), one `functions/<name>/app.py`
binding `a2a_serverless.handlers.<name>` per function, sample events, and a layer built by
layer/Makefile from a wheel of this package in `vendor/` plus the project's requirements.txt.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import keyword
import os
import re
import shlex
import shutil
import zipfile
from pathlib import Path
from typing import Any

import a2a_serverless

PACKAGE_DIR = Path(a2a_serverless.__file__).resolve().parent
# The layer's dependencies pinned to the tested versions (scripts/pin_layer.py writes it).
LAYER_CONSTRAINTS = "layer-constraints.txt"
DISTRIBUTION = "a2a-serverless"
# The sample events of the functions (a link to the repository's events/; a copy in the wheel).
EVENTS_DIR = PACKAGE_DIR / "cli" / "events"
# The layer's source folder (the template's ContentUri): its Makefile and links to what goes in.
LAYER_DIR = "layer"

# What app.py binds of `a2a_serverless.handlers.<name>.create()` -> the functions/<name>/ that
# do: Mangum functions an app and its handler, Web Adapter functions an app (run.sh serves it),
# plain functions a handler.
_BINDINGS = {
    "app, handler": ("agent_card", "list_tasks", "push_config", "delegation_receiver"),
    "app": ("get_task", "send_message", "stream"),
    "handler": ("authorizer", "flow_worker", "webhook_sender"),
}
ENTRY_POINTS = {name: binds for binds, names in _BINDINGS.items() for name in names}

RUN_SH = """#!/bin/sh
# Started by the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap). This is a plain
# process, not the Python bootstrap, so the layer (/opt/python) must be put on the path here.
# Unbuffered: stdout is a pipe, and a log line or EMF blob left in Python's buffer when the
# invocation ends would reach CloudWatch late (or, at shutdown, never).
# exec: the adapter's SIGTERM reaches the server (a2a_serverless/serve.py: uvicorn on $PORT).
PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python:${LAMBDA_RUNTIME_DIR:-}" \\
  exec python -m a2a_serverless.serve app:app
"""


def app_py(name: str) -> str:
    """functions/<name>/app.py: the function's entry point, bound from the package."""
    return (
        f'"""Lambda entry point: the code is a2a_serverless.handlers.{name}."""\n'
        "\n"
        f"from a2a_serverless.handlers.{name} import create\n"
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


# The parameters a first deploy asks for (`sam deploy --guided` asks one question each); the
# template's other parameters become settings (Mappings), each edited in template.yaml.
KEPT_PARAMETERS = ("Flow", "Auth", "JwtIssuer", "JwtAudience", "WorkflowType", "AlarmEmail")
_SUB_NAME = re.compile(r"\$\{([^}!.]+)\}")
# Properties of AWS::Serverless::* resources (and Globals) that the SAM transform resolves with
# the parameters' values and reads itself (samtranslator's resolve_parameter_refs): a mapping
# value there would reach CloudFormation unread (Tracing: Disabled as a TracingConfig mode), so
# a parameter they name stays a parameter.
SAM_RESOLVED = frozenset(
    {
        "Tracing",
        "AutoPublishAlias",
        "AutoPublishCodeSha256",
        "EventInvokeConfig",
        "Role",
        "CodeUri",
        "ContentUri",
        "BinaryMediaTypes",
        "Domain",
        "Auth",
        "CorsConfiguration",
        "Routes",
    }
)


def project_template(package: str) -> str:
    """The packaged template for a project: its flow, the layer built from layer/, and only
    KEPT_PARAMETERS as parameters (the others are settings: settings_template)."""
    from a2a_serverless.local.template import SETTINGS_MAP, dump_template

    text = packaged_template()
    text = _replace_once(
        text, "Default: a2a_serverless.flows.echo:flow", f"Default: {package}.flow:flow"
    )
    text = _replace_once(text, "      ContentUri: shared/\n", f"      ContentUri: {LAYER_DIR}/\n")
    template, _ = settings_template(yaml_template(text), KEPT_PARAMETERS)
    header = (
        "  # Settings: values a deployment does not ask for. Edit one here, or set it locally\n"
        "  # with `a2a-serverless dev --param NAME=VALUE`; README.md lists them.\n"
    )
    text = _replace_once(
        dump_template(template),
        f"Mappings:\n  {SETTINGS_MAP}:\n",
        f"Mappings:\n{header}  {SETTINGS_MAP}:\n",
    )
    return _replace_once(text, "\n  FlowPolicy:\n", f"\n{FLOW_POLICY_COMMENT}  FlowPolicy:\n")


# The dumped template keeps no comments: the one a user needs most goes back in.
FLOW_POLICY_COMMENT = """\
  # What your flow's own code calls in AWS (boto3: an S3 object, a secret, another API) must be
  # allowed here, on its resources only: replace NothingYet with your statements, e.g.
  #   - Effect: Allow
  #     Action: s3:GetObject
  #     Resource: arn:aws:s3:::my-bucket/docs/*
  # Attached to the four functions that run the flow's code. Bedrock: the FlowUsesBedrock setting.
"""


def yaml_template(text: str) -> dict[str, Any]:
    from a2a_serverless.local.template import load_template_text

    return load_template_text(text)


def settings_template(
    template: dict[str, Any], keep: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """`template` with its parameters other than `keep` (and those without a default) turned
    into entries of Mappings Settings/Values: every `Ref` to one, and every `${NAME}` in a Sub,
    read it with Fn::FindInMap; Rules (which may read parameters only) lose the assertions that
    name one. Returns the new template and the moved parameters' specs, by name."""
    from a2a_serverless.local.template import SETTINGS_KEY, SETTINGS_MAP

    parameters = template.get("Parameters") or {}
    read_by_sam = _sam_resolved_names(template)
    moved = {
        name: spec
        for name, spec in parameters.items()
        if name not in keep and name not in read_by_sam and "Default" in spec
    }
    if not moved:
        return template, {}

    def find(name: str) -> dict[str, Any]:
        value = {"Fn::FindInMap": [SETTINGS_MAP, SETTINGS_KEY, name]}
        # A list parameter's value is kept as its comma-separated text (as it is given).
        return {"Fn::Split": [",", value]} if _is_list(moved[name]) else value

    def rewrite(value: Any) -> Any:
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref" and arg in moved:
                return find(arg)
            if key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                variables = {k: rewrite(v) for k, v in variables.items()}
                names = [n for n in _SUB_NAME.findall(text) if n in moved and n not in variables]
                for name in dict.fromkeys(names):  # (a list parameter cannot be in a Sub)
                    variables[name] = {"Fn::FindInMap": [SETTINGS_MAP, SETTINGS_KEY, name]}
                return {key: [text, variables] if variables else text}
        return {k: rewrite(v) for k, v in value.items()}

    def names_moved(value: Any) -> bool:
        return bool(_names(value) & moved.keys())

    out: dict[str, Any] = {}
    for section, body in template.items():
        if section == "Parameters":
            out[section] = {n: spec for n, spec in body.items() if n not in moved}
            out["Mappings"] = {
                **(template.get("Mappings") or {}),
                SETTINGS_MAP: {SETTINGS_KEY: {n: _mapping_value(s) for n, s in moved.items()}},
            }
        elif section == "Mappings":
            continue  # written with the settings, after Parameters
        elif section == "Rules":
            rules = {}
            for name, rule in body.items():
                assertions = [a for a in rule.get("Assertions", []) if not names_moved(a)]
                if assertions and not names_moved(rule.get("RuleCondition")):
                    rules[name] = {**rule, "Assertions": assertions}
            if rules:
                out[section] = rules
        elif section == "Metadata":
            out[section] = _interface_without(body, moved)
        else:
            out[section] = rewrite(body)
    return out, moved


def _names(value: Any) -> set[str]:
    """The names a value refers to: Ref, and ${NAME} in a Sub."""
    if isinstance(value, list):
        return set().union(set(), *map(_names, value))
    if not isinstance(value, dict):
        return set()
    found = {value["Ref"]} if isinstance(value.get("Ref"), str) else set()
    sub = value.get("Fn::Sub")
    if isinstance(sub, str | list) and sub:
        found |= set(_SUB_NAME.findall(sub if isinstance(sub, str) else str(sub[0])))
    return found | _names(list(value.values()))


def _sam_resolved_names(template: dict[str, Any]) -> set[str]:
    """The names that SAM_RESOLVED properties of SAM resources and Globals refer to."""
    sections = [s for s in (template.get("Globals") or {}).values() if isinstance(s, dict)]
    sections += [
        r.get("Properties") or {}
        for r in (template.get("Resources") or {}).values()
        if str(r.get("Type", "")).startswith("AWS::Serverless::")
    ]
    return _names([v for props in sections for k, v in props.items() if k in SAM_RESOLVED])


def _is_list(spec: dict[str, Any]) -> bool:
    return "List" in str(spec.get("Type", ""))


def _mapping_value(spec: dict[str, Any]) -> str:
    """A parameter's default as a mapping value: its text (a list's comma-separated)."""
    default = spec["Default"]
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, list):
        return ",".join(map(str, default))
    return str(default)


def _interface_without(metadata: Any, moved: dict[str, Any]) -> Any:
    """Metadata, its console parameter groups and labels without the moved parameters."""
    interface = (
        metadata.get("AWS::CloudFormation::Interface") if isinstance(metadata, dict) else None
    )
    if not isinstance(interface, dict):
        return metadata
    groups = [
        {**g, "Parameters": [p for p in g.get("Parameters", []) if p not in moved]}
        for g in interface.get("ParameterGroups", [])
    ]
    labels = {k: v for k, v in (interface.get("ParameterLabels") or {}).items() if k not in moved}
    kept = {**interface, "ParameterGroups": [g for g in groups if g["Parameters"]]}
    if "ParameterLabels" in interface:
        kept["ParameterLabels"] = labels
    return {**metadata, "AWS::CloudFormation::Interface": kept}


def settings_table(moved: dict[str, dict[str, Any]]) -> str:
    """The settings as a Markdown table: name, default, meaning (with the values allowed)."""
    rows = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for name, spec in moved.items():
        meaning = " ".join(str(spec.get("Description", "")).split()).replace("|", "/")
        limits = []
        if "AllowedValues" in spec:
            limits.append("one of " + ", ".join(str(v) for v in spec["AllowedValues"]))
        if "MinValue" in spec:
            limits.append(f"at least {spec['MinValue']}")
        if "MaxValue" in spec:
            limits.append(f"at most {spec['MaxValue']}")
        if limits:
            meaning = f"{meaning} ({'; '.join(limits)})".strip()
        shown = _mapping_value(spec)
        rows.append(f"| `{name}` | {f'`{shown}`' if shown else '(empty)'} | {meaning} |")
    return "\n".join(rows) + "\n"


def readme(title: str, package: str) -> str:
    """README.md: how to work on the project; its parameters and the settings table."""
    template, moved = settings_template(yaml_template(packaged_template()), KEPT_PARAMETERS)
    also = [f"`{n}`" for n in template["Parameters"] if n not in KEPT_PARAMETERS]
    return README.format(
        title=title,
        package=package,
        stack=package.replace("_", "-"),
        settings=settings_table(moved),
        also=(
            f" Also {', '.join(also)}: SAM reads {'it' if len(also) == 1 else 'them'}"
            " when it transforms the template, before any mapping is looked up."
            if also
            else ""
        ),
    )


def project_settings() -> dict[str, dict[str, Any]]:
    """The packaged template's parameters that a project's template has as settings."""
    return settings_template(yaml_template(packaged_template()), KEPT_PARAMETERS)[1]


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
    sources: dict[str, Path] = {}
    # Links followed: in a source tree cli/events is one (rglob would not enter it).
    for folder_path, dirs, names in os.walk(PACKAGE_DIR, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for file_name in names:
            path = Path(folder_path) / file_name
            if path.suffix != ".pyc":
                sources[f"a2a_serverless/{path.relative_to(PACKAGE_DIR).as_posix()}"] = path
    files = {name: sources[name].read_bytes() for name in sorted(sources)}
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
(`ctx.artifact`); progress as status messages (`ctx.status`). Files: `ctx.files` are the
message's file parts (`file.open()` streams one), `ctx.artifact_file(data, filename=...)` sends
one back of any size (declare their types in `input_modes` / `output_modes`). The Agent Card's
name, description, version and skills come from the class attributes.
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

MAKEFILE = """# `sam build` runs this for SharedLayer (template.yaml: BuildMethod: makefile,
# ContentUri: layer/), any local Python >= 3.11. It copies layer/ into a scratch folder first,
# the links followed: vendor/, requirements.txt and `{package}` are links to the project's, so
# nothing else of the project (.venv, tests) is copied or hashed for `sam build --cached`.
# It installs the a2a-serverless wheel in vendor/ and the project's requirements.txt, in one
# pip resolution, for the Lambda runtime (CPython 3.13, arm64; manylinux wheels from PyPI),
# leaves out the package's dev-only parts (the local stack, the command), and adds the agent
# package `{package}`.
# (tar -h: the links followed when make runs in layer/ itself.)
# Then the whole tree is compiled to bytecode: Lambda extracts the layer to /opt, read-only, so
# Python cannot write __pycache__ there and would compile every module it imports from source
# at every cold start. Bytecode is version-specific (cpython-313), so only a Python 3.13 (PYTHON
# if it is one, else python3.13 on PATH) compiles it; hash-based and unchecked, because the
# layer never changes and zip extraction does not keep the mtimes a timestamp check compares.
# The paths recorded in it are /opt/python's (-s, -p): the same bytes from any build folder.
# The dependencies are the versions a2a-serverless was tested with (vendor/layer-constraints.txt),
# the project's own too where the constraints name them.
# Messages go to stdout: `sam build` shows make's stderr only when the build fails.
PYTHON ?= python3
LAMBDA_TARGET := --platform manylinux2014_aarch64 --implementation cp --python-version 3.13 \\
\t--only-binary=:all:
LAYER_PYTHON_DIR := /opt/python

build-SharedLayer:
\t$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile $(LAMBDA_TARGET) \\
\t\t--target "$(ARTIFACTS_DIR)/python" vendor/a2a_serverless-*-py3-none-any.whl \\
\t\t-r requirements.txt -c vendor/layer-constraints.txt
\trm -rf "$(ARTIFACTS_DIR)/python/a2a_serverless/local" \\
\t\t"$(ARTIFACTS_DIR)/python/a2a_serverless/cli"
\ttar -chf - --exclude=__pycache__ --exclude='*.pyc' {package} \\
\t\t| tar -xf - -C "$(ARTIFACTS_DIR)/python"
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
pip install "$(ls vendor/a2a_serverless-*.whl)[local]" -r requirements.txt \\
    -c vendor/layer-constraints.txt pytest
pytest                                   # the agent on the local stack, in-process
a2a-serverless dev                       # http://127.0.0.1:8000 (add --reload while editing)
a2a-serverless invoke SendMessageFunction events/send_message.json  # one function, no Docker
a2a-serverless doctor --region REGION     # before deploying: can the account take the stack?
sam build && sam deploy --guided          # any Python >= 3.11; no Docker
KEY=$(a2a-serverless keys create --stack-name {stack} --principal alice)  # Auth=ApiKey
a2a-serverless smoke "$ApiUrl" --api-key "$KEY" --long  # ApiUrl: the stack's output
```

With your AWS credentials: `doctor` checks the account's Lambda concurrency quota against any
reservation, the Web Adapter layer in the region, SnapStart, the Bedrock model and the
card-signing key where they are used, and the API Gateway logging role (OK/WARN/FAIL, each with
its fix; `--param NAME=VALUE` as you deploy). `keys create|list|revoke` manage the API keys of
the deployed stack (`Auth=ApiKey`, the default; a key is printed once); locally, `keys create
--principal alice` against `a2a-serverless dev --param Auth=ApiKey`. `smoke` sends the deployed
agent messages over every interface; `--long` (about 75 s) proves that streams and blocking sends
outlive API Gateway's 29 s. Install the wheel with `[local,a2a-sdk]` for its strict A2A parsing.

`sam build` needs any Python >= 3.11; with a `python3.13` on `PATH` as well, it also compiles
the layer to bytecode, which Lambda cannot write in its read-only `/opt` (without it every
cold start compiles the imported modules from source; the build says so in a `WARNING` line).

- `template.yaml` (parameter `Flow`, default `{package}.flow:flow`) deploys the same resources
  as a2a-serverless; `layer/Makefile` builds the layer from `vendor/`, `requirements.txt` and
  `{package}/` (linked into `layer/`, so `sam build` copies nothing else of the project, such
  as `.venv`).
- `functions/*/app.py` bind the package's entry points; leave them as they are.
- `events/` holds a sample event for every function, as Lambda delivers it:
  `a2a-serverless invoke FUNCTION events/FILE.json` runs one on a fresh local stack (in this
  process, no Docker), which holds no task: the samples that name one (`get_task.json`,
  `cancel_task.json`, `subscribe_task.json`, the push configs) answer 404 there. To run them
  on a task, start `a2a-serverless dev`, send it a message as the event's principal, put the
  task's id in the event's path and `pathParameters`, and add `--url http://127.0.0.1:8000`
  (the function then runs inside that stack).

## Dependencies

Your agent's own dependencies go in `requirements.txt` (the one place for them: the project
has no `pyproject.toml`). The layer's build installs them with a2a-serverless in one pip
resolution, and the `pip install` above puts the same into `.venv`, both constrained by
`vendor/layer-constraints.txt`: the versions a2a-serverless was tested with (pydantic,
starlette, ...). A requirement that wants another version of a pinned package fails the build
with pip's conflict message; to move that pin, edit its line in
`vendor/layer-constraints.txt` (your edit wins, and holds until you replace `vendor/`).
Requirements must come as wheels (pure Python, or manylinux aarch64 for CPython 3.13): the
layer is built for Lambda, not for this machine. To upgrade a2a-serverless, replace the wheel
and `layer-constraints.txt` in `vendor/` (`a2a-serverless new` writes fresh ones), redo your
edits of the pins, and rebuild.

## Parameters and settings

`sam deploy --guided` asks for the template's few parameters (and saves your answers in
`samconfig.toml`): `Flow` (the flow, `module:attribute`), `Auth` (who may call: `ApiKey`,
`Jwt`, `Iam` or `None`), `JwtIssuer` and `JwtAudience` (`Auth=Jwt` only), `WorkflowType`
(`EXPRESS`, or `STANDARD` for flow steps over 150 s) and `AlarmEmail` (who gets the alarms;
empty = nobody).{also}
Everything else is a setting: a value in `template.yaml`'s
`Mappings: Settings: Values` block. Change one by editing it there and deploying again;
`a2a-serverless dev --param NAME=VALUE` (and `LocalStack(parameters=...)` in a test) sets one
for the local stack only. A setting's value is not checked at deploy time as a parameter's
would be: keep to what the table says.

{settings}"""

GITIGNORE = ".aws-sam/\n.venv/\n__pycache__/\n"

REQUIREMENTS = """# The agent's own dependencies, a pip requirement a line: layer/Makefile installs
# them into the Lambda layer with a2a-serverless (`sam build`), the README's pip install into
# .venv.
# vendor/layer-constraints.txt pins those it names (README: Dependencies). Wheels only: the
# layer is built for Lambda (CPython 3.13, arm64), not for this machine.
# An a2a-sdk AgentExecutor as the flow (a2a_serverless.flows.a2a_sdk) needs:
# a2a-sdk>=1.3,<1.4
"""


def agent_title(package: str) -> str:
    """The card's title: the package's words, with "Agent" unless the last word is one."""
    words = [w.capitalize() for w in package.split("_") if w]
    return " ".join(words if words[-1] == "Agent" else [*words, "Agent"])


def scaffold(directory: Path, name: str | None = None) -> list[Path]:
    """Write the project into `directory` (new or empty); the files written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise SystemExit(f"{directory} exists and is not empty: choose a new folder")
    package = package_name(directory, name)
    title = agent_title(package)
    cls = "".join(w.capitalize() for w in package.split("_")) + "Flow"
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        f"{package}/__init__.py": f'"""{title}."""\n',
        f"{package}/flow.py": FLOW_PY.format(package=package, title=title, cls=cls),
        "tests/test_agent.py": TEST_PY.format(package=package),
        "template.yaml": project_template(package),
        f"{LAYER_DIR}/Makefile": MAKEFILE.format(package=package),
        "requirements.txt": REQUIREMENTS,
        "samconfig.toml": SAMCONFIG.format(stack=package.replace("_", "-")),
        "README.md": readme(title, package),
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
    for linked in (package, "vendor", "requirements.txt"):
        (directory / LAYER_DIR / linked).symlink_to(Path("..") / linked)
    (directory / "events").mkdir()
    for event in sorted(EVENTS_DIR.glob("*.json")):
        shutil.copyfile(event, directory / "events" / event.name)
    return sorted(p for p in directory.rglob("*") if p.is_file())


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    written = scaffold(directory, args.name)
    print(f"a2a-serverless: created {directory} ({len(written)} files)")
    print(
        f"  next: cd {shlex.quote(str(directory))} && pip install "
        f'"$(ls vendor/*.whl)[local]" -r requirements.txt -c vendor/{LAYER_CONSTRAINTS} pytest'
        " && pytest"
    )
    return 0
