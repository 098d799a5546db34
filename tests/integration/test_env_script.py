"""scripts/_env.sh, which the two commands run first: an interpreter named by PYTHON that does
not run is reported as such, before anything is created."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_python_that_does_not_run_is_named_and_no_venv_is_made(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    (tmp_path / "pyproject.toml").write_text("")
    result = subprocess.run(
        ["bash", "scripts/test"],
        cwd=tmp_path,
        env={**os.environ, "PYTHON": "no-such-python-here"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"a2a-serverless: cannot create {tmp_path}/.venv: no-such-python-here does not run "
        "(set PYTHON to an interpreter's path):"
    )
    assert not (tmp_path / ".venv").exists()
