"""Flows served only by e2e test servers (`scripts/dev --flow tests.e2e.flows_for_tests:timed`).

Imported by the dev server's flow worker, so it depends on the project's flow API (and the
plain builders of tests/helpers.py) only.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator

from a2a_serverless.flows import AgentExtension, Flow, FlowCanceled, Outcome, StepContext
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


class _FileDigest(Flow):
    """Answers with one line per file part of the message (inline, stored or url), in order:
    `{sha256 hex} {byte count}`, read through ctx.open in 1 MiB pieces (artifact "digest")."""

    input_modes = ["text/plain", "*/*"]  # files of any type

    def step(self, ctx: StepContext) -> Outcome:
        lines = []
        for file in ctx.files:
            digest, size = hashlib.sha256(), 0
            with file.open() as stream:
                while piece := stream.read(1 << 20):
                    digest.update(piece)
                    size += len(piece)
            lines.append(f"{digest.hexdigest()} {size}")
        ctx.artifact("\n".join(lines) or "no files", artifact_id="digest", last_chunk=True)
        return Outcome.completed()


file_digest = _FileDigest()


# What `big_file` emits: BIG_FILE_BLOCK rotated by a different offset for each 1 MiB chunk, so
# a lost, repeated or reordered chunk changes the digest.
_BLOCK_BYTES = 1 << 20
BIG_FILE_BLOCK = random.Random(36).randbytes(_BLOCK_BYTES)


def big_file_chunks(size: int) -> Iterator[bytes]:
    """The `size` bytes `big_file` emits, 1 MiB at a time (hash them to get its sha256)."""
    index = 0
    while size > 0:
        offset = index * 7919 % _BLOCK_BYTES
        chunk = BIG_FILE_BLOCK[offset:] + BIG_FILE_BLOCK[:offset]
        yield chunk[:size]
        size -= len(chunk)
        index += 1


def big_file(ctx: StepContext) -> Outcome:
    """A file artifact ("file", big.bin) of as many bytes as the message text says (e.g.
    "52428800"), streamed from `big_file_chunks` to the content bucket, never whole in
    memory."""
    try:
        size = int(ctx.text.strip())
    except ValueError:
        return Outcome.rejected("send the file's size in bytes, e.g. 52428800")
    ctx.artifact_file(big_file_chunks(size), filename="big.bin", artifact_id="file", name="big")
    return Outcome.completed()


# -- remote agents for the delegation tests (tests/e2e/test_delegation.py) ---------------------

CITY_QUESTION = "Which city?"
CHUNK_PAUSE_SECONDS = 0.2
SLOW_SECONDS = 60.0
SLOW_CHECK_SECONDS = 0.5


def forecast_chunks(city: str) -> list[str]:
    """The three chunks `asks_then_answers` streams for `city`."""
    return ["The forecast for ", city, ": sunny."]


def asks_then_answers(ctx: StepContext) -> Outcome:
    """Turn 1 asks CITY_QUESTION (input-required); the answer's turn streams the forecast for
    that city as one artifact ("forecast") in 3 chunks, then completes."""
    if not ctx.state.get("asked"):
        ctx.state["asked"] = True
        return Outcome.input_required(CITY_QUESTION)
    chunks = forecast_chunks(ctx.text.strip())
    for index, chunk in enumerate(chunks):
        if index:
            time.sleep(CHUNK_PAUSE_SECONDS)
        artifact_chunk(ctx, "forecast", chunk, index, len(chunks))
    return Outcome.completed("Forecast sent.")


def slow(ctx: StepContext) -> Outcome:
    """Works until canceled (looking every SLOW_CHECK_SECONDS), completing after SLOW_SECONDS.
    Silent meanwhile: a delegating task's status keeps naming this task."""
    started = time.monotonic()
    while time.monotonic() - started < SLOW_SECONDS:
        if ctx.emitter.canceled():  # type: ignore[attr-defined]  # the worker's emitter has it
            raise FlowCanceled()
        time.sleep(SLOW_CHECK_SECONDS)
    return Outcome.completed("Done at last.")


def remote_agent(ctx: StepContext) -> Outcome:
    """`slow` for a message that starts with "[slow]"; for "[partial] CITY", the forecast's
    chunks for CITY, then `slow`; else `asks_then_answers`."""
    if ctx.text.startswith("[slow]"):
        return slow(ctx)
    if ctx.text.startswith("[partial]"):
        chunks = forecast_chunks(ctx.text.removeprefix("[partial]").strip())
        for index, chunk in enumerate(chunks):
            artifact_chunk(ctx, "forecast", chunk, index, len(chunks))
        return slow(ctx)
    return asks_then_answers(ctx)
