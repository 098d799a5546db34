"""Flows served only by e2e test servers (`scripts/dev --flow tests.e2e.flows_for_tests:timed`).

Imported by the dev server's flow worker, so it depends on the project's flow API only.
"""

from __future__ import annotations

import time

from a2a_serverless.flows import Outcome, StepContext

TIMED_CHUNKS = 60
TIMED_INTERVAL_SECONDS = 0.1


def timed(ctx: StepContext) -> Outcome:
    """One artifact streamed as TIMED_CHUNKS chunks, ~100 ms apart, each stamped with the
    worker's wall-clock emit time in the artifact's metadata (`emittedAt`, seconds since the
    epoch), so a client on the same machine can measure emit→receive latency."""
    for index in range(TIMED_CHUNKS):
        time.sleep(TIMED_INTERVAL_SECONDS)
        ctx.artifact(
            f"{index} ",
            artifact_id="timed",
            name="timed",
            append=index > 0,
            last_chunk=index == TIMED_CHUNKS - 1,
            metadata={"emittedAt": time.time(), "index": index},
        )
    return Outcome.completed()
