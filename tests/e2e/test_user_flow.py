"""A user's own flow, in the user's own folder: `scripts/dev --flow my_agent.flow:flow` run from
there serves it; a flow that cannot be loaded stops the stack at startup with a clear error."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import DEV_SCRIPT
from tests.ports import listen_port

pytestmark = pytest.mark.e2e

FLOW = """
from a2a_serverless.flows import Flow, Outcome, StepContext


class Shout(Flow):
    name = "shout"

    def step(self, ctx: StepContext) -> Outcome:
        ctx.artifact(ctx.text.upper(), last_chunk=True)
        return Outcome.completed()


flow = Shout()


class Research(Shout):
    name = "research"
    max_step_seconds = 600


research = Research()
"""


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    package = tmp_path / "my_agent"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "flow.py").write_text(FLOW)
    return tmp_path


def _served_shouts(user_dir: Path, *arguments: str) -> None:
    """scripts/dev with `arguments`, from the user's folder: it starts, a send is answered by
    the Shout flow, and Ctrl-C stops it cleanly."""
    port = listen_port()
    process = subprocess.Popen(
        [str(DEV_SCRIPT), "--port", str(port), *arguments],
        cwd=user_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                if httpx.get(f"{base}/.well-known/agent-card.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "scripts/dev did not start"
            time.sleep(0.2)
        body = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
        answer = httpx.post(
            f"{base}/message:send", json=body, headers={"A2A-Version": "1.0"}, timeout=30
        ).json()
        assert answer["task"]["artifacts"][0]["parts"] == [{"text": "HI"}]
    finally:
        os.killpg(process.pid, signal.SIGINT)
        output = process.communicate(timeout=20)[0].decode()
    assert process.returncode == 0, output


def test_a_flow_in_the_users_folder_is_served(user_dir: Path) -> None:
    _served_shouts(user_dir, "--flow", "my_agent.flow:flow")


def test_a_flow_that_cannot_load_stops_the_stack_at_startup(user_dir: Path) -> None:
    result = subprocess.run(
        [str(DEV_SCRIPT), "--port", str(listen_port()), "--flow", "my_agent.missing:flow"],
        cwd=user_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot load the flow 'my_agent.missing:flow'" in result.stderr
    assert "ModuleNotFoundError" in result.stderr


def test_a_bad_setting_stops_the_stack_at_startup_naming_it(user_dir: Path) -> None:
    """A variable exported before the command wins over the template's: a bad one is named."""
    result = subprocess.run(
        [str(DEV_SCRIPT), "--port", str(listen_port())],
        cwd=user_dir,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "STREAM_MAX_SECONDS": "abc"},
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "invalid settings: STREAM_MAX_SECONDS must be a number (got 'abc')" in result.stderr
    assert "cannot load the flow" not in result.stderr


def test_a_flow_whose_steps_outlast_the_workflow_stops_the_stack_naming_the_one_that_fits(
    user_dir: Path,
) -> None:
    """`max_step_seconds` over EXPRESS's 150 s: refused at startup (not a task failing as timed
    out 150 s into its step); with the workflow the message names, the same flow is served."""
    flow = ["--flow", "my_agent.flow:research"]
    result = subprocess.run(
        [str(DEV_SCRIPT), "--port", str(listen_port()), *flow],
        cwd=user_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "cannot serve the flow 'my_agent.flow:research': the flow's steps may run 600 s "
        "(max_step_seconds) and WorkflowType=EXPRESS runs a step for at most 150 s: deploy with "
        "WorkflowType=STANDARD (locally: --param WorkflowType=STANDARD)"
    ) in result.stderr
    _served_shouts(user_dir, *flow, "--param", "WorkflowType=STANDARD")
