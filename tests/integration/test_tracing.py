"""Tracing (shared/a2a_serverless/observability.py), each case in a fresh interpreter as a
Lambda init is: no tracer outside Lambda, and inside it segments reach the X-Ray daemon."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LAMBDA_", "_X_AMZN"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={
            **clean,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)]),
            "AWS_DEFAULT_REGION": "us-east-1",
            "POWERTOOLS_SERVICE_NAME": "a2a-serverless",
            **env,
        },
        timeout=60,
        check=False,
    )


def test_outside_lambda_no_tracer_and_no_xray_sdk() -> None:
    code = (
        "import runpy, sys\n"
        f"runpy.run_path({str(ROOT / 'functions/flow_worker/app.py')!r})\n"
        f"runpy.run_path({str(ROOT / 'functions/stream/app.py')!r})\n"
        "from a2a_serverless import observability\n"
        "assert observability.function_tracer() is None\n"
        "print('xray' if 'aws_xray_sdk' in sys.modules else 'no xray')\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "no xray"


def test_inside_lambda_handlers_and_web_adapter_requests_are_traced() -> None:
    """With LAMBDA_TASK_ROOT set (as in Lambda), a plain handler's subsegment and a Web
    Adapter request's AWS call reach the X-Ray daemon address (a UDP socket here), the latter
    under the trace id of the request's `x-amzn-trace-id` header."""
    daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    daemon.bind(("127.0.0.1", 0))
    daemon.settimeout(20)
    port = daemon.getsockname()[1]
    handler_trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    request_trace = "Root=1-5759e988-aaaaaaaaaaaaaaaaaaaaaaaa;Parent=1111111111111111;Sampled=1"
    code = f"""
import asyncio, json, os, runpy
import httpx
os.environ["_X_AMZN_TRACE_ID"] = {handler_trace!r}
card = runpy.run_path({str(ROOT / "functions/agent_card/app.py")!r})
from a2a_serverless import observability
assert observability.function_tracer() is not None
class Ctx:
    function_name = "AgentCardFunction"; memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:1:function:x"; aws_request_id = "r1"
event = json.load(open({str(ROOT / "events/agent_card.json")!r}))
assert card["handler"](event, Ctx())["statusCode"] == 200
del os.environ["_X_AMZN_TRACE_ID"]  # a Web Adapter process has none of its own
send = runpy.run_path({str(ROOT / "functions/send_message/app.py")!r})
from fastapi import APIRouter
from starlette.responses import JSONResponse
import boto3
router = APIRouter()
@router.get("/aws")
def aws_call() -> JSONResponse:
    client = boto3.client("sqs", endpoint_url="http://127.0.0.1:9")
    try:
        client.list_queues()
    except Exception:
        pass
    return JSONResponse({{}})
send["app"].router.routes.extend(router.routes)  # before its first request
async def main():
    transport = httpx.ASGITransport(app=send["app"])
    async with httpx.AsyncClient(transport=transport, base_url="http://a") as c:
        r = await c.get("/aws", headers={{"x-amzn-trace-id": {request_trace!r}}})
        assert r.status_code == 200, r.text
asyncio.run(main())
print("done")
"""
    result = _run(
        code,
        LAMBDA_TASK_ROOT="/var/task",
        AWS_XRAY_DAEMON_ADDRESS=f"127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="x",
        AWS_MAX_ATTEMPTS="1",
    )
    assert result.returncode == 0, result.stderr
    documents = []
    with contextlib.suppress(TimeoutError):
        daemon.settimeout(2)
        while True:
            datagram = daemon.recv(65536).decode()
            documents.append(json.loads(datagram.split("\n", 1)[1]))
    daemon.close()
    names = {(d["trace_id"], d["name"]) for d in documents}
    assert ("1-5759e988-bd862e3fe1be46a994272793", "## handler") in names, names
    assert ("1-5759e988-aaaaaaaaaaaaaaaaaaaaaaaa", "sqs") in names, names
