"""The `a2a-serverless` command without a server: its parser, the scaffold it writes, the
entry files that bind the package's functions, and the flow check at a function's init."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless import wiring
from a2a_serverless.cli import parser
from a2a_serverless.cli.dev import python_files
from a2a_serverless.cli.scaffold import (
    ENTRY_POINTS,
    FLOW_POLICY_COMMENT,
    KEPT_PARAMETERS,
    RUN_SH,
    app_py,
    packaged_template,
    project_settings,
    project_template,
    scaffold,
    settings_template,
)
from a2a_serverless.handlers import FlowLoadError, flow_at_init
from a2a_serverless.local.__main__ import parse_params
from a2a_serverless.local.template import (
    Resolver,
    dump_template,
    load_template,
    load_template_text,
    template_settings,
    with_settings,
)
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
    """The entry code exists once (a2a_serverless/handlers): app.py only binds it."""
    for name in ENTRY_POINTS:
        assert (ROOT / "functions" / name / "app.py").read_text() == app_py(name), name
    for name in ("send_message", "stream", "get_task"):
        assert (ROOT / "functions" / name / "run.sh").read_text() == RUN_SH, name


def test_the_packaged_template_is_this_repositorys() -> None:
    assert packaged_template() == (ROOT / "template.yaml").read_text()


# -- the scaffold ------------------------------------------------------------------------------


class AnyAttribute(dict[str, str]):
    """Every GetAtt resolves, to its own name."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return key


def test_new_writes_a_project(tmp_path: Path) -> None:
    project = tmp_path / "My-Agent"
    written = {p.relative_to(project).as_posix() for p in scaffold(project)}
    wheels = [w for w in written if w.startswith("vendor/") and w.endswith(".whl")]
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-any.whl")
    entry_files = {f"functions/{n}/app.py" for n in ENTRY_POINTS}
    events = {f"events/{p.name}" for p in (ROOT / "events").glob("*.json")}
    assert "events/send_message.json" in events
    assert written - set(wheels) == {
        ".gitignore",
        "vendor/layer-constraints.txt",
        "layer/Makefile",
        "layer/requirements.txt",  # links: the layer's folder holds what goes in, no more
        "requirements.txt",
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
        *events,
    }
    for name in events:
        assert (project / name).read_text() == (ROOT / name).read_text()
    readme = " ".join((project / "README.md").read_text().split())
    assert "runs one on a fresh local stack" in readme and "answer 404 there" in readme
    assert "--url http://127.0.0.1:8000" in readme
    layer_links = {p.name: os.readlink(p) for p in (project / "layer").iterdir() if p.is_symlink()}
    assert layer_links == {
        "my_agent": "../my_agent",
        "vendor": "../vendor",
        "requirements.txt": "../requirements.txt",
    }
    template = load_template(project / "template.yaml")
    assert template["Parameters"]["Flow"]["Default"] == "my_agent.flow:flow"
    layer = template["Resources"]["SharedLayer"]
    assert layer["Properties"]["ContentUri"] == "layer/"
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    ours = load_template(ROOT / "template.yaml")
    assert set(template["Resources"]) == set(ours["Resources"])  # the same stack
    # The same functions, once the settings read from the Mappings are the parameters again.
    assert set(template_functions(template)) == set(template_functions(ours))
    defaults = {n: str(spec["Default"]) for n, spec in ours["Parameters"].items()}
    refs = {name: name for name in ours["Resources"]}
    for name, props in template_functions(template).items():
        mine = Resolver(
            {**defaults, "Flow": "x"},
            refs,
            AnyAttribute(),
            conditions=template["Conditions"],
            mappings=template["Mappings"],
        )
        theirs = Resolver(
            {**defaults, "Flow": "x"}, refs, AnyAttribute(), conditions=ours["Conditions"]
        )
        for key in ("CodeUri", "Handler", "Timeout", "MemorySize", "Environment", "Layers"):
            assert mine.resolve(props.get(key)) == theirs.resolve(
                template_functions(ours)[name].get(key)
            ), (name, key)
    makefile = (project / "layer" / "Makefile").read_text()
    assert "build-SharedLayer:" in makefile and "--platform manylinux2014_aarch64" in makefile
    assert 'rm -rf "$(ARTIFACTS_DIR)/python/a2a_serverless/local"' in makefile
    assert 'stack_name = "my-agent"' in (project / "samconfig.toml").read_text()
    assert (project / "functions" / "stream" / "run.sh").stat().st_mode & 0o111


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_projects_makefile_ships_the_agent_with_bytecode_when_it_can(tmp_path: Path) -> None:
    project = tmp_path / "My-Agent"
    scaffold(project)
    makefile = (project / "layer" / "Makefile").read_text()
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
            cwd=project / "layer",
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
    assert "a2a_serverless/handlers/stream.py" in names
    assert "a2a_serverless/layer-constraints.txt" in names
    # The sample events `new` writes, though cli/events is a link in a source tree.
    assert "a2a_serverless/cli/events/send_message.json" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert all(n in record for n in names if not n.endswith("RECORD"))
    assert template == (ROOT / "template.yaml").read_text()  # a copy, not the link's text


def test_a_new_project_builds_its_layer_with_the_pinned_versions(tmp_path: Path) -> None:
    project = tmp_path / "agent"
    scaffold(project)
    pins = (project / "vendor" / "layer-constraints.txt").read_text()
    assert pins == (ROOT / "shared" / "a2a_serverless" / "layer-constraints.txt").read_text()
    assert "\npydantic==" in pins
    makefile = (project / "layer" / "Makefile").read_text()
    # The project's own requirements in the same pip resolution as the wheel, constrained.
    assert "-r requirements.txt -c vendor/layer-constraints.txt" in makefile
    assert (project / "requirements.txt").read_text().startswith("# ")  # none yet, explained
    # The local install the README gives uses them too: the tests run what deploys.
    readme = (project / "README.md").read_text()
    assert '[local]" -r requirements.txt \\\n    -c vendor/layer-constraints.txt pytest' in readme


def test_the_cards_title_says_agent_once(tmp_path: Path) -> None:
    for folder, title in (
        ("My Agent", "My Agent"),
        ("weather", "Weather Agent"),
        ("agent", "Agent"),
    ):
        scaffold(tmp_path / folder)
        package = folder.lower().replace(" ", "_")
        assert f'title = "{title}"' in (tmp_path / folder / package / "flow.py").read_text()


# -- the project's template: a few parameters, the rest settings (Mappings) ----------------------

SYNTHETIC = """
Parameters:
  Kept: {Type: String, Default: a}
  Required: {Type: String}
  Size: {Type: Number, Default: 5}
  Name: {Type: String, Default: ''}
  Arns: {Type: CommaDelimitedList, Default: 'x,y'}
  Traced: {Type: String, Default: Active}
Globals:
  Function:
    Tracing: !Ref Traced
Conditions:
  Big: !Not [!Equals [!Ref Size, '0']]
Rules:
  KeptRule:
    Assertions:
      - Assert: !Not [!Equals [!Ref Kept, '']]
      - Assert: !Not [!Equals [!Ref Name, '']]
  SettingRule:
    RuleCondition: !Equals [!Ref Size, '1']
    Assertions:
      - Assert: !Not [!Equals [!Ref Kept, '']]
Resources:
  Thing:
    Type: AWS::X::Y
    Properties:
      A: !Ref Size
      B: !Sub "${Name}-${Kept}-${AWS::Region}-${!Name}"
      C: !Sub ["${Name}/${Other}", {Other: !Ref Size}]
      D: !Ref Arns
      E: !If [Big, !Ref Kept, !Ref AWS::NoValue]
      F: !GetAtt Other.Arn
"""


def test_settings_replace_every_reference_to_a_parameter_not_kept() -> None:
    template, moved = settings_template(load_template_text(SYNTHETIC), ("Kept",))
    # No default: a deploy asks. Read by SAM's transform (before mappings are): a parameter.
    assert list(template["Parameters"]) == ["Kept", "Required", "Traced"]
    assert list(moved) == ["Size", "Name", "Arns"]
    assert template["Mappings"] == {
        "Settings": {"Values": {"Size": "5", "Name": "", "Arns": "x,y"}}
    }

    def find(name: str) -> dict[str, Any]:
        return {"Fn::FindInMap": ["Settings", "Values", name]}

    props = template["Resources"]["Thing"]["Properties"]
    assert props["A"] == find("Size")
    assert props["B"] == {
        "Fn::Sub": ["${Name}-${Kept}-${AWS::Region}-${!Name}", {"Name": find("Name")}]
    }
    assert props["C"] == {
        "Fn::Sub": ["${Name}/${Other}", {"Other": find("Size"), "Name": find("Name")}]
    }
    assert props["D"] == {"Fn::Split": [",", find("Arns")]}
    assert props["E"] == {"Fn::If": ["Big", {"Ref": "Kept"}, {"Ref": "AWS::NoValue"}]}
    assert props["F"] == {"Fn::GetAtt": ["Other", "Arn"]}
    assert template["Conditions"]["Big"] == {"Fn::Not": [{"Fn::Equals": [find("Size"), "0"]}]}
    # Rules read parameters only: what names a setting goes.
    assert template["Rules"] == {
        "KeptRule": {
            "Assertions": [{"Assert": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Kept"}, ""]}]}}]
        }
    }
    # The local stack reads the settings, and a value given for one overrides it.
    resolver = Resolver(
        {"Kept": "k"},
        {},
        {"Other.Arn": "arn"},
        conditions=template["Conditions"],
        mappings=with_settings(template["Mappings"], {"Name": "n", "Unrelated": "u"}),
    )
    assert resolver.resolve(props) == {
        "A": "5",
        "B": "n-k-us-east-1-${!Name}",
        "C": "n/5",
        "D": ["x", "y"],
        "E": "k",
        "F": "arn",
    }
    assert template_settings(template) == {"Size": "5", "Name": "", "Arns": "x,y"}


def test_a_template_written_out_reads_back_the_same() -> None:
    """dump_template: what the project's template.yaml is written with (short tags, every
    node in full: no generated YAML anchors)."""
    ours = load_template(ROOT / "template.yaml")
    text = dump_template(ours)
    assert load_template_text(text) == ours
    assert not re.search(r"[&*]id\d+", text)
    assert "!Ref Auth" in text and "!GetAtt " in text and "Fn::" not in text
    project = project_template("agent")
    assert "!FindInMap [Settings, Values, RetentionDays]" in project
    assert not re.search(r"[&*]id\d+", project) and "Fn::" not in project


def test_the_project_template_keeps_the_first_deploys_parameters() -> None:
    template = load_template_text(project_template("agent"))
    # The first deploy's, and those SAM itself reads (Globals Function Tracing).
    assert set(template["Parameters"]) == {*KEPT_PARAMETERS, "Tracing"}
    settings = template["Mappings"]["Settings"]["Values"]
    ours = load_template(ROOT / "template.yaml")
    assert set(settings) == set(ours["Parameters"]) - set(template["Parameters"])
    assert set(settings) == set(project_settings())
    assert settings["PushAllowHttp"] == "false"

    def refs(value: Any) -> set[str]:
        if isinstance(value, list):
            return set().union(*map(refs, value)) if value else set()
        if isinstance(value, dict):
            found = {value["Ref"]} if isinstance(value.get("Ref"), str) else set()
            sub = value.get("Fn::Sub")
            if sub is not None:
                text = sub if isinstance(sub, str) else sub[0]
                known = set() if isinstance(sub, str) else set(sub[1])
                found |= {n for n in re.findall(r"\$\{([^}!.]+)\}", text) if n not in known}
            return found | refs(list(value.values()))
        return set()

    assert not refs(template) & set(settings)  # every reference rewritten
    # Settings that hold values the deployed functions read are in README.md's table.
    readme = scaffold_readme()
    for name in settings:
        assert f"| `{name}` |" in readme


def scaffold_readme() -> str:
    from a2a_serverless.cli.scaffold import readme

    text = readme("T", "p")
    assert "Also `Tracing`: SAM reads it" in text
    return text


# `sam deploy --guided` (samcli/commands/deploy/guided_context.py guided_prompts): Stack Name,
# AWS Region, one per parameter, Confirm changes, Allow IAM role creation, Disable rollback,
# one per Api event without authentication (auth_utils.py), Save arguments, SAM configuration
# file, SAM configuration environment; code signing asks only where a function has a config.
FIXED_QUESTIONS = 8


def guided_questions(template: dict[str, Any]) -> int:
    """The questions `sam deploy --guided` asks (every confirm answered yes)."""
    resources = template["Resources"]

    def has_security(body: dict[str, Any]) -> bool:
        """auth_utils' check: a `security` at the top or on any operation of any path."""
        paths = body.get("paths") or {}
        operations = [
            op for path in paths.values() if isinstance(path, dict) for op in path.values()
        ]
        return bool(body.get("security")) or any(
            isinstance(op, dict) and op.get("security") for op in operations
        )

    no_auth = 0
    signing = False
    for resource in resources.values():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        props = resource.get("Properties", {})
        signing = signing or "CodeSigningConfigArn" in props
        for event in (props.get("Events") or {}).values():
            if event.get("Type") not in ("Api", "HttpApi"):
                continue
            event_props = event.get("Properties", {})
            api_id = event_props.get("RestApiId") or event_props.get("ApiId") or {}
            api = resources.get(api_id.get("Ref", "") if isinstance(api_id, dict) else "", {})
            api_props = api.get("Properties", {})
            secured = (
                event_props.get("Auth")
                or api_props.get("Auth")
                or has_security(api_props.get("DefinitionBody", {}))
            )
            no_auth += not secured
    return FIXED_QUESTIONS + len(template.get("Parameters", {})) + no_auth + signing


def test_the_project_template_says_where_the_flows_permissions_go() -> None:
    # The written template keeps no comments but this one, right above the policy it explains.
    text = project_template("agent")
    comment, _, after = text.partition("  FlowPolicy:\n")
    assert comment.endswith(FLOW_POLICY_COMMENT) and "Type: AWS::IAM::ManagedPolicy" in after


def test_a_first_guided_deploy_of_a_project_asks_at_most_15_questions() -> None:
    project = guided_questions(load_template_text(project_template("agent")))
    assert project <= 15
    assert guided_questions(load_template(ROOT / "template.yaml")) > project + 30


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
