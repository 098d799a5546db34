"""How fast the local stack is, measured against an a2a-sdk in-memory server.

`local_figures()` starts the local stack in this process behind uvicorn (a real HTTP server in
a thread, as `scripts/dev` serves it; httpx's ASGI transport would buffer the SSE streams) and
measures, with httpx clients in a process of their own (as real clients: they take none of the
server process's CPU or GIL):

- local_tasks_per_second: non-blocking echo sends (`returnImmediately`) by `clients`
  concurrent clients, each polling `GET /tasks/{id}` until its task is COMPLETED before it
  sends the next; completed tasks / wall time, on an empty table.
- local_throughput_ratio_5000_stored: the same with `stored` tasks already in the table (the
  items of real tasks copied under new ids, straight into moto, owned by the same caller),
  divided by the figure without them: the median of PAIRS pairs of runs, the stored tasks put
  in before the second run of a pair and taken out after it (the first figure is the median of
  the pairs' first runs; "empty" then means without the 5,000: earlier runs' tasks stay).
- blocking_send_p50_ms: one client, blocking echo sends, median latency.
- stream_p95_ms_8_streams: 8 concurrent `POST /message:stream`, a flow emitting a chunk every
  100 ms stamped with its emit time (`metadata.emittedAt`); p95 of receive - emit.
- list_p50_ms_5000_stored / list_filtered_p50_ms_5000_stored: `GET /tasks?pageSize=50`, and
  the same filtered by a context none of the caller's tasks is in (its page examines the
  owner's whole index, up to the store's budget: the worst case of a filter), with the
  `stored` tasks in the table (first pair; stamped STORED_AGE before they were copied, as an
  owner's older tasks are); median latency.
- list_client_context_p50_ms_5000_stored: the same page of 50 filtered by a context a client
  named (3 tasks sent with it after the stored ones): the page reads the index from that
  context's first task on (its counter says when, less a minute for clocks), not to the end.
- list_since_p50_ms_5000_stored: the same page of 50 with `statusTimestampAfter` a time before
  every stored task (a client syncing everything since then: `totalSize` counts the smaller
  side of the time, the few entries before it).
- sdk_inmemory_tasks_per_second: the first figure's workload against an a2a-sdk server
  (DefaultRequestHandler, InMemoryTaskStore, an echo AgentExecutor, its REST routes) served
  by uvicorn in a thread of this process, its clients in their own process likewise, and
  ratio_vs_sdk_inmemory = local / sdk.

`file_figures()` measures files over HTTP the same way (scripts/bench's files phase):
- file_roundtrip_mb_per_s: one blocking SendMessage carrying a FILE_IN_BYTES file as `raw`,
  which the flow reads whole (sha256), and a FILE_OUT_BYTES artifact the flow streams to the
  content bucket (`ctx.artifact_file`), downloaded from the URL the task answers with; (bytes
  in + bytes out) / wall time of send to download end, in MB (10^6 bytes) a second, the
  median of the runs. The client checks both digests.
- file_baseline_s3_mb_per_s: the same bytes put and got straight through boto3 on the stack's
  moto S3 in this process (one PutObject, a multipart upload of PART_BYTES parts, both read
  back in 1 MiB pieces and hashed), each run paired with a round trip;
  file_roundtrip_ratio_to_s3: the median of the pairs' round trip / baseline.

Run: `PYTHONPATH=shared .venv/bin/python scripts/bench_local.py [--quick]` (scripts/bench
prints these figures too). `A2A_LOCAL_SPEEDUPS` picks the stack's speed-ups for an ablation
(`0`: none; `all,-planned_updates`: all but one; local/moto_speedups.py).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import logging
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
PRINCIPAL = "bench-local"
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}
TIMED_CHUNKS = 20
TIMED_INTERVAL_SECONDS = 0.1
PAIRS = 3  # runs without and with the stored tasks, alternated (the medians are the figures)
# The stored tasks' times, this long before the task they are copied from: an owner's older
# tasks, not all of the last minute.
STORED_AGE = timedelta(hours=1)
# An ISO 8601 UTC time as the store writes them (index sort keys, status JSON, createdAt).
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
# The file round trip: the largest file a 6,000,000-byte body carries as base64 `raw` is about
# 4.49 MB, so 4.4 MB in (a 5 MB file does not fit the deployed limit as raw); 50 MiB out.
FILE_IN_BYTES = 4_400_000
FILE_OUT_BYTES = 50 * 1024 * 1024
FILE_RUNS = 5
MEGABYTE = 1_000_000
# The baseline's multipart parts: store/s3.py's PART_BYTES.
PART_BYTES = 16 * 1024 * 1024
_BLOCK = 1 << 20


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-int(q * 1000) * len(ordered) // 1000))
    return ordered[rank - 1]


def _bench_flow() -> Any:
    """The echo flow, except that a message "timed" gets TIMED_CHUNKS artifact chunks
    TIMED_INTERVAL_SECONDS apart, each stamped with its emit time (`metadata.emittedAt`), and
    a message with files gets `_file_round_trip`."""
    from a2a_serverless.flows.echo import EchoFlow

    class BenchFlow(EchoFlow):
        input_modes = [*EchoFlow.input_modes, "image/*"]

        def step(self, ctx: Any) -> Any:
            if ctx.text == "timed":
                return _timed(ctx)
            if ctx.files:
                return _file_round_trip(ctx)
            return super().step(ctx)

    return BenchFlow()


def _timed(ctx: Any) -> Any:
    from a2a_serverless.flows import Outcome

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


def file_chunks(size: int) -> Iterator[bytes]:
    """`size` bytes, 1 MiB at a time: a random block rotated differently in each chunk, so a
    lost, repeated or reordered chunk changes the digest."""
    import random

    block = random.Random(37).randbytes(_BLOCK)
    index = 0
    while size > 0:
        offset = index * 7919 % _BLOCK
        chunk = (block[offset:] + block[:offset])[:size]
        yield chunk
        size -= len(chunk)
        index += 1


def digest_of(chunks: Iterable[bytes]) -> tuple[str, int]:
    """(sha256 hex, byte count) of the chunks."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _pieces(stream: Any) -> Iterator[bytes]:
    while piece := stream.read(_BLOCK):
        yield piece


def _file_round_trip(ctx: Any) -> Any:
    """Each file of the message read whole in 1 MiB pieces: an artifact "digest" of
    `{sha256} {size}` lines; then, when the text is a number, a file artifact ("file",
    out.bin) of that many bytes from `file_chunks`, streamed to the content bucket."""
    from a2a_serverless.flows import Outcome

    lines = []
    for file in ctx.files:
        with file.open() as stream:
            lines.append("{} {}".format(*digest_of(_pieces(stream))))
    ctx.artifact("\n".join(lines), artifact_id="digest", name="digest", last_chunk=True)
    if ctx.text.strip().isdigit():
        ctx.artifact_file(
            file_chunks(int(ctx.text)), filename="out.bin", artifact_id="file", name="file"
        )
    return Outcome.completed()


# The stack's flow (`Flow=bench_local:BENCH_FLOW`), built when the stack loads it.
def __getattr__(name: str) -> Any:
    if name == "BENCH_FLOW":
        return _bench_flow()
    raise AttributeError(name)


def _message(text: str, immediate: bool = False, context_id: str | None = None) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if context_id is not None:
        message["contextId"] = context_id
    return {"message": message, "configuration": {"returnImmediately": True} if immediate else {}}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serving(app: Any, port: int | None = None) -> Iterator[str]:
    """`app` served by uvicorn in a thread (on `port`, else a free one); its base URL."""
    import uvicorn

    port = port or _free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="bench-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def _local_stack(
    parameters: dict[str, str] | None = None, public: bool = False
) -> Iterator[tuple[Any, str]]:
    """The stack served over HTTP; `public`: the functions know its URL, so the content URLs
    they sign are served by it (`/_s3/`), as `scripts/dev` does."""
    from a2a_serverless.local.stack import LocalStack

    stack = LocalStack(parameters=parameters).start()
    try:
        port = _free_port()
        public_url = f"http://127.0.0.1:{port}" if public else None
        with _serving(stack.gateway(public_url=public_url), port) as url:
            yield stack, url
    finally:
        stack.stop()


# -- workloads --------------------------------------------------------------------------------


async def _non_blocking_rate(url: str, clients: int, tasks: int, headers: dict[str, str]) -> float:
    """Completed non-blocking tasks per second: `clients` loops of send + poll to the end."""
    import httpx

    async def client_loop(client: httpx.AsyncClient, remaining: list[int]) -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            response = await client.post("/message:send", json=_message("bench", True))
            response.raise_for_status()
            task_id = response.json()["task"]["id"]
            pause = 0.005
            while True:
                got = await client.get(f"/tasks/{task_id}")
                got.raise_for_status()
                state = got.json()["status"]["state"]
                if state in TERMINAL:
                    if state != "TASK_STATE_COMPLETED":
                        raise RuntimeError(f"task {task_id} ended {state}")
                    break
                await asyncio.sleep(pause)
                pause = min(0.05, pause * 1.5)

    limits = httpx.Limits(max_connections=clients + 2)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=60, limits=limits
    ) as client:
        # Warm-up: imports, first executions, connections, then a round of the measured loop
        # (its first GETs and non-blocking executions: the first measured run was slower).
        await asyncio.gather(*(client_loop_once(client) for _ in range(clients)))
        warm_up = [clients * 2]
        await asyncio.gather(*(client_loop(client, warm_up) for _ in range(clients)))
        remaining = [tasks]
        start = time.perf_counter()
        await asyncio.gather(*(client_loop(client, remaining) for _ in range(clients)))
        return tasks / (time.perf_counter() - start)


async def client_loop_once(client: Any) -> None:
    response = await client.post("/message:send", json=_message("warm up"))
    response.raise_for_status()


async def _blocking_p50_ms(url: str, samples: int, headers: dict[str, str]) -> float:
    import httpx

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        await client_loop_once(client)
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            response = await client.post("/message:send", json=_message("hello"))
            times.append(time.perf_counter() - start)
            response.raise_for_status()
            if response.json()["task"]["status"]["state"] != "TASK_STATE_COMPLETED":
                raise RuntimeError(f"blocking send did not complete: {response.text[:300]}")
        return statistics.median(times) * 1000


async def _stream_p95_ms(url: str, streams: int, headers: dict[str, str]) -> float:
    import httpx

    async def one(client: httpx.AsyncClient) -> list[float]:
        lags: list[float] = []
        async with client.stream("POST", "/message:stream", json=_message("timed")) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                received = time.time()
                update = json.loads(line[5:]).get("artifactUpdate")
                if update:
                    lags.append(received - update["artifact"]["metadata"]["emittedAt"])
        if len(lags) != TIMED_CHUNKS:
            raise RuntimeError(f"stream carried {len(lags)} of {TIMED_CHUNKS} chunks")
        return lags

    limits = httpx.Limits(max_connections=streams + 2)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=60, limits=limits
    ) as client:
        await one(client)  # warm-up
        results = await asyncio.gather(*(one(client) for _ in range(streams)))
    return percentile([lag for lags in results for lag in lags], 0.95) * 1000


async def _list_p50_ms(
    url: str, samples: int, headers: dict[str, str], query: dict[str, Any]
) -> float:
    import httpx

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            response = await client.get("/tasks", params=query)
            times.append(time.perf_counter() - start)
            response.raise_for_status()
        return statistics.median(times) * 1000


def file_in(size: int) -> bytes:
    """The file sent in (random bytes: nothing compresses them on the way)."""
    import random

    return random.Random(7).randbytes(size)


async def _file_round_trip_seconds(
    url: str, headers: dict[str, str], in_bytes: int, out_bytes: int
) -> float:
    """One file round trip (see `file_figures`), both digests checked: its wall time."""
    import httpx

    image = file_in(in_bytes)
    expected_in = "{} {}".format(*digest_of([image]))
    expected_out = digest_of(file_chunks(out_bytes))
    photo = {"raw": base64.b64encode(image).decode(), "filename": "photo.png"}
    photo["mediaType"] = "image/png"
    message = _message(str(out_bytes))
    message["message"]["parts"].append(photo)
    body = json.dumps(message).encode()
    del image, photo, message
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as client:
        start = time.perf_counter()
        response = await client.post("/message:send", content=body)
        response.raise_for_status()
        task = response.json()["task"]
        parts = {a["artifactId"]: a["parts"][0] for a in task.get("artifacts", [])}
        if task["status"]["state"] != "TASK_STATE_COMPLETED" or set(parts) != {"digest", "file"}:
            raise RuntimeError(f"the file task did not complete: {response.text[:500]}")
        if parts["digest"]["text"] != expected_in:
            raise RuntimeError(f"the flow read {parts['digest']['text']}, not {expected_in}")
        digest, size = hashlib.sha256(), 0
        async with client.stream("GET", parts["file"]["url"]) as download:
            download.raise_for_status()
            async for chunk in download.aiter_bytes(_BLOCK):
                digest.update(chunk)
                size += len(chunk)
        elapsed = time.perf_counter() - start
    if (digest.hexdigest(), size) != expected_out:
        raise RuntimeError(f"the artifact downloaded is not the flow's ({size} bytes)")
    return elapsed


WORKLOADS: dict[str, Callable[..., Coroutine[Any, Any, float]]] = {
    "non_blocking": _non_blocking_rate,
    "blocking": _blocking_p50_ms,
    "streams": _stream_p95_ms,
    "list": _list_p50_ms,
    "files": _file_round_trip_seconds,
}


def run_clients(workload: str, url: str, **arguments: Any) -> float:
    """One workload's figure, its clients run in a process of their own (this file, run with
    `--client`): as real clients, they take none of the server's CPU or GIL, and the server
    process keeps both cores' worth of its own. Both sides of the a2a-sdk ratio are measured
    this way."""
    request = json.dumps({"workload": workload, "url": url, "arguments": arguments})
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--client", request],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench client {workload} failed: {done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["result"])


def _client_main(request: str) -> int:
    """The client process: run one workload against a URL, print its figure as JSON."""
    asked = json.loads(request)
    workload = WORKLOADS[asked["workload"]]
    result = asyncio.run(workload(asked["url"], **asked["arguments"]))
    print(json.dumps({"result": result}), flush=True)
    return 0


# -- stored tasks -----------------------------------------------------------------------------


def _send(
    url: str, headers: dict[str, str], text: str, context_id: str | None = None
) -> dict[str, Any]:
    """One blocking echo task (its Task), in `context_id` when given."""
    import httpx

    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        response = client.post("/message:send", json=_message(text, context_id=context_id))
        response.raise_for_status()
        return dict(response.json()["task"])


def preload(stack: Any, count: int, principal_headers: dict[str, str], url: str) -> list[Any]:
    """Put `count` tasks in the table: the items of one real echo task, copied under new task
    ids straight into moto (no stream records: the webhook sender has nothing to do with
    them). Items whose key does not name the task (the caller's counters) are not copied.
    Returns the keys written, for `unload`."""

    from a2a_serverless.local import patching

    task_id = _send(url, principal_headers, "a task to copy")["id"]
    table = _table(stack)
    with patching.DYNAMODB_LOCK:
        originals = [
            item.to_json()["Attributes"]
            for item in table.all_items()
            if _key_names(table, item, task_id)
        ]
    if not originals:
        raise RuntimeError("found no item of the task to copy")
    keys = []
    for start in range(0, count, 200):
        with patching.DYNAMODB_LOCK, _no_stream_records(table):
            for _ in range(min(200, count - start)):
                new_id = str(uuid.uuid4())
                for attributes in originals:
                    item = table.put_item(_copied(attributes, task_id, new_id))
                    keys.append((item.hash_key, item.range_key))
    return keys


def unload(stack: Any, keys: list[Any]) -> None:
    """Take `preload`'s items out of the table again (no stream records either)."""
    from a2a_serverless.local import patching

    table = _table(stack)
    for start in range(0, len(keys), 1000):
        with patching.DYNAMODB_LOCK, _no_stream_records(table):
            for hash_key, range_key in keys[start : start + 1000]:
                table.delete_item(hash_key, range_key)


def _table(stack: Any) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    from a2a_serverless.local.resources import ACCOUNT, REGION

    return dynamodb_backends[ACCOUNT][REGION].get_table(stack.env["TABLE_NAME"])


@contextmanager
def _no_stream_records(table: Any) -> Iterator[None]:
    shard, table.stream_shard = table.stream_shard, None
    try:
        yield
    finally:
        table.stream_shard = shard


def _key_names(table: Any, item: Any, task_id: str) -> bool:
    keys = [item.hash_key.value] + ([item.range_key.value] if item.range_key else [])
    return any(task_id in str(value) for value in keys)


def _aged_time(match: re.Match[str]) -> str:
    """A time `ISO_TIME` found, STORED_AGE earlier."""
    from a2a_serverless.models import format_timestamp

    return format_timestamp(datetime.fromisoformat(match.group()) - STORED_AGE)


def _copied(value: Any, old: str, new: str) -> Any:
    """An item's attribute values with task id `old` renamed `new` and every time in their
    strings STORED_AGE earlier."""
    if isinstance(value, str):
        return ISO_TIME.sub(_aged_time, value.replace(old, new))
    if isinstance(value, dict):
        return {k: _copied(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v, old, new) for v in value]
    return value


# -- the a2a-sdk in-memory server ------------------------------------------------------------


def sdk_echo_executor() -> Any:
    """An a2a-sdk AgentExecutor that echoes the text as one artifact (the samples' shape)."""
    from a2a.helpers import new_task
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.tasks import TaskUpdater
    from a2a.types import Part, TaskState

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task_id, context_id = context.task_id or "", context.context_id or ""
            if context.current_task is None:
                history = [context.message] if context.message is not None else []
                await event_queue.enqueue_event(
                    new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
                )
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.start_work()
            await updater.add_artifact([Part(text="Echo: " + context.get_user_input())])
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
            await updater.cancel()

    return Echo()


def sdk_app() -> Any:
    """An a2a-sdk server: DefaultRequestHandler over InMemoryTaskStore, an executor that
    echoes the text as one artifact, its REST routes on Starlette."""
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_rest_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from starlette.applications import Starlette

    card = AgentCard(
        name="sdk echo",
        description="a2a-sdk in-memory echo (bench)",
        version="1.0",
        supported_interfaces=[
            AgentInterface(
                url="http://127.0.0.1/", protocol_binding="HTTP+JSON", protocol_version="1.0"
            )
        ],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["echo"])],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandler(
        agent_executor=sdk_echo_executor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=[*create_agent_card_routes(card), *create_rest_routes(handler)])


# -- all figures ------------------------------------------------------------------------------

# Timed, not counted: the functions' INFO lines and metric blobs would bury the report (and
# cost CPU a deployed function spends on CloudWatch, not on this machine's one process).
QUIET = {"POWERTOOLS_METRICS_DISABLED": "true", "LOG_LEVEL": "WARNING"}


@contextmanager
def functions_quiet() -> Iterator[None]:
    """The stack's functions log warnings only and emit no metrics, for the block's length."""
    saved = {name: os.environ.get(name) for name in QUIET}
    os.environ.update(QUIET)
    package_logger = logging.getLogger("a2a_serverless")
    level = package_logger.level
    package_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        package_logger.setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def local_figures(clients: int = 8, stored: int = 5000, quick: bool = False) -> dict[str, float]:
    """The local stack's speed figures (see the module's docstring); `quick`: fewer tasks."""
    # Enough tasks that a run lasts several seconds: at ~96 tasks (4 s) the 5,000-stored ratio
    # swung 0.74-1.62 from run to run for the same code.
    tasks = clients * (4 if quick else 25)
    headers = {**HEADERS, "X-Local-Principal": PRINCIPAL}
    figures: dict[str, float] = {}

    def run(workload: str, url: str, **arguments: Any) -> float:
        started = time.perf_counter()
        result = run_clients(workload, url, **arguments)
        print(
            f"bench_local: {workload} {result:.2f} in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        return result

    module = "bench_local" if __name__ == "__main__" else __name__
    sys.modules.setdefault(module, sys.modules[__name__])  # the flow worker imports it by name
    with _local_stack({"Flow": f"{module}:BENCH_FLOW"}) as (stack, url):
        figures["stream_p95_ms_8_streams"] = run("streams", url, streams=8, headers=headers)
        figures["blocking_send_p50_ms"] = run(
            "blocking", url, samples=10 if quick else 30, headers=headers
        )
        # Pairs of runs, without and with the stored tasks (preloaded, then taken out again):
        # one pair swung 0.74-1.62 between runs of the same code on this shared machine.
        empties, ratios = [], []
        for pair in range(1 if quick else PAIRS):
            empty = run("non_blocking", url, clients=clients, tasks=tasks, headers=headers)
            before_stored = datetime.now(UTC) - STORED_AGE - timedelta(minutes=1)
            keys = preload(stack, stored, headers, url)
            full = run("non_blocking", url, clients=clients, tasks=tasks, headers=headers)
            if pair == 0:
                conversation = f"bench-conversation-{uuid.uuid4()}"  # a context a client named
                for turn in range(3):
                    _send(url, headers, f"in a conversation {turn}", context_id=conversation)
                figures["list_p50_ms_5000_stored"] = run(
                    "list", url, samples=5, headers=headers, query={"pageSize": 50}
                )
                figures["list_filtered_p50_ms_5000_stored"] = run(
                    "list",
                    url,
                    samples=3,
                    headers=headers,
                    query={"pageSize": 50, "contextId": f"bench-unused-{uuid.uuid4()}"},
                )
                figures["list_client_context_p50_ms_5000_stored"] = run(
                    "list",
                    url,
                    samples=5,
                    headers=headers,
                    query={"pageSize": 50, "contextId": conversation},
                )
                figures["list_since_p50_ms_5000_stored"] = run(
                    "list",
                    url,
                    samples=5,
                    headers=headers,
                    query={
                        "pageSize": 50,
                        "statusTimestampAfter": before_stored.isoformat().replace("+00:00", "Z"),
                    },
                )
            unload(stack, keys)
            empties.append(empty)
            ratios.append(full / empty)
    with _serving(sdk_app()) as url:
        sdk = run("non_blocking", url, clients=clients, tasks=tasks * 4, headers=HEADERS)
    figures["local_tasks_per_second"] = statistics.median(empties)
    figures["local_throughput_ratio_5000_stored"] = statistics.median(ratios)
    figures["sdk_inmemory_tasks_per_second"] = sdk
    figures["ratio_vs_sdk_inmemory"] = figures["local_tasks_per_second"] / sdk
    return {k: round(v, 3) for k, v in figures.items()}


def _regrouped(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """The chunks' bytes in pieces of `size` (the last one shorter)."""
    pieces: list[bytes] = []
    held = 0
    for chunk in chunks:
        pieces.append(chunk)
        held += len(chunk)
        if held >= size:
            joined = b"".join(pieces)
            yield joined[:size]
            rest = joined[size:]
            pieces, held = ([rest] if rest else []), len(rest)
    if pieces:
        yield b"".join(pieces)


def s3_baseline_seconds(bucket: str, in_bytes: int, out_bytes: int) -> float:
    """The file round trip's bytes straight through boto3 on moto S3 in this process: the
    file put (PutObject) and got, the artifact put as a multipart upload of PART_BYTES parts
    (generated meanwhile, as the flow does) and got; each get read in 1 MiB pieces and hashed.
    Its wall time; the objects are deleted after."""
    import boto3

    from a2a_serverless.local.resources import REGION

    s3 = boto3.session.Session(region_name=REGION).client("s3")
    image = file_in(in_bytes)
    prefix = f"bench/{uuid.uuid4()}"
    start = time.perf_counter()
    s3.put_object(Bucket=bucket, Key=f"{prefix}/in", Body=image)
    got_in = digest_of(_pieces(s3.get_object(Bucket=bucket, Key=f"{prefix}/in")["Body"]))
    upload = s3.create_multipart_upload(Bucket=bucket, Key=f"{prefix}/out")["UploadId"]
    parts: list[dict[str, Any]] = []
    for number, body in enumerate(_regrouped(file_chunks(out_bytes), PART_BYTES), start=1):
        answer = s3.upload_part(
            Bucket=bucket, Key=f"{prefix}/out", UploadId=upload, PartNumber=number, Body=body
        )
        parts.append({"ETag": answer["ETag"], "PartNumber": number})
    s3.complete_multipart_upload(
        Bucket=bucket, Key=f"{prefix}/out", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    got_out = digest_of(_pieces(s3.get_object(Bucket=bucket, Key=f"{prefix}/out")["Body"]))
    elapsed = time.perf_counter() - start
    for name in ("in", "out"):
        s3.delete_object(Bucket=bucket, Key=f"{prefix}/{name}")
    if got_in != digest_of([image]) or got_out != digest_of(file_chunks(out_bytes)):
        raise RuntimeError("the baseline read back other bytes than it put")
    return elapsed


def file_figures(
    runs: int = FILE_RUNS, in_bytes: int = FILE_IN_BYTES, out_bytes: int = FILE_OUT_BYTES
) -> dict[str, float]:
    """The file figures (see the module's docstring): `runs` round trips, each paired with a
    baseline run just before it, after one unmeasured round trip."""
    headers = {**HEADERS, "X-Local-Principal": PRINCIPAL}
    module = "bench_local" if __name__ == "__main__" else __name__
    sys.modules.setdefault(module, sys.modules[__name__])  # the flow worker imports it by name
    sizes = {"in_bytes": in_bytes, "out_bytes": out_bytes}
    trips, baselines = [], []
    with _local_stack({"Flow": f"{module}:BENCH_FLOW"}, public=True) as (stack, url):
        bucket = stack.env["CONTENT_BUCKET"]
        run_clients("files", url, headers=headers, **sizes)  # warm-up
        for _ in range(runs):
            baselines.append(s3_baseline_seconds(bucket, in_bytes, out_bytes))
            trips.append(run_clients("files", url, headers=headers, **sizes))
            print(
                f"bench_local: files {trips[-1]:.2f} s, S3 baseline {baselines[-1]:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    megabytes = (in_bytes + out_bytes) / MEGABYTE
    return {
        "file_roundtrip_mb_per_s": round(megabytes / statistics.median(trips), 2),
        "file_baseline_s3_mb_per_s": round(megabytes / statistics.median(baselines), 2),
        "file_roundtrip_ratio_to_s3": round(
            statistics.median(b / t for b, t in zip(baselines, trips, strict=True)), 3
        ),
        "file_roundtrip_seconds": round(statistics.median(trips), 3),
        "file_runs": runs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--stored", type=int, default=5000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--files", action="store_true", help="the file figures only")
    parser.add_argument("--client", help=argparse.SUPPRESS)  # the client process (run_clients)
    args = parser.parse_args()
    if args.client:
        return _client_main(args.client)
    with functions_quiet():  # as scripts/bench runs it
        if args.files:
            figures = file_figures(runs=2 if args.quick else FILE_RUNS)
        else:
            figures = local_figures(args.clients, args.stored, args.quick)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
