"""The pydantic models accept liberally and emit exact proto-JSON."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from a2a_serverless.models import (
    AgentCapabilities,
    Artifact,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    format_timestamp,
    parse_task_state,
)
from tests.wire import a2a_types, parse_strict


def test_message_accepts_both_role_spellings_and_ignores_unknown_fields() -> None:
    for role in ("ROLE_USER", "user", "USER"):
        message = Message.model_validate(
            {"messageId": "m", "role": role, "parts": [{"text": "hi"}], "surprise": 1}
        )
        assert message.role is Role.USER
    assert message.wire() == {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}


@pytest.mark.parametrize(
    "value",
    ["TASK_STATE_INPUT_REQUIRED", "input-required", "INPUT_REQUIRED", "input_required", 6],
)
def test_task_state_spellings(value: object) -> None:
    assert parse_task_state(value) is TaskState.INPUT_REQUIRED


def test_task_state_rejects_unknown_names_with_the_valid_list() -> None:
    with pytest.raises(ValueError, match="TASK_STATE_COMPLETED"):
        parse_task_state("done")


@pytest.mark.parametrize(
    "part",
    [{}, {"text": "a", "url": "https://x"}, {"raw": "aGk=", "data": {"a": 1}}],
)
def test_part_oneof_requires_exactly_one_content(part: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="exactly one of text, raw, url, data"):
        Part.model_validate(part)


def test_part_raw_must_be_base64_and_data_keeps_falsy_values() -> None:
    with pytest.raises(ValidationError, match="base64"):
        Part.model_validate({"raw": "not base64!"})
    assert Part.model_validate({"raw": "aGk-_w"}).raw == "aGk-_w"  # URL-safe alphabet
    assert Part(data={}).wire() == {"data": {}}
    assert Part(data=False).wire() == {"data": False}
    assert Part(text="").wire() == {"text": ""}


def test_message_requires_id_role_and_parts() -> None:
    with pytest.raises(ValidationError) as info:
        Message.model_validate({"role": "ROLE_UNSPECIFIED", "parts": []})
    fields = {tuple(e["loc"]) for e in info.value.errors()}
    assert ("messageId",) in fields and ("parts",) in fields and ("role",) in fields


def test_timestamps_are_utc_millis_with_z() -> None:
    plus_two = timezone(timedelta(hours=2))
    moment = datetime(2025, 1, 2, 5, 4, 5, 123456, tzinfo=plus_two)
    assert format_timestamp(moment) == "2025-01-02T03:04:05.123Z"
    status = TaskStatus.model_validate(
        {"state": "working", "timestamp": "2025-01-02T05:04:05+02:00"}
    )
    assert status.timestamp == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert status.wire()["timestamp"] == "2025-01-02T03:04:05.000Z"


def test_outputs_parse_strictly_as_protobuf() -> None:
    task = Task(
        id="t",
        context_id="c",
        status=TaskStatus(state=TaskState.COMPLETED, timestamp=datetime.now(UTC)),
        artifacts=[Artifact(artifact_id="a", parts=[Part(text="x", media_type="text/plain")])],
        history=[Message(message_id="m", role=Role.USER, parts=[Part(data={"k": [1, None]})])],
    )
    parse_strict(task.wire(), a2a_types.Task)
    event = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id="t", context_id="c", artifact=task.artifacts[0], append=True, last_chunk=True
        )
    )
    parse_strict(event.wire(), a2a_types.StreamResponse)
    empty = ListTasksResponse(tasks=[], next_page_token="", page_size=50, total_size=0)
    assert empty.wire() == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
    parse_strict(empty.wire(), a2a_types.ListTasksResponse)


def test_capabilities_false_is_emitted_not_dropped() -> None:
    wire = AgentCapabilities(streaming=False, push_notifications=False).wire()
    assert wire == {"streaming": False, "pushNotifications": False}


def test_stream_response_is_a_oneof() -> None:
    with pytest.raises(ValidationError, match="exactly one payload"):
        StreamResponse()


def test_send_request_history_length_cannot_be_negative() -> None:
    with pytest.raises(ValidationError):
        SendMessageRequest.model_validate(
            {
                "message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]},
                "configuration": {"historyLength": -1},
            }
        )


def test_a_data_part_may_carry_json_null() -> None:
    """The proto's Value allows null: `{"data": null}` is a data part, kept on the wire
    (dropping it would leave a part with no content, refused when read back)."""
    from a2a_serverless.models import Message, Part
    from a2a_serverless.models.v03 import part_to_v03

    message = Message.model_validate(
        {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": None}]}
    )
    assert message.wire()["parts"] == [{"data": None}]
    assert Message.model_validate(message.wire()) == message
    assert part_to_v03(message.parts[0]) == {"kind": "data", "data": {"value": None}}
    with pytest.raises(ValueError, match="exactly one"):
        Part.model_validate({})
    with pytest.raises(ValueError, match="exactly one"):
        Part.model_validate({"text": "x", "data": None})
