"""Where a flow step's updates go: appended to the task's event log, one seq each, split so no
event approaches DynamoDB's item size limit; a write that loses to a cancel stops the step.
An event that cannot be split small enough raises store.TooLarge, nothing written. With a
content store, a part too large for an event is written whole (its own event): the store keeps
its content in the content store.

Idempotent: each event carries (turn, step, position in the step), so a re-run of a step
(a retry, a redelivery) skips what an earlier run already wrote.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from a2a_serverless.core.tasklog import status_event
from a2a_serverless.flows.base import ArtifactChunk, FlowCanceled
from a2a_serverless.models import (
    Artifact,
    Message,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    limits,
    utcnow,
)
from a2a_serverless.store import ConflictError, TaskRecord, TaskStore, TooLarge

# Largest text in one artifact event (64 Ki characters are at most 256 KiB of UTF-8); longer
# text is split across chunks. Other parts, and escape-heavy text, count in encoded bytes.
MAX_CHUNK_CHARS = 64 * 1024
MAX_PART_BYTES = 300 * 1024
# A character takes at most this many bytes in a JSON string (`\uXXXX`): a shorter text needs
# no measuring.
_MAX_ESCAPED_CHAR_BYTES = 6


class LogEmitter:
    """Appends a step's updates to the event log; sees cancellation on its next write.

    `written`: the event identities already in the log (an earlier run of this step wrote
    those); `seq`: the last event so far, where this run's new events go after;
    `stores_content`: whether the store puts large parts in the content store.
    """

    def __init__(
        self,
        store: TaskStore,
        record: TaskRecord,
        seq: int,
        step: int = 0,
        written: Collection[str] = (),
        stores_content: bool = False,
    ) -> None:
        self._store = store
        self._record = record
        self.seq = seq
        self._step = step
        self._position = 0
        self._written = frozenset(written)
        self._stores_content = stores_content

    def _next_id(self) -> str:
        event_id = f"{self._record.turn}.{self._step}.{self._position}"
        self._position += 1
        return event_id

    def _append(self, event: StreamResponse) -> None:
        event_id = self._next_id()
        if event_id in self._written:
            return  # an earlier run of this step wrote it
        while True:
            try:
                # False: a run of this step racing us wrote this very event at this seq.
                self._store.append_event(self._record.task_id, self.seq + 1, event, event_id)
                self.seq += 1
                return
            except ConflictError:
                # Someone else wrote at this seq: a cancel (or another writer). Look again.
                fresh = self._store.get_record(self._record.task_id)
                if (
                    fresh is None
                    or fresh.state is not TaskState.WORKING
                    or fresh.turn != self._record.turn
                ):
                    raise FlowCanceled() from None
                self.seq = self._store.last_seq(self._record.task_id)

    def canceled(self) -> bool:
        """Whether this turn is over (canceled, or moved on), for a flow waiting on something
        long between writes (one GetItem; a write finds out on its own)."""
        fresh = self._store.get_record(self._record.task_id)
        return (
            fresh is None or fresh.state is not TaskState.WORKING or fresh.turn != self._record.turn
        )

    def status(self, message: Message) -> None:
        status = TaskStatus(state=TaskState.WORKING, message=message, timestamp=utcnow())
        self._append(status_event(self._record, status))

    def artifact(self, chunk: ArtifactChunk) -> None:
        pieces = _split_parts(chunk.parts, whole=self._stores_content)
        for index, piece in enumerate(pieces):
            artifact = Artifact(
                artifact_id=chunk.artifact_id,
                name=chunk.name,
                description=chunk.description,
                parts=piece,
                metadata=chunk.metadata,
                extensions=chunk.extensions,
            )
            self._append(
                StreamResponse(
                    artifact_update=TaskArtifactUpdateEvent(
                        task_id=self._record.task_id,
                        context_id=self._record.context_id,
                        artifact=artifact,
                        append=chunk.append or index > 0,
                        last_chunk=chunk.last_chunk and index == len(pieces) - 1,
                    )
                )
            )


def _split_parts(parts: list[Part], whole: bool = False) -> list[list[Part]]:
    """Group parts into events that each stay well under the item size limit; `whole`: a part
    too large for that is kept whole, in an event of its own (the store will store it)."""
    groups: list[list[Part]] = [[]]
    size = 0
    for part in parts:
        if not whole and part.text is not None and _needs_splitting(part.text):
            for text in _text_pieces(part.text):
                groups.append([part.model_copy(update={"text": text})])
            groups.append([])
            size = 0
            continue
        part_size = len(part.model_dump_json().encode())
        if part_size > limits.MAX_EVENT_BYTES and not whole:
            raise TooLarge(
                "an artifact part as JSON",
                part_size,
                limits.MAX_EVENT_BYTES,
                "MAX_EVENT_BYTES",
                "send large files as `url` parts",
            )
        if size + part_size > MAX_PART_BYTES and groups[-1]:
            groups.append([])
            size = 0
        groups[-1].append(part)
        size += part_size
    return [g for g in groups if g] or [[]]


def _needs_splitting(text: str) -> bool:
    """Whether `text` is past MAX_CHUNK_CHARS or, as JSON, MAX_PART_BYTES (measured only when
    its length allows that: a character is at most 6 bytes of a JSON string)."""
    if len(text) > MAX_CHUNK_CHARS:
        return True
    return len(text) * _MAX_ESCAPED_CHAR_BYTES + 2 > MAX_PART_BYTES and (
        _text_bytes(text) > MAX_PART_BYTES
    )


def _text_bytes(text: str) -> int:
    """The bytes of `text` as a JSON string in an event (UTF-8, escapes included)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _text_pieces(text: str) -> list[str]:
    """`text` in runs of at most MAX_CHUNK_CHARS characters, each at most MAX_PART_BYTES as
    JSON (a run of characters that escape long is halved until it fits)."""
    pieces = []
    start = 0
    while start < len(text):
        length = MAX_CHUNK_CHARS
        while length > 1 and _text_bytes(text[start : start + length]) > MAX_PART_BYTES:
            length //= 2
        pieces.append(text[start : start + length])
        start += length
    return pieces
