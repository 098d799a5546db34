"""Server-Sent Events from the event log: shared by every binding that streams."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from a2a_serverless.core.service import A2AService, StreamStart
from a2a_serverless.core.tail import StreamEnd
from a2a_serverless.models import StreamResponse
from a2a_serverless.observability import Metric, annotate, emit

HEARTBEAT = b": keep-alive\n\n"


def frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def event_frames(
    service: A2AService,
    start: StreamStart,
    render: Callable[[StreamResponse], dict[str, Any]],
) -> AsyncIterator[bytes]:
    """The first event, then the log after it, until a terminal or interrupted status (`StreamEnd`).
    Quiet periods get heartbeat comments; the stream ends cleanly after `stream_max_seconds`,
    before the function's timeout, so the client resubscribes. A client that leaves cancels it."""
    task = start.first.task
    annotate(task_id=start.task_id, context_id=task.context_id if task else None)
    # Opened is printed at once (not with the request's metrics when the stream ends) so
    # opened minus closed tracks the streams open at any moment.
    emit(Metric.STREAMS_OPENED, now=True)
    try:
        yield frame(render(start.first))
        if not start.open:
            return
        tail = service.tail(start)
        end = StreamEnd(awaiting_work=start.resume)
        policy = service.wait
        deadline = time.monotonic() + policy.stream_max_seconds
        last_sent = time.monotonic()
        while time.monotonic() < deadline:
            events = await run_in_threadpool(tail.poll)
            for event in events:
                yield frame(render(event))
                if end.reached(event):
                    return
            now = time.monotonic()
            if events:
                last_sent = now
            elif now - last_sent >= policy.heartbeat_seconds:
                yield HEARTBEAT
                last_sent = now
            await asyncio.sleep(min(tail.interval, max(0.0, deadline - now)))
    finally:
        # However it ends: settled, timed out, or the client hung up (cancellation).
        emit(Metric.STREAMS_CLOSED)


def sse_response(frames: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        frames,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
