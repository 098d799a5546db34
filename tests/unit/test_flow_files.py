"""The flow API for files (flows/base.py): `ctx.open` / `ctx.read` of every part kind, url parts
fetched through the egress guard with a size cap (push/delivery.py `open_url` over an httpx
MockTransport and a fake resolver), `ctx.files`, `ctx.artifact_file` streamed to the content
store, and the worker giving the step its message's stored text and its stored state back."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import socket
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import IO, Any

import httpx
import pytest

from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.flows import (
    ContentTooLarge,
    NoContentStore,
    Outcome,
    StepContext,
    UrlRefused,
)
from a2a_serverless.flows.base import ArtifactChunk, load_flow
from a2a_serverless.flows.emitter import LogEmitter
from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.models import Message, Part, Role, TaskState
from a2a_serverless.push.delivery import open_url
from a2a_serverless.settings import Settings
from a2a_serverless.store import TooLarge
from a2a_serverless.store.content import IterableReader, reference, stored_name
from a2a_serverless.store.s3 import PART_BYTES
from tests.fakes import InMemoryContentStore, InMemoryTaskStore
from tests.helpers import RecordingEmitter, add_submitted_task

PUBLIC = "93.184.216.34"
FILE = bytes(range(256)) * 64  # 16 KiB, every byte value


def resolver(address: str) -> Callable[..., list[Any]]:
    def resolve(host: str, port: int, *args: object, **kwargs: object) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    return resolve


class Server:
    """What the url parts' server answers (an httpx MockTransport), and what it was asked."""

    def __init__(self, body: bytes = FILE, status: int = 200, declare: bool = True) -> None:
        self.body, self.status, self.declare = body, status, declare
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.declare:  # streamed in pieces, no Content-Length
            pieces = (self.body[i : i + 4096] for i in range(0, len(self.body), 4096))
            return httpx.Response(self.status, content=pieces)
        return httpx.Response(self.status, content=self.body)

    def opener(self, address: str = PUBLIC) -> Callable[[str], tuple[IO[bytes], int | None]]:
        transport = httpx.MockTransport(self.handle)

        def opened(url: str) -> tuple[IO[bytes], int | None]:
            return open_url(url, EgressPolicy(), resolve=resolver(address), transport=transport)

        return opened


def context(
    *parts: Part,
    content: InMemoryContentStore | None = None,
    server: Server | None = None,
    **fields: Any,
) -> StepContext:
    message = Message(message_id="m-1", role=Role.USER, parts=list(parts) or [Part(text="go")])
    return StepContext(
        task_id="t-1",
        context_id="c-1",
        turn=fields.pop("turn", 1),
        step=fields.pop("step", 0),
        message=message,
        history=[message],
        state={},
        emitter=RecordingEmitter(),
        content=content,
        open_url=server.opener() if server else None,
        **fields,
    )


def stored(content: InMemoryContentStore, name: str, body: bytes, **part: Any) -> Part:
    content.put("t-1", name, body, "application/octet-stream")
    return Part(url=reference(name), **part)


def read_in_pieces(stream: IO[bytes], size: int = 1000) -> bytes:
    pieces = []
    with stream:
        while piece := stream.read(size):
            pieces.append(piece)
    return b"".join(pieces)


# -- open and read -------------------------------------------------------------------------


def test_every_part_kind_opens_as_its_bytes() -> None:
    content = InMemoryContentStore()
    raw = Part(raw=base64.b64encode(FILE).decode(), filename="a.bin")
    urlsafe = Part(raw=base64.urlsafe_b64encode(FILE).decode().rstrip("="))
    ctx = context(content=content, server=Server())
    assert read_in_pieces(ctx.open(raw)) == FILE
    assert ctx.read(urlsafe) == FILE
    assert ctx.read(stored(content, "raw.abc", FILE)) == FILE
    assert ctx.read(stored(content, "text.abc", "héllo".encode())) == "héllo".encode()
    assert ctx.read(Part(text="héllo")) == "héllo".encode()
    assert json.loads(ctx.read(Part(data={"a": [1, "é"]}))) == {"a": [1, "é"]}
    assert read_in_pieces(ctx.open(Part(url="https://files.example/a.bin"))) == FILE


def test_a_url_part_is_fetched_at_its_vetted_address() -> None:
    server = Server(declare=False)
    ctx = context(server=server)
    assert ctx.read(Part(url="https://files.example/x/a.bin?v=1")) == FILE
    (request,) = server.requests
    assert request.method == "GET"
    assert request.url.host == PUBLIC  # the pinned address: no second lookup
    assert request.url.raw_path == b"/x/a.bin?v=1"
    assert request.headers["host"] == "files.example"
    assert request.extensions["sni_hostname"] == "files.example"


def test_a_url_part_to_a_private_address_is_refused_unfetched() -> None:
    server = Server()
    transport = httpx.MockTransport(server.handle)
    ctx = context()
    ctx.open_url = lambda url: open_url(
        url, EgressPolicy(), resolve=resolver("10.0.0.7"), transport=transport
    )
    with pytest.raises(UrlRefused, match="private address") as refused:
        ctx.open(Part(url="https://intranet.example/secret"))
    assert refused.value.reason == "private"
    with pytest.raises(UrlRefused, match="metadata") as refused:
        ctx.open(Part(url="https://169.254.169.254/latest/meta-data/"))
    with pytest.raises(UrlRefused, match="https"):
        ctx.open(Part(url="http://files.example/a.bin"))
    assert server.requests == []


def test_a_url_part_past_the_cap_stops_with_content_too_large() -> None:
    big = b"x" * 10_000
    declared = context(server=Server(big), fetch_max_bytes=9_999)
    with pytest.raises(ContentTooLarge, match="10000 bytes, more than 9999"):
        declared.open(Part(url="https://files.example/big"))  # refused before any read
    streamed = context(server=Server(big, declare=False), fetch_max_bytes=9_999)
    with pytest.raises(ContentTooLarge), streamed.open(Part(url="https://files.example/big")) as f:
        read_in_pieces(f)
    # Exactly at the cap is fine; a call's own cap wins over the default.
    assert (
        len(
            context(server=Server(big), fetch_max_bytes=10_000).read(Part(url="https://a.example/"))
        )
        == 10_000
    )
    capped = context(server=Server(big, declare=False))
    with pytest.raises(ContentTooLarge):
        capped.read(Part(url="https://files.example/big"), max_bytes=100)


def test_any_part_may_be_read_under_a_cap() -> None:
    content = InMemoryContentStore()
    ctx = context(content=content)
    with pytest.raises(ContentTooLarge):
        ctx.read(stored(content, "raw.abc", FILE), max_bytes=len(FILE) - 1)
    assert ctx.read(stored(content, "raw.abc", FILE), max_bytes=len(FILE)) == FILE


def test_a_failed_fetch_is_an_os_error_without_the_url() -> None:
    ctx = context(server=Server(b"gone", status=404))
    with pytest.raises(OSError, match="HTTP 404") as failed:
        ctx.read(Part(url="https://files.example/a.bin?token=secret"))
    assert "secret" not in str(failed.value)
    redirected = context(server=Server(b"", status=302))
    with pytest.raises(OSError, match="HTTP 302"):
        redirected.read(Part(url="https://files.example/a.bin"))


def test_stored_content_needs_a_content_store() -> None:
    with pytest.raises(NoContentStore, match="no content bucket"):
        context().read(Part(url=reference("raw.abc")))


# -- the message's files -----------------------------------------------------------------


def test_files_are_the_messages_file_parts() -> None:
    content = InMemoryContentStore()
    parts = [
        Part(text="look at these"),
        Part(raw=base64.b64encode(b"inline").decode(), filename="a.txt", media_type="text/plain"),
        stored(content, "raw.big", FILE, filename="b.bin", media_type="image/png"),
        Part(url="https://files.example/c.pdf", filename="c.pdf"),
        Part(data={"not": "a file"}),
    ]
    ctx = context(*parts, content=content, server=Server(b"%PDF"))
    files = ctx.files
    assert [(f.filename, f.media_type) for f in files] == [
        ("a.txt", "text/plain"),
        ("b.bin", "image/png"),
        ("c.pdf", None),
    ]
    assert [f.read() for f in files] == [b"inline", FILE, b"%PDF"]
    with files[1].open() as stream:
        assert stream.read(3) == FILE[:3]


# -- files out ------------------------------------------------------------------------------


def test_artifact_file_stores_bytes_files_and_chunks_and_emits_references() -> None:
    content = InMemoryContentStore()
    ctx = context(content=content, turn=2, step=1)
    sources: list[Any] = [FILE, io.BytesIO(FILE), iter([FILE[:100], FILE[100:]])]
    emitted = [
        ctx.artifact_file(source, filename="r.pdf", artifact_id=f"a{i}")
        for i, source in enumerate(sources)
    ]
    chunks = ctx.emitter.chunks  # type: ignore[attr-defined]
    assert [c.parts for c in chunks] == [[p] for p in emitted]
    assert [(c.artifact_id, c.last_chunk) for c in chunks] == [
        ("a0", True),
        ("a1", True),
        ("a2", True),
    ]
    names = [stored_name(p) for p in emitted]
    assert names == ["raw.out-2-1-0", "raw.out-2-1-1", "raw.out-2-1-2"]
    for name, part in zip(names, emitted, strict=True):
        assert content.objects[("t-1", str(name))] == FILE
        assert content.media_types[("t-1", str(name))] == "application/pdf"
        assert (part.filename, part.media_type) == ("r.pdf", "application/pdf")
    # A re-run of the step writes the same objects again (no stray copies).
    again = context(content=content, turn=2, step=1)
    assert stored_name(again.artifact_file(b"x", media_type="text/csv")) == "raw.out-2-1-0"
    assert content.media_types[("t-1", "raw.out-2-1-0")] == "text/csv"
    assert len(content.objects) == 3


def test_artifact_file_without_a_content_store_says_so() -> None:
    ctx = context()
    with pytest.raises(NoContentStore, match="no content bucket"):
        ctx.artifact_file(b"report")
    assert ctx.emitter.chunks == []  # type: ignore[attr-defined]


def test_a_large_file_is_uploaded_in_parts_never_whole_in_memory() -> None:
    size = 5 * PART_BYTES + 123
    piece = bytes(range(256)) * 4096  # 1 MiB, yielded again and again: no copy is made

    def generated() -> Iterator[bytes]:
        left = size
        while left:
            yield piece[: min(left, len(piece))]
            left -= min(left, len(piece))

    content = InMemoryContentStore(keep=False)
    ctx = context(content=content)
    tracemalloc.start()
    try:
        part = ctx.artifact_file(generated(), filename="big.bin")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    key = ("t-1", str(stored_name(part)))
    assert (content.sizes[key], content.parts[key]) == (size, 6)
    expected = hashlib.sha256(b"".join(generated())).hexdigest()
    assert content.digests[key] == expected
    assert peak < size / 2, peak  # a few parts' worth at most, never the file


def test_chunks_are_read_in_time_linear_in_their_size() -> None:
    def seconds(chunk: int) -> float:
        reader = IterableReader(bytes(chunk) for _ in range(PART_BYTES // chunk))
        started = time.perf_counter()
        assert len(reader.read(PART_BYTES)) == PART_BYTES
        return time.perf_counter() - started

    one_chunk = min(seconds(PART_BYTES) for _ in range(3))
    small_chunks = min(seconds(16 * 1024) for _ in range(3))
    # Joined once: adding 1,024 chunks to a growing buffer one by one copied ~500 times more.
    assert small_chunks < 20 * one_chunk + 0.01, (small_chunks, one_chunk)


def test_iterable_reader_reads_across_chunks() -> None:
    reader = IterableReader([b"abc", b"de", b"", b"fghij"])
    assert [reader.read(4), reader.read(0), reader.read(2), reader.read(), reader.read(3)] == [
        b"abcd",
        b"",
        b"ef",
        b"ghij",
        b"",
    ]


# -- the worker -----------------------------------------------------------------------------

SEEN: dict[str, Any] = {}


def sees(ctx: StepContext) -> Outcome:
    SEEN.update(text=ctx.text, history=ctx.history, state=dict(ctx.state), files=ctx.files)
    SEEN["file"] = ctx.files[0].read()
    return Outcome.completed()


def test_the_worker_restores_the_messages_text_and_the_stored_state() -> None:
    content = InMemoryContentStore()
    text = "a long message " * 5_000
    content.put("t-1", "text.long", text.encode(), "text/plain")
    content.put("t-1", "state.s", json.dumps({"turns": 41}).encode(), "application/json")
    message = Message(
        message_id="m-1",
        role=Role.USER,
        parts=[
            Part(text="Read: "),
            Part(url=reference("text.long")),
            stored(content, "raw.photo", FILE, filename="p.png"),
        ],
    )
    store = InMemoryTaskStore()
    add_submitted_task(store, message)
    store.tasks["t-1"].record.flow_state_ref = "state.s"
    content.opened.clear()
    worker = FlowWorker(store, load_flow(f"{__name__}:sees"), content=content)
    worker.handle({"taskId": "t-1", "turn": 1})
    assert SEEN["text"] == "Read: " + text
    assert SEEN["state"] == {"turns": 41}
    assert SEEN["file"] == FILE
    # The history stays as stored: references, read only when asked for.
    assert SEEN["history"][-1].parts[1].url == reference("text.long")
    assert content.opened == [("t-1", "state.s"), ("t-1", "text.long"), ("t-1", "raw.photo")]


SEEN_BY_THE_FUNCTION: dict[str, Any] = {}


def reads_and_fetches(ctx: StepContext) -> Outcome:
    SEEN_BY_THE_FUNCTION["stored"] = ctx.read(Part(url=reference("raw.photo")))
    SEEN_BY_THE_FUNCTION["cap"] = ctx.fetch_max_bytes
    with pytest.raises(UrlRefused, match="private address"):  # an IP literal: no DNS
        ctx.open(Part(url="https://10.1.2.3/file"))
    return Outcome.completed()


def test_the_worker_function_gives_steps_the_bucket_and_the_guarded_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from a2a_serverless.handlers import flow_worker

    content = InMemoryContentStore()
    content.put("t-1", "raw.photo", FILE, "image/png")
    store = InMemoryTaskStore()
    add_submitted_task(store, Message(message_id="m-1", role=Role.USER, parts=[Part(text="go")]))
    monkeypatch.setenv("FETCH_MAX_BYTES", "12345")
    monkeypatch.setattr(flow_worker, "get_settings", lambda: Settings())
    monkeypatch.setattr(flow_worker, "get_store", lambda: store)
    monkeypatch.setattr(flow_worker, "get_flow", lambda: load_flow(f"{__name__}:reads_and_fetches"))
    monkeypatch.setattr(flow_worker, "get_content_store", lambda: content)
    flow_worker.handler({"taskId": "t-1", "turn": 1}, None)
    assert SEEN_BY_THE_FUNCTION == {"stored": FILE, "cap": 12345}
    assert (store.get_record("t-1") or pytest.fail()).state is TaskState.COMPLETED


def test_with_a_content_store_large_parts_are_emitted_whole() -> None:
    store = InMemoryTaskStore()
    add_submitted_task(store, Message(message_id="m-1", role=Role.USER, parts=[Part(text="go")]))
    record = store.get_record("t-1") or pytest.fail()
    text, raw = "ü" * 300_000, base64.b64encode(FILE * 32).decode()  # 600 KB, 700 KB as JSON
    parts = [Part(text="small"), Part(text=text), Part(raw=raw), Part(text="tail")]
    LogEmitter(store, record, 1, stores_content=True).artifact(ArtifactChunk(parts))
    events = [e.artifact_update for _, e in store.read_events("t-1", 1)]
    assert [[p.text or p.raw for p in e.artifact.parts] for e in events if e] == [
        ["small"],
        [text],
        [raw],
        ["tail"],
    ]
    with pytest.raises(TooLarge):  # without one, a part past an event's bound is refused
        LogEmitter(store, record, 5).artifact(ArtifactChunk([Part(raw=raw)]))
