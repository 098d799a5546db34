"""Ids become parts of DynamoDB keys (at most 2048 bytes for a partition key, 1024 for a
sort key): raw HTTP over REST and JSON-RPC, an over-long id is a 400 naming the field and
stores nothing, an id at exactly the bound works, and ids with the key separator `#` or the
escape `%` are ordinary ids."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from a2a_serverless.store import MAX_ID_BYTES, utf8_size
from tests.e2e import rpc
from tests.e2e.test_wire import error_of, message_body, reason_of, violations_of

pytestmark = pytest.mark.e2e

FOUR_BYTES = "😀"
# 256 four-byte characters (1024 bytes: its `X#` counter sort key is 1026).
TOO_LONG = FOUR_BYTES * 256
AT_BOUND = FOUR_BYTES * (MAX_ID_BYTES // 4)
SEPARATORS_AT_BOUND = "#%" * (MAX_ID_BYTES // 2)  # escaped: three times as long


def total(http: httpx.Client, **query: Any) -> int:
    response = http.get("/tasks", params=query)
    assert response.status_code == 200, response.text
    return int(response.json().get("totalSize", 0))


def test_the_bounds_are_bytes_not_characters() -> None:
    assert utf8_size(AT_BOUND) == utf8_size(SEPARATORS_AT_BOUND) == MAX_ID_BYTES
    assert len(TOO_LONG) == 256 and utf8_size(TOO_LONG) > MAX_ID_BYTES


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("contextId", TOO_LONG),
        ("contextId", "a" * (MAX_ID_BYTES - 1) + "é"),  # one byte over
        ("messageId", TOO_LONG),
        ("taskId", TOO_LONG),
    ],
    ids=["contextId-4-byte", "contextId-1-over", "messageId", "taskId"],
)
def test_rest_send_refuses_an_over_long_id_and_stores_nothing(
    http: httpx.Client, field: str, value: str
) -> None:
    response = http.post("/message:send", json=message_body("hello", **{field: value}))
    error = error_of(response, 400)
    assert reason_of(error) == "INVALID_PARAMS"
    assert violations_of(error) == [f"message.{field}"], error
    assert f"at most {MAX_ID_BYTES} bytes in UTF-8" in error["message"]
    assert total(http) == 0


def test_rest_list_refuses_an_over_long_context_id(http: httpx.Client) -> None:
    error = error_of(http.get("/tasks", params={"contextId": TOO_LONG}), 400)
    assert violations_of(error) == ["contextId"], error


@pytest.mark.parametrize("context_id", [AT_BOUND, SEPARATORS_AT_BOUND], ids=["4-byte", "#%"])
def test_rest_ids_at_the_bound_work(http: httpx.Client, context_id: str) -> None:
    message_id = context_id[::-1]
    body = message_body("hello", contextId=context_id, messageId=message_id)
    first = http.post("/message:send", json=body)
    assert first.status_code == 200, first.text
    task = first.json()["task"]
    assert task["contextId"] == context_id
    listed = http.get("/tasks", params={"contextId": context_id}).json()
    assert [t["id"] for t in listed["tasks"]] == [task["id"]] and listed["totalSize"] == 1
    assert total(http, contextId=context_id[:-1]) == 0
    # Its transitions moved it to the completed state's partition (a key with the owner).
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"  # a blocking send to the echo
    assert total(http, contextId=context_id, status="TASK_STATE_COMPLETED") == 1
    assert total(http, status="TASK_STATE_COMPLETED") == 1
    assert total(http, status="TASK_STATE_SUBMITTED") == 0


def test_rest_reads_of_over_long_ids_are_not_found(http: httpx.Client) -> None:
    got = http.get(f"/tasks/{quote(TOO_LONG)}")
    assert got.status_code == 404 and reason_of(got.json()["error"]) == "TASK_NOT_FOUND"
    task = http.post("/message:send", json=message_body("hello")).json()["task"]
    huge_config = quote(FOUR_BYTES * 300)  # 1200 bytes: more than a sort key holds
    config = http.get(f"/tasks/{task['id']}/pushNotificationConfigs/{huge_config}")
    assert config.status_code == 404, config.text
    deleted = http.delete(f"/tasks/{task['id']}/pushNotificationConfigs/{huge_config}")
    assert deleted.status_code in (200, 204), deleted.text


def test_jsonrpc_refuses_an_over_long_context_id_and_stores_nothing(
    raw: Any,
) -> None:
    client = raw(principal=f"rpc-{uuid.uuid4().hex[:12]}")
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "hello"}],
        "contextId": TOO_LONG,
    }
    error = rpc.error(client, "SendMessage", {"message": message}, code=-32602)
    assert rpc.violated_fields(error) == ["message.contextId"], error
    listed = rpc.error(client, "ListTasks", {"contextId": TOO_LONG}, code=-32602)
    assert rpc.violated_fields(listed) == ["contextId"], listed
    assert rpc.result(client, "ListTasks", {}).get("totalSize", 0) == 0

    message = {**message, "contextId": AT_BOUND}
    task = rpc.result(client, "SendMessage", {"message": message})["task"]
    assert task["contextId"] == AT_BOUND
    listed_ok = rpc.result(client, "ListTasks", {"contextId": AT_BOUND})
    assert [t["id"] for t in listed_ok["tasks"]] == [task["id"]]
