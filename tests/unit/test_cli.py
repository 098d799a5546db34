"""The `a2a-serverless` command without a server: its parser, the scaffold it writes, the
entry files that bind the package's functions, and the flow check at a function's init."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from a2a_serverless import wiring
from a2a_serverless.cli import parser
from a2a_serverless.cli.dev import python_files
from a2a_serverless.cli.scaffold import (
    ENTRY_POINTS,
    RUN_SH,
    app_py,
    packaged_template,
    project_template,
    scaffold,
)
from a2a_serverless.functions import FlowLoadError, flow_at_init
from a2a_serverless.local.__main__ import parse_params
from a2a_serverless.local.template import load_template
from tests.pythons import python313

ROOT = Path(__file__).resolve().parents[2]


def test_the_parser_reads_each_command() -> None:
    dev = parser().parse_args(
        ["dev", "--flow", "my_agent.flow:flow", "--param", "Auth=ApiKey", "--reload"]
    )
    assert (dev.command, dev.flow, dev.param, dev.reload) == (
        "dev",
        "my_agent.flow:flow",
        ["Auth=ApiKey"],
        True,
    )
    assert dev.port == 8000 and dev.template is None
    invoke = parser().parse_args(["invoke", "StreamFunction", "e.json", "--param", "A=B"])
    assert (invoke.function, invoke.event, invoke.param) == ("StreamFunction", "e.json", ["A=B"])
    new = parser().parse_args(["new", "proj", "--name", "agent"])
    assert (new.directory, new.name) == ("proj", "agent")
    with pytest.raises(SystemExit):
        parser().parse_args([])  # a command is required
    with pytest.raises(SystemExit):
        parser().parse_args(["invoke", "StreamFunction"])  # and invoke its event


def test_a_param_without_a_value_is_refused() -> None:
    assert parse_params(["A=B=C", "D="]) == {"A": "B=C", "D": ""}
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        parse_params(["Auth"])


def test_help_imports_no_server_or_aws_library() -> None:
    code = (
        "import sys\n"
        "from a2a_serverless.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('moto', 'boto3', 'uvicorn', 'fastapi', 'yaml') if m in sys.modules]\n"
        "print('heavy:', heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "shared")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: a2a-serverless" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "heavy: []"


# -- the functions' entry files ----------------------------------------------------------------


def template_functions(template: dict) -> dict[str, dict]:
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def test_every_function_of_the_template_has_an_entry_point_in_the_package() -> None:
    functions = template_functions(load_template(ROOT / "template.yaml"))
    folders = {
        props["CodeUri"].removeprefix("functions/").rstrip("/") for props in functions.values()
    }
    assert folders == set(ENTRY_POINTS)
    for props in functions.values():
        name = props["CodeUri"].removeprefix("functions/").rstrip("/")
        web_adapter = props["Handler"] == "run.sh"
        assert (ENTRY_POINTS[name] == "app") == web_adapter, name


def test_this_repository_binds_the_same_entry_files_a_project_gets() -> None:
    """The entry code exists once (a2a_serverless/functions): app.py only binds it."""
    for name in ENTRY_POINTS:
        assert (ROOT / "functions" / name / "app.py").read_text() == app_py(name), name
    for name in ("send_message", "stream", "get_task"):
        assert (ROOT / "functions" / name / "run.sh").read_text() == RUN_SH, name


def test_the_packaged_template_is_this_repositorys() -> None:
    assert packaged_template() == (ROOT / "template.yaml").read_text()


# -- the scaffold ------------------------------------------------------------------------------


def test_new_writes_a_project(tmp_path: Path) -> None:
    project = tmp_path / "My-Agent"
    written = {p.relative_to(project).as_posix() for p in scaffold(project)}
    wheels = [w for w in written if w.startswith("vendor/") and w.endswith(".whl")]
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-any.whl")
    entry_files = {f"functions/{n}/app.py" for n in ENTRY_POINTS}
    assert written - set(wheels) == {
        ".gitignore",
        "vendor/layer-constraints.txt",
        "Makefile",
        "README.md",
        "samconfig.toml",
        "template.yaml",
        "my_agent/__init__.py",
        "my_agent/flow.py",
        "tests/test_agent.py",
        "functions/send_message/run.sh",
        "functions/stream/run.sh",
        "functions/get_task/run.sh",
        *entry_files,
    }
    template = load_template(project / "template.yaml")
    assert template["Parameters"]["Flow"]["Default"] == "my_agent.flow:flow"
    layer = template["Resources"]["SharedLayer"]
    assert layer["Properties"]["ContentUri"] == "./"
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    ours = load_template(ROOT / "template.yaml")
    assert set(template["Resources"]) == set(ours["Resources"])  # the same stack
    assert template_functions(template) == template_functions(ours)
    makefile = (project / "Makefile").read_text()
    assert "build-SharedLayer:" in makefile and "--platform manylinux2014_aarch64" in makefile
    assert 'rm -rf "$(ARTIFACTS_DIR)/python/a2a_serverless/local"' in makefile
    assert 'stack_name = "my-agent"' in (project / "samconfig.toml").read_text()
    assert (project / "functions" / "stream" / "run.sh").stat().st_mode & 0o111


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_projects_makefile_ships_the_agent_with_bytecode_when_it_can(tmp_path: Path) -> None:
    project = tmp_path / "My-Agent"
    scaffold(project)
    makefile = (project / "Makefile").read_text()
    assert "--invalidation-mode unchecked-hash" in makefile
    # A PYTHON that is no Python 3.13 and whose pip only makes the target (no network); PATH's
    # python3.13 decides whether there is bytecode. The Makefile's shell text runs for real.
    fake = tmp_path / "fake-python"
    fake.write_text(
        '#!/bin/sh\n[ "$1 $2" = "-m pip" ] || exit 1\n'
        'while [ "$1" != --target ]; do shift; done\nmkdir -p "$2"\n'
    )
    fake.chmod(0o755)
    not_313 = tmp_path / "bin"
    not_313.mkdir()
    (not_313 / "python3.13").write_text("#!/bin/sh\necho cpython-311\n")
    (not_313 / "python3.13").chmod(0o755)
    python = python313()
    paths = {"none": f"{not_313}:/usr/bin:/bin"}
    if python is not None:
        paths["3.13"] = f"{Path(python).parent}:/usr/bin:/bin"
    for case, path in paths.items():
        artifacts = tmp_path / case
        done = subprocess.run(
            ["make", "-s", "build-SharedLayer", f"ARTIFACTS_DIR={artifacts}"],
            cwd=project,
            env={"PATH": path, "PYTHON": str(fake)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (case, done.stderr)
        flow = artifacts / "python" / "my_agent" / "flow.py"
        assert flow.is_file()
        pyc = flow.parent / "__pycache__" / "flow.cpython-313.pyc"
        if case == "none":
            (warning,) = [line for line in done.stdout.splitlines() if "WARNING" in line]
            assert "bytecode" in warning and "sam build --use-container" in warning
            assert not pyc.exists()
        else:
            assert "WARNING" not in done.stdout
            # Flags word 1: hash-based, unchecked (zip extraction does not keep mtimes).
            assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 1


def test_the_vendored_wheel_holds_the_package_and_its_metadata(tmp_path: Path) -> None:
    scaffold(tmp_path / "agent")
    (wheel,) = (tmp_path / "agent" / "vendor").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(f"{info}/METADATA").decode()
        record = zf.read(f"{info}/RECORD").decode()
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        template = zf.read("a2a_serverless/cli/template.yaml").decode()
    assert "Name: a2a-serverless" in metadata and "Requires-Dist: starlette" in metadata
    assert "a2a-serverless = a2a_serverless.cli:main" in entry_points  # the command
    assert "a2a_serverless/functions/stream.py" in names
    assert "a2a_serverless/layer-constraints.txt" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert all(n in record for n in names if not n.endswith("RECORD"))
    assert template == (ROOT / "template.yaml").read_text()  # a copy, not the link's text


def test_a_new_project_builds_its_layer_with_the_pinned_versions(tmp_path: Path) -> None:
    project = tmp_path / "agent"
    scaffold(project)
    pins = (project / "vendor" / "layer-constraints.txt").read_text()
    assert pins == (ROOT / "shared" / "a2a_serverless" / "layer-constraints.txt").read_text()
    assert "\npydantic==" in pins
    makefile = (project / "Makefile").read_text()
    assert "-c vendor/layer-constraints.txt" in makefile
    # The local install the README gives uses them too: the tests run what deploys.
    assert '[local]" -c vendor/layer-constraints.txt pytest' in (project / "README.md").read_text()


def test_new_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="not empty"):
        scaffold(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
    scaffold(tmp_path / "empty-is-fine", name="agent")  # an existing empty folder is fine


def test_new_refuses_a_name_that_is_no_package(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="package name"):
        scaffold(tmp_path / "x", name="class")
    with pytest.raises(SystemExit, match="taken"):
        scaffold(tmp_path / "functions")


def test_the_project_template_fails_loudly_when_ours_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("a2a_serverless.cli.scaffold.packaged_template", lambda: "Resources: {}\n")
    with pytest.raises(RuntimeError, match="expected"):
        project_template("agent")


# -- the reload watcher ------------------------------------------------------------------------


def test_the_watcher_sees_the_projects_python_files_only(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "flow.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    for skipped in (".venv", ".aws-sam", "__pycache__", ".git"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "mod.py").write_text("")
    before = python_files(tmp_path)
    assert set(before) == {tmp_path / "agent" / "flow.py"}
    import os

    os.utime(tmp_path / "agent" / "flow.py", (1, 1))
    assert python_files(tmp_path) != before


# -- a flow that cannot load fails the function's init ------------------------------------------


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_here.flow:flow", "ModuleNotFoundError"),
        ("a2a_serverless.flows.echo:no_such_flow", "AttributeError"),
        ("a2a_serverless.flows.echo:UPPERCASE_EXTENSION", "TypeError"),
    ],
)
def test_a_flow_that_cannot_load_fails_the_init(
    spec: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2a_serverless.settings import get_settings

    monkeypatch.setenv("FLOW", spec)
    get_settings.cache_clear()
    wiring.reset()
    try:
        with pytest.raises(FlowLoadError, match=f"FLOW={spec!r}: {says}"):
            flow_at_init()
    finally:
        monkeypatch.delenv("FLOW")
        get_settings.cache_clear()
        wiring.reset()
    assert flow_at_init().name == "echo"
