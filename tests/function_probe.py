"""Run a snippet in a fresh interpreter as a function's code directory would (its `app.py`
importable, the layer's package on the path, AWS settings and nothing else from this
process's environment) and read the JSON it prints last, with all it printed under
`_output`: what its init or first request loads, apart from the test process's imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_in_function(
    function: str, code: str, *args: str, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT / "shared"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "TABLE_NAME": "tasks",
        "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:flow",
        **(extra_env or {}),
    }
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT / "functions" / function,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    result["_output"] = out.stdout + out.stderr  # what it printed and logged, for assertions
    return result
