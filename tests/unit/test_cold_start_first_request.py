"""The thread hop the bindings take for blocking calls (Starlette's `run_in_threadpool`, as
FastAPI runs sync handlers): the caller's context goes along, and a caller cancelled with a
plain `Task.cancel()` (bindings/keepalive.py cancels a blocking send's wait so when the client
hangs up) stops waiting at once while the call finishes in its thread."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest
from starlette.concurrency import run_in_threadpool

_var: contextvars.ContextVar[str] = contextvars.ContextVar("test_var", default="unset")


def test_the_call_runs_in_another_thread_with_the_caller_s_context() -> None:
    def work(a: int, *, b: int) -> tuple[int, str, int]:
        seen = _var.get()
        _var.set("set in the thread")  # a copy: the caller's value stays
        return a + b, seen, threading.get_ident()

    async def main() -> tuple[tuple[int, str, int], str]:
        _var.set("the request's")
        result = await run_in_threadpool(work, 1, b=2)
        return result, _var.get()

    (total, seen, ident), after = asyncio.run(main())
    assert (total, seen, after) == (3, "the request's", "the request's")
    assert ident != threading.get_ident()


def test_an_exception_reaches_the_caller() -> None:
    def fail() -> None:
        raise LookupError("no such task")

    with pytest.raises(LookupError, match="no such task"):
        asyncio.run(run_in_threadpool(fail))


def test_a_cancelled_caller_stops_waiting_and_the_call_finishes_in_its_thread() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        finished.set()
        return "done"

    async def main() -> None:
        task = asyncio.ensure_future(run_in_threadpool(slow))
        while not started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not finished.is_set()
        release.set()

    asyncio.run(main())
    assert finished.wait(10)
