"""Helpers for the JSON-RPC e2e tests: raw `POST /` calls through the checked clients (so the
wire hook checks every answer), 0.3 requests validated against the 0.3 schema before they are
sent, and a2a-sdk clients over each interface our card declares."""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import AgentCard, TaskState

from tests import wire
from tests.e2e.conftest import checked_async_client, new_principal
from tests.helpers import user_message
from tests.helpers import violated_fields as violated_fields  # for rpc.violated_fields

# The 0.3 JSON-RPC request definition of each 0.3 method (schema `definitions`).
V03_REQUESTS = {
    "message/send": "SendMessageRequest",
    "message/stream": "SendStreamingMessageRequest",
    "tasks/get": "GetTaskRequest",
    "tasks/cancel": "CancelTaskRequest",
    "tasks/resubscribe": "TaskResubscriptionRequest",
    "tasks/pushNotificationConfig/set": "SetTaskPushNotificationConfigRequest",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfigRequest",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigRequest",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfigRequest",
    "agent/getAuthenticatedExtendedCard": "GetAuthenticatedExtendedCardRequest",
}
_ids = itertools.count(1)


def client_version(client: httpx.Client) -> str:
    return wire.rpc_version(client.headers.get("a2a-version"), None)


def request_body(method: str, params: Any = None, *, id: Any = "auto") -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not ...:  # `...` = a notification (no id member)
        body["id"] = f"req-{next(_ids)}" if id == "auto" else id
    if params is not None:
        body["params"] = params
    return body


def checked_request(client: httpx.Client, body: dict[str, Any], validate: bool) -> None:
    """A 0.3 request must itself be valid 0.3 (so these tests speak real 0.3)."""
    if validate and client_version(client) == "0.3" and body.get("method") in V03_REQUESTS:
        wire.check_v03(body, V03_REQUESTS[body["method"]])


def post(
    client: httpx.Client,
    method: str,
    params: Any = None,
    *,
    id: Any = "auto",
    path: str = "/",
    validate: bool = True,
    **kwargs: Any,
) -> tuple[dict[str, Any], httpx.Response]:
    body = request_body(method, params, id=id)
    checked_request(client, body, validate)
    response = client.post(path, json=body, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    envelope = response.json()
    assert envelope["id"] == body.get("id"), (body, envelope)
    return envelope, response


def result(client: httpx.Client, method: str, params: Any = None, **kwargs: Any) -> Any:
    envelope, _ = post(client, method, params, **kwargs)
    assert "result" in envelope, envelope
    return envelope["result"]


def error(
    client: httpx.Client, method: str, params: Any = None, *, code: int, **kwargs: Any
) -> dict[str, Any]:
    envelope, _ = post(client, method, params, **kwargs)
    assert "error" in envelope, envelope
    assert envelope["error"]["code"] == code, envelope
    return envelope["error"]


def error_info(error_object: dict[str, Any]) -> dict[str, Any]:
    return next(d for d in error_object["data"] if d["@type"].endswith("google.rpc.ErrorInfo"))


@dataclass
class Streamed:
    """An SSE answer of `POST /`: the JSON-RPC envelopes of its `data:` lines."""

    envelopes: list[dict[str, Any]]
    comments: int
    headers: httpx.Headers

    @property
    def results(self) -> list[dict[str, Any]]:
        return [e["result"] for e in self.envelopes]


def stream(
    client: httpx.Client,
    method: str,
    params: Any = None,
    *,
    id: Any = "auto",
    validate: bool = True,
    stop_after: int | None = None,
) -> Streamed:
    """Read an SSE answer to its end (or stop after `stop_after` events and hang up)."""
    body = request_body(method, params, id=id)
    checked_request(client, body, validate)
    envelopes: list[dict[str, Any]] = []
    comments = 0
    with client.stream("POST", "/", json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith(wire.EVENT_STREAM), response.headers
        for line in response.iter_lines():
            if line.startswith(":"):
                comments += 1
            elif line.startswith("data: "):
                envelopes.append(json.loads(line[len("data: ") :]))
                assert envelopes[-1]["id"] == body["id"], envelopes[-1]
                if stop_after is not None and len(envelopes) >= stop_after:
                    break
        return Streamed(envelopes, comments, response.headers)


def wait_state(
    client: httpx.Client, method: str, task_id: str, states: set[str], timeout: float = 20.0
) -> dict[str, Any]:
    """Poll `method` (GetTask or tasks/get) until the task is in one of `states`."""
    deadline = time.monotonic() + timeout
    while True:
        task = result(client, method, {"id": task_id})
        if task["status"]["state"] in states:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.1)


def pending_then(
    client: httpx.Client, method: str, task: dict[str, Any], pending: set[str], state: str
) -> dict[str, Any]:
    """A task just sent without blocking: in one of the `pending` states, then (polled with
    `method`) in `state`."""
    assert task["status"]["state"] in pending, task
    return wait_state(client, method, task["id"], {state})


# The terminal states, as the a2a-sdk types name them.
TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


# -- message builders --------------------------------------------------------------------------


def msg10(text: str, *, task_id: str | None = None, context_id: str | None = None) -> dict:
    return user_message(text, task_id=task_id, context_id=context_id)


def msg03(text: str, *, task_id: str | None = None, context_id: str | None = None) -> dict:
    message: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": f"m-{uuid.uuid4().hex}",
        "parts": [{"kind": "text", "text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


def text10(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def text03(task: dict[str, Any]) -> str:
    return "".join(
        p["text"] for a in task.get("artifacts", []) for p in a["parts"] if p["kind"] == "text"
    )


# -- a2a-sdk clients over each declared interface ----------------------------------------------

INTERFACES = ("JSONRPC 1.0", "HTTP+JSON 1.0", "JSONRPC 0.3")


@dataclass
class SdkAgent:
    client: Client
    card: AgentCard
    interface: str
    principal: str


def v03_only(card: AgentCard) -> AgentCard:
    """A 0.3-only view of our card: the SDK then uses its 0.3 compat transport."""
    legacy = AgentCard()
    legacy.CopyFrom(card)
    keep = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
    del legacy.supported_interfaces[:]
    legacy.supported_interfaces.extend(keep)
    return legacy


@contextlib.asynccontextmanager
async def sdk_client(base_url: str, interface: str, *, streaming: bool) -> AsyncIterator[SdkAgent]:
    """An a2a-sdk 1.3 client that picks `interface` from OUR card (every response checked)."""
    principal = new_principal("sdk")
    http = checked_async_client(principal=principal, version=None, source="sdk")
    binding, version = interface.split()
    config = ClientConfig(
        httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
    )
    card = await A2ACardResolver(http, base_url).get_agent_card()
    if version == "0.3":
        card = v03_only(card)
        client = await create_client(card, client_config=config)
    else:
        client = await create_client(base_url, client_config=config)
    try:
        yield SdkAgent(client, card, interface, principal)
    finally:
        await client.close()
        await http.aclose()
