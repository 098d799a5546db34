"""Protocol items of the 1.0.1 spec over every binding (HTTP+JSON 1.0, JSON-RPC 1.0, JSON-RPC
0.3), raw wire plus the official client: direct Message replies (§3.1.1), extensions (§4.6),
subscriptions across interruptions are in test_streaming.py; the Streaming switch, send
deduplication off by default, `data: null` parts, every field violation, and the smaller
JSON-RPC corrections. Every response body is strictly checked by the fixtures' clients."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest

from tests.e2e import rpc
from tests.e2e.conftest import DevServer, new_principal, server_fixture
from tests.e2e.flows_for_tests import OPTIONAL_EXTENSION, REQUIRED_EXTENSION
from tests.e2e.test_wire import message_body, reason_of

pytestmark = pytest.mark.e2e

UPPERCASE = "urn:a2a-serverless:echo:uppercase:v1"
INTERFACES = ("HTTP+JSON 1.0", "JSONRPC 1.0", "JSONRPC 0.3")

# One server for the strict flow (a required extension) with streaming switched off.
strict_server = server_fixture(
    "dev-strict",
    args=("--flow", "tests.e2e.flows_for_tests:strict"),
    env={"STREAMING": "false"},
)


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", []))


# -- direct Message replies --------------------------------------------------------------------


def test_rest_direct_reply_is_a_message_and_no_task(http: httpx.Client) -> None:
    response = http.post("/message:send", json=message_body("hi [reply]", contextId="ctx-r"))
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["message"]
    message = body["message"]
    assert message["role"] == "ROLE_AGENT" and message["contextId"] == "ctx-r"
    assert "taskId" not in message
    assert message["parts"] == [{"text": "Echo: hi [reply]"}]
    with http.stream("POST", "/message:stream", json=message_body("again [reply]")) as stream:
        frames = [line for line in stream.iter_lines() if line.startswith("data: ")]
    assert len(frames) == 1 and '"message"' in frames[0]
    assert http.get("/tasks").json()["totalSize"] == 0  # nothing was created


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_jsonrpc_direct_reply_is_a_message(raw: Callable[..., httpx.Client], version: str) -> None:
    client = raw(principal=new_principal(), version=None if version == "0.3" else version)
    if version == "1.0":
        result = rpc.result(client, "SendMessage", {"message": rpc.msg10("hi [reply]")})
        assert result["message"]["parts"] == [{"text": "Echo: hi [reply]"}]
        streamed = rpc.stream(client, "SendStreamingMessage", {"message": rpc.msg10("s [reply]")})
        assert [list(r) for r in streamed.results] == [["message"]]
        assert rpc.result(client, "ListTasks", {})["totalSize"] == 0
    else:
        result = rpc.result(client, "message/send", {"message": rpc.msg03("hi [reply]")})
        assert result["kind"] == "message" and result["role"] == "agent"
        assert result["parts"] == [{"kind": "text", "text": "Echo: hi [reply]"}]
        streamed = rpc.stream(client, "message/stream", {"message": rpc.msg03("s [reply]")})
        assert [r["kind"] for r in streamed.results] == ["message"]


@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "streaming"])
@pytest.mark.parametrize("interface", INTERFACES)
async def test_the_sdk_client_receives_a_direct_reply(
    base_url: str, interface: str, streaming: bool
) -> None:
    async with rpc.sdk_client(base_url, interface, streaming=streaming) as agent:
        request = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="yo [reply]")]
            )
        )
        responses = [r async for r in agent.client.send_message(request)]
    assert [r.WhichOneof("payload") for r in responses] == ["message"]
    assert responses[0].message.parts[0].text == "Echo: yo [reply]"
    assert responses[0].message.role == Role.ROLE_AGENT


# -- extensions --------------------------------------------------------------------------------


def test_the_card_declares_the_flows_extensions(http: httpx.Client) -> None:
    card = http.get("/.well-known/agent-card.json").json()
    assert card["capabilities"]["extensions"] == [
        {"uri": UPPERCASE, "description": card["capabilities"]["extensions"][0]["description"]}
    ]


def test_rest_extension_is_activated_echoed_and_reaches_the_flow(http: httpx.Client) -> None:
    headers = {"A2A-Extensions": f"urn:unknown:v1, {UPPERCASE}"}
    response = http.post("/message:send", json=message_body("loud"), headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["a2a-extensions"] == UPPERCASE  # the unknown one is ignored
    task = response.json()["task"]
    assert artifact_text(task) == "ECHO: LOUD"
    assert {UPPERCASE} == {e for a in task["artifacts"] for e in a.get("extensions", [])}
    with http.stream(
        "POST", "/message:stream", json=message_body("streamed"), headers=headers
    ) as stream:
        assert stream.headers["a2a-extensions"] == UPPERCASE
        stream.read()
    plain = http.post("/message:send", json=message_body("quiet"))
    assert "a2a-extensions" not in plain.headers
    assert artifact_text(plain.json()["task"]) == "Echo: quiet"


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_jsonrpc_extension_headers(raw: Callable[..., httpx.Client], version: str) -> None:
    client = raw(principal=new_principal(), version=None if version == "0.3" else version)
    header = "A2A-Extensions" if version == "1.0" else "X-A2A-Extensions"
    method, message = (
        ("SendMessage", rpc.msg10("rpc"))
        if version == "1.0"
        else ("message/send", rpc.msg03("rpc"))
    )
    envelope, response = rpc.post(client, method, {"message": message}, headers={header: UPPERCASE})
    assert response.headers[header] == UPPERCASE
    task = envelope["result"]["task"] if version == "1.0" else envelope["result"]
    assert artifact_text(task) == "ECHO: RPC"


def test_a_required_extension_must_be_requested(strict_server: DevServer) -> None:
    with httpx.Client(
        base_url=strict_server.base_url,
        headers={"A2A-Version": "1.0", "X-Local-Principal": new_principal()},
        timeout=30,
    ) as client:
        refused = client.post("/message:send", json=message_body("hi"))
        assert refused.status_code == 400, refused.text
        assert reason_of(refused.json()["error"]) == "EXTENSION_SUPPORT_REQUIRED"
        assert REQUIRED_EXTENSION in refused.json()["error"]["message"]
        assert client.get("/tasks").json()["totalSize"] == 0
        rpc_refused = client.post(
            "/", json=rpc.request_body("SendMessage", {"message": rpc.msg10("hi")})
        ).json()
        assert rpc_refused["error"]["code"] == -32008
        asked = {"A2A-Extensions": f"{OPTIONAL_EXTENSION},{REQUIRED_EXTENSION}"}
        done = client.post("/message:send", json=message_body("hi"), headers=asked)
        assert done.status_code == 200, done.text
        assert done.headers["a2a-extensions"] == f"{REQUIRED_EXTENSION},{OPTIONAL_EXTENSION}"
        assert artifact_text(done.json()["task"]) == f"{REQUIRED_EXTENSION},{OPTIONAL_EXTENSION}"


# -- the Streaming switch ----------------------------------------------------------------------


def test_streaming_off_is_declared_and_refused_on_every_binding(strict_server: DevServer) -> None:
    ask = {"A2A-Extensions": REQUIRED_EXTENSION}
    with httpx.Client(
        base_url=strict_server.base_url,
        headers={"A2A-Version": "1.0", "X-Local-Principal": new_principal(), **ask},
        timeout=30,
    ) as client:
        card = client.get("/.well-known/agent-card.json").json()
        assert card["capabilities"]["streaming"] is False
        refused = client.post("/message:stream", json=message_body("s"))
        assert refused.status_code == 400
        assert reason_of(refused.json()["error"]) == "UNSUPPORTED_OPERATION"
        task = client.post("/message:send", json=message_body("t")).json()["task"]
        refused = client.post(f"/tasks/{task['id']}:subscribe")
        assert refused.status_code == 400
        body = rpc.request_body("SendStreamingMessage", {"message": rpc.msg10("s")})
        assert client.post("/", json=body).json()["error"]["code"] == -32004
        v03 = rpc.request_body("message/stream", {"message": rpc.msg03("s")})
        answer = client.post("/", json=v03, headers={"A2A-Version": "0.3"}).json()
        assert answer["error"]["code"] == -32004
        # In 0.3 spellings: the method the 0.3 caller called.
        assert answer["error"]["message"].startswith("message/stream is not supported")
        v03 = rpc.request_body("tasks/resubscribe", {"id": task["id"]})
        answer = client.post("/", json=v03, headers={"A2A-Version": "0.3"}).json()
        assert answer["error"]["code"] == -32004
        assert answer["error"]["message"].startswith("tasks/resubscribe is not supported")
        assert client.get("/tasks").json()["totalSize"] == 1  # only the unary send's task


# -- deduplication, data: null, field violations, JSON-RPC corrections -------------------------


def test_reusing_a_message_id_is_a_new_send_by_default(http: httpx.Client) -> None:
    body = message_body("same words")
    first = http.post("/message:send", json=body).json()["task"]
    second = http.post("/message:send", json=body).json()["task"]
    assert first["id"] != second["id"]
    assert http.get("/tasks").json()["totalSize"] == 2


def test_a_data_part_may_be_null(http: httpx.Client, raw: Callable[..., httpx.Client]) -> None:
    body = message_body("with data")
    body["message"]["parts"].append({"data": None})
    task = http.post("/message:send", json=body).json()["task"]
    got = http.get(f"/tasks/{task['id']}").json()
    assert got["history"][0]["parts"] == [{"text": "with data"}, {"data": None}]
    client = raw(principal=http.headers["x-local-principal"], version="1.0")
    fetched = rpc.result(client, "GetTask", {"id": task["id"]})
    assert fetched["history"][0]["parts"][1] == {"data": None}
    legacy = raw(principal=http.headers["x-local-principal"], version=None)
    old = rpc.result(legacy, "tasks/get", {"id": task["id"]})
    assert old["history"][0]["parts"][1] == {"kind": "data", "data": {"value": None}}


def test_every_field_violation_is_reported(http: httpx.Client) -> None:
    body = message_body("x", role="ROLE_AGENT", contextId="c" * 300)
    response = http.post("/message:send", json=body)
    assert response.status_code == 400
    fields = [
        v["field"]
        for d in response.json()["error"]["details"]
        if d["@type"].endswith("BadRequest")
        for v in d["fieldViolations"]
    ]
    assert fields == ["message.role", "message.contextId"]


def test_schema_and_semantic_violations_are_reported_together(
    raw: Callable[..., httpx.Client],
) -> None:
    """One refusal names every field, whether the schema (parts) or the send's own checks
    (role, id size) find it, on every binding; 0.3 in 0.3 spellings."""
    principal = new_principal()
    message = {"messageId": "v3", "role": "ROLE_AGENT", "contextId": "c" * 300, "parts": []}
    expected = ["message.parts", "message.role", "message.contextId"]
    http = raw(principal=principal, version="1.0")
    rest = http.post("/message:send", json={"message": message})
    assert rest.status_code == 400
    error = rest.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert rpc.violated_fields({"data": error["details"]}) == expected
    v10 = rpc.error(http, "SendMessage", {"message": message}, code=-32602)
    assert rpc.violated_fields(v10) == expected
    legacy = raw(principal=principal, version=None)
    for method in ("message/send", "message/stream"):
        message03 = {**message, "kind": "message", "role": "agent"}
        v03 = rpc.error(legacy, method, {"message": message03}, code=-32602)
        assert rpc.violated_fields(v03) == expected
        assert "ROLE_" not in json.dumps(v03) and "must be 'user'" in v03["message"]
    assert http.get("/tasks").json()["totalSize"] == 0


def test_0_3_errors_are_spelled_as_0_3(raw: Callable[..., httpx.Client]) -> None:
    legacy = raw(principal=new_principal(), version=None)
    agent = {**rpc.msg03("from an agent"), "role": "agent"}
    refused = rpc.error(legacy, "message/send", {"message": agent}, code=-32602)
    assert refused["message"] == "message.role: must be 'user' for messages sent to an agent"
    assert rpc.violated_fields(refused) == ["message.role"]
    task = rpc.result(legacy, "message/send", {"message": rpc.msg03("done")})
    error = rpc.error(legacy, "tasks/cancel", {"id": task["id"]}, code=-32002)
    assert rpc.error_info(error)["metadata"]["state"] == "completed"
    assert "TASK_STATE_" not in json.dumps(error)


def test_jsonrpc_corrections(raw: Callable[..., httpx.Client]) -> None:
    principal = new_principal()
    client = raw(principal=principal, version="1.0")
    body = rpc.request_body("GetTask", {"id": "x"}, id="keep-me")
    answer = client.post("/", json=body, headers={"Content-Type": "text/plain"}).json()
    assert answer["id"] == "keep-me" and answer["error"]["code"] == -32005
    legacy = raw(principal=principal, version=None)
    task = rpc.result(legacy, "message/send", {"message": rpc.msg03("done")})
    error = rpc.error(legacy, "tasks/cancel", {"id": task["id"]}, code=-32002)
    assert "TASK_STATE_" not in error["message"] and "completed" in error["message"]
