"""Flows served only by e2e test servers (`scripts/dev --flow tests.e2e.flows_for_tests:timed`).

Imported by the dev server's flow worker, so it depends on the project's flow API (and the
plain builders of tests/helpers.py) only.
"""

from __future__ import annotations

import time

from a2a_serverless.flows import AgentExtension, Flow, Outcome, StepContext
from tests.helpers import artifact_chunk

TIMED_CHUNKS = 60
REQUIRED_EXTENSION = "urn:a2a-serverless:test:required:v1"
OPTIONAL_EXTENSION = "urn:a2a-serverless:test:optional:v1"
TIMED_INTERVAL_SECONDS = 0.1


def timed(ctx: StepContext) -> Outcome:
    """One artifact streamed as TIMED_CHUNKS chunks, ~100 ms apart, each stamped with the
    worker's wall-clock emit time in the artifact's metadata (`emittedAt`, seconds since the
    epoch), so a client on the same machine can measure emit→receive latency."""
    for index in range(TIMED_CHUNKS):
        time.sleep(TIMED_INTERVAL_SECONDS)
        stamp = {"emittedAt": time.time(), "index": index}
        artifact_chunk(ctx, "timed", f"{index} ", index, TIMED_CHUNKS, metadata=stamp)
    return Outcome.completed()


class _Strict(Flow):
    """A flow with a required extension (and an optional one it reports back)."""

    extensions = [
        AgentExtension(uri=REQUIRED_EXTENSION, description="must be requested", required=True),
        AgentExtension(uri=OPTIONAL_EXTENSION, description="may be requested"),
    ]

    def step(self, ctx: StepContext) -> Outcome:
        ctx.artifact(",".join(ctx.extensions) or "(none)", last_chunk=True)
        return Outcome.completed()


strict = _Strict()
