"""Shared fixtures: the stack of template.yaml inside moto, in this process.

IAM proven from observed calls: every local stack of the session (in-process, and the e2e
suite's `scripts/dev` servers, which inherit the environment) records the AWS calls each
function makes to a call log of this session (a temporary file, or A2A_LOCAL_CALL_LOG when
set); at the end of the session they are evaluated against the functions' roles in the
translated template (tests/iam_check.py). A call no policy allows fails the run; grants no
call used are reported (terminal summary and `.pytest-reports/iam-report.json`).

That check and the others that close a session (e2e wire coverage, the fuzz tally, why the
browser tests were skipped) run where the session ends: in this process, or under
pytest-xdist in the controller, over the records each process handed over (`hand_over`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.local.calls import CALL_LOG_ENV
from a2a_serverless.local.stack import LocalStack

REPORTS = Path(__file__).resolve().parents[1] / ".pytest-reports"
IAM_REPORT = REPORTS / "iam-report.json"
Summary = tuple[str, bool, list[str]]  # title, failed, lines
_CALL_LOG = pytest.StashKey[tuple[Path, bool]]()  # (path, whether this session made it)


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


# -- what each process hands to the session's closing checks -----------------------------------
#
# The closing checks run where the session ends: alone, in this process; under pytest-xdist,
# in the controller, over the records each worker handed over as it finished.

_RECORDS = pytest.StashKey[dict[str, list[Any]]]()
_SUMMARIES = pytest.StashKey[list[Summary]]()


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def hand_over(config: pytest.Config, name: str, record: Any) -> None:
    """Give this process's `record` (plain data: lists, dicts, numbers, strings) of `name`
    to the closing checks; call it from pytest_sessionfinish (tryfirst)."""
    if is_worker(config):
        config.workeroutput.setdefault("records", {})[name] = record
    else:
        config.stash.setdefault(_RECORDS, {}).setdefault(name, []).append(record)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker finished; keep what it handed over."""
    records = getattr(node, "workeroutput", {}).get("records", {})
    for name, record in records.items():
        node.config.stash.setdefault(_RECORDS, {}).setdefault(name, []).append(record)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The closing checks (after every fixture, the dev servers too, has stopped): IAM from
    the recorded calls, the e2e suite's wire coverage, the fuzz tally. A failed check fails
    the session; each prints a section of the terminal summary."""
    config = session.config
    if is_worker(config):
        return
    records = config.stash.get(_RECORDS, {})
    summaries = config.stash.setdefault(_SUMMARIES, [])
    for check in (_iam_check, _e2e_coverage_check, _fuzz_tally, _browser_skipped):
        summary = check(config, records)
        if summary is None:
            continue
        summaries.append(summary)
        if summary[1] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _iam_check(config: pytest.Config, records: dict[str, list[Any]]) -> Summary | None:
    from tests.iam_check import evaluate_file, format_report, to_json

    path, ours = config.stash[_CALL_LOG]
    try:
        report = evaluate_file(path)
    finally:
        if ours:
            path.unlink(missing_ok=True)
    if report is None:  # nothing recorded: no stack ran (unit or template tests only)
        return None
    REPORTS.mkdir(exist_ok=True)
    IAM_REPORT.write_text(json.dumps(to_json(report), indent=2) + "\n")
    lines = [*format_report(report), f"(details: {IAM_REPORT})"]
    return ("IAM from observed calls", report.failed, lines)


def _e2e_coverage_check(config: pytest.Config, records: dict[str, list[Any]]) -> Summary | None:
    from tests.e2e.coverage import closing_problems

    e2e = records.get("e2e", [])
    problems = closing_problems(e2e)
    if problems is None:  # part of the e2e suite: the counts say nothing
        return None
    seen = sum(len(record["seen"]) for record in e2e)
    lines = problems or [f"every operation strictly checked ({seen} responses)"]
    return ("e2e wire coverage", bool(problems), lines)


def _fuzz_tally(config: pytest.Config, records: dict[str, list[Any]]) -> Summary | None:
    from tests.fuzz.tally import Tally

    tally = Tally.merged(records.get("fuzz", []))
    if not tally.cases:
        return None
    return ("fuzz", tally.bad, [tally.written()])


def _browser_skipped(config: pytest.Config, records: dict[str, list[Any]]) -> Summary | None:
    """Why the browser tests were skipped (tests/browser/conftest.py), said once."""
    reasons = sorted(set(records.get("browser", [])))
    return ("browser tests skipped", False, reasons) if reasons else None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, failed, lines in terminalreporter.config.stash.get(_SUMMARIES, []):
        terminalreporter.section(title, red=failed, green=not failed)
        for line in lines:
            terminalreporter.write_line(line)


class SharedStack:
    """One in-process stack for consecutive tests that use it (`local_stack`, or `make_stack`
    for a variant that is a setting), each seeing what a fresh one gives: the environment as
    a start from the test's environment leaves it, then `LocalStack.reset`. Stopped before a
    test that does not use it (a stack of its own must not find moto running)."""

    def __init__(self) -> None:
        self.stack: LocalStack | None = None
        self.environ: dict[str, str] = {}  # as the stack's start left it
        self.test_environ: dict[str, str] = {}  # as the current test began
        self.outer: dict[str, str] = {}  # as the stack's start found it
        self.set_aside_for: dict[str, str] | None = None  # the outer one, to restore
        self.ready = False  # started or reset for the current test

    def begin(self, uses: bool) -> None:
        """Before any other fixture of a test (they may set a variant)."""
        if not uses:
            self.stop()
        elif self.stack is not None:
            _replace_environ(self.environ)
        if self.set_aside_for is not None:  # what the last test's fixtures left behind
            _replace_environ(self.set_aside_for)
            self.set_aside_for = None
        self.test_environ = dict(os.environ)
        self.ready = False

    def get(self) -> LocalStack:
        """The stack, with the settings the test has set so far applied."""
        if self.stack is None:
            # Started from the environment the test began with, as if before its fixtures:
            # later tests get back exactly that; the test's own settings go on top.
            current = dict(os.environ)
            _replace_environ(self.test_environ)
            self.outer = dict(os.environ)
            self.stack = LocalStack(event_sources=False).start()
            self.environ = dict(os.environ)
            for key in set(current) | set(self.test_environ):
                if current.get(key) != self.test_environ.get(key):
                    _set_or_unset(key, current.get(key))
        elif not self.ready:
            self.stack.reset()
        self.ready = True
        return self.stack

    def only_settings_changed(self) -> bool:
        """Whether every variable the test changed is a setting the wiring reads (a fresh
        start reads others: credentials, the local stack's own switches)."""
        from a2a_serverless.settings import Settings

        names = {name.upper() for name in Settings.model_fields} | {"PYTEST_CURRENT_TEST"}
        keys = set(os.environ) | set(self.test_environ)
        return all(os.environ.get(k) == self.test_environ.get(k) or k in names for k in keys)

    def refresh(self) -> LocalStack:
        """After a setting changed: data, wiring and handlers rebuilt."""
        stack = self.get()
        stack.reset()
        return stack

    def set_aside(self) -> None:
        """Stopped mid-test for a stack of the test's own: the variables the test set are
        kept, and the next test begins from the environment this stack's start found (the
        test's monkeypatch would restore this stack's values)."""
        if self.stack is None:
            return
        current = dict(os.environ)
        changed = {
            key
            for key in set(current) | set(self.test_environ)
            if current.get(key) != self.test_environ.get(key)
        }
        self.stop()
        for key in changed:
            _set_or_unset(key, current.get(key))
        self.set_aside_for = self.outer

    def stop(self) -> None:
        if self.stack is not None:
            stack, self.stack = self.stack, None
            stack.stop()


def _set_or_unset(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def _replace_environ(values: dict[str, str]) -> None:
    for key in set(os.environ) - set(values):
        del os.environ[key]
    os.environ.update(values)


SHARED = SharedStack()


@pytest.fixture(autouse=True)
def _shared_stack_between_tests(request: pytest.FixtureRequest) -> None:
    """The first fixture of every test: the shared stack made ready for a test that may use
    it, stopped for one that does not."""
    SHARED.begin(uses=bool({"local_stack", "make_stack"} & set(request.fixturenames)))


@pytest.fixture(scope="module", autouse=True)
def _shared_stack_per_module() -> Iterator[None]:
    """One stack per module at most: a module's own fixtures may start stacks of theirs."""
    SHARED.stop()
    yield
    SHARED.stop()


@pytest.fixture
def local_stack() -> LocalStack:
    """The in-process stack (table, queues, state machine, handlers) as a fresh one is, without
    the event-source pollers: call budgets must see only the operation under test. Shared by
    consecutive tests (SharedStack); settings that fixtures set before this one apply (wiring
    and handlers are rebuilt from the environment). Tests of the stream and queue mappings
    use `stack_with_event_sources`."""
    return SHARED.get()


@pytest.fixture
def stack_with_event_sources() -> Iterator[LocalStack]:
    """The stack as `scripts/dev` runs it: stream and queue mappings polled by threads."""
    stack = LocalStack().start()
    try:
        yield stack
    finally:
        stack.stop()
