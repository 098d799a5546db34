"""Values stored before the input gate existed: `NaN` and `Infinity`, which the
store's json.dumps wrote into items, written here straight into the table, still read over
every binding — HTTP+JSON GetTask and ListTasks, JSON-RPC 1.0 GetTask, JSON-RPC 0.3
tasks/get — as strict JSON with the odd numbers as null, never a 500. (Lone surrogates never
reached the table: DynamoDB refuses a string that is not UTF-8, as moto does.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from a2a_serverless.local.stack import LocalStack
from tests import wire
from tests.integration.harness import A2A, ddb, partition, table, wait_idle

# JSON text as the store's json.dumps (allow_nan=True) wrote it before the gate: not JSON.
ODD_METADATA = '{"nan":NaN,"inf":Infinity,"ninf":-Infinity,"ok":[1.5,"x"]}'
SANITIZED = {"nan": None, "inf": None, "ninf": None, "ok": [1.5, "x"]}


def plant(stack: LocalStack, task_id: str) -> None:
    """Odd metadata on the task (header `meta`), its first message (the header's `m1`, or an
    `M#` item) and its artifact's first chunk (`E#` item)."""

    def with_odd_metadata(message_json: str) -> str:
        return message_json[:-1] + ',"metadata":' + ODD_METADATA + "}"

    for item in partition(stack, task_id):
        sk = item["sk"]["S"]
        changes: dict[str, str] = {}
        if sk == "H":
            changes["meta"] = ODD_METADATA
            if "m1" in item:
                changes["m1"] = with_odd_metadata(item["m1"]["S"])
        elif sk.startswith("M#"):
            changes["msg"] = with_odd_metadata(item["msg"]["S"])
        elif '"text":"Echo: "' in item.get("ev", {}).get("S", ""):
            chunk = '"parts":[{"text":"Echo: "}]'
            changes["ev"] = item["ev"]["S"].replace(chunk, chunk + ',"metadata":' + ODD_METADATA)
        for name, value in changes.items():
            ddb().update_item(
                TableName=table(stack),
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET #n = :v",
                ExpressionAttributeNames={"#n": name},
                ExpressionAttributeValues={":v": {"S": value}},
            )


def rpc_call(
    stack: LocalStack, version: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """One JSON-RPC call on `POST /` through the StreamFunction app, checked by the wire
    hook's JSON-RPC checks; returns the result."""
    body = json.dumps({"jsonrpc": "2.0", "id": "odd-1", "method": method, "params": params})
    headers = {
        "Content-Type": "application/json",
        "x-amzn-request-context": json.dumps({"authorizer": {"principalId": "alice"}}),
    }
    if version == "1.0":
        headers["A2A-Version"] = "1.0"

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=stack.app_for("StreamFunction"))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post("/", content=body, headers=headers)

    response = asyncio.run(call())
    assert response.status_code == 200, response.text
    assert b"NaN" not in response.content and b"Infinity" not in response.content
    wire.check_jsonrpc_response(wire.rpc_request(body.encode(), version), 200, response.content)
    envelope = json.loads(response.content)
    assert "result" in envelope, envelope
    return envelope["result"]


def test_odd_stored_values_render_sanitized_on_every_binding(
    local_stack: LocalStack, alice: A2A
) -> None:
    task_id = alice.send("odd").task["id"]
    wait_idle(local_stack)
    plant(local_stack, task_id)

    got = alice.get(task_id)
    assert got.status == 200, got.body
    assert b"NaN" not in got.body
    task = got.json
    assert task["metadata"] == SANITIZED
    assert task["history"][0]["metadata"] == SANITIZED
    assert task["artifacts"][0]["metadata"] == SANITIZED

    listed = alice.list(includeArtifacts="true")
    assert listed.status == 200, listed.body
    assert [t["id"] for t in listed.json["tasks"]] == [task_id]

    v10 = rpc_call(local_stack, "1.0", "GetTask", {"id": task_id})
    assert v10["metadata"] == SANITIZED and v10["history"][0]["metadata"] == SANITIZED

    v03 = rpc_call(local_stack, "0.3", "tasks/get", {"id": task_id})
    assert v03["metadata"] == SANITIZED and v03["history"][0]["metadata"] == SANITIZED
    assert v03["artifacts"][0]["metadata"] == SANITIZED
