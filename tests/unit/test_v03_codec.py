"""The A2A 0.3 codec (models/v03.py): 0.3 params to 1.0 models, 1.0 models to 0.3 JSON. Every
0.3 object it produces is checked against the 0.3 JSON schema and parsed with a2a-sdk's 0.3
types (tests/wire.py), as the e2e suite checks the bodies on the wire."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from a2a_serverless import models as a2a
from a2a_serverless.models import v03
from tests import wire

MESSAGE_03: dict[str, Any] = {
    "kind": "message",
    "messageId": "m1",
    "role": "user",
    "contextId": "c1",
    "parts": [
        {"kind": "text", "text": "hello"},
        {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}},
        {"kind": "file", "file": {"uri": "https://example.com/x.png"}},
        {"kind": "data", "data": {"n": 1}, "metadata": {"source": "form"}},
    ],
}


def _task(state: a2a.TaskState = a2a.TaskState.COMPLETED) -> a2a.Task:
    agent = a2a.Message(
        message_id="m2", role=a2a.Role.AGENT, parts=[a2a.Part(text="done")], task_id="t1"
    )
    return a2a.Task(
        id="t1",
        context_id="c1",
        status=a2a.TaskStatus(
            state=state, message=agent, timestamp=datetime(2025, 1, 2, tzinfo=UTC)
        ),
        artifacts=[
            a2a.Artifact(artifact_id="a1", name="out", parts=[a2a.Part(data=[1, 2])]),
            a2a.Artifact(
                artifact_id="a2", parts=[a2a.Part(url="https://e.x/f", media_type="image/png")]
            ),
        ],
        history=[a2a.Message.model_validate(v03.message_from_v03(MESSAGE_03))],
        metadata={"k": "v"},
    )


def test_send_params_decode_to_a_1_0_request() -> None:
    params = {
        "message": MESSAGE_03,
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 2},
        "metadata": {"trace": "x"},
    }
    wire.check_v03(params, "MessageSendParams")
    request = a2a.SendMessageRequest.model_validate(v03.send_params_from_v03(params))
    parts = request.message.parts
    assert request.message.role is a2a.Role.USER and request.message.context_id == "c1"
    assert (parts[0].text, parts[1].raw, parts[1].media_type, parts[1].filename) == (
        "hello",
        "aGk=",
        "text/plain",
        "a.txt",
    )
    assert (parts[2].url, parts[3].data, parts[3].metadata) == (
        "https://example.com/x.png",
        {"n": 1},
        {"source": "form"},
    )
    assert request.configuration is not None
    assert request.configuration.history_length == 2
    # 0.3 servers blocked unless told `blocking: false`.
    assert request.configuration.return_immediately is False
    assert request.metadata == {"trace": "x"}


@pytest.mark.parametrize(("blocking", "immediate"), [(True, False), (None, False), (False, True)])
def test_blocking_becomes_return_immediately(blocking: bool | None, immediate: bool) -> None:
    config = {} if blocking is None else {"blocking": blocking}
    decoded = v03.send_params_from_v03({"message": MESSAGE_03, "configuration": config})
    assert decoded["configuration"]["returnImmediately"] is immediate


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (None, "message"),
        ({**MESSAGE_03, "parts": {"kind": "text"}}, "message.parts"),
        ({**MESSAGE_03, "parts": [{"kind": "video"}]}, "message.parts[0].kind"),
        ({**MESSAGE_03, "parts": [{"kind": "file", "file": {}}]}, "message.parts[0].file"),
        ({**MESSAGE_03, "parts": ["text"]}, "message.parts[0]"),
    ],
)
def test_untranslatable_params_name_the_field(message: Any, field: str) -> None:
    with pytest.raises(v03.InvalidParamsError) as info:
        v03.send_params_from_v03({"message": message})
    assert [f for f, _ in info.value.violations] == [field]
    assert isinstance(info.value, ValueError)  # the codec knows nothing of A2A errors


def test_every_untranslatable_field_is_named_with_the_rest_translated() -> None:
    message = {
        "messageId": "m",
        "role": ["agent"],
        "parts": [{"kind": "video"}, {"kind": "text", "text": "ok"}, {"kind": "text"}],
    }
    config = {"pushNotificationConfig": "https://x.test/"}
    with pytest.raises(v03.InvalidParamsError) as info:
        v03.send_params_from_v03({"message": message, "configuration": config})
    assert [f for f, _ in info.value.violations] == [
        "message.role",
        "message.parts[0].kind",
        "message.parts[2].text",
        "configuration.pushNotificationConfig",
    ]
    # The rest, for the 1.0 checks: bad parts held by valid placeholders, bad values left out.
    partial = info.value.partial
    assert partial is not None
    assert partial["message"] == {
        "messageId": "m",
        "parts": [{"text": ""}, {"text": "ok"}, {"text": ""}],
    }
    assert "taskPushNotificationConfig" not in partial["configuration"]


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("Task t is already TASK_STATE_COMPLETED", "Task t is already completed"),
        (
            "message.role: must be ROLE_USER for messages sent to an agent",
            "message.role: must be 'user' for messages sent to an agent",
        ),
        ("Input should be 'ROLE_USER' or 'ROLE_AGENT'", "Input should be 'user' or 'agent'"),
        (
            "SendStreamingMessage is not supported: this agent does not stream",
            "message/stream is not supported: this agent does not stream",
        ),
        ("SubscribeToTask is not supported", "tasks/resubscribe is not supported"),
        (
            "nothing to subscribe to. Use GetTask to read it.",
            "nothing to subscribe to. Use tasks/get to read it.",
        ),
        ("GetTaskPushNotificationConfig, GetTask", "tasks/pushNotificationConfig/get, tasks/get"),
        ("GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"),
        (
            "message.parts[2].mediaType 'x/y' is not accepted",
            "message.parts[2].file.mimeType 'x/y' is not accepted",
        ),
        ("message.parts[0].raw", "message.parts[0].file.bytes"),
        (
            "configuration.taskPushNotificationConfig.url",
            "configuration.pushNotificationConfig.url",
        ),
        # Not 1.0 names: left alone.
        (
            "SendMessageFunction timed out; ListTasks; mediaType",
            "SendMessageFunction timed out; ListTasks; mediaType",
        ),
    ],
)
def test_texts_are_spelled_as_0_3(text: str, spelled: str) -> None:
    assert v03.text_to_v03(text) == spelled


def test_an_error_object_is_spelled_as_0_3_in_its_message_metadata_and_violations() -> None:
    error = {
        "code": -32602,
        "message": "message.role: must be ROLE_USER for messages sent to an agent",
        "data": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_CANCELABLE",
                "domain": "a2a-protocol.org",
                "metadata": {"taskId": "t1", "state": "TASK_STATE_COMPLETED"},
            },
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [
                    {"field": "message.role", "description": "must be ROLE_USER for …"},
                    {"field": "message.parts[1].mediaType", "description": "is not accepted"},
                ],
            },
        ],
    }
    spelled = v03.error_to_v03(error)
    assert spelled["code"] == -32602
    assert spelled["message"] == "message.role: must be 'user' for messages sent to an agent"
    info, bad = spelled["data"]
    # The reason is a code, not a text: never respelled.
    assert info["reason"] == "TASK_NOT_CANCELABLE"
    assert info["metadata"] == {"taskId": "t1", "state": "completed"}
    assert bad["fieldViolations"] == [
        {"field": "message.role", "description": "must be 'user' for …"},
        {"field": "message.parts[1].file.mimeType", "description": "is not accepted"},
    ]
    assert error["data"][0]["metadata"]["state"] == "TASK_STATE_COMPLETED"  # not changed in place


def test_task_encodes_as_a_0_3_task() -> None:
    encoded = v03.task_to_v03(_task())
    wire.check_v03(encoded, "Task")
    assert encoded["kind"] == "task" and encoded["status"]["state"] == "completed"
    assert encoded["status"]["timestamp"] == "2025-01-02T00:00:00.000Z"
    assert encoded["status"]["message"]["role"] == "agent"
    assert encoded["artifacts"][0]["parts"] == [{"kind": "data", "data": {"value": [1, 2]}}]
    assert encoded["artifacts"][1]["parts"][0]["file"] == {
        "uri": "https://e.x/f",
        "mimeType": "image/png",
    }
    # A 0.3 message read in comes back out the same.
    assert encoded["history"] == [MESSAGE_03]


@pytest.mark.parametrize(
    ("state", "final"),
    [
        (a2a.TaskState.WORKING, False),
        (a2a.TaskState.SUBMITTED, False),
        (a2a.TaskState.COMPLETED, True),
        (a2a.TaskState.CANCELED, True),
        (a2a.TaskState.INPUT_REQUIRED, True),
        (a2a.TaskState.AUTH_REQUIRED, True),
    ],
)
def test_status_updates_are_final_when_the_stream_ends(state: a2a.TaskState, final: bool) -> None:
    update = a2a.TaskStatusUpdateEvent(
        task_id="t1", context_id="c1", status=a2a.TaskStatus(state=state)
    )
    encoded = v03.event_to_v03(a2a.StreamResponse(status_update=update))
    wire.check_v03(encoded, "TaskStatusUpdateEvent")
    assert encoded["final"] is final and encoded["status"]["state"] == state.short


def test_every_stream_event_kind() -> None:
    task = _task(a2a.TaskState.WORKING)
    chunk = a2a.TaskArtifactUpdateEvent(
        task_id="t1", context_id="c1", artifact=task.artifacts[0], append=True, last_chunk=True
    )
    events = [
        (a2a.StreamResponse(task=task), "Task"),
        (a2a.StreamResponse(message=task.status.message), "Message"),
        (a2a.StreamResponse(artifact_update=chunk), "TaskArtifactUpdateEvent"),
    ]
    for event, definition in events:
        encoded = wire.check_v03(v03.event_to_v03(event), definition)
        assert encoded["kind"] == {"Task": "task", "Message": "message"}.get(
            definition, "artifact-update"
        )
    artifact = v03.event_to_v03(events[2][0])
    assert (artifact["append"], artifact["lastChunk"]) == (True, True)


def test_push_config_round_trip() -> None:
    params = {
        "taskId": "t1",
        "pushNotificationConfig": {
            "id": "cfg",
            "url": "https://hooks.example.com/a2a",
            "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
        },
    }
    wire.check_v03(params, "TaskPushNotificationConfig")
    config = a2a.TaskPushNotificationConfig.model_validate(v03.push_config_from_v03(params))
    assert config.authentication is not None and config.authentication.scheme == "Bearer"
    assert v03.push_config_to_v03(config) == params
    assert v03.config_ids({"id": "t1", "pushNotificationConfigId": "cfg"}) == ("t1", "cfg")
    with pytest.raises(v03.InvalidParamsError):
        v03.config_ids({"pushNotificationConfigId": "cfg"})


@pytest.mark.parametrize(
    "body",
    [
        {**v03.task_to_v03(_task()), "unknownField": 1},  # the SDK would drop it silently
        {**v03.task_to_v03(_task()), "status": {"state": "TASK_STATE_COMPLETED"}},
    ],
)
def test_the_sdk_check_refuses_what_a_0_3_client_misreads(body: dict[str, Any]) -> None:
    with pytest.raises(Exception):  # noqa: B017 - a pydantic error or the round-trip assert
        wire.parse_v03_sdk(body, "Task")
