"""Cold start: what a buffered HTTP function's first request loads, and the thread hop the
bindings use instead of Starlette's `run_in_threadpool` (bindings/routing.py's run_in_thread).

run_in_threadpool goes through anyio, whose asyncio backend (~14 ms of CPU to import) was
loaded by every HTTP function's first request; a buffered answer has no other use for it (an
SSE response's task group still loads it)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.bindings import routing
from a2a_serverless.bindings.routing import run_in_thread
from tests.function_probe import run_in_function

ROOT = Path(__file__).resolve().parents[2]
ANYIO_BACKEND = "anyio._backends._asyncio"

# The function's first request against an AWS endpoint that refuses connections: it reaches
# the store (in the worker thread) and fails there, answered by the error table.
_FIRST_REQUEST = r"""
import asyncio, json, sys
sys.path.insert(0, ".")
import app
event = json.loads(open(sys.argv[1]).read())
if hasattr(app, "handler"):
    class Context:
        function_name = "f"
        function_version = "$LATEST"
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:f"
        memory_limit_in_mb = 512
        aws_request_id = "00000000-0000-0000-0000-000000000000"
        log_group_name = "/aws/lambda/f"
        log_stream_name = "test"
        def get_remaining_time_in_millis(self):
            return 60000
    status = app.handler(event, Context())["statusCode"]
else:
    headers = {k: v for k, v in (event.get("headers") or {}).items()}
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": event["httpMethod"], "scheme": "http", "path": event["path"],
        "raw_path": event["path"].encode(), "root_path": "", "query_string": b"",
        "headers": [(k.lower().encode(), str(v).encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8080),
    }
    status = None
    async def call():
        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}
        async def send(message):
            global status
            if message["type"] == "http.response.start":
                status = message["status"]
        await app.app(scope, receive, send)
    try:
        asyncio.run(call())
    except Exception:  # Starlette re-raises to the server once the 500 is sent
        pass
print(json.dumps({"status": status, "backend": "anyio._backends._asyncio" in sys.modules}))
"""


@pytest.mark.parametrize(
    ("function", "sample"), [("list_tasks", "list_tasks.json"), ("get_task", "get_task.json")]
)
def test_a_buffered_first_request_does_not_load_anyio_s_backend(function: str, sample: str) -> None:
    result = run_in_function(
        function,
        _FIRST_REQUEST,
        str(ROOT / "events" / sample),
        extra_env={
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # the discard port: connection refused
            "AWS_MAX_ATTEMPTS": "1",
        },
    )
    # The store call ran (and failed on the refused connection): the request took the hop.
    assert result["status"] >= 500, result["_output"][-2000:]
    assert "EndpointConnectionError" in result["_output"]  # logged with the 500
    assert result["backend"] is False


# -- run_in_thread ---------------------------------------------------------------------------

_var: contextvars.ContextVar[str] = contextvars.ContextVar("test_var", default="unset")


def test_the_call_runs_in_another_thread_with_the_caller_s_context() -> None:
    def work(a: int, *, b: int) -> tuple[int, str, int]:
        seen = _var.get()
        _var.set("set in the thread")  # a copy: the caller's value stays
        return a + b, seen, threading.get_ident()

    async def main() -> tuple[tuple[int, str, int], str]:
        _var.set("the request's")
        result = await run_in_thread(work, 1, b=2)
        return result, _var.get()

    (total, seen, ident), after = asyncio.run(main())
    assert (total, seen, after) == (3, "the request's", "the request's")
    assert ident != threading.get_ident()


def test_an_exception_reaches_the_caller() -> None:
    def fail() -> None:
        raise LookupError("no such task")

    with pytest.raises(LookupError, match="no such task"):
        asyncio.run(run_in_thread(fail))


def test_a_cancelled_caller_stops_waiting_and_the_call_finishes_in_its_thread() -> None:
    # As anyio's thread call under a plain Task.cancel() (keepalive.py cancels its answer so).
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        finished.set()
        return "done"

    async def main() -> None:
        task = asyncio.ensure_future(run_in_thread(slow))
        while not started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not finished.is_set()
        release.set()

    asyncio.run(main())
    assert finished.wait(10)


def test_the_pool_is_as_large_as_anyio_s_default_limiter() -> None:
    # Starlette's run_in_threadpool ran at most 40 calls at once (anyio's default limiter).
    seen: list[Any] = []

    async def main() -> None:
        await run_in_thread(seen.append, 1)

    asyncio.run(main())
    assert routing._executor._max_workers == routing.THREADS == 40
