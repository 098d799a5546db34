"""Benchmarks on the local stack: latency, throughput, cold-start imports and AWS units per task.

Timings are reported as ratios against a baseline measured in the same run (the machine is
shared and noisy): request latency against GET agent card (no AWS calls), import time against
`import boto3`. AWS units are counted, not timed: DynamoDB calls and estimated capacity units
(moto reports none, so sizes are computed from the items written and read), Lambda invocations,
Step Functions state transitions and API requests per task.

Usage: scripts/bench [--requests N] [--concurrency C] [--json FILE] [--write-docs]

--write-docs also measures SSE emit→receive latency (the e2e latency test, on its own
`scripts/dev` server) and writes docs/stream-latency.md; nothing else writes that page.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "shared"))

FUNCTIONS = {
    "AgentCardFunction": "functions/agent_card/app.py",
    "SendMessageFunction": "functions/send_message/app.py",
    "GetTaskFunction": "functions/get_task/app.py",
    "ListTasksFunction": "functions/list_tasks/app.py",
    "StreamFunction": "functions/stream/app.py",
    "PushConfigFunction": "functions/push_config/app.py",
    "FlowWorkerFunction": "functions/flow_worker/app.py",
    "WebhookSenderFunction": "functions/webhook_sender/app.py",
}
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


# -- cold start ------------------------------------------------------------------------------


def import_seconds(code: str, repeats: int = 5) -> float:
    """Median wall time of a fresh interpreter running `code` minus a bare interpreter."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "shared"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "TABLE_NAME": "bench",
        "POWERTOOLS_SERVICE_NAME": "bench",
    }
    probe = f"import time, runpy, sys; t=time.perf_counter(); {code}; print(time.perf_counter()-t)"
    samples = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
        )
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def cold_start() -> dict[str, Any]:
    baseline = import_seconds("import boto3")
    rows = {}
    for name, path in FUNCTIONS.items():
        seconds = import_seconds(f"runpy.run_path({str(ROOT / path)!r})")
        rows[name] = {
            "import_ms": round(seconds * 1000, 1),
            "ratio_vs_boto3": round(seconds / baseline, 2),
        }
    return {"baseline_import_boto3_ms": round(baseline * 1000, 1), "functions": rows}


# -- SSE latency page ----------------------------------------------------------------------------

LATENCY_TEST = "tests/e2e/test_streaming.py::test_event_latency_emit_to_receive"
LATENCY_DOC = ROOT / "docs" / "stream-latency.md"


def write_latency_doc() -> int:
    """Run the e2e latency test with its page pointed at docs/ (its exit code)."""
    env = {**os.environ, "A2A_STREAM_LATENCY_DOC": str(LATENCY_DOC)}
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", LATENCY_TEST]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


# -- latency, throughput and units -------------------------------------------------------------


class Meter:
    """Counts DynamoDB calls and estimated capacity units, via botocore events."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.wcu = 0.0
        self.rcu = 0.0

    @staticmethod
    def item_size(item: dict[str, Any]) -> int:
        size = 0
        for name, value in item.items():
            size += len(name.encode())
            ((kind, raw),) = value.items()
            if kind == "S":
                size += len(raw.encode())
            elif kind == "N":
                size += len(raw) // 2 + 1
            else:
                size += len(json.dumps(raw))
        return size

    def before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        self.calls[name] += 1
        if name == "PutItem":
            self.wcu += math.ceil(self.item_size(params["Item"]) / 1024)
        elif name == "UpdateItem":
            self.wcu += 1  # header updates are small (< 1 KB)
        elif name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                if "Put" in entry:
                    self.wcu += 2 * math.ceil(self.item_size(entry["Put"]["Item"]) / 1024)
                else:
                    self.wcu += 2

    def after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        items = parsed.get("Items") or ([parsed["Item"]] if "Item" in parsed else [])
        size = sum(self.item_size(i) for i in items)
        if model.name in ("Query", "GetItem"):
            self.rcu += max(1, math.ceil(size / 4096))


async def http_phase(requests: int, concurrency: int) -> dict[str, Any]:
    import httpx

    from a2a_serverless import wiring
    from a2a_serverless.local.stack import LocalStack

    # Event sources polled by hand, so the sender's share of a task is counted exactly.
    stack = LocalStack(event_sources="manual").start()
    assert stack.event_sources is not None
    task_events = stack.event_sources.by_name("WebhookSenderFunction.TaskEvents")

    def run_webhook_sender() -> int:
        """Invoke the sender for everything on the stream; returns the invocations."""
        before = task_events.invocations
        while task_events.poll_once():
            pass
        return task_events.invocations - before

    invocations: Counter[str] = Counter()
    original_invoke = stack._invoke

    def counted(function_name: str, body: Any, headers: Any) -> str:
        invocations[function_name.rsplit("-", 1)[-1]] += 1
        return original_invoke(function_name, body, headers)

    stack._invoke = counted  # type: ignore[method-assign]
    meter = Meter()
    client_events = wiring.get_store()._db.meta.events
    client_events.register("provide-client-params.dynamodb.*", meter.before)
    client_events.register(
        "after-call.dynamodb.*", lambda parsed, model, **kw: meter.after(parsed, model)
    )
    transport = httpx.ASGITransport(app=stack.gateway())
    results: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def timed(method: str, url: str, **kwargs: Any) -> tuple[float, httpx.Response]:
                start = time.perf_counter()
                response = await client.request(method, url, headers=HEADERS, **kwargs)
                elapsed = time.perf_counter() - start
                assert response.status_code < 400, response.text
                return elapsed, response

            def body(text: str, immediate: bool = False) -> dict[str, Any]:
                message = {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                }
                config = {"returnImmediately": True} if immediate else {}
                return {"message": message, "configuration": config}

            # Warm-up: imports and first executions.
            await timed("POST", "/message:send", json=body("warm up"))
            samples: dict[str, list[float]] = {
                k: []
                for k in (
                    "card",
                    "send_blocking",
                    "send_immediate",
                    "get_task",
                    "list_tasks",
                    "cancel",
                )
            }
            for _ in range(requests):
                samples["card"].append((await timed("GET", "/.well-known/agent-card.json"))[0])
                elapsed, response = await timed("POST", "/message:send", json=body("hello bench"))
                samples["send_blocking"].append(elapsed)
                task_id = response.json()["task"]["id"]
                samples["get_task"].append((await timed("GET", f"/tasks/{task_id}"))[0])
                samples["list_tasks"].append((await timed("GET", "/tasks?pageSize=20"))[0])
                elapsed, response = await timed(
                    "POST", "/message:send", json=body("slow [slow=30]", True)
                )
                samples["send_immediate"].append(elapsed)
                slow_id = response.json()["task"]["id"]
                samples["cancel"].append((await timed("POST", f"/tasks/{slow_id}:cancel"))[0])
            baseline = statistics.median(samples["card"])
            results["latency_ms"] = {
                name: {
                    "p50": round(statistics.median(values) * 1000, 2),
                    "p95": round(percentile(values, 0.95) * 1000, 2),
                    "p50_ratio_vs_card": round(statistics.median(values) / baseline, 2),
                }
                for name, values in samples.items()
            }

            # Units for exactly one blocking echo task, start to finish (its stream batch
            # included: the webhook sender runs for every task, with or without webhooks).
            await asyncio.sleep(0.5)
            run_webhook_sender()
            meter.calls.clear()
            meter.wcu = meter.rcu = 0.0
            invocations.clear()
            _, response = await timed("POST", "/message:send", json=body("units please"))
            task_id = response.json()["task"]["id"]
            await asyncio.sleep(0.2)  # the worker's last writes reach the stream
            invocations["WebhookSenderFunction"] += run_webhook_sender()
            sfn = stack._client("stepfunctions")
            history = sfn.get_execution_history(
                executionArn=stack.env["STATE_MACHINE_ARN"].replace(":stateMachine:", ":execution:")
                + f":{task_id}-1"
            )["events"]
            results["units_per_blocking_echo_task"] = {
                "api_requests": 1,
                "lambda_invocations": dict(invocations),
                "stepfunctions_state_transitions": sum(
                    1 for e in history if e["type"].endswith("StateEntered")
                ),
                "dynamodb_calls": dict(meter.calls),
                "dynamodb_wcu_estimate_table": meter.wcu,
                "dynamodb_rcu_estimate": meter.rcu,
                "note": "RCU includes the blocking send's log polling and the webhook sender's "
                "config read (the task has no webhook); GSI writes are not included",
            }

            # Throughput: concurrent blocking sends.
            async def one() -> None:
                await timed("POST", "/message:send", json=body("throughput"))

            start = time.perf_counter()
            for offset in range(0, requests, concurrency):
                await asyncio.gather(*(one() for _ in range(min(concurrency, requests - offset))))
            elapsed = time.perf_counter() - start
            results["throughput"] = {
                "blocking_tasks_per_second": round(requests / elapsed, 2),
                "concurrency": concurrency,
                "ratio_vs_card_rate": round((requests / elapsed) * baseline, 3),
            }
    finally:
        stack.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--skip-cold-start", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--write-docs", action="store_true", help=f"also measure and write {LATENCY_DOC}"
    )
    args = parser.parse_args()
    report: dict[str, Any] = {}
    if not args.skip_cold_start:
        report["cold_start"] = cold_start()
    report.update(asyncio.run(http_phase(args.requests, args.concurrency)))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    if args.write_docs:
        return write_latency_doc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
