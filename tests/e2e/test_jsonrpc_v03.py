"""A2A 0.3 compatibility on `POST /` (spec a2a-v0.3.0 §7, schema a2a-v0.3.0.schema.json), the
version matrix of the JSON-RPC endpoint, and the Agent Card as 0.3 clients read it.

Every 0.3 request these tests send is validated against the 0.3 schema before it is sent
(tests/e2e/rpc.py), and every answer against the 0.3 schema by the wire hook.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a import types as a2a_types
from google.protobuf import json_format

from tests import wire
from tests.e2e import rpc
from tests.e2e.conftest import DevServer, checked_client, new_principal, server_fixture
from tests.e2e.coverage import CARD_PATH

pytestmark = pytest.mark.e2e


@pytest.fixture
def c(raw: Callable[..., httpx.Client]) -> httpx.Client:
    """A checked client speaking 0.3 (no A2A-Version header: empty means 0.3)."""
    return raw(principal=new_principal("v03"), version=None)


def send03(client: httpx.Client, text: str, **config: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": rpc.msg03(text)}
    if config:
        params["configuration"] = config
    task = rpc.result(client, "message/send", params)
    assert task["kind"] == "task", task
    return task


# -- methods -------------------------------------------------------------------------------------


def test_message_send_blocking_exact_frame(c: httpx.Client) -> None:
    message = rpc.msg03("hello 0.3")
    envelope, _ = rpc.post(c, "message/send", {"message": message}, id="s-1")
    assert set(envelope) == {"jsonrpc", "id", "result"} and envelope["id"] == "s-1"
    task = envelope["result"]
    assert set(task) == {"kind", "id", "contextId", "status", "artifacts", "history"}, task
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert [(a["artifactId"], a["name"]) for a in task["artifacts"]] == [("echo", "echo")]
    assert all(p["kind"] == "text" for a in task["artifacts"] for p in a["parts"])
    assert rpc.text03(task) == "Echo: hello 0.3"
    assert task["history"] == [{**message, "contextId": task["contextId"], "taskId": task["id"]}]


def test_message_send_with_explicit_blocking_true(c: httpx.Client) -> None:
    task = send03(c, "blocking", blocking=True, acceptedOutputModes=["text/plain"])
    assert task["status"]["state"] == "completed"


def test_message_send_non_blocking_then_tasks_get(c: httpx.Client) -> None:
    task = send03(c, "later [slow=0.5]", blocking=False)
    done = rpc.pending_then(c, "tasks/get", task, {"submitted", "working"}, "completed")
    assert rpc.text03(done) == "Echo: later [slow=0.5]"
    short = rpc.result(c, "tasks/get", {"id": task["id"], "historyLength": 1})
    assert len(short["history"]) == 1


def test_multi_turn_input_required(c: httpx.Client) -> None:
    task = send03(c, "who [input]")
    assert task["status"]["state"] == "input-required"
    prompt = task["status"]["message"]
    assert prompt["kind"] == "message" and prompt["role"] == "agent"
    assert prompt["parts"] == [{"kind": "text", "text": "What should I add to the echo?"}]
    follow = rpc.msg03("Grace", task_id=task["id"], context_id=task["contextId"])
    done = rpc.result(c, "message/send", {"message": follow})
    assert done["id"] == task["id"] and done["status"]["state"] == "completed"
    assert rpc.text03(done) == "Echo: who [input] + Grace"
    assert [m["role"] for m in done["history"]] == ["user", "agent", "user"]


def test_file_and_data_parts_round_trip(c: httpx.Client) -> None:
    raw_bytes = base64.b64encode(b"\x00\x01binary").decode()
    message = rpc.msg03("with parts")
    message["parts"] += [
        {"kind": "data", "data": {"answer": 42, "nested": {"ok": True}}},
        {"kind": "file", "file": {"bytes": raw_bytes, "mimeType": "text/plain", "name": "b.txt"}},
        {"kind": "file", "file": {"uri": "https://example.com/a.txt", "mimeType": "text/plain"}},
    ]
    task = rpc.result(c, "message/send", {"message": message})
    assert task["history"][0]["parts"] == message["parts"], task["history"][0]


def test_tasks_cancel_and_cancel_completed(c: httpx.Client) -> None:
    task = send03(c, "cancel [slow=5]", blocking=False)
    canceled = rpc.result(c, "tasks/cancel", {"id": task["id"]})
    assert canceled["kind"] == "task" and canceled["status"]["state"] == "canceled"
    done = send03(c, "done")
    err = rpc.error(c, "tasks/cancel", {"id": done["id"]}, code=-32002)
    assert rpc.error_info(err)["reason"] == "TASK_NOT_CANCELABLE"


def check_v03_stream(results: list[dict[str, Any]]) -> None:
    """0.3 stream events carry `kind`; status updates carry `final`, true only on the last."""
    assert results[0]["kind"] == "task"
    assert all("kind" in r for r in results)
    statuses = [r for r in results if r["kind"] == "status-update"]
    assert statuses and all(r["final"] is False for r in statuses[:-1]), statuses
    assert results[-1]["kind"] == "status-update" and results[-1]["final"] is True


def test_message_stream_frames(c: httpx.Client) -> None:
    streamed = rpc.stream(c, "message/stream", {"message": rpc.msg03("stream me please")}, id=9)
    assert all(e["id"] == 9 and set(e) == {"jsonrpc", "id", "result"} for e in streamed.envelopes)
    results = streamed.results
    check_v03_stream(results)
    assert results[0]["status"]["state"] == "submitted"
    assert results[-1]["status"]["state"] == "completed"
    kinds = {r["kind"] for r in results}
    assert kinds == {"task", "status-update", "artifact-update"}, kinds
    chunks = [r for r in results if r["kind"] == "artifact-update"]
    assert (
        "".join(p["text"] for r in chunks for p in r["artifact"]["parts"])
        == "Echo: stream me please"
    )
    assert chunks[-1]["lastChunk"] is True and "append" not in chunks[0]


def test_message_stream_ends_final_on_input_required(c: httpx.Client) -> None:
    results = rpc.stream(c, "message/stream", {"message": rpc.msg03("more? [input]")}).results
    check_v03_stream(results)
    assert results[-1]["status"]["state"] == "input-required"


def test_tasks_resubscribe_frames(c: httpx.Client) -> None:
    task = send03(c, "resub [slow=1]", blocking=False)
    results = rpc.stream(c, "tasks/resubscribe", {"id": task["id"]}, id=0).results
    assert results[0]["id"] == task["id"]
    check_v03_stream(results)
    assert results[-1]["status"]["state"] == "completed"


def test_unknown_task(c: httpx.Client) -> None:
    missing = f"missing-{uuid.uuid4().hex}"
    for method in ("tasks/get", "tasks/cancel", "tasks/resubscribe"):
        err = rpc.error(c, method, {"id": missing}, code=-32001)
        assert rpc.error_info(err)["reason"] == "TASK_NOT_FOUND"


def test_push_config_methods(c: httpx.Client) -> None:
    task = send03(c, "for push")
    hook = "http://127.0.0.1:9/hook"
    auth = {"schemes": ["Bearer"], "credentials": "s3cret"}
    params = {
        "taskId": task["id"],
        "pushNotificationConfig": {"url": hook, "token": "t-03", "authentication": auth},
    }
    wire.check_v03(params, "TaskPushNotificationConfig")
    created = rpc.result(c, "tasks/pushNotificationConfig/set", params)
    config_id = created["pushNotificationConfig"]["id"]
    assert created == {
        "taskId": task["id"],
        "pushNotificationConfig": {
            "id": config_id,
            "url": hook,
            "token": "t-03",
            "authentication": auth,
        },
    }, created
    ids = {"id": task["id"], "pushNotificationConfigId": config_id}
    assert rpc.result(c, "tasks/pushNotificationConfig/get", ids) == created
    # 0.3 clients may omit the config id: the task's (first) config.
    assert rpc.result(c, "tasks/pushNotificationConfig/get", {"id": task["id"]}) == created
    assert rpc.result(c, "tasks/pushNotificationConfig/list", {"id": task["id"]}) == [created]
    assert rpc.result(c, "tasks/pushNotificationConfig/delete", ids) is None
    assert rpc.result(c, "tasks/pushNotificationConfig/list", {"id": task["id"]}) == []
    err = rpc.error(c, "tasks/pushNotificationConfig/get", ids, code=-32001)
    assert rpc.error_info(err)["reason"] == "TASK_NOT_FOUND"
    # Created over 0.3, visible over 1.0 (same core operation, same storage).
    again = rpc.result(c, "tasks/pushNotificationConfig/set", params)
    with checked_client(str(c.base_url), principal=c.headers["x-local-principal"]) as v10:
        listed = rpc.result(v10, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert [x["id"] for x in listed["configs"]] == [again["pushNotificationConfig"]["id"]]
    # Violations name the field as a 0.3 client sent it.
    bad = {"taskId": task["id"], "pushNotificationConfig": {"url": "ftp://x"}}
    err = rpc.error(c, "tasks/pushNotificationConfig/set", bad, code=-32602)
    assert rpc.violated_fields(err) == ["pushNotificationConfig.url"], err


def test_message_send_with_inline_push_config(c: httpx.Client) -> None:
    config = {"pushNotificationConfig": {"url": "http://127.0.0.1:9/inline", "token": "i"}}
    params = {"message": rpc.msg03("push me"), "configuration": config}
    task = rpc.result(c, "message/send", params)
    configs = rpc.result(c, "tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert [x["pushNotificationConfig"]["url"] for x in configs] == ["http://127.0.0.1:9/inline"]


def test_authenticated_extended_card_is_unsupported(c: httpx.Client) -> None:
    err = rpc.error(c, "agent/getAuthenticatedExtendedCard", None, code=-32004)
    assert rpc.error_info(err)["reason"] == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            {"kind": "message", "role": "user", "parts": [{"kind": "text", "text": "x"}]},
            "message.messageId",
        ),
        (
            {"kind": "message", "role": "user", "messageId": "m", "parts": [{"kind": "nope"}]},
            "message.parts[0].kind",
        ),
        (
            {
                "kind": "message",
                "role": "robot",
                "messageId": "m",
                "parts": [{"kind": "text", "text": "x"}],
            },
            "message.role",
        ),
    ],
    ids=["messageId", "part-kind", "role"],
)
def test_invalid_params(c: httpx.Client, message: dict, field: str) -> None:
    # Deliberately invalid 0.3, so not schema-checked before sending.
    err = rpc.error(c, "message/send", {"message": message}, code=-32602, validate=False)
    assert field in rpc.violated_fields(err), err


def test_ids_and_notification(c: httpx.Client) -> None:
    for request_id in ("x", 12, 0):  # 0.3 ids are strings or integers
        envelope, _ = rpc.post(c, "tasks/get", {"id": "nope"}, id=request_id)
        assert envelope["id"] == request_id and envelope["error"]["code"] == -32001
    body = rpc.request_body("message/send", {"message": rpc.msg03("notify")}, id=...)
    wire.check_v03({**body, "id": 0}, "SendMessageRequest")  # valid 0.3 apart from the id
    response = c.post("/", json=body)
    assert response.status_code == 204 and response.content == b""


# -- the version matrix --------------------------------------------------------------------------

V10_CALLS = [
    ("SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]}}),
    (
        "SendStreamingMessage",
        {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]}},
    ),
    ("GetTask", {"id": "t"}),
    ("ListTasks", {}),
    ("CancelTask", {"id": "t"}),
    ("SubscribeToTask", {"id": "t"}),
    ("GetExtendedAgentCard", {}),
]
V03_CALLS = [
    ("message/send", "SendMessage"),
    ("message/stream", "SendStreamingMessage"),
    ("tasks/get", "GetTask"),
    ("tasks/cancel", "CancelTask"),
    ("tasks/resubscribe", "SubscribeToTask"),
    ("tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig"),
    ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"),
]


@pytest.mark.parametrize("version", ["0.3", None, ""], ids=["0.3", "absent", "empty"])
@pytest.mark.parametrize(("method", "params"), V10_CALLS, ids=[m for m, _ in V10_CALLS])
def test_v10_method_without_version_1_0(
    raw: Callable[..., httpx.Client], version: str | None, method: str, params: dict
) -> None:
    client = raw(principal=new_principal(), version=version)
    err = rpc.error(client, method, params, code=-32601)
    assert "A2A-Version: 1.0" in err["message"], err
    assert rpc.error_info(err)["reason"] == "METHOD_NOT_FOUND"


@pytest.mark.parametrize(("method", "counterpart"), V03_CALLS, ids=[m for m, _ in V03_CALLS])
def test_v03_method_under_1_0(
    raw: Callable[..., httpx.Client], method: str, counterpart: str
) -> None:
    client = raw(principal=new_principal(), version="1.0")
    err = rpc.error(client, method, {"id": "t"}, code=-32601)
    assert f"call {counterpart}" in err["message"], err


@pytest.mark.parametrize(
    ("version", "method", "params"),
    [
        ("1.0.2", "ListTasks", {}),
        ("1.0.0", "GetTask", {"id": "x"}),
        ("0.3.0", "tasks/get", {"id": "x"}),
    ],
)
def test_patch_version_is_ignored(
    raw: Callable[..., httpx.Client], version: str, method: str, params: dict
) -> None:
    client = raw(principal=new_principal(), version=version)
    envelope, _ = rpc.post(client, method, params)
    assert envelope.get("result") is not None or envelope["error"]["code"] == -32001, envelope


def test_query_version_0_3(base_url: str) -> None:
    with checked_client(base_url, principal=new_principal(), version=None) as client:
        body = rpc.request_body("tasks/get", {"id": "x"}, id=1)
        envelope = client.post("/", params={"A2A-Version": "0.3"}, json=body).json()
        assert envelope["error"]["code"] == -32001, envelope


@pytest.mark.parametrize("version", ["2.0", "0.2", "1.1"])
def test_unsupported_version(base_url: str, version: str) -> None:
    with checked_client(base_url, version=version) as client:
        envelope = client.post("/", json=rpc.request_body("GetTask", {"id": "x"}, id=5)).json()
    assert envelope["id"] == 5, envelope  # the id is readable, so it is echoed (JSON-RPC §5)
    err = envelope["error"]
    assert err["code"] == -32009, envelope
    wire.check_rpc_error(err, version="1.0")
    info = rpc.error_info(err)
    assert info["reason"] == "VERSION_NOT_SUPPORTED"
    assert info["metadata"] == {"requested": version, "supported": "1.0,0.3"}
    assert "A2A-Version: 1.0" in err["message"]


@pytest.mark.parametrize("version", ["0.3", "0.3.0", None])
def test_http_json_routes_still_refuse_0_3(
    raw: Callable[..., httpx.Client], version: str | None
) -> None:
    client = raw(principal=new_principal(), version=version)
    response = client.get("/tasks")
    assert response.status_code == 400
    detail = response.json()["error"]["details"][0]
    assert detail["reason"] == "VERSION_NOT_SUPPORTED", detail


# -- the Agent Card ------------------------------------------------------------------------------


def test_card_declares_three_interfaces_strict_1_0(
    raw: Callable[..., httpx.Client], base_url: str
) -> None:
    response = raw(version=None).get(CARD_PATH)
    card = response.json()
    assert card["supportedInterfaces"] == [
        {"url": base_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": base_url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": base_url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    # Strictly 1.0 by default: no deprecated 0.3 top-level fields, no unknown field at all.
    assert not {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"} & set(card)
    wire.parse_strict(response.content, a2a_types.AgentCard)


v03_card_server = server_fixture("dev-v03-card", env={"AGENT_CARD_V03_FIELDS": "true"})


def test_card_with_v03_fields_lets_0_3_clients_discover_us(v03_card_server: DevServer) -> None:
    """AGENT_CARD_V03_FIELDS=true is how 0.3-only clients discover us: a 0.3 client reads the
    top-level `url`, `preferredTransport` and `protocolVersion` (the 0.3 AgentCard's required
    discovery fields) and ignores the 1.0 `supportedInterfaces`; it then POSTs 0.3 JSON-RPC to
    `url` without an A2A-Version header, which the endpoint reads as 0.3. The card must pass
    the 0.3 schema's AgentCard definition and still parse as a 1.0 card for 1.0 clients."""
    base = v03_card_server.base_url
    # A plain client: the strict 1.0 wire hook would (rightly) refuse this card's extra fields.
    with httpx.Client(base_url=base) as client:
        card = client.get(CARD_PATH).json()
        assert card["url"] == base
        assert card["preferredTransport"] == "JSONRPC"
        assert card["protocolVersion"] == "0.3.0"
        assert [i["protocolVersion"] for i in card["supportedInterfaces"]] == ["1.0", "1.0", "0.3"]
        # The 0.3 view: valid per the 0.3 AgentCard definition (1.0 extras are ignored by it).
        wire.check_v03(card, "AgentCard", strict=False)
        # A 1.0 parser sees the extra fields as unknown; a lenient one (what the SDK uses) is fine.
        with pytest.raises(Exception, match=r"url|preferredTransport|protocolVersion"):
            wire.parse_strict(card, a2a_types.AgentCard)
        lenient = a2a_types.AgentCard()
        json_format.ParseDict(card, lenient, ignore_unknown_fields=True)
        assert len(lenient.supported_interfaces) == 3
        # And a 0.3 client following `url` with no version header gets 0.3 answers.
        body = rpc.request_body("message/send", {"message": rpc.msg03("found you")}, id="d")
        wire.check_v03(body, "SendMessageRequest")
        with checked_client(card["url"], principal=new_principal(), version=None) as legacy:
            task = legacy.post("", json=body).json()["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
