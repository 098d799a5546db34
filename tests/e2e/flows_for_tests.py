"""Flows served only by e2e test servers (`scripts/dev --flow tests.e2e.flows_for_tests:timed`).

Imported by the dev server's flow worker, so it depends on the project's flow API (and the
plain builders of tests/helpers.py) only.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Iterator

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
