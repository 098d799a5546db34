"""JSON-RPC on `POST /`: the a2a-sdk 1.3 client over every interface our card declares, and raw
A2A 1.0 JSON-RPC (spec §9, errors §5.4/§9.5) with exact frames.

Every answer goes through the wire hook (tests/wire.py): envelope, echoed id, strict protobuf
parse of 1.0 results and stream events, 0.3 schema validation, error `data` details.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils import errors as a2a_errors

from tests.e2e import rpc
from tests.e2e.conftest import SEEN, checked_client, new_principal

pytestmark = pytest.mark.e2e

TRANSPORTS = {
    "JSONRPC 1.0": JsonRpcTransport,
    "HTTP+JSON 1.0": RestTransport,
    "JSONRPC 0.3": CompatJsonRpcTransport,
}


# -- a2a-sdk over every declared interface -------------------------------------------------------


def user_message(text: str, task: Task | None = None) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=f"msg-{uuid.uuid4().hex}",
        parts=[Part(text=text)],
        task_id=task.id if task else "",
        context_id=task.context_id if task else "",
    )


def artifact_text(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def send(
    agent: rpc.SdkAgent, text: str, *, task: Task | None = None, detach: bool = False
) -> tuple[Task, list[StreamResponse]]:
    """Send; non-streaming: the one response; streaming: every event (or only the first when
    `detach`, hanging up). Returns the task as the server then has it, and the events."""
    request = SendMessageRequest(
        message=user_message(text, task),
        configuration=SendMessageConfiguration(return_immediately=detach),
    )
    events: list[StreamResponse] = []
    iterator = agent.client.send_message(request)
    async for event in iterator:
        events.append(event)
        if detach:
            break
    await iterator.aclose()
    assert events and events[0].WhichOneof("payload") == "task", events
    if detach or len(events) == 1:
        return events[0].task, events
    last = events[-1]
    assert last.WhichOneof("payload") == "status_update", last
    return await agent.client.get_task(GetTaskRequest(id=events[0].task.id)), events


async def settle(agent: rpc.SdkAgent, task_id: str, timeout: float = 20.0) -> Task:
    deadline = time.monotonic() + timeout
    while True:
        task = await agent.client.get_task(GetTaskRequest(id=task_id))
        if task.status.state in rpc.TERMINAL:
            return task
        assert time.monotonic() < deadline, task
        await asyncio.sleep(0.1)


async def blocking(agent: rpc.SdkAgent, streaming: bool) -> str:
    task, events = await send(agent, "hello sdk")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    assert artifact_text(task) == "Echo: hello sdk"
    if streaming:
        kinds = [e.WhichOneof("payload") for e in events]
        assert kinds[0] == "task" and "artifact_update" in kinds, kinds
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        streamed = "".join(
            p.text
            for e in events
            if e.HasField("artifact_update")
            for p in e.artifact_update.artifact.parts
        )
        assert streamed == "Echo: hello sdk"
    else:
        assert len(events) == 1
    return task.id


async def non_blocking(agent: rpc.SdkAgent) -> str:
    task, _ = await send(agent, "poll me [slow=0.6]", detach=True)
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    done = await settle(agent, task.id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(done) == "Echo: poll me [slow=0.6]"
    return task.id


async def multi_turn(agent: rpc.SdkAgent) -> str:
    task, _ = await send(agent, "first [input]")
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
    assert "".join(p.text for p in task.status.message.parts) == "What should I add to the echo?"
    done, _ = await send(agent, "second", task=task)
    assert done.id == task.id and done.context_id == task.context_id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
    assert artifact_text(done) == "Echo: first [input] + second"
    return task.id


async def cancel(agent: rpc.SdkAgent) -> str:
    task, _ = await send(agent, "long [slow=5]", detach=True)
    canceled = await agent.client.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled.id == task.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled
    got = await agent.client.get_task(GetTaskRequest(id=task.id))
    assert got.status.state == TaskState.TASK_STATE_CANCELED
    return task.id


async def subscribe(agent: rpc.SdkAgent, streaming: bool) -> str:
    task, _ = await send(agent, "watch [slow=1]", detach=True)
    if not streaming:
        # The SDK refuses client-side: subscribing needs a streaming client.
        with pytest.raises(NotImplementedError):
            async for _ in agent.client.subscribe(SubscribeToTaskRequest(id=task.id)):
                pass
        await settle(agent, task.id)
        return task.id
    events = [e async for e in agent.client.subscribe(SubscribeToTaskRequest(id=task.id))]
    assert events[0].WhichOneof("payload") == "task" and events[0].task.id == task.id, events
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, events[-1]
    done = await agent.client.get_task(GetTaskRequest(id=task.id))
    assert artifact_text(done) == "Echo: watch [slow=1]"
    return task.id


async def failures(agent: rpc.SdkAgent, completed_id: str) -> None:
    with pytest.raises(a2a_errors.TaskNotFoundError):
        await agent.client.get_task(GetTaskRequest(id=f"missing-{uuid.uuid4().hex}"))
    with pytest.raises(a2a_errors.TaskNotCancelableError):
        await agent.client.cancel_task(CancelTaskRequest(id=completed_id))


async def push_configs(agent: rpc.SdkAgent, task_id: str) -> None:
    """Push config CRUD through the SDK (the 0.3 transport maps it to the 0.3 methods)."""
    config = TaskPushNotificationConfig(
        task_id=task_id, url="http://127.0.0.1:9/hook", token="tok-sdk"
    )
    created = await agent.client.create_task_push_notification_config(config)
    assert created.id and created.task_id == task_id and created.token == "tok-sdk", created
    got = await agent.client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id)
    )
    assert got.url == "http://127.0.0.1:9/hook" and got.id == created.id, got
    listed = await agent.client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert [c.id for c in listed.configs] == [created.id], listed
    await agent.client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=created.id)
    )
    listed = await agent.client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert list(listed.configs) == [], listed
    with pytest.raises(a2a_errors.TaskNotFoundError):
        await agent.client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=f"missing-{uuid.uuid4().hex}", url=config.url)
        )


@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "streaming"])
@pytest.mark.parametrize("interface", rpc.INTERFACES)
async def test_sdk_client_over_every_declared_interface(
    base_url: str, interface: str, streaming: bool
) -> None:
    """The SDK picks `interface` from our card and every operation of that version works."""
    async with rpc.sdk_client(base_url, interface, streaming=streaming) as agent:
        transport = agent.client._transport  # which transport the SDK chose from our card
        assert type(transport) is TRANSPORTS[interface], type(transport)
        seen_from = len(SEEN)
        created = await asyncio.gather(
            blocking(agent, streaming),
            non_blocking(agent),
            multi_turn(agent),
            cancel(agent),
            subscribe(agent, streaming),
        )
        await failures(agent, created[0])
        await push_configs(agent, created[0])

        if interface == "JSONRPC 0.3":
            # The 0.3 compat transport has no tasks/list: it refuses client-side.
            before = len(SEEN)
            with pytest.raises(NotImplementedError, match="ListTasks is not supported"):
                await agent.client.list_tasks(ListTasksRequest())
            assert len(SEEN) == before, "no request may have been sent"
        else:
            listed = await agent.client.list_tasks(ListTasksRequest(page_size=100))
            assert sorted(t.id for t in listed.tasks) == sorted(created), listed
            assert listed.total_size == len(created)

        # No extended card (capabilities.extendedAgentCard false): the SDK answers with the
        # card it has, without asking the server (the server's answer is tested raw below).
        before = len(SEEN)
        card = await agent.client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert card == agent.card
        assert len(SEEN) == before

        # What went over the wire really was the chosen binding and version.
        mine = [s for s in SEEN[seen_from:] if s.source == "sdk"]
        assert mine
        if interface == "HTTP+JSON 1.0":
            assert all(s.rpc is None for s in mine), mine
        else:
            version = interface.split()[1]
            assert all(s.rpc and s.rpc.startswith(version + " ") for s in mine), mine
            methods = {s.rpc.split(" ", 1)[1] for s in mine if s.rpc}
            expected = (
                {"SendMessage", "GetTask", "CancelTask", "ListTasks"}
                if version == "1.0"
                else {"message/send", "tasks/get", "tasks/cancel"}
            )
            if streaming:
                expected |= (
                    {"SendStreamingMessage", "SubscribeToTask"}
                    if version == "1.0"
                    else {"message/stream", "tasks/resubscribe"}
                )
                expected -= {"SendMessage", "message/send"}
            assert expected <= methods, methods


# -- raw A2A 1.0 JSON-RPC ------------------------------------------------------------------------


@pytest.fixture
def c(raw: Callable[..., httpx.Client]) -> httpx.Client:
    """A checked client speaking A2A 1.0 JSON-RPC as a fresh principal."""
    return raw(principal=new_principal("rpc"), version="1.0")


def send10(client: httpx.Client, text: str, **config: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": rpc.msg10(text)}
    if config:
        params["configuration"] = config
    response = rpc.result(client, "SendMessage", params)
    assert set(response) == {"task"}, response
    return response["task"]


def test_send_message_blocking_exact_frame(c: httpx.Client) -> None:
    message = rpc.msg10("hello rpc")
    envelope, response = rpc.post(c, "SendMessage", {"message": message}, id="send-1")
    assert response.headers["content-type"] == "application/json"
    assert set(envelope) == {"jsonrpc", "id", "result"} and envelope["id"] == "send-1"
    task = envelope["result"]["task"]
    assert set(task) == {"id", "contextId", "status", "artifacts", "history"}, task
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [(a["artifactId"], a["name"]) for a in task["artifacts"]] == [("echo", "echo")]
    assert rpc.text10(task) == "Echo: hello rpc"
    assert task["history"] == [{**message, "contextId": task["contextId"], "taskId": task["id"]}]


def test_send_non_blocking_then_get_task_polling(c: httpx.Client) -> None:
    task = send10(c, "later [slow=0.5]", returnImmediately=True)
    pending = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
    done = rpc.pending_then(c, "GetTask", task, pending, "TASK_STATE_COMPLETED")
    assert rpc.text10(done) == "Echo: later [slow=0.5]"
    short = rpc.result(c, "GetTask", {"id": task["id"], "historyLength": 0})
    assert "history" not in short and short["id"] == task["id"]


def test_multi_turn_input_required(c: httpx.Client) -> None:
    task = send10(c, "name [input]")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["role"] == "ROLE_AGENT"
    follow = rpc.msg10("Ada", task_id=task["id"], context_id=task["contextId"])
    done = rpc.result(c, "SendMessage", {"message": follow})["task"]
    assert done["id"] == task["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert rpc.text10(done) == "Echo: name [input] + Ada"


def test_list_tasks_filters_and_pages(c: httpx.Client) -> None:
    done = [send10(c, f"list {i}") for i in range(3)]
    waiting = send10(c, "list [input]")
    listed = rpc.result(c, "ListTasks", {"pageSize": 2})
    assert listed["totalSize"] == 4 and listed["pageSize"] == 2 and len(listed["tasks"]) == 2
    rest = rpc.result(c, "ListTasks", {"pageSize": 2, "pageToken": listed["nextPageToken"]})
    ids = {t["id"] for t in listed["tasks"] + rest["tasks"]}
    assert ids == {t["id"] for t in done} | {waiting["id"]}
    assert not rest.get("nextPageToken")
    only = rpc.result(c, "ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED"})
    assert [t["id"] for t in only["tasks"]] == [waiting["id"]]
    with_artifacts = rpc.result(c, "ListTasks", {"includeArtifacts": True, "pageSize": 10})
    assert all("artifacts" in t for t in with_artifacts["tasks"] if t["id"] != waiting["id"])
    without = rpc.result(c, "ListTasks", {"pageSize": 10})
    assert all("artifacts" not in t for t in without["tasks"])


def test_cancel_task_and_cancel_completed(c: httpx.Client) -> None:
    task = send10(c, "cancel me [slow=5]", returnImmediately=True)
    canceled = rpc.result(c, "CancelTask", {"id": task["id"]})
    assert canceled["id"] == task["id"] and canceled["status"]["state"] == "TASK_STATE_CANCELED"
    done = send10(c, "finished")
    err = rpc.error(c, "CancelTask", {"id": done["id"]}, code=-32002)
    assert rpc.error_info(err)["reason"] == "TASK_NOT_CANCELABLE"


def test_send_streaming_message_frames(c: httpx.Client) -> None:
    message = rpc.msg10("stream these words")
    streamed = rpc.stream(c, "SendStreamingMessage", {"message": message}, id=77)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert all(e["id"] == 77 and set(e) == {"jsonrpc", "id", "result"} for e in streamed.envelopes)
    results = streamed.results
    members = [next(iter(r)) for r in results]
    assert members[0] == "task" and results[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert members[-1] == "statusUpdate"
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert set(members[1:-1]) <= {"statusUpdate", "artifactUpdate"}
    text = "".join(
        p["text"]
        for r in results
        if "artifactUpdate" in r
        for p in r["artifactUpdate"]["artifact"]["parts"]
    )
    assert text == "Echo: stream these words"
    chunks = [r["artifactUpdate"] for r in results if "artifactUpdate" in r]
    assert chunks[-1].get("lastChunk") is True and all(ch.get("append") for ch in chunks[1:])


def test_subscribe_to_task_frames(c: httpx.Client) -> None:
    task = send10(c, "subscribe [slow=1]", returnImmediately=True)
    streamed = rpc.stream(c, "SubscribeToTask", {"id": task["id"]}, id="sub")
    first = streamed.results[0]
    assert set(first) == {"task"} and first["task"]["id"] == task["id"]
    assert streamed.results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # A task already terminal has no stream to join (spec §3.1.6): UnsupportedOperationError.
    err = rpc.error(c, "SubscribeToTask", {"id": task["id"]}, code=-32004)
    assert rpc.error_info(err)["reason"] == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize(
    "method", ["GetTask", "CancelTask", "SubscribeToTask", "SendStreamingMessage"]
)
def test_unknown_task_is_task_not_found(c: httpx.Client, method: str) -> None:
    missing = f"missing-{uuid.uuid4().hex}"
    if method == "SendStreamingMessage":
        params: dict[str, Any] = {"message": rpc.msg10("x", task_id=missing)}
    else:
        params = {"id": missing}
    err = rpc.error(c, method, params, code=-32001)
    assert rpc.error_info(err)["reason"] == "TASK_NOT_FOUND"


def test_tasks_of_other_principals_are_not_found(raw: Callable[..., httpx.Client]) -> None:
    owner = raw(principal=new_principal("owner"))
    other = raw(principal=new_principal("other"))
    task = send10(owner, "mine")
    rpc.error(other, "GetTask", {"id": task["id"]}, code=-32001)
    assert rpc.result(other, "ListTasks", {})["tasks"] == []


def test_push_config_methods_exact_frames(c: httpx.Client) -> None:
    task = rpc.result(c, "SendMessage", {"message": rpc.msg10("for push")})["task"]
    hook = "http://127.0.0.1:9/hook"
    created = rpc.result(
        c,
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "url": hook, "token": "t-1"},
    )
    assert set(created) == {"id", "taskId", "url", "token"} and created["url"] == hook, created
    ids = {"taskId": task["id"], "id": created["id"]}
    assert rpc.result(c, "GetTaskPushNotificationConfig", ids) == created
    listed = rpc.result(c, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert listed == {"configs": [created]}, listed
    assert rpc.result(c, "DeleteTaskPushNotificationConfig", ids) == {}
    assert rpc.result(c, "DeleteTaskPushNotificationConfig", ids) == {}  # idempotent
    err = rpc.error(c, "GetTaskPushNotificationConfig", ids, code=-32001)
    assert rpc.error_info(err)["reason"] == "TASK_NOT_FOUND"
    err = rpc.error(
        c, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": "ftp://x"}, code=-32602
    )
    assert "url" in rpc.violated_fields(err), err


def test_get_extended_agent_card_is_unsupported(c: httpx.Client) -> None:
    # capabilities.extendedAgentCard is false: UnsupportedOperationError (spec §3.3.2 / §13).
    err = rpc.error(c, "GetExtendedAgentCard", {}, code=-32004)
    assert rpc.error_info(err)["reason"] == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize("request_id", ["abc", 7, 0, -3, 2.5, None], ids=repr)
def test_id_is_echoed(c: httpx.Client, request_id: Any) -> None:
    envelope, _ = rpc.post(c, "ListTasks", {}, id=request_id)
    assert envelope["id"] == request_id and type(envelope["id"]) is type(request_id)
    assert "result" in envelope
    envelope, _ = rpc.post(c, "GetTask", {"id": "nope"}, id=request_id)
    assert envelope["id"] == request_id and envelope["error"]["code"] == -32001


@pytest.mark.parametrize("path", ["", "/"], ids=["no-slash", "slash"])
def test_endpoint_answers_at_base_url_with_and_without_slash(base_url: str, path: str) -> None:
    with checked_client(base_url, principal=new_principal(), version="1.0") as client:
        response = client.post(path, json=rpc.request_body("ListTasks", {}, id=1))
        assert response.request.url.path == "/"
        assert response.json()["result"]["tasks"] == []
    with checked_client(f"{base_url}{path}", principal=new_principal()) as client:
        envelope = client.post("", json=rpc.request_body("ListTasks", {}, id=2)).json()
        assert envelope["id"] == 2 and envelope["result"]["tasks"] == [], envelope


def test_version_in_query_parameter(base_url: str) -> None:
    with checked_client(base_url, principal=new_principal(), version=None) as client:
        envelope = client.post(
            "/", params={"A2A-Version": "1.0"}, json=rpc.request_body("ListTasks", {}, id=1)
        ).json()
        assert "result" in envelope, envelope


# -- request errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_non_json_content_type(c: httpx.Client, content_type: str) -> None:
    body = rpc.request_body("ListTasks", {}, id=1)
    response = c.post("/", content=json.dumps(body), headers={"content-type": content_type})
    error = response.json()["error"]
    assert error["code"] == -32005, error
    assert rpc.error_info(error)["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    assert "application/json" in error["message"]


def test_a2a_json_content_type_is_accepted(c: httpx.Client) -> None:
    body = json.dumps(rpc.request_body("ListTasks", {}, id=1))
    response = c.post("/", content=body, headers={"content-type": "application/a2a+json"})
    assert "result" in response.json()


@pytest.mark.parametrize("text", ["{bad", "", '{"jsonrpc": "2.0", "id": 1,'], ids=repr)
def test_invalid_json_is_parse_error_with_null_id(c: httpx.Client, text: str) -> None:
    response = c.post("/", content=text, headers={"content-type": "application/json"})
    envelope = response.json()
    assert envelope["id"] is None and envelope["error"]["code"] == -32700, envelope
    assert rpc.error_info(envelope["error"])["reason"] == "JSON_PARSE"


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ("just a string", "object"),
        (42, "object"),
        ({"id": 1, "method": "ListTasks"}, "jsonrpc"),
        ({"jsonrpc": "1.0", "id": 1, "method": "ListTasks"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, "method"),
        ({"jsonrpc": "2.0", "id": 1}, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, "method"),
        ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ListTasks"}, "id"),
        ({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": "x"}, "params"),
    ],
    ids=repr,
)
def test_invalid_request_object(c: httpx.Client, payload: Any, needle: str) -> None:
    envelope = c.post("/", json=payload).json()
    assert envelope["error"]["code"] == -32600, envelope
    assert needle in envelope["error"]["message"], envelope
    assert rpc.error_info(envelope["error"])["reason"] == "INVALID_REQUEST"


def test_batch_is_refused_clearly(c: httpx.Client) -> None:
    batch = [rpc.request_body("ListTasks", {}, id=1), rpc.request_body("ListTasks", {}, id=2)]
    envelope = c.post("/", json=batch).json()
    assert envelope["id"] is None and envelope["error"]["code"] == -32600, envelope
    assert "Batch requests are not supported" in envelope["error"]["message"]


def test_unknown_method(c: httpx.Client) -> None:
    err = rpc.error(c, "DoSomething", {}, code=-32601)
    assert "DoSomething" in err["message"] and "SendMessage" in err["message"]
    assert rpc.error_info(err)["reason"] == "METHOD_NOT_FOUND"


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        (
            "SendMessage",
            {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
            "message.messageId",
        ),
        ("SendMessage", {}, "message"),
        ("ListTasks", {"pageSize": 0}, "pageSize"),
        ("ListTasks", {"status": "TASK_STATE_BOGUS"}, "status"),
        ("GetTask", {"id": "t", "historyLength": -1}, "historyLength"),
        ("GetTask", {}, "id"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_invalid_params_name_the_field(
    c: httpx.Client, method: str, params: dict, field: str
) -> None:
    err = rpc.error(c, method, params, code=-32602)
    assert rpc.error_info(err)["reason"] == "INVALID_PARAMS"
    assert field in rpc.violated_fields(err), err


def test_notification_gets_204_and_takes_effect(c: httpx.Client) -> None:
    body = rpc.request_body("SendMessage", {"message": rpc.msg10("fire and forget")}, id=...)
    assert "id" not in body
    response = c.post("/", json=body)
    assert response.status_code == 204 and response.content == b""
    tasks = rpc.result(c, "ListTasks", {"includeArtifacts": True})["tasks"]
    assert len(tasks) == 1 and rpc.text10(tasks[0]) == "Echo: fire and forget", tasks


def test_failing_notification_gets_no_reply(base_url: str) -> None:
    # Unchecked client: the wire hook would (rightly) refuse the reply.
    with httpx.Client(base_url=base_url, headers={"A2A-Version": "1.0"}) as client:
        response = client.post(
            "/", json={"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}
        )
    assert response.status_code == 204 and response.content == b"", response.text


# -- one task, every binding ---------------------------------------------------------------------


def test_cross_binding_create_read_stream_cancel(raw: Callable[..., httpx.Client]) -> None:
    """Spec §5.1 functional equivalence: a task created over one binding is the same task over
    the others (same owner), whichever reads, streams or cancels it."""
    principal = new_principal("cross")
    rest = raw(principal=principal, version="1.0")
    v10 = raw(principal=principal, version="1.0")
    v03 = raw(principal=principal, version=None)

    # Created over HTTP+JSON, read over JSON-RPC 1.0 and 0.3, watched over 1.0, cancelled over
    # 0.3, and the outcome read back over HTTP+JSON.
    body = {"message": rpc.msg10("cross [slow=20]"), "configuration": {"returnImmediately": True}}
    created = rest.post("/message:send", json=body).json()["task"]
    task_id = created["id"]
    assert rpc.result(v10, "GetTask", {"id": task_id})["contextId"] == created["contextId"]
    assert rpc.result(v03, "tasks/get", {"id": task_id})["kind"] == "task"
    with v10.stream("POST", "/", json=rpc.request_body("SubscribeToTask", {"id": task_id})) as s:
        lines = s.iter_lines()
        first = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
        assert first["result"]["task"]["id"] == task_id, first
        canceled = rpc.result(v03, "tasks/cancel", {"id": task_id})
        assert canceled["status"]["state"] == "canceled", canceled
        last = None
        for line in lines:
            if line.startswith("data: "):
                last = json.loads(line[6:])["result"]
        assert last and last["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED", last
    assert rest.get(f"/tasks/{task_id}").json()["status"]["state"] == "TASK_STATE_CANCELED"

    # Created over 0.3, listed over JSON-RPC 1.0, read over HTTP+JSON, and continued (the
    # second turn of an input-required task) over 1.0.
    asked = rpc.result(v03, "message/send", {"message": rpc.msg03("two turns [input]")})
    assert asked["status"]["state"] == "input-required", asked
    listed = rpc.result(v10, "ListTasks", {"contextId": asked["contextId"]})
    assert [t["id"] for t in listed["tasks"]] == [asked["id"]], listed
    got = rest.get(f"/tasks/{asked['id']}").json()
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", got
    follow = rpc.msg10("answer", task_id=asked["id"], context_id=asked["contextId"])
    done = rpc.result(v10, "SendMessage", {"message": follow})["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert rpc.text10(done) == "Echo: two turns [input] + answer"
    assert rpc.text03(rpc.result(v03, "tasks/get", {"id": asked["id"]})) == rpc.text10(done)
