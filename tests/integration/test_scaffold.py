"""A project made by `a2a-serverless new`, beyond its files: its template translates and lints
clean with its settings in Mappings, its local stack reads those settings and lets a test (or
`dev --param`) set one, and its layer's Makefile, run the way `sam build` runs it, installs the
project's requirements.txt with the wheel under the layer's constraints (pip for real, offline,
from a folder of wheels)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from cfnlint.api import lint
from cfnlint.config import ManualArgs

from a2a_serverless.cli.scaffold import packaged_template, project_template, scaffold
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.local.template import load_template, load_template_text
from tests.template.sam import translate
from tests.template.test_translate_and_lint import _without_deployment_id

REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2"]


def _lint(text: str) -> list[str]:
    matches = lint(text, config=ManualArgs(regions=REGIONS, include_experimental=True))
    return [
        f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches if m.rule.id[0] in "EW"
    ]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scaffold") / "my-agent"
    scaffold(root)
    return root


def test_the_projects_template_translates_and_lints_clean(project: Path) -> None:
    text = (project / "template.yaml").read_text()
    sam = load_template(project / "template.yaml")
    assert _lint(text) == []
    for parameters in ({}, {"Auth": "Jwt", "JwtIssuer": "https://i.example", "JwtAudience": "a"}):
        cfn = translate(sam, parameters)
        assert cfn["Mappings"]["Settings"]["Values"]["RetentionDays"] == "30"
        assert _lint(json.dumps(cfn, indent=1)) == []


def filled(value: Any, values: dict[str, Any]) -> Any:
    """`value` with every read of a setting (Ref, FindInMap, ${NAME}) replaced by its value
    (a list parameter's Ref by the list, its mapping value by the text)."""
    if isinstance(value, list):
        return [filled(v, values) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref" and arg in values:
            return values[arg]
        if key == "Fn::FindInMap" and arg[:2] == ["Settings", "Values"]:
            found = values[arg[2]]
            return ",".join(found) if isinstance(found, list) else found
        if key == "Fn::Split":
            sep, text = filled(arg, values)
            return text.split(sep) if isinstance(text, str) else {key: [sep, text]}
        if key == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else filled(arg, values)
            for name, v in list(variables.items()):
                if isinstance(v, str):
                    text = text.replace("${" + name + "}", v)
                    del variables[name]
            for name in set(re.findall(r"\$\{([^}!.]+)\}", text)) & set(values):
                text = text.replace("${" + name + "}", str(values[name]))
            return {key: [text, variables] if variables else text}
    return {k: filled(v, values) for k, v in value.items()}


def test_the_translation_is_the_packaged_ones_with_the_settings_filled_in() -> None:
    """What CloudFormation gets from the project's template is the packaged template's stack
    (its defaults): a setting SAM itself reads (e.g. Tracing) would show here."""
    packaged = load_template_text(packaged_template())
    sam = load_template_text(project_template("my_agent"))
    values = dict(sam["Mappings"]["Settings"]["Values"])
    for name, spec in packaged["Parameters"].items():
        if name in values and "List" in spec["Type"]:
            values[name] = values[name].split(",")
    theirs, ours = translate(sam), translate(packaged)
    for cfn in (theirs, ours):
        for section in ("Parameters", "Mappings", "Rules"):
            cfn.pop(section, None)
    # Versions are named by a hash of their source and properties (the layer's: shared/ here,
    # layer/ there; a function's: its properties as written, FindInMap or Ref).
    ours, theirs = (
        json.loads(
            re.sub(r"(SharedLayer|FunctionVersion)[0-9a-f]{10}", r"\1X", _without_deployment_id(c))
        )
        for c in (ours, theirs)
    )
    content = theirs["Resources"]["SharedLayerX"]["Properties"]["Content"]
    ours["Resources"]["SharedLayerX"]["Properties"]["Content"] = content
    assert filled(theirs, values) == filled(ours, values)


def card(stack: LocalStack) -> dict[str, Any]:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=stack.gateway())
        async with httpx.AsyncClient(transport=transport, base_url="http://local") as client:
            return await client.get("/.well-known/agent-card.json")

    response = asyncio.run(call())
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_local_stack_reads_the_settings_and_takes_overrides(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(project))  # the agent package, as the layer ships it
    with LocalStack(root=project, event_sources=False) as stack:
        # The template's value, and the local stack's own (http webhooks) over the template's.
        assert (stack.env["RETENTION_DAYS"], stack.env["PUSH_ALLOW_HTTP"]) == ("30", "true")
        assert card(stack)["name"] == "My Agent"
    overrides = {"AgentName": "Renamed", "RetentionDays": "7", "PushAllowHttp": "false"}
    with LocalStack(root=project, parameters=overrides, event_sources=False) as stack:
        assert stack.env["AGENT_NAME"] == "Renamed"
        assert (stack.env["RETENTION_DAYS"], stack.env["PUSH_ALLOW_HTTP"]) == ("7", "false")
        assert card(stack)["name"] == "Renamed"


# -- the layer ---------------------------------------------------------------------------------


def wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel of module `name` saying its version."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'VERSION = "{version}"\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},{len(text)}"
        for path, text in files.items()
    ]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return path


def build_layer(project: Path, tmp_path: Path, wheels: Path) -> subprocess.CompletedProcess[str]:
    """The layer's build as `sam build` runs it (aws_lambda_builders' CustomMakeWorkflow):
    ContentUri (layer/) copied into a scratch folder, links followed, then make there."""
    scratch = tmp_path / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(project / "layer", scratch, symlinks=False)
    assert {p.name for p in scratch.iterdir()} == {
        "Makefile",
        "requirements.txt",
        "vendor",
        "my_agent",
    }
    # This Python's pip, offline: the wheel's own dependencies are not fetched (--no-deps), the
    # project's requirement comes from `wheels`.
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then\n'
        f'  exec "{sys.executable}" "$@" --no-index --find-links "{wheels}" --no-deps\nfi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    artifacts = tmp_path / "SharedLayer"
    shutil.rmtree(artifacts, ignore_errors=True)
    return subprocess.run(
        ["make", "-s", "build-SharedLayer", f"ARTIFACTS_DIR={artifacts}", f"PYTHON={python}"],
        cwd=scratch,
        env={"PATH": "/usr/bin:/bin"},  # no python3.13: no bytecode step
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_layer_ships_the_projects_requirements_under_the_constraints(tmp_path: Path) -> None:
    project = tmp_path / "my-agent"
    scaffold(project)
    (project / ".venv" / "lib").mkdir(parents=True)  # a local venv: not copied for the build
    (project / ".venv" / "lib" / "big.py").write_text("")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.0", "2.0"):
        wheel(wheels, "tinydep", version)
    requirements = project / "requirements.txt"
    requirements.write_text(requirements.read_text() + "tinydep\n")
    constraints = project / "vendor" / "layer-constraints.txt"
    pins = constraints.read_text()
    constraints.write_text(pins + "tinydep==1.0\n")

    done = build_layer(project, tmp_path, wheels)
    assert done.returncode == 0, done.stdout + done.stderr
    python = tmp_path / "SharedLayer" / "python"
    assert (python / "tinydep" / "__init__.py").read_text() == 'VERSION = "1.0"\n'  # the pin
    assert (python / "my_agent" / "flow.py").is_file()
    assert (python / "a2a_serverless" / "handlers" / "stream.py").is_file()
    assert not (python / "a2a_serverless" / "local").exists()

    # The user's edit of a pin wins.
    constraints.write_text(pins + "tinydep==2.0\n")
    assert build_layer(project, tmp_path, wheels).returncode == 0
    assert (python / "tinydep" / "__init__.py").read_text() == 'VERSION = "2.0"\n'

    # A requirement against a pin fails the build, loudly.
    requirements.write_text("tinydep<2\n")
    failed = build_layer(project, tmp_path, wheels)
    assert failed.returncode != 0
    assert "tinydep" in failed.stderr
