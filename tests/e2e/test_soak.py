"""`scripts/soak`, run as a user runs it (a subprocess): a short soak against the local stack it
starts itself is clean and its report has the promised shape; against an unreachable URL it
fails; bad options are usage errors.

The short run (45 s, 4 workers) is the same mix as the documented 10-minute run, so it proves
every operation kind, both webhook flavours and the memory sampling work end to end; with a
20 s TTL (A2A_LOCAL_TTL_SECONDS) its warm-up tasks expire and are gone by the end, and the
steady state after 2 x TTL is measured.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e

SOAK = ROOT / "scripts" / "soak"
RUN_TIMEOUT_SECONDS = 200.0
# Every operation kind the mix must exercise (one HTTP request each).
OPERATIONS = {
    "rest send (blocking)",
    "rest send (non-blocking)",
    "rest get-task",
    "rest stream",
    "rest subscribe",
    "rest cancel",
    "rest send (input-required)",
    "rest send (continuation)",
    "rest list-tasks",
    "rest push create",
    "rest push get",
    "rest push list",
    "rest push delete",
    "rest stream (webhook)",
    "jsonrpc SendMessage",
    "jsonrpc SendMessage (non-blocking)",
    "jsonrpc GetTask",
    "jsonrpc SendStreamingMessage",
    "jsonrpc SubscribeToTask",
    "jsonrpc CancelTask",
    "jsonrpc SendMessage (input-required)",
    "jsonrpc SendMessage (continuation)",
    "jsonrpc ListTasks",
    "jsonrpc CreateTaskPushNotificationConfig",
    "jsonrpc GetTaskPushNotificationConfig",
    "jsonrpc ListTaskPushNotificationConfigs",
    "jsonrpc DeleteTaskPushNotificationConfig",
    "jsonrpc SendStreamingMessage (webhook)",
    "v0.3 message/send",
    "v0.3 message/send (non-blocking)",
    "v0.3 tasks/get",
    "v0.3 message/stream",
    "v0.3 tasks/cancel",
    "v0.3 message/stream (webhook)",
}


@dataclass
class SoakRun:
    code: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads(self.stdout)
        return report

    def explain(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.stdout[-4000:]}\nstderr:\n{self.stderr[-4000:]}"


def run_soak(*args: str) -> SoakRun:
    done = subprocess.run(
        [str(SOAK), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    return SoakRun(done.returncode, done.stdout, done.stderr)


def test_short_soak_of_the_local_stack_is_clean() -> None:
    run = run_soak("--duration", "45", "--workers", "4", "--ttl-seconds", "20", "--json")
    assert run.code == 0, run.explain()
    report = run.report
    assert report["ok"] is True and report["problems"] == [], run.explain()
    assert report["workers"] == 4 and report["durationSeconds"] >= 45, report
    assert report["baseUrl"].startswith("http://127.0.0.1:"), report

    # Every kind ran, none failed, and its latency figures are consistent.
    operations = report["operations"]
    assert set(operations) == OPERATIONS, sorted(set(operations) ^ OPERATIONS)
    for name, figures in operations.items():
        assert figures["errors"] == 0, (name, report["errorSamples"])
        assert figures["count"] >= 1, name
        assert 0 < figures["p50Ms"] <= figures["p95Ms"] <= figures["maxMs"], (name, figures)
    totals = report["totals"]
    assert totals["errors"] == 0 and report["errorSamples"] == [], run.explain()
    assert totals["operations"] == sum(o["count"] for o in operations.values()), totals
    assert 0 < totals["loadOperations"] < totals["operations"], totals  # warm-up came first

    # Webhooks of both flavours got exactly their tasks' events.
    hooks = report["webhooks"]
    assert hooks["webhooksByVersion"]["1.0"] >= 2 and hooks["webhooksByVersion"]["0.3"] >= 1, hooks
    assert hooks["webhooksIncomplete"] == 0, hooks
    # An echo task has at least SUBMITTED, WORKING, a chunk and COMPLETED.
    assert hooks["received"] == hooks["expected"] >= 4 * hooks["webhooks"], hooks
    lag = hooks["lagMs"]
    assert lag["p50"] <= lag["p95"] <= lag["max"] < 30_000, lag

    tasks = report["tasks"]
    assert tasks["created"] >= 20 and tasks["nonTerminal"] == 0, tasks
    # TTL: every warm-up task expired and was deleted (GET answers 404), none broke a later
    # operation (no errors above).
    assert tasks["expired"]["checked"] >= 4, tasks
    assert tasks["expired"]["gone"] == tasks["expired"]["checked"], tasks

    # The server's memory was sampled from start to end, and it stopped cleanly on SIGINT.
    memory = report["memory"]
    labels = [s["label"] for s in memory["samples"]]
    assert labels[:2] == ["start", "after warm-up"] and labels[-1] == "end", labels
    assert "during" in labels, labels
    assert all(s["rssMb"] and s["rssMb"] > 50 for s in memory["samples"]), memory
    counts = [s["operations"] for s in memory["samples"]]
    assert counts == sorted(counts) and counts[-1] == totals["operations"], counts
    assert memory["startMb"] == memory["samples"][0]["rssMb"], memory
    assert memory["growthMb"] == round(memory["endMb"] - memory["afterWarmupMb"], 1), memory
    assert memory["growthMb"] <= 100, memory
    # The steady state: from the first sample after 2 x TTL of load (tasks expiring) to the end.
    assert memory["steadyFromLoadSeconds"] >= 40, memory
    assert memory["steadyGrowthMb"] == round(memory["endMb"] - memory["steadyFromMb"], 1), memory
    assert memory["steadyGrowthMb"] <= 25, memory
    assert report["server"]["exitCode"] == 0, report["server"]

    # The human summary went to stderr, ending with the verdict.
    assert "rest subscribe" in run.stderr, run.explain()
    assert run.stderr.rstrip().splitlines()[-1] == "OK", run.explain()


def test_soak_fails_against_an_unreachable_url() -> None:
    # Port 1 on loopback: every request is refused at once.
    run = run_soak("--url", "http://127.0.0.1:1", "--duration", "2", "--workers", "2", "--json")
    assert run.code == 1, run.explain()
    report = run.report
    assert report["ok"] is False and report["totals"]["errors"] > 0, report["totals"]
    assert any("errors" in problem for problem in report["problems"]), report["problems"]
    assert "ConnectError" in report["errorSamples"][0]["detail"], report["errorSamples"]
    assert report["memory"] is None and "server" not in report, report  # nothing to measure
    assert run.stderr.rstrip().splitlines()[-1].startswith("FAILED: "), run.explain()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--pid", "1"), "--pid goes with --url"),
        (("--url", "ftp://x"), "--url must be an http(s) URL"),
        (("--header", "no-colon"), "NAME:VALUE"),
        (("--workers", "0"), "must be positive"),
    ],
)
def test_soak_usage_errors_exit_2(args: tuple[str, ...], said: str) -> None:
    run = run_soak(*args)
    assert run.code == 2 and said in run.stderr, run.explain()
