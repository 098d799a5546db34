"""SharedLayer builds with shared/Makefile (`sam build` with any local Python >= 3.11): the
dependencies are installed for the Lambda runtime (python3.13, arm64) by pip's platform
options, and the package goes in without its dev-only parts, then everything is compiled to
bytecode by a Python 3.13 when there is one. The Makefile's copy and compile steps are run here
for real (pip stubbed out: no network), and their output inspected."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.pythons import python313
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "shared" / "Makefile"


def test_the_layer_builds_with_the_makefile_for_the_runtime(sam: dict[str, Any]) -> None:
    layer = sam["Resources"]["SharedLayer"]
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    functions = sam["Globals"]["Function"]
    assert functions["Runtime"] == "python3.13" and functions["Architectures"] == ["arm64"]
    # The pip options name that runtime and architecture, whatever Python runs the build.
    text = MAKEFILE.read_text()
    assert "build-SharedLayer:" in text
    for option in (
        "--platform manylinux2014_aarch64",
        "--implementation cp",
        "--python-version 3.13",
        "--only-binary=:all:",
        '--target "$(ARTIFACTS_DIR)/python"',
        "-r requirements.txt",
    ):
        assert option in text, option


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_layer_ships_the_package_without_its_dev_only_parts(tmp_path: Path) -> None:
    artifacts = tmp_path / "SharedLayer"
    # PYTHON=true: the pip step succeeds without installing anything; no Python 3.13, so no
    # bytecode is compiled and any .pyc would be the dev tree's.
    done = _build(artifacts, _without_python313(tmp_path))
    assert done.returncode == 0, done.stderr
    package = artifacts / "python" / "a2a_serverless"
    shipped = {p.relative_to(package).as_posix() for p in package.rglob("*")}
    assert {"wiring.py", "settings.py", "core/service.py", "handlers/stream.py"} <= shipped
    dev_only = [
        name
        for name in shipped
        if name.split("/")[0] in ("local", "cli")
        or "__pycache__" in name
        or name.endswith((".pyc", ".egg-info"))
    ]
    assert dev_only == []
    # Everything else of the package is there.
    source = ROOT / "shared" / "a2a_serverless"
    expected = {
        p.relative_to(source).as_posix()
        for p in source.rglob("*.py")
        if p.relative_to(source).parts[0] not in ("local", "cli")
    }
    assert expected <= shipped


# -- bytecode: Lambda extracts the layer to /opt, read-only, so Python cannot write __pycache__
# there; the build compiles it, with the runtime's Python (bytecode is version-specific).

UNCHECKED_HASH = 1  # a .pyc's flags word (bytes 4-8): 0 timestamp, 3 checked hash, 1 unchecked


def _build(artifacts: Path, path: str, python: str = "true") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-f", str(MAKEFILE), "build-SharedLayer", f"ARTIFACTS_DIR={artifacts}"],
        cwd=ROOT / "shared",
        env={"PATH": path, "PYTHON": python},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _shell_script(path: Path, body: str) -> Path:
    """An executable /bin/sh script at `path` (a stand-in Python for the Makefile)."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _without_python313(tmp_path: Path) -> str:
    """A PATH whose first python3.13 is not one (as a pyenv shim without that version is), so
    the build finds none even on a machine that has /usr/bin/python3.13."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _shell_script(bin_dir / "python3.13", "echo cpython-311\n")
    return f"{bin_dir}:/usr/bin:/bin"


def _fake_pip(directory: Path) -> Path:
    """A PYTHON whose `-m pip install --target DIR` writes one good module and one .py that is
    not Python (some packages ship templates so), and that is no Python 3.13 itself."""
    return _shell_script(
        directory / "fake-python",
        '[ "$1 $2" = "-m pip" ] || exit 1\n'
        'while [ "$1" != --target ]; do shift; done\n'
        'mkdir -p "$2/vendored" && echo "VALUE = 1" > "$2/vendored/good.py"\n'
        'echo "{% if broken %}" > "$2/vendored/template.py"\n',
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_layer_ships_unchecked_hash_bytecode_for_the_runtime(tmp_path: Path) -> None:
    python = python313()
    if python is None:
        pytest.skip("needs a Python 3.13 (python3.13 on PATH or pyenv)")
    artifacts = tmp_path / "SharedLayer"
    # The 3.13 only as python3.13 on PATH, PYTHON (the pip step) something else: the build
    # machine's Python need not be the runtime's.
    done = _build(
        artifacts, f"{Path(python).parent}:/usr/bin:/bin", python=str(_fake_pip(tmp_path))
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stdout
    tree = artifacts / "python"
    modules = [p for p in (tree / "a2a_serverless").rglob("*.py") if "__pycache__" not in p.parts]
    assert len(modules) > 20
    for module in [*modules, tree / "vendored" / "good.py"]:
        pyc = module.parent / "__pycache__" / f"{module.stem}.cpython-313.pyc"
        assert pyc.is_file(), pyc
        header = pyc.read_bytes()[:16]
        assert int.from_bytes(header[4:8], "little") == UNCHECKED_HASH, pyc
    # A .py that is not Python stays as it is and does not fail the build.
    assert not list((tree / "vendored" / "__pycache__").glob("template.*"))
    # The magic number is 3.13's, whatever Python ran make.
    magic = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.MAGIC_NUMBER.hex())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pyc = tree / "a2a_serverless" / "__pycache__" / "settings.cpython-313.pyc"
    assert pyc.read_bytes()[:4].hex() == magic
    # Still no dev-only parts, and the sources stay beside their bytecode (tracebacks).
    assert not (tree / "a2a_serverless" / "local").exists()
    assert not (tree / "a2a_serverless" / "cli").exists()
    assert (tree / "a2a_serverless" / "settings.py").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_without_a_python_313_the_layer_builds_without_bytecode_and_says_so(
    tmp_path: Path,
) -> None:
    artifacts = tmp_path / "SharedLayer"
    done = _build(artifacts, _without_python313(tmp_path))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stdout.splitlines() if "WARNING" in line]
    assert len(warnings) == 1
    assert "python3.13" in warnings[0] and "sam build --use-container" in warnings[0]
    assert (artifacts / "python" / "a2a_serverless" / "settings.py").is_file()
    assert not list(artifacts.rglob("*.pyc"))


# -- versions: the layer installs what the tests ran with (scripts/pin_layer.py) -----------------


def _pin_layer() -> Any:
    return load_script("pin_layer.py", "pin_layer")


def test_every_package_of_the_layer_is_pinned_to_the_version_the_tests_run() -> None:
    pin_layer = _pin_layer()
    pins = pin_layer.read_constraints()
    # What pip installs for python3.13 on arm64, read from the installed packages' metadata.
    closure = pin_layer.layer_closure(pin_layer.top_level_requirements())
    assert {"pydantic", "pydantic-core", "starlette", "botocore", "cryptography"} <= set(closure)
    stale = {
        name: (pins.get(name), closure[name]) for name in closure if pins.get(name) != closure[name]
    }
    assert stale == {}, f"pin != .venv for {stale}: run scripts/pin-layer, then the tests"
    assert set(pins) == set(closure), "pins for packages the layer no longer installs"
    # The file on disk is exactly what the script writes.
    assert pin_layer.CONSTRAINTS.read_text() == pin_layer.render(closure)


def test_the_closure_follows_the_runtime_s_markers_and_extras(tmp_path: Path) -> None:
    pin_layer = _pin_layer()
    requirement = pin_layer.Requirement
    # A marker for another Python or platform adds nothing; an extra pulls its requirements in.
    assert pin_layer.layer_closure([requirement("pytest; python_version < '3.12'")]) == {}
    assert pin_layer.layer_closure([requirement("pytest; platform_machine == 'x86_64'")]) == {}
    without = pin_layer.layer_closure([requirement("moto")])
    with_extra = pin_layer.layer_closure([requirement("moto[server]")])
    assert "botocore" in without and "flask" not in without
    assert "flask" in with_extra
    written = tmp_path / "c.txt"
    written.write_text(pin_layer.render({"Pydantic_Core": "2.0", "a": "1"}) + "\n# note\n")
    assert pin_layer.read_constraints(written) == {"pydantic-core": "2.0", "a": "1"}


def _recording_pip(directory: Path) -> tuple[Path, Path]:
    """A PYTHON whose `-m pip ...` records its arguments, one per line, and installs nothing."""
    log = directory / "pip-args"
    script = _shell_script(
        directory / "recording-python",
        f'[ "$1 $2" = "-m pip" ] || exit 1\nfor a in "$@"; do echo "$a"; done > "{log}"\n',
    )
    return script, log


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_layer_build_installs_the_pinned_versions(tmp_path: Path) -> None:
    python, log = _recording_pip(tmp_path)
    artifacts = tmp_path / "SharedLayer"
    done = _build(artifacts, _without_python313(tmp_path), python=str(python))
    assert done.returncode == 0, done.stderr
    arguments = log.read_text().splitlines()
    constraints = arguments[arguments.index("-c") + 1]
    # Relative to shared/, where sam build runs the Makefile (the layer's ContentUri).
    assert (ROOT / "shared" / constraints).resolve() == _pin_layer().CONSTRAINTS
    assert arguments[arguments.index("-r") + 1] == "requirements.txt"
    # The pins are a build input, not part of the layer.
    assert not (artifacts / "python" / "a2a_serverless" / "layer-constraints.txt").exists()


def test_the_venv_and_the_package_carry_the_pins() -> None:
    # .venv is installed with them (scripts/_env.sh), so the suite runs the layer's versions,
    # and reinstalled when they change.
    env_script = (ROOT / "scripts" / "_env.sh").read_text()
    assert '-e "$ROOT[dev]" -c "$CONSTRAINTS"' in env_script
    assert '[ "$CONSTRAINTS" -nt "$STAMP" ]' in env_script
    assert 'CONSTRAINTS="$ROOT/shared/a2a_serverless/layer-constraints.txt"' in env_script
    # A non-editable install (the wheel a project vendors) has the file as package data.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = pyproject["tool"]["setuptools"]["package-data"]["a2a_serverless"]
    assert "layer-constraints.txt" in package_data
