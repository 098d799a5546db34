"""JSON-RPC request handling on `POST /` (bindings/jsonrpc.py), without AWS: the envelope, id
echo, method routing per version, notifications, batch refusal and error rendering, against
a test double of the service (the e2e suite runs the same binding on the local stack)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from a2a_serverless.bindings.jsonrpc import V03, jsonrpc_router
from a2a_serverless.bindings.rest import create_app
from a2a_serverless.core.connections import Connection, unbounded
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.errors import TaskNotFoundError
from a2a_serverless.core.send import Accepted
from a2a_serverless.core.service import A2AService
from a2a_serverless.models import (
    Caller,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a_serverless.models.v03 import task_to_v03
from tests.helpers import violated_fields

TASK = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.WORKING))


class StubService:
    """The few A2AService methods the JSON-RPC binding calls; records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def get_task(self, owner: str, task_id: str, history_length: int | None = None) -> Task:
        self.calls.append(("get_task", (owner, task_id, history_length)))
        if task_id == "boom":
            raise RuntimeError("a bug, not an A2A error")
        if task_id != TASK.id:
            raise TaskNotFoundError(taskId=task_id)
        return TASK

    def cancel_task(self, owner: str, task_id: str) -> Task:
        self.calls.append(("cancel_task", task_id))
        return TASK

    def list_tasks(self, owner: str, params: ListTasksRequest) -> ListTasksResponse:
        self.calls.append(("list_tasks", params))
        return ListTasksResponse(tasks=[TASK], next_page_token="", page_size=50, total_size=1)

    @property
    def sender(self) -> StubService:
        return self  # the SEND path's methods are here too

    def context(self, caller: Caller, requested: list[str], base_url: str = "") -> RequestContext:
        supported = tuple(u for u in requested if u == "urn:x:supported")
        return RequestContext(caller, supported, base_url)

    def accept(self, context: RequestContext, request: SendMessageRequest) -> Accepted:
        self.calls.append(("accept", request))
        self.calls.append(("extensions", list(context.extensions)))
        # Not blocking, answer known: the binding answers at once (no wait, no log reads).
        return Accepted(context.owner, TASK.id, 0, None, False, SendMessageResponse(task=TASK))

    def answer(self, accepted: Accepted) -> SendMessageResponse:
        assert accepted.answer is not None
        return accepted.answer

    def blocks(self, request: SendMessageRequest) -> bool:
        return A2AService.blocks(request)

    def connect(self, caller: object, kind: object) -> Connection:
        return unbounded()  # bounds: tests/unit/test_connections.py


class StubPush:
    def __init__(self) -> None:
        self.deleted: list[tuple[str, str]] = []

    def delete(self, owner: str, task_id: str, config_id: str) -> None:
        self.deleted.append((task_id, config_id))


@pytest.fixture
def service() -> StubService:
    return StubService()


@pytest.fixture
def push() -> StubPush:
    return StubPush()


@pytest.fixture
def post(service: StubService, push: StubPush) -> Any:
    app = create_app(jsonrpc_router(service, push))  # type: ignore[arg-type]

    def post(
        body: Any,
        *,
        version: str | None = "1.0",
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
    ) -> httpx.Response:
        headers = {"Content-Type": content_type, **(extra or {})}
        if version is not None:
            headers["A2A-Version"] = version
        content = body if isinstance(body, bytes) else json.dumps(body).encode()

        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.post("/", content=content, headers=headers)

        return asyncio.run(call())

    return post


def rpc(method: str, params: Any = None, id_: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id_}
    if params is not None:
        body["params"] = params
    return body


def error_of(response: httpx.Response, code: int) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    return error


def reason(error: dict[str, Any]) -> str:
    return next(d["reason"] for d in error["data"] if d["@type"].endswith("ErrorInfo"))


@pytest.mark.parametrize("id_", [1, "req-7", 2.5, None])
def test_result_envelope_echoes_the_id(post: Any, id_: Any) -> None:
    response = post(rpc("GetTask", {"id": "t1"}, id_))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"jsonrpc": "2.0", "id": id_, "result": TASK.wire()}


def test_params_reach_the_operation(post: Any, service: StubService) -> None:
    post(rpc("GetTask", {"id": "t1", "historyLength": 3}))
    post(rpc("ListTasks", {"contextId": "c1", "status": "TASK_STATE_WORKING"}))
    assert service.calls[0] == ("get_task", ("anonymous", "t1", 3))
    listed = service.calls[1][1]
    assert (listed.context_id, listed.status) == ("c1", TaskState.WORKING)


def test_the_version_picks_the_method_set_and_the_codec(post: Any) -> None:
    v03 = post(rpc("tasks/get", {"id": "t1"}), version=None).json()
    assert v03["result"] == task_to_v03(TASK) and v03["result"]["kind"] == "task"
    assert post(rpc("tasks/cancel", {"id": "t1"}), version="0.3").json()["result"]["kind"] == "task"

    wrong = error_of(post(rpc("GetTask", {"id": "t1"}), version=None), -32601)
    assert "A2A-Version: 1.0" in wrong["message"] and "tasks/get" in wrong["message"]
    wrong = error_of(post(rpc("tasks/get", {"id": "t1"})), -32601)
    assert "GetTask" in wrong["message"]
    unknown = error_of(post(rpc("tasks/list")), -32601)
    assert reason(unknown) == "METHOD_NOT_FOUND" and "SendMessage" in unknown["message"]


def test_send_message_result_in_each_version(post: Any) -> None:
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    sent = post(rpc("SendMessage", {"message": message})).json()
    assert sent["result"] == {"task": TASK.wire()}
    message03 = {"kind": "message", "messageId": "m1", "role": "user", "parts": []}
    message03["parts"] = [{"kind": "text", "text": "hi"}]
    sent03 = post(rpc("message/send", {"message": message03}), version=None).json()
    assert sent03["result"] == task_to_v03(TASK)


def test_push_operations_reach_the_push_service(post: Any, push: StubPush) -> None:
    deleted = post(rpc("DeleteTaskPushNotificationConfig", {"taskId": "t1", "id": "c1"}))
    assert deleted.json()["result"] == {}
    params03 = {"id": "t1", "pushNotificationConfigId": "c2"}
    deleted03 = post(rpc("tasks/pushNotificationConfig/delete", params03), version="0.3")
    assert "result" in deleted03.json() and deleted03.json()["result"] is None
    assert push.deleted == [("t1", "c1"), ("t1", "c2")]


def test_a_notification_runs_and_gets_no_answer(post: Any, service: StubService) -> None:
    body = rpc("CancelTask", {"id": "t1"})
    del body["id"]
    response = post(body)
    assert (response.status_code, response.content) == (204, b"")
    assert service.calls == [("cancel_task", "t1")]
    failing = rpc("GetTask", {"id": "nope"})
    del failing["id"]
    assert post(failing).status_code == 204


def test_batches_are_refused(post: Any) -> None:
    response = post([rpc("GetTask", {"id": "t1"}), rpc("GetTask", {"id": "t1"}, 2)])
    error = error_of(response, -32600)
    assert response.json()["id"] is None and "Batch" in error["message"]


@pytest.mark.parametrize(
    ("body", "code", "id_"),
    [
        (b"{not json", -32700, None),
        ({"jsonrpc": "1.0", "method": "GetTask", "id": 4}, -32600, 4),
        ({"jsonrpc": "2.0", "method": "", "id": "x"}, -32600, "x"),
        ({"jsonrpc": "2.0", "method": "GetTask", "params": [1], "id": 5}, -32600, 5),
        ({"jsonrpc": "2.0", "method": "GetTask", "id": True}, -32600, None),
    ],
)
def test_invalid_requests(post: Any, body: Any, code: int, id_: Any) -> None:
    response = post(body)
    error_of(response, code)
    assert response.json()["id"] == id_


def test_a2a_errors_are_rendered_from_the_table(post: Any) -> None:
    missing = error_of(post(rpc("GetTask", {"id": "nope"}, "q")), -32001)
    assert reason(missing) == "TASK_NOT_FOUND"
    info = next(d for d in missing["data"] if d["@type"].endswith("ErrorInfo"))
    assert info == {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org",
        "metadata": {"taskId": "nope"},
    }
    invalid = error_of(post(rpc("GetTask", {"historyLength": -1})), -32602)
    bad = next(d for d in invalid["data"] if d["@type"].endswith("BadRequest"))
    assert [v["field"] for v in bad["fieldViolations"]] == ["id", "historyLength"]


def test_version_content_type_and_unexpected_failures(post: Any) -> None:
    unsupported = post(rpc("GetTask", {"id": "t1"}, 9), version="2.0")
    assert unsupported.json()["id"] == 9  # checked once the id is known
    assert reason(error_of(unsupported, -32009)) == "VERSION_NOT_SUPPORTED"
    refused = post(rpc("GetTask", {"id": "t1"}, "id-7"), content_type="text/plain")
    text = error_of(refused, -32005)
    assert text["message"].endswith("send application/json")
    assert refused.json()["id"] == "id-7"  # the body is JSON after all: its id is echoed
    unreadable = post(b"not json", content_type="text/plain")
    assert error_of(unreadable, -32005) and unreadable.json()["id"] is None
    internal = error_of(post(rpc("GetTask", {"id": "boom"})), -32603)
    assert internal["message"] == "Internal error" and "bug" not in json.dumps(internal)


def test_a_message_result_in_0_3_is_a_0_3_message() -> None:
    message = Message(message_id="m", role=Role.AGENT, parts=[Part(text="hello")])
    assert V03.send_result(SendMessageResponse(message=message)) == {
        "kind": "message",
        "messageId": "m",
        "role": "agent",
        "parts": [{"kind": "text", "text": "hello"}],
    }


def test_error_texts_spell_states_as_the_callers_version(
    post: Any, service: StubService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2a_serverless.core.errors import TaskNotCancelableError

    def settled(owner: str, task_id: str) -> Task:
        raise TaskNotCancelableError(f"Task {task_id} is already TASK_STATE_INPUT_REQUIRED")

    monkeypatch.setattr(service, "cancel_task", settled)
    v10 = error_of(post(rpc("CancelTask", {"id": "t1"})), -32002)
    assert v10["message"] == "Task t1 is already TASK_STATE_INPUT_REQUIRED"
    v03 = error_of(post(rpc("tasks/cancel", {"id": "t1"}), version="0.3"), -32002)
    assert v03["message"] == "Task t1 is already input-required"


@pytest.mark.parametrize(
    ("method", "version", "role", "parts"),
    [
        ("SendMessage", "1.0", "ROLE_AGENT", []),
        ("message/send", "0.3", "agent", []),
        ("message/stream", "0.3", "agent", []),
        # A part the 0.3 translation refuses instead of the 1.0 schema.
        ("message/send", "0.3", "agent", [{"kind": "text"}]),
    ],
)
def test_one_refusal_names_the_schemas_and_the_semantic_violations(
    post: Any, service: StubService, method: str, version: str, role: str, parts: list[Any]
) -> None:
    message = {"messageId": "v3", "role": role, "contextId": "c" * 300, "parts": parts}
    error = error_of(post(rpc(method, {"message": message}), version=version), -32602)
    part_field = "message.parts" if not parts else "message.parts[0].text"
    assert violated_fields(error) == [part_field, "message.role", "message.contextId"]
    roles = [v for v in error["data"][-1]["fieldViolations"] if v["field"] == "message.role"]
    expected = "'user'" if version == "0.3" else "ROLE_USER"
    assert roles[0]["description"] == f"must be {expected} for messages sent to an agent"
    assert expected in error["message"] and ("ROLE_" in error["message"]) == (version == "1.0")
    assert not [c for c in service.calls if c[0] == "accept"]


def test_0_3_refusals_spell_methods_and_states_as_0_3(
    post: Any, service: StubService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2a_serverless.core.errors import TaskNotCancelableError, UnsupportedOperationError

    def settled(owner: str, task_id: str) -> Task:
        raise TaskNotCancelableError(
            f"Task {task_id} is already completed", taskId=task_id, state="TASK_STATE_COMPLETED"
        )

    def no_streams(owner: str, task_id: str) -> Any:
        raise UnsupportedOperationError("SubscribeToTask is not supported: streaming is off")

    monkeypatch.setattr(service, "cancel_task", settled)
    monkeypatch.setattr(service, "subscribe", no_streams, raising=False)
    v03 = error_of(post(rpc("tasks/cancel", {"id": "t1"}), version="0.3"), -32002)
    assert v03["data"][0]["metadata"] == {"taskId": "t1", "state": "completed"}
    v10 = error_of(post(rpc("CancelTask", {"id": "t1"})), -32002)
    assert v10["data"][0]["metadata"]["state"] == "TASK_STATE_COMPLETED"
    v03 = error_of(post(rpc("tasks/resubscribe", {"id": "t1"}), version="0.3"), -32004)
    assert v03["message"] == "tasks/resubscribe is not supported: streaming is off"
    v10 = error_of(post(rpc("SubscribeToTask", {"id": "t1"})), -32004)
    assert v10["message"].startswith("SubscribeToTask is not supported")


def test_requested_extensions_reach_the_send_and_the_activated_are_echoed(
    post: Any, service: StubService
) -> None:
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    asked = {"A2A-Extensions": "urn:x:unknown, urn:x:supported"}
    response = post(rpc("SendMessage", {"message": message}), extra=asked)
    assert "result" in response.json(), response.text
    assert response.headers["a2a-extensions"] == "urn:x:supported"
    assert ("extensions", ["urn:x:supported"]) in service.calls
    # 0.3 clients send and read X-A2A-Extensions.
    v03_message = {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    response = post(
        rpc("message/send", {"message": v03_message}),
        version="0.3",
        extra={"X-A2A-Extensions": "urn:x:supported"},
    )
    assert response.headers["x-a2a-extensions"] == "urn:x:supported"
    assert "a2a-extensions" not in response.headers
    # Nothing activated: no header.
    response = post(rpc("SendMessage", {"message": message}))
    assert "a2a-extensions" not in response.headers
