"""The local stack checks the moto attributes its patches replace: a speed-up whose attribute
changed is skipped with one warning and the stack still answers; a correctness fix that cannot
apply stops the start; A2A_LOCAL_SPEEDUPS=0 applies no speed-up. scripts/_env.sh reinstalls
when the moto pin changes."""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.local import moto_fidelity, moto_speedups
from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import A2A, wait_idle

ROOT = Path(__file__).resolve().parents[2]


def _resolve(spec: str) -> Any:
    module, path = spec.split("(")[0].split(":")
    found: Any = importlib.import_module(module)
    for part in path.split("."):
        found = getattr(found, part)
    return found


def _speedup_only_attributes() -> list[str]:
    fixes = {spec.split("(")[0] for fix in moto_fidelity.FIXES for spec in fix.replaces}
    return sorted(
        {spec.split("(")[0] for s in moto_speedups.SPEEDUPS for spec in s.replaces} - fixes
    )


def _replaced_by_a_start(env: str | None, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The speed-up attributes a stack started with A2A_LOCAL_SPEEDUPS=`env` replaced."""
    if env is None:
        monkeypatch.delenv(moto_speedups.ENV, raising=False)
    else:
        monkeypatch.setenv(moto_speedups.ENV, env)
    specs = _speedup_only_attributes()
    before = {spec: _resolve(spec) for spec in specs}
    with LocalStack(event_sources=False) as stack:
        replaced = [spec for spec in specs if _resolve(spec) != before[spec]]
        wait_idle(stack)
    return replaced


def test_switched_off_no_speedup_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _replaced_by_a_start(None, monkeypatch)  # on by default
    assert _replaced_by_a_start("0", monkeypatch) == []


def test_all_but_one(monkeypatch: pytest.MonkeyPatch) -> None:
    left_out = moto_speedups.SPEEDUPS[0]
    own = [spec.split("(")[0] for spec in left_out.replaces]
    replaced = _replaced_by_a_start(f"all,-{left_out.name}", monkeypatch)
    assert replaced and not set(own) & set(replaced)


def test_a_speedup_whose_attribute_changed_is_skipped_and_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    original = ConditionExpressionParser.parse

    def parse(self: Any, strict: bool = True) -> Any:  # as if moto had added a parameter
        return original(self)

    monkeypatch.setattr(ConditionExpressionParser, "parse", parse)
    monkeypatch.delenv(moto_speedups.ENV, raising=False)
    with (
        caplog.at_level(logging.WARNING, logger=moto_speedups.__name__),
        LocalStack(event_sources=False) as stack,
    ):
        assert ConditionExpressionParser.parse is parse  # not replaced
        alice = A2A(stack, "alice")
        task = alice.send("hello").task
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert alice.get(task["id"]).task["id"] == task["id"]
        wait_idle(stack)
    said = [r.getMessage() for r in caplog.records if r.name == moto_speedups.__name__]
    assert said == [
        "local stack: speed-up parsed_conditions_kept skipped: "
        "moto.dynamodb.comparisons:ConditionExpressionParser.parse takes (self, strict), "
        "not (self)"
    ]


def test_a_fix_that_cannot_apply_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.sqs.models import SQSBackend

    monkeypatch.delattr(SQSBackend, "receive_message")
    live = list(LocalStack._live)
    with pytest.raises(RuntimeError, match=r"fifo_groups_in_order: moto\.sqs\.models:SQSBackend"):
        LocalStack(event_sources=False).start()
    assert LocalStack._live == live


def _env_script_run(root: Path) -> str:
    """scripts/_env.sh sourced in a copy of the tree whose .venv's python logs its arguments."""
    subprocess.run(
        ["bash", "scripts/probe"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ""},
    )
    log = root / "calls.log"
    return log.read_text() if log.exists() else ""


def test_env_script_reinstalls_when_the_moto_pin_changes(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "_env.sh").write_text((ROOT / "scripts" / "_env.sh").read_text())
    (tmp_path / "scripts" / "probe").write_text('. "$(dirname "$0")/_env.sh"\n')
    (tmp_path / "pyproject.toml").write_text("")
    local = tmp_path / "shared" / "a2a_serverless" / "local"
    local.mkdir(parents=True)
    (local.parent / "layer-constraints.txt").write_text("")
    pin = local / "moto-constraints.txt"
    pin.write_text("moto==5.2.5\n")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls.log\n')
    python.chmod(0o755)
    stamp = tmp_path / ".venv" / ".installed"
    stamp.write_text("")
    for path in (tmp_path / "pyproject.toml", local.parent / "layer-constraints.txt", pin):
        os.utime(path, (1_000_000, 1_000_000))  # all older than the stamp
    assert _env_script_run(tmp_path) == ""
    os.utime(pin, None)  # the pin changes after the install
    os.utime(stamp, (1_000_000, 1_000_000))
    assert f"-c {pin}" in _env_script_run(tmp_path)
