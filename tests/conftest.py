"""Shared fixtures: the stack of template.yaml inside moto, in this process.

IAM proven from observed calls: every local stack of the session (in-process, and the e2e
suite's `scripts/dev` servers, which inherit the environment) records the AWS calls each
function makes to a call log of this session (a temporary file, or A2A_LOCAL_CALL_LOG when
set); at the end of the session they are evaluated against the functions' roles in the
translated template (tests/iam_check.py). A call no policy allows fails the run; grants no
call used are reported (terminal summary and `.pytest-reports/iam-report.json`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_serverless.local.calls import CALL_LOG_ENV
from a2a_serverless.local.stack import LocalStack

REPORTS = Path(__file__).resolve().parents[1] / ".pytest-reports"
IAM_REPORT = REPORTS / "iam-report.json"
_CALL_LOG = pytest.StashKey[tuple[Path, bool]]()  # (path, whether this session made it)
_IAM_SUMMARY = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    """A fresh call log for this session (its own file: sessions running side by side in
    one checkout must not mix their calls), named where every local stack looks for it."""
    given = os.environ.get(CALL_LOG_ENV)
    if given:
        config.stash[_CALL_LOG] = (Path(given), False)
        return
    fd, name = tempfile.mkstemp(prefix="a2a-iam-calls-", suffix=".jsonl")
    os.close(fd)
    os.environ[CALL_LOG_ENV] = name
    config.stash[_CALL_LOG] = (Path(name), True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Evaluate the recorded calls (after every fixture, the dev servers too, has stopped)."""
    from tests.iam_check import evaluate_file, format_report, to_json

    path, ours = session.config.stash[_CALL_LOG]
    try:
        report = evaluate_file(path)
    finally:
        if ours:
            path.unlink(missing_ok=True)
    if report is None:  # nothing recorded: no stack ran (unit or template tests only)
        return
    REPORTS.mkdir(exist_ok=True)
    IAM_REPORT.write_text(json.dumps(to_json(report), indent=2) + "\n")
    session.config.stash[_IAM_SUMMARY] = format_report(report)
    if report.failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = terminalreporter.config.stash.get(_IAM_SUMMARY, None)
    if lines is None:
        return
    failed = any(line.startswith(("DENIED", "UNMAPPED")) for line in lines)
    terminalreporter.section("IAM from observed calls", red=failed, green=not failed)
    for line in lines:
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"(details: {IAM_REPORT})")


@pytest.fixture
def local_stack() -> Iterator[LocalStack]:
    """A fresh in-process stack (table, queues, state machine, handlers) per test, without the
    event-source pollers: call budgets must see only the operation under test. Tests of the
    stream and queue mappings use `stack_with_event_sources`."""
    stack = LocalStack(event_sources=False).start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def stack_with_event_sources() -> Iterator[LocalStack]:
    """The stack as `scripts/dev` runs it: stream and queue mappings polled by threads."""
    stack = LocalStack().start()
    try:
        yield stack
    finally:
        stack.stop()
