"""The `a2a-serverless` command as a user runs it: `new` scaffolds a project that passes its
own test, `invoke` runs every sample event of `events/` on its function (no Docker), and
`dev --reload` serves a project's flow and restarts on an edit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_serverless.cli import main
from tests.integration.test_event_samples import SAMPLES
from tests.ports import listen_port

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
SCRIPT = Path(sys.executable).parent / "a2a-serverless"


def command(*args: str) -> list[str]:
    """The installed console script (pip install gives it), else the module."""
    if SCRIPT.exists():
        return [str(SCRIPT), *args]
    return [sys.executable, "-m", "a2a_serverless.cli", *args]


def user_env() -> dict[str, str]:
    """The environment of a user's shell: the package installed, nothing of this repository's
    test setup (no PYTHONPATH pointing at the sources' tests)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTEST"))}
    env["PYTHONPATH"] = str(ROOT / "shared")
    return env


def run_command(
    *args: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`a2a-serverless *args` run from a user's shell (`user_env`), its output captured."""
    return subprocess.run(
        command(*args), cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=timeout
    )


# -- invoke ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _process_state() -> Iterator[None]:
    """The command, run in this process, sets what a command may (POWERTOOLS_METRICS_DISABLED,
    the working folder on sys.path): undone after each test, so that later tests in the same
    pytest process (the metrics tests) see the environment they started with."""
    environ, path = dict(os.environ), list(sys.path)
    yield
    os.environ.clear()
    os.environ.update(environ)
    sys.path[:] = path


def invoke_in_process(function: str, event: Path, *args: str) -> tuple[int, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            ["invoke", function, str(event), "--template", str(ROOT / "template.yaml"), *args]
        )
    return code, json.loads(out.getvalue())


def body_of(result: dict[str, Any]) -> str:
    assert result["isBase64Encoded"] is False
    return str(result["body"])


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_invoke_runs_every_sample_event(name: str) -> None:
    code, result = invoke_in_process(SAMPLES[name], EVENTS / name)
    if name == "authorizer_request.json":
        # The local stack's default Auth=None has no authenticator: refused, as a handler error.
        assert (code, result) == (1, {"errorType": "Exception", "errorMessage": "Unauthorized"})
        return
    assert code == 0, result
    event = json.loads((EVENTS / name).read_text())
    if "httpMethod" not in event:  # a plain handler's own answer
        assert isinstance(result, dict) and "statusCode" not in result
        return
    # An API Gateway proxy result (the samples' tasks do not exist on a fresh stack: 404; nor
    # does the sample notification's delegation, whose token is its only credential: 401).
    assert set(result) >= {"statusCode", "headers", "body"}
    expected = (401,) if name == "delegation_notification.json" else (200, 400, 404)
    assert result["statusCode"] in expected, result
    if name == "send_message.json":
        assert result["statusCode"] == 200
        task = json.loads(body_of(result))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    if name == "stream_message.json":  # the Web Adapter's stream, collected whole
        assert result["headers"]["content-type"].startswith("text/event-stream")
        frames = [line for line in body_of(result).splitlines() if line.startswith("data:")]
        events = [json.loads(frame.removeprefix("data:")) for frame in frames]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        chunks = [
            part.get("text", "")
            for e in events
            if "artifactUpdate" in e
            for part in e["artifactUpdate"]["artifact"]["parts"]
        ]
        assert "stream this from sam local invoke" in "".join(chunks)


def test_invoke_from_any_folder_with_the_packaged_template(tmp_path: Path) -> None:
    done = run_command(
        "invoke",
        "StreamFunction",
        str(EVENTS / "jsonrpc_send_message.json"),
        cwd=tmp_path,  # no template.yaml here: the packaged one
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # stdout is the answer alone
    assert result["statusCode"] == 200
    assert json.loads(result["body"])["result"]["task"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


def test_invoke_reports_a_flow_that_cannot_load_as_a_failed_init() -> None:
    code, result = invoke_in_process(
        "SendMessageFunction", EVENTS / "send_message.json", "--flow", "no_such_agent.flow:flow"
    )
    assert code == 1
    assert result["errorType"] == "FlowLoadError"
    assert "no_such_agent.flow:flow" in result["errorMessage"]


def test_invoke_names_the_functions_when_one_is_unknown() -> None:
    with pytest.raises(SystemExit, match="StreamFunction"):
        invoke_in_process("NoSuchFunction", EVENTS / "send_message.json")


# -- new ---------------------------------------------------------------------------------------


def test_a_new_project_passes_its_own_test(tmp_path: Path) -> None:
    project = tmp_path / "weather-agent"
    made = run_command("new", str(project))
    assert made.returncode == 0, made.stderr
    assert (project / "weather_agent" / "flow.py").is_file()
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
    # The README's invoke, on the sample event the project got, against the project's flow.
    invoked = run_command(
        "invoke", "SendMessageFunction", "events/send_message.json", cwd=project, timeout=120
    )
    assert invoked.returncode == 0, invoked.stderr
    task = json.loads(json.loads(invoked.stdout)["body"])["task"]
    assert task["artifacts"][0]["parts"][0]["text"].startswith("Hello! You sent")
    again = run_command("new", str(project))
    assert again.returncode != 0 and "not empty" in again.stderr


# -- dev --reload ------------------------------------------------------------------------------


def card_name(base: str, timeout: float, not_: str | None = None) -> str:
    """The served card's name, once the server answers (and the name is not `not_`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            card = httpx.get(f"{base}/.well-known/agent-card.json", timeout=5)
            if card.status_code == 200 and card.json()["name"] != not_:
                return str(card.json()["name"])
        time.sleep(0.3)
    raise AssertionError(f"no card (other than {not_!r}) at {base} within {timeout}s")


@contextlib.contextmanager
def running(args: list[str], cwd: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            args,
            cwd=cwd,
            env=user_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_dev_reload_serves_the_projects_flow_and_picks_up_an_edit(tmp_path: Path) -> None:
    project = tmp_path / "desk"
    assert main(["new", str(project), "--name", "desk"]) == 0
    port = listen_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dev.log"
    with running(command("dev", "--reload", "--port", str(port)), project, log) as server:
        # The flow of ./template.yaml, imported from the project folder.
        assert card_name(base, 120) == "Desk Agent", log.read_text()
        flow = project / "desk" / "flow.py"
        flow.write_text(flow.read_text().replace('title = "Desk Agent"', 'title = "Edited Desk"'))
        assert card_name(base, 120, not_="Desk Agent") == "Edited Desk", log.read_text()
        assert server.poll() is None
    assert "changed, restarting" in log.read_text()
