"""SharedLayer builds with shared/Makefile (`sam build` with any local Python >= 3.11): the
dependencies are installed for the Lambda runtime (python3.13, arm64) by pip's platform
options, and the package goes in without its dev-only parts. The Makefile's copy step is run
here for real (pip stubbed out: no network), and its output inspected."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

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
    done = subprocess.run(
        # PYTHON=true: the pip step succeeds without installing anything.
        ["make", "-s", "-f", str(MAKEFILE), "build-SharedLayer", f"ARTIFACTS_DIR={artifacts}"],
        cwd=ROOT / "shared",
        env={"PATH": "/usr/bin:/bin", "PYTHON": "true"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    package = artifacts / "python" / "a2a_serverless"
    shipped = {p.relative_to(package).as_posix() for p in package.rglob("*")}
    assert {"wiring.py", "settings.py", "core/service.py", "functions/stream.py"} <= shipped
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
