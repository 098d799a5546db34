"""`a2a-serverless invoke --url`: a sample event run inside a running dev stack (`scripts/dev`,
as a user starts it) answers about a task that stack holds, where a fresh stack can only
answer 404 (and says how to do better)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_serverless.cli import main
from tests.e2e.conftest import new_principal

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
SAMPLE_TASK_ID = "3f0c9a8e-5b1d-4c2e-9f7a-1b2c3d4e5f60"


@pytest.fixture(autouse=True)
def _process_state() -> Iterator[None]:
    """What the command sets in this process (POWERTOOLS_METRICS_DISABLED, sys.path), undone."""
    environ, path = dict(os.environ), list(sys.path)
    yield
    os.environ.clear()
    os.environ.update(environ)
    sys.path[:] = path


def sample_for(tmp_path: Path, name: str, task_id: str, principal: str) -> Path:
    event = json.loads((EVENTS / name).read_text().replace(SAMPLE_TASK_ID, task_id))
    event["requestContext"]["authorizer"]["principalId"] = principal
    path = tmp_path / name
    path.write_text(json.dumps(event))
    return path


def run(*argv: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, json.loads(out.getvalue()) if out.getvalue() else None, err.getvalue()


def test_get_task_sample_answers_about_a_task_of_the_running_stack(
    base_url: str, tmp_path: Path
) -> None:
    principal = new_principal("invoke")
    sent = httpx.post(
        f"{base_url}/message:send",
        headers={"A2A-Version": "1.0", "X-Local-Principal": principal},
        json={"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}},
        timeout=30,
    )
    assert sent.status_code == 200, sent.text
    task_id = sent.json()["task"]["id"]
    event = sample_for(tmp_path, "get_task.json", task_id, principal)
    code, result, err = run("invoke", "GetTaskFunction", str(event), "--url", base_url)
    assert code == 0, err
    assert result["statusCode"] == 200, result
    assert json.loads(result["body"])["id"] == task_id
    # Another principal's view of the same task: the stack's own owner scoping applies.
    other = sample_for(tmp_path, "get_task.json", task_id, new_principal("other"))
    code, result, err = run("invoke", "GetTaskFunction", str(other), "--url", base_url)
    assert (code, result["statusCode"]) == (0, 404), err


def test_an_unknown_function_or_no_stack_is_one_line(base_url: str) -> None:
    sample = str(EVENTS / "get_task.json")
    code, result, err = run("invoke", "NoSuchFunction", sample, "--url", base_url)
    assert (code, result) == (2, None)
    assert len(err.strip().splitlines()) == 1 and "GetTaskFunction" in err
    code, result, err = run("invoke", "GetTaskFunction", sample, "--url", "http://127.0.0.1:9")
    assert (code, result) == (2, None)
    assert "no local stack answers" in err and "a2a-serverless dev" in err


def test_a_fresh_stacks_404_says_how_to_reach_a_task() -> None:
    code, result, err = run(
        "invoke",
        "GetTaskFunction",
        str(EVENTS / "get_task.json"),
        "--template",
        str(ROOT / "template.yaml"),
    )
    assert (code, result["statusCode"]) == (0, 404)
    hint = err.strip().splitlines()[-1]
    assert "fresh stack" in hint and "--url http://127.0.0.1:8000" in hint
