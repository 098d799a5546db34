"""Part content kept outside the table: the one rule that decides what is stored inline and
what goes to the content store (S3), and the references that stand for stored content.

A stored part keeps its `filename`, `mediaType` and `metadata`; its content is replaced by a
`url` in the reserved `a2a-content:` scheme naming an object of the task. A name is only ever
resolved inside the task that holds it (`object_key`), so no reference reaches another task's
content. Clients cannot send the scheme (core/send.py refuses it). Content-addressed names make
a retried write store the same object under the same name.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from typing import IO, Any, Protocol
from urllib.parse import quote

from a2a_serverless.models import Artifact, Message, Part, StreamResponse, TaskStatus

REF_SCHEME = "a2a-content:"
_NAME = re.compile(r"(text|data|raw|state)\.[A-Za-z0-9_-]{1,120}")
# What a stored part's presented URL says its content is, when the part named no media type.
DEFAULT_MEDIA_TYPES = {
    "text": "text/plain; charset=utf-8",
    "data": "application/json",
    "raw": "application/octet-stream",
    "state": "application/json",
}


class Kind(StrEnum):
    """What a stored object held before it was stored: a part's text, data or raw bytes, or a
    flow state."""

    TEXT = "text"
    DATA = "data"
    RAW = "raw"
    STATE = "state"


class ContentStore(Protocol):
    """Objects of a task, by name: what the S3 content store (store/s3.py) does."""

    def put(self, task_id: str, name: str, body: bytes, media_type: str) -> None:
        """Store `body` (idempotent: the name is its content's)."""
        ...

    def put_stream(self, task_id: str, name: str, source: IO[bytes], media_type: str) -> int:
        """Store what `source` yields, in parts when it is large; the number of bytes."""
        ...

    def open(self, task_id: str, name: str) -> IO[bytes]:
        """The object's bytes as a stream (read them in pieces; close it after)."""
        ...

    def link(self, task_id: str, name: str) -> str:
        """A short-lived HTTPS URL that downloads the object (no call: signed locally)."""
        ...


def object_key(task_id: str, name: str) -> str:
    """The object key of a task's stored content (`tasks/{taskId}/{name}`)."""
    return f"tasks/{quote(task_id, safe='')}/{name}"


def reference(name: str) -> str:
    return REF_SCHEME + name


def stored_name(part: Part) -> str | None:
    """The object name a stored part refers to; None for any other part (a malformed
    reference too: it resolves to nothing)."""
    url = part.url
    if url is None or not url.startswith(REF_SCHEME):
        return None
    name = url[len(REF_SCHEME) :]
    return name if _NAME.fullmatch(name) else None


def kind_of(name: str) -> Kind:
    return Kind(name.partition(".")[0])


def content_name(kind: Kind, body: bytes) -> str:
    """A content-addressed object name: the same content gets the same name."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).decode().rstrip("=")
    return f"{kind.value}.{digest}"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def part_bytes(part: Part) -> int:
    """A part's size as it would be stored inline: its JSON in UTF-8."""
    return len(dumps(part.wire()).encode("utf-8", "surrogatepass"))


def content_of(part: Part) -> tuple[Kind, bytes] | None:
    """The kind and bytes a part's content is stored as; None for a `url` part (kept as
    given)."""
    if part.text is not None:
        return Kind.TEXT, part.text.encode("utf-8", "surrogatepass")
    if part.raw is not None:
        padded = part.raw + "=" * (-len(part.raw) % 4)
        return Kind.RAW, base64.b64decode(padded.replace("-", "+").replace("_", "/"))
    if part.url is not None:
        return None
    return Kind.DATA, dumps(part.data).encode("utf-8", "surrogatepass")


def event_with(
    event: StreamResponse,
    status: Callable[[str, TaskStatus], TaskStatus],
    artifact: Callable[[str, Artifact], Artifact],
) -> StreamResponse:
    """`event` with its status update's status or its artifact update's artifact as `status`
    or `artifact` make it (given the event's task id); the same event when that is unchanged
    (or the event is neither)."""
    if event.status_update is not None:
        payload, field = "status_update", "status"
        inner: Any = event.status_update
        changed: Any = status(inner.task_id, inner.status)
    elif event.artifact_update is not None:
        payload, field = "artifact_update", "artifact"
        inner = event.artifact_update
        changed = artifact(inner.task_id, inner.artifact)
    else:
        return event
    if changed is getattr(inner, field):
        return event
    return event.model_copy(update={payload: inner.model_copy(update={field: changed})})


def media_type_of(part: Part, kind: Kind) -> str:
    return part.media_type or DEFAULT_MEDIA_TYPES[kind.value]


class ContentRule:
    """Inline or stored: a part whose JSON is over `inline_part_bytes` is stored; then, while
    the parts of one message or artifact are together over what the item they go in leaves
    them, the largest inline ones are stored too. Without a content store nothing is stored
    (the item's own bound then refuses what does not fit)."""

    # Names stored lately (a status message goes in the header, its event and the history in
    # one write): each is put once.
    RECENT = 256

    def __init__(self, store: ContentStore | None, inline_part_bytes: int = 32_768) -> None:
        self.store = store
        self.inline_part_bytes = inline_part_bytes
        self._recent: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def message(self, task_id: str, message: Message, limit: int) -> Message:
        """`message` as written for `task_id`, its JSON within `limit` where storing parts can
        make it so."""
        parts = self._fitted(task_id, message, message.parts, limit)
        return message if parts is None else message.model_copy(update={"parts": parts})

    def artifact(self, task_id: str, artifact: Artifact, limit: int) -> Artifact:
        """`artifact` as written for `task_id` (as `message`)."""
        parts = self._fitted(task_id, artifact, artifact.parts, limit)
        return artifact if parts is None else artifact.model_copy(update={"parts": parts})

    def _fitted(
        self, task_id: str, holder: Message | Artifact, parts: list[Part], limit: int
    ) -> list[Part] | None:
        if self.store is None:
            return None
        # The holder without its parts: its content is measured part by part below.
        empty = holder.model_copy(update={"parts": []})
        frame = len(dumps(empty.wire()).encode("utf-8", "surrogatepass"))
        budget = limit - frame - len(parts)  # a comma between parts
        out = self.parts(task_id, parts, budget)
        return None if all(a is b for a, b in zip(out, parts, strict=True)) else out

    def parts(self, task_id: str, parts: list[Part], budget: int) -> list[Part]:
        """`parts` as written for `task_id`: stored ones replaced by references, the inline
        rest within `budget` bytes of JSON where storing can make it so."""
        if self.store is None:
            return parts
        sizes = [part_bytes(part) for part in parts]
        out = list(parts)
        for index, size in enumerate(sizes):
            if size > self.inline_part_bytes:
                out[index] = self._store_part(task_id, parts[index])
                sizes[index] = part_bytes(out[index])
        total = sum(sizes)
        for index in sorted(range(len(out)), key=lambda i: -sizes[i]):
            if total <= budget:
                break
            stored = self._store_part(task_id, out[index])
            smaller = part_bytes(stored)
            if smaller < sizes[index]:
                out[index], total = stored, total - sizes[index] + smaller
                sizes[index] = smaller
        return out

    def _store_part(self, task_id: str, part: Part) -> Part:
        content = content_of(part)
        if content is None:
            return part  # a url part (a reference too): kept as given
        kind, body = content
        name = content_name(kind, body)
        self._put(task_id, name, body, media_type_of(part, kind))
        stored = part.model_copy(update={"text": None, "raw": None, "data": None})
        stored.url = reference(name)
        stored.model_fields_set.discard("data")
        return stored

    def _put(self, task_id: str, name: str, body: bytes, media_type: str) -> None:
        key = (task_id, name)
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return
        assert self.store is not None
        self.store.put(task_id, name, body, media_type)
        with self._lock:
            self._recent[key] = None
            while len(self._recent) > self.RECENT:
                self._recent.popitem(last=False)

    def state(self, task_id: str, state_json: str, inline_bytes: int) -> tuple[str, str | None]:
        """(what the header keeps, the stored object's name or None): the state's JSON when it
        is within `inline_bytes` (or there is no content store), else "{}" and the name of the
        object now holding it."""
        body = state_json.encode("utf-8", "surrogatepass")
        if self.store is None or len(body) <= inline_bytes:
            return state_json, None
        name = content_name(Kind.STATE, body)
        self._put(task_id, name, body, DEFAULT_MEDIA_TYPES["state"])
        return "{}", name


def read_all(stream: IO[bytes], limit: int | None = None) -> bytes:
    """Every byte of `stream` (closed after), refusing more than `limit`."""
    with stream:
        body = stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(body) > limit:
        raise ValueError(f"the content is larger than {limit} bytes")
    return body


def restored(part: Part, task_id: str, store: ContentStore) -> Part:
    """A stored text or data part with its content back in place (reading the object); any
    other part as it is. Raw content stays stored: read it with `store.open`."""
    name = stored_name(part)
    if name is None:
        return part
    kind = kind_of(name)
    if kind not in (Kind.TEXT, Kind.DATA):
        return part
    body = read_all(store.open(task_id, name))
    if kind is Kind.TEXT:
        return part.model_copy(update={"url": None, "text": body.decode("utf-8", "surrogatepass")})
    back = part.model_copy(update={"url": None, "data": json.loads(body)})
    back.model_fields_set.add("data")
    return back


class IterableReader:
    """A readable binary stream over chunks of bytes (a generator of a file's pieces)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        # Pieces joined once: adding each chunk to a buffer copies it again per chunk.
        pieces, held = [self._buffer], len(self._buffer)
        while size < 0 or held < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            pieces.append(bytes(chunk))
            held += len(pieces[-1])
        buffer = b"".join(pieces)
        if size < 0:
            out, self._buffer = buffer, b""
        else:
            out, self._buffer = buffer[:size], buffer[size:]
        return out
