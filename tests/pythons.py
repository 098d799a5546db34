"""Other Pythons on this machine that tests may build with (no fixtures)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def python313() -> str | None:
    """A working CPython 3.13's real executable, or None: the Lambda runtime's version, which
    the layer's bytecode must be compiled by (a pyenv shim may exist and not work)."""
    candidates = [
        shutil.which("python3.13"),
        *map(str, Path.home().glob(".pyenv/versions/3.13*/bin/python3.13")),
    ]
    for candidate in filter(None, candidates):
        done = subprocess.run(
            [candidate, "-c", "import sys; print(sys.implementation.cache_tag, sys.executable)"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        tag, _, executable = done.stdout.strip().partition(" ")
        if done.returncode == 0 and tag == "cpython-313":
            return executable
    return None
