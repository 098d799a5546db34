"""What importing a module loads, each in a fresh interpreter: optional dependencies stay
optional, and the AWS SDK is loaded only by the code that calls AWS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WITHOUT_SDK = """
import sys
sys.modules["a2a"] = None  # as if a2a-sdk were not installed
import a2a_serverless.flows
import a2a_serverless.flows.runtime
import a2a_serverless.wiring
try:
    from a2a_serverless.flows import ExecutorFlow
except ImportError as error:
    print(error)
"""


def test_the_package_imports_without_the_sdk_and_the_adapter_names_the_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_SDK],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT / "shared")},
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'a2a-serverless[a2a-sdk]'" in result.stdout


def test_importing_the_bedrock_flow_does_not_import_boto3() -> None:
    # The card function imports the configured flow; boto3 would add to every cold start.
    code = "import sys, a2a_serverless.flows.bedrock; print('boto3' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "shared")},
        check=True,
    )
    assert result.stdout.strip() == "False"


def test_the_card_function_imports_the_aws_sdk_only_for_a_kms_key() -> None:
    code = (
        "import sys, runpy\n"
        "runpy.run_path('functions/agent_card/app.py')\n"
        "print('sdk' if 'botocore.session' in sys.modules else 'no sdk')\n"
    )

    def run(key: str) -> str:
        env = {"PYTHONPATH": "shared", "CARD_SIGNING_KEY": key, "AWS_DEFAULT_REGION": "us-east-1"}
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert run("") == "no sdk"
    assert run("local") == "no sdk"
    assert run("alias/card") == "sdk"
