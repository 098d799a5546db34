"""Blocking sends keep their connection alive, against a real `scripts/dev` server (uvicorn).

API Gateway drops a streamed response after 5 minutes without a byte; a blocking send that
waits writes a newline every BLOCKING_KEEPALIVE_SECONDS before its JSON. This module's server
sets it to 0.05 s, so a 1 s echo (`[slow=1]`) shows ~20 of them: read raw, time-stamped as
they arrive, and through the official a2a-sdk client over every interface our card declares
(whose JSON parsing must accept the leading whitespace).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)

from tests import wire
from tests.e2e import rpc
from tests.e2e.conftest import LOCAL_PRINCIPAL_HEADER, DevServer, dev_server_running, new_principal

pytestmark = pytest.mark.e2e

INTERVAL = 0.05
KEEPALIVE = b"\n"


@pytest.fixture(scope="module")
def keepalive_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    env = {"BLOCKING_KEEPALIVE_SECONDS": str(INTERVAL)}
    with dev_server_running(tmp_path_factory.mktemp("dev-keepalive"), env=env) as server:
        yield server


def _request(interface: str, text: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(path, headers, body) of a blocking send over one binding."""
    headers = {"Content-Type": "application/json", LOCAL_PRINCIPAL_HEADER: new_principal("ka")}
    if interface == "HTTP+JSON 1.0":
        headers["A2A-Version"] = "1.0"
        return "/message:send", headers, {"message": rpc.msg10(text)}
    call_id = f"ka-{uuid.uuid4().hex[:8]}"
    if interface == "JSONRPC 1.0":
        headers["A2A-Version"] = "1.0"
        body = rpc.request_body("SendMessage", {"message": rpc.msg10(text)}, id=call_id)
    else:
        body = rpc.request_body("message/send", {"message": rpc.msg03(text)}, id=call_id)
    return "/", headers, body


@pytest.mark.parametrize("interface", rpc.INTERFACES)
async def test_keepalive_bytes_arrive_while_the_task_runs(
    keepalive_server: DevServer, interface: str
) -> None:
    """Raw httpx, chunks time-stamped on arrival: newlines come from ~0.05 s on, long before
    the task ends (~1 s); then the JSON, and the whole body passes the strict wire check."""
    text = "keep me alive [slow=1]"
    path, headers, body = _request(interface, text)
    chunks: list[tuple[float, bytes]] = []
    async with httpx.AsyncClient(base_url=keepalive_server.base_url, timeout=30) as client:
        started = time.monotonic()
        async with client.stream("POST", path, json=body, headers=headers) as response:
            status = response.status_code
            content_type = response.headers.get("content-type")
            async for chunk in response.aiter_raw():
                chunks.append((time.monotonic() - started, chunk))
    whole = b"".join(chunk for _, chunk in chunks)
    assert status == 200, whole
    expected_type = "application/a2a+json" if path == "/message:send" else "application/json"
    assert content_type == expected_type, content_type
    count = len(whole) - len(whole.lstrip(KEEPALIVE))
    assert count >= 5, f"{count} keep-alives in a ~1 s wait every {INTERVAL} s: {chunks[:5]}"
    first_at = chunks[0][0]
    json_at = next(at for at, chunk in chunks if chunk.strip(KEEPALIVE))
    assert chunks[0][1].startswith(KEEPALIVE), chunks[0]
    # Loose bounds (a loaded machine), still "bytes long before the task's end".
    assert json_at >= 0.9 and first_at < json_at - 0.4, (first_at, json_at)
    arrivals = sorted({round(at, 2) for at, chunk in chunks if not chunk.strip(KEEPALIVE)})
    assert len(arrivals) >= 3, f"keep-alives did not arrive over time: {arrivals}"
    print(
        f"\n{interface}: {count} keep-alive bytes, first at {first_at * 1000:.0f} ms, "
        f"JSON at {json_at * 1000:.0f} ms"
    )

    if path == "/message:send":
        wire.check_response("POST", path, 200, whole)
        task = json.loads(whole)["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert rpc.text10(task) == f"Echo: {text}"
        return
    version = headers.get("A2A-Version", "0.3")
    request = wire.rpc_request(json.dumps(body).encode(), version)
    wire.check_jsonrpc_response(request, 200, whole)
    answer = json.loads(whole)
    assert answer["id"] == body["id"], answer
    if version == "1.0":
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
        assert rpc.text10(answer["result"]["task"]) == f"Echo: {text}"
    else:
        assert answer["result"]["status"]["state"] == "completed", answer
        assert rpc.text03(answer["result"]) == f"Echo: {text}"


@pytest.mark.parametrize("interface", rpc.INTERFACES)
async def test_sdk_client_reads_a_kept_alive_answer(
    keepalive_server: DevServer, interface: str
) -> None:
    """The a2a-sdk client's blocking send_message over JSON-RPC 1.0, HTTP+JSON 1.0 and
    JSON-RPC 0.3 gets the completed task from a body that began with keep-alives (the
    strict wire hook saw them: tests.wire.KEPT_ALIVE)."""
    text = f"sdk kept alive {interface} [slow=1]"
    seen = len(wire.KEPT_ALIVE)
    async with rpc.sdk_client(keepalive_server.base_url, interface, streaming=False) as agent:
        request = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER,
                message_id=f"msg-{uuid.uuid4().hex}",
                parts=[Part(text=text)],
            ),
            configuration=SendMessageConfiguration(return_immediately=False),
        )
        responses = [r async for r in agent.client.send_message(request)]
    assert len(responses) == 1 and responses[0].WhichOneof("payload") == "task", responses
    task = responses[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    assert "".join(p.text for a in task.artifacts for p in a.parts) == f"Echo: {text}"
    binding, version = interface.split()
    operation = {
        "HTTP+JSON": "/message:send",
        "JSONRPC": "1.0 SendMessage" if version == "1.0" else "0.3 message/send",
    }[binding]
    kept = [entry for entry in wire.KEPT_ALIVE[seen:] if entry[1] == operation]
    assert kept and kept[0][2] >= 5, (operation, wire.KEPT_ALIVE[seen:])
