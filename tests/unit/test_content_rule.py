"""The inline-or-stored rule (store/content.py) and how stored content is answered
(core/content.py), on an in-memory content store."""

from __future__ import annotations

import base64
import io
import json
from typing import IO

import pytest

from a2a_serverless.core.content import present, present_event_json
from a2a_serverless.core.send import request_violations
from a2a_serverless.models import (
    Artifact,
    ListTasksResponse,
    Message,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
)
from a2a_serverless.store.content import (
    ContentRule,
    read_all,
    reference,
    restored,
    stored_name,
)


class MemoryContent:
    """A ContentStore in memory; `link` names the object it reaches."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], tuple[bytes, str]] = {}
        self.puts = 0

    def put(self, task_id: str, name: str, body: bytes, media_type: str) -> None:
        self.puts += 1
        self.objects[(task_id, name)] = (body, media_type)

    def put_stream(self, task_id: str, name: str, source: IO[bytes], media_type: str) -> int:
        body = source.read()
        self.put(task_id, name, body, media_type)
        return len(body)

    def open(self, task_id: str, name: str) -> IO[bytes]:
        return io.BytesIO(self.objects[(task_id, name)][0])

    def link(self, task_id: str, name: str) -> str:
        return f"https://bucket.example/{task_id}/{name}?sig"


def _message(*parts: Part) -> Message:
    return Message(message_id="m1", role="user", parts=list(parts))


def test_a_part_over_the_inline_bound_is_stored_and_the_rest_stays() -> None:
    content = MemoryContent()
    rule = ContentRule(content, inline_part_bytes=1024)
    big, small = Part(text="é" * 2000, media_type="text/markdown"), Part(text="hi")
    kept = rule.message("t1", _message(big, small), 100_000)
    name = stored_name(kept.parts[0])
    assert name is not None and name.startswith("text.")
    assert kept.parts[0].media_type == "text/markdown" and kept.parts[0].text is None
    assert kept.parts[1] is small
    assert content.objects[("t1", name)] == (("é" * 2000).encode(), "text/markdown")
    assert "data" not in kept.parts[0].wire()
    assert restored(kept.parts[0], "t1", content) == big


def test_raw_and_data_parts_are_stored_as_their_bytes_and_json() -> None:
    content = MemoryContent()
    rule = ContentRule(content, inline_part_bytes=300)
    data = bytes(range(256)) * 4
    raw = Part(raw=base64.b64encode(data).decode(), filename="f.bin")
    structured = Part(data={"rows": list(range(200))})
    kept = rule.message("t1", _message(raw, structured), 100_000)
    raw_name, data_name = (stored_name(p) for p in kept.parts)
    assert raw_name and data_name and raw_name.startswith("raw.") and data_name.startswith("data.")
    assert content.objects[("t1", raw_name)] == (data, "application/octet-stream")
    assert json.loads(content.objects[("t1", data_name)][0]) == {"rows": list(range(200))}
    assert kept.parts[0].filename == "f.bin"
    assert restored(kept.parts[1], "t1", content) == structured
    assert restored(kept.parts[0], "t1", content) is kept.parts[0]  # raw stays a reference


def test_small_parts_are_stored_largest_first_only_until_the_budget_holds() -> None:
    content = MemoryContent()
    rule = ContentRule(content, inline_part_bytes=10_000)
    parts = [Part(text="a" * 900), Part(text="b" * 5000), Part(text="c" * 3000)]
    kept = rule.parts("t1", parts, budget=5000)
    assert [stored_name(p) is not None for p in kept] == [False, True, False]
    assert rule.parts("t1", parts, budget=100_000) == parts
    assert content.puts == 1


def test_the_same_content_is_put_once_and_named_alike() -> None:
    content = MemoryContent()
    rule = ContentRule(content, inline_part_bytes=100)
    first = rule.message("t1", _message(Part(text="x" * 500)), 10_000)
    again = rule.message("t1", _message(Part(text="x" * 500)), 10_000)
    assert first.parts[0].url == again.parts[0].url and content.puts == 1


def test_without_a_content_store_nothing_changes() -> None:
    rule = ContentRule(None, inline_part_bytes=100)
    message = _message(Part(text="x" * 500))
    assert rule.message("t1", message, 10) is message
    assert rule.state("t1", '{"a":1}', 1) == ('{"a":1}', None)


def test_a_large_state_is_stored_and_the_header_keeps_an_empty_object() -> None:
    content = MemoryContent()
    rule = ContentRule(content)
    state = json.dumps({"k": "v" * 100})
    assert rule.state("t1", state, 1000) == (state, None)
    kept, name = rule.state("t1", state, 50)
    assert kept == "{}" and name is not None and name.startswith("state.")
    assert read_all(content.open("t1", name)) == state.encode()


@pytest.mark.parametrize(
    "url",
    [
        "a2a-content:",
        "a2a-content:raw.",
        "a2a-content:../x",
        "a2a-content:raw.a/b",
        "a2a-content:x.y",
    ],
)
def test_a_malformed_reference_names_nothing(url: str) -> None:
    assert stored_name(Part(url=url)) is None


def _task() -> Task:
    stored = Part(url=reference("raw.abc"), filename="p.png")
    text = Part(url=reference("text.def"))
    return Task(
        id="t1",
        context_id="c1",
        status=TaskStatus(state=TaskState.COMPLETED, message=_message(text)),
        history=[_message(stored, Part(text="hi"))],
        artifacts=[Artifact(artifact_id="a", parts=[stored])],
    )


def test_every_stored_part_of_a_task_is_answered_as_a_link_to_that_task() -> None:
    task = present(_task(), MemoryContent())
    status_part = task.status.message.parts[0]  # type: ignore[union-attr]
    assert status_part.url == "https://bucket.example/t1/text.def?sig"
    assert status_part.media_type == "text/plain; charset=utf-8"
    (history,) = task.history or []
    assert history.parts[0].url == "https://bucket.example/t1/raw.abc?sig"
    assert (history.parts[0].filename, history.parts[0].media_type) == (
        "p.png",
        "application/octet-stream",
    )
    assert history.parts[1].text == "hi"
    assert task.artifacts[0].parts[0].url == history.parts[0].url  # type: ignore[index]
    listed = present(
        ListTasksResponse(tasks=[_task()], next_page_token="", page_size=1, total_size=1),
        MemoryContent(),
    )
    assert listed.tasks[0] == task


def test_without_a_content_store_or_a_reference_nothing_is_copied() -> None:
    task = _task()
    assert present(task, None) is task
    plain = Task(id="t2", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    assert present(plain, MemoryContent()) == plain
    body = (
        b'{"statusUpdate":{"taskId":"t2","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}'
    )
    assert present_event_json(body, MemoryContent()) is body


def test_an_event_is_answered_with_links_to_its_own_task() -> None:
    artifact = Artifact(artifact_id="a", parts=[Part(url=reference("raw.abc"))])
    event = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(task_id="t9", context_id="c", artifact=artifact)
    )
    body = json.dumps(event.wire()).encode()
    shown = json.loads(present_event_json(body, MemoryContent()))
    assert shown["artifactUpdate"]["artifact"]["parts"][0]["url"].startswith(
        "https://bucket.example/t9/raw.abc"
    )


def _send(message: dict) -> list[tuple[str, str]]:
    return request_violations({"message": {"messageId": "m", "role": "ROLE_USER", **message}})


def test_a_client_cannot_send_a_reference_to_stored_content() -> None:
    found = _send({"parts": [{"text": "hi"}, {"url": "a2a-content:raw.abc"}]})
    assert [path for path, _ in found] == ["message.parts[1].url"]


def test_parts_and_a_message_frame_are_bounded_but_not_part_content() -> None:
    assert _send({"parts": [{"text": "x" * 5_000_000}]}) == []
    many = _send({"parts": [{"text": "x"}] * 1025})
    assert ("message.parts", "must have at most 1024 entries") in many
    heavy = _send({"parts": [{"text": "x"}], "metadata": {"k": "y" * 270_000}})
    assert [path for path, _ in heavy] == ["message"]


def test_webhooks_of_both_versions_carry_links_to_stored_content() -> None:
    """A 1.0 webhook gets the event, a 0.3 webhook the task (file.uri): both with a link."""
    from a2a_serverless.core.egress import EgressPolicy
    from a2a_serverless.push.sender import SenderConfig, WebhookSender
    from tests.fakes import InMemoryTaskStore
    from tests.helpers import add_submitted_task

    store = InMemoryTaskStore()
    add_submitted_task(store, _message(Part(text="hi")))
    artifact = Artifact(
        artifact_id="a", parts=[Part(url=reference("raw.abc"), media_type="image/png")]
    )
    event = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(task_id="t-1", context_id="c-1", artifact=artifact)
    )
    store.append_event("t-1", 2, event)
    config = SenderConfig(egress=EgressPolicy(), retry_queue_url="queue")
    link = "https://bucket.example/t-1/raw.abc?sig"
    for links, expected in ((MemoryContent(), link), (None, "a2a-content:raw.abc")):
        sender = WebhookSender(store, None, config, links=links)
        v10 = json.loads(sender.payload("1.0", "t-1", 2) or b"{}")
        assert v10["artifactUpdate"]["artifact"]["parts"][0]["url"] == expected
        v03 = json.loads(sender.payload("0.3", "t-1", 2) or b"{}")
        (file,) = [p["file"] for a in v03["artifacts"] for p in a["parts"]]
        assert (file["uri"], file["mimeType"]) == (expected, "image/png")
