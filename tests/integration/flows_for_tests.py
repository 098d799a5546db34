"""Flows used by the integration suite (selected with the template's `Flow` parameter)."""

from __future__ import annotations

import re
import threading
import time

from a2a_serverless.flows import Outcome, StepContext
from a2a_serverless.models import Part
from tests.helpers import artifact_chunk

# About 1 MB of UTF-8 text: mixed-width characters, quotes and newlines, ending in a long run
# of 4-byte characters (the worst case for a chunker that counts characters).
_LINE = 'The quick brown fox — «jumps» over the "lazy" dog; naïve café, 東京.\n'
BIG_TEXT = _LINE * (640_000 // len(_LINE.encode())) + "🦊" * 90_000
assert 990_000 < len(BIG_TEXT.encode()) < 1_010_000

# A structured (data) part of ~420 KB of UTF-8 but only ~140 K characters.
WIDE_DATA = {"text": "東" * 140_000}


def big(ctx: StepContext) -> Outcome:
    """One 1 MB text artifact in a single emit; `[data]` emits WIDE_DATA as a data part."""
    if "[data]" in ctx.text:
        ctx.artifact([Part(data=WIDE_DATA)], artifact_id="wide", name="wide", last_chunk=True)
    else:
        ctx.artifact(BIG_TEXT, artifact_id="big", name="big", last_chunk=True)
    return Outcome.completed()


class Gates:
    """The test holds the gated flow at fixed points to look at the table in between."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.emit = threading.Event()
        self.emitted = threading.Event()
        self.finish = threading.Event()


GATES = Gates()
GATED_CHUNKS = 5


def gated(ctx: StepContext) -> Outcome:
    """started -> (wait emit) -> GATED_CHUNKS artifact chunks -> emitted -> (wait finish)."""
    GATES.started.set()
    GATES.emit.wait(20)
    for index in range(GATED_CHUNKS):
        artifact_chunk(ctx, "out", f"chunk {index}; ", index, GATED_CHUNKS)
    GATES.emitted.set()
    GATES.finish.wait(20)
    return Outcome.completed("gated flow done")


class Progress:
    """How far the `numbered` flow has got (the test attaches subscribers at chosen points)."""

    def __init__(self) -> None:
        self.emitted = 0


PROGRESS = Progress()
NUMBERED_CHUNKS = 200
_COUNT = re.compile(r"\[n=(\d+)\]")


def numbered(ctx: StepContext) -> Outcome:
    """NUMBERED_CHUNKS (or `[n=N]`) chunks "0;", "1;", ... of one artifact, ~10 ms apart, then
    completed; `[input]` ends the turn input-required instead."""
    found = _COUNT.search(ctx.text)
    count = int(found.group(1)) if found else NUMBERED_CHUNKS
    progress = PROGRESS
    for index in range(count):
        artifact_chunk(ctx, "numbers", f"{index};", index, count)
        progress.emitted = index + 1
        time.sleep(0.01)
    if "[input]" in ctx.text:
        return Outcome.input_required("Which number comes next?")
    return Outcome.completed("all numbers sent")


class Rerun:
    """Test controls of the `two_steps` flow: `hold` parks the first run that enters the flow
    (the stack's own execution) until `release`, and with it every later run of step 1 in an
    execution (the one a run of step 0 starts: one execution per step), so that only the
    test's own runs (in its thread) go on; `crash_at` = (step, position) raises before that
    emit, once (a step that dies half-way)."""

    def __init__(self) -> None:
        self.hold = False
        self.held = threading.Event()
        self.park_next_steps = False
        self.release = threading.Event()
        self.crash_at: tuple[int, int] | None = None


RERUN = Rerun()
STEP_CHUNKS = (3, 2)  # artifact chunks of step 0 and step 1


def _emit_point(ctx: StepContext, position: int) -> None:
    control = RERUN
    if control.crash_at == (ctx.step, position):
        control.crash_at = None
        raise RuntimeError("died half-way")


def two_steps(ctx: StepContext) -> Outcome:
    """Step 0: a status message and STEP_CHUNKS[0] chunks, then the next step with state
    {"seen": n}; step 1: STEP_CHUNKS[1] chunks of a second artifact, then completed."""
    control = RERUN
    if control.hold:
        control.hold = False
        control.held.set()
        control.park_next_steps = True
        control.release.wait(30)
    elif (
        control.park_next_steps
        and ctx.step > 0
        and threading.current_thread() is not threading.main_thread()
    ):
        control.release.wait(30)  # step 1's execution, started by the test's run of step 0
    position = 0
    if ctx.step == 0:
        _emit_point(ctx, position)
        ctx.status(f"reading {ctx.text}")
        position += 1
    name = f"part{ctx.step}"
    count = STEP_CHUNKS[ctx.step]
    for index in range(count):
        _emit_point(ctx, position)
        artifact_chunk(ctx, name, f"{name}:{index}:{ctx.state.get('seen', 0)};", index, count)
        position += 1
    if ctx.step == 0:
        ctx.state["seen"] = ctx.state.get("seen", 0) + 1
        return Outcome.next_step()
    return Outcome.completed(f"done after {ctx.state.get('seen')}")


def metadata_echo(ctx: StepContext) -> Outcome:
    """Turn 1 asks for input; every turn reports the request metadata it saw (and the task's)."""
    import json

    seen = {"request": ctx.request_metadata, "task": ctx.metadata}
    ctx.artifact(json.dumps(seen, sort_keys=True), artifact_id=f"turn-{ctx.turn}")
    if ctx.turn == 1:
        return Outcome.input_required("more?")
    return Outcome.completed()


# What `reads_s3` reads: an object the test puts in moto's S3 before it sends.
FLOW_BUCKET = "flow-documents"
FLOW_KEY = "greeting.txt"


def reads_s3(ctx: StepContext) -> Outcome:
    """A flow whose step calls AWS itself (boto3, the default session, as a user's flow would):
    GetObject of FLOW_BUCKET/FLOW_KEY, answered with the object's text. Its permission is
    FlowPolicy's (tests/integration/test_flow_permissions.py)."""
    import boto3

    body = boto3.client("s3").get_object(Bucket=FLOW_BUCKET, Key=FLOW_KEY)["Body"].read()
    return Outcome.completed(body.decode())
