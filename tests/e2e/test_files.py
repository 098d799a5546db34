"""Files and long conversations end to end, with the a2a-sdk over every interface of the card
(HTTP+JSON 1.0, JSON-RPC 1.0, and its 0.3 compat transport): a file sent as `raw` reaches the
flow byte-exact, a 50 MB artifact downloads byte-exact from the URL the task answers with (over
SSE and in a webhook too), a long conversation of 100 KB messages completes, URLs expire, and
no caller reaches another's content. The URLs are the local stack's, checked as S3 checks
them (signature, expiry)."""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)

from tests.e2e import rpc
from tests.e2e.conftest import DevServer, checked_client, new_principal, server_fixture
from tests.e2e.flows_for_tests import big_file_chunks
from tests.e2e.test_push import Receiver

pytestmark = pytest.mark.e2e

digest_server = server_fixture(
    "files-digest",
    env={"FLOW": "tests.e2e.flows_for_tests:file_digest", "CONTENT_URL_SECONDS": "3"},
)
big_server = server_fixture("files-big", env={"FLOW": "tests.e2e.flows_for_tests:big_file"})

# The largest file a body of MAX_BODY_BYTES (6,000,000) carries as `raw` is about 4.49 MB:
# base64 takes 4 bytes for every 3 (README "Files and large content").
IMAGE_BYTES = 4_400_000
BIG_FILE_BYTES = 50 * 1024 * 1024


def _image() -> bytes:
    return random.Random(7).randbytes(IMAGE_BYTES)


def _big_file_digest(size: int) -> str:
    digest = hashlib.sha256()
    for chunk in big_file_chunks(size):
        digest.update(chunk)
    return digest.hexdigest()


def _message(*parts: Part, task_id: str = "") -> Message:
    return Message(
        role=Role.ROLE_USER, message_id=f"m-{uuid.uuid4().hex}", parts=list(parts), task_id=task_id
    )


async def _send(agent: rpc.SdkAgent, message: Message, **config: Any) -> Task:
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))
    responses = [r async for r in agent.client.send_message(request)]
    assert responses and responses[-1].WhichOneof("payload") == "task", responses
    return responses[-1].task


def _download(url: str, **headers: str) -> tuple[int, str, bytes]:
    """(status, content type, body) of a GET of `url`, as any HTTP client makes it."""
    with httpx.Client(timeout=120) as client:
        response = client.get(url, headers=headers)
    return response.status_code, response.headers.get("content-type", ""), response.content


def _streamed_digest(url: str) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with httpx.Client(timeout=120) as client, client.stream("GET", url) as response:
        assert response.status_code == 200, response.read()[:300]
        for chunk in response.iter_bytes(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _artifact_text(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


@pytest.mark.parametrize("interface", rpc.INTERFACES)
async def test_an_image_sent_as_raw_reaches_the_flow_byte_exact(
    digest_server: DevServer, interface: str
) -> None:
    image = _image()
    async with rpc.sdk_client(digest_server.base_url, interface, streaming=False) as agent:
        photo = Part(raw=image, media_type="image/png", filename="photo.png")
        task = await _send(agent, _message(photo))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
        assert _artifact_text(task) == f"{hashlib.sha256(image).hexdigest()} {len(image)}"
        # Read back, the image is a URL to the stored bytes, with its media type and name.
        (stored,) = [p for m in task.history for p in m.parts if p.url]
        assert stored.url.startswith(f"{digest_server.base_url}/_s3/"), stored.url
        assert (stored.media_type, stored.filename) == ("image/png", "photo.png")
        status, content_type, body = _download(stored.url)
        assert (status, content_type) == (200, "image/png") and body == image


@pytest.mark.parametrize("interface", rpc.INTERFACES)
async def test_a_50_mb_artifact_downloads_byte_exact_from_its_url(
    big_server: DevServer, interface: str
) -> None:
    async with rpc.sdk_client(big_server.base_url, interface, streaming=False) as agent:
        task = await _send(agent, _message(Part(text=str(BIG_FILE_BYTES))))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
        ((part,),) = [list(a.parts) for a in task.artifacts]
        assert (part.filename, part.media_type) == ("big.bin", "application/octet-stream")
        assert await asyncio.to_thread(_streamed_digest, part.url) == (
            _big_file_digest(BIG_FILE_BYTES),
            BIG_FILE_BYTES,
        )


async def test_the_artifact_arrives_as_a_url_over_sse_and_in_a_webhook(
    big_server: DevServer,
) -> None:
    size = 8 * 1024 * 1024
    receiver = Receiver()
    try:
        async with rpc.sdk_client(big_server.base_url, "HTTP+JSON 1.0", streaming=True) as agent:
            hook = TaskPushNotificationConfig(url=receiver.url("files"), token="t")
            request = SendMessageRequest(
                message=_message(Part(text=str(size))),
                configuration=SendMessageConfiguration(task_push_notification_config=hook),
            )
            streamed = [
                r.artifact_update
                async for r in agent.client.send_message(request)
                if r.WhichOneof("payload") == "artifact_update"
            ]
        ((part,),) = [list(update.artifact.parts) for update in streamed]
        expected = (_big_file_digest(size), size)
        assert _streamed_digest(part.url) == expected
        receiver.wait_for("the artifact's webhook", lambda: _hooked_urls(receiver))
        (hooked,) = _hooked_urls(receiver)
        assert _streamed_digest(hooked) == expected
    finally:
        receiver.close()


def _hooked_urls(receiver: Receiver) -> list[str]:
    return [
        part["url"]
        for event in receiver.events("files")
        if "artifactUpdate" in event
        for part in event["artifactUpdate"]["artifact"]["parts"]
    ]


async def test_a_200_turn_conversation_of_100_kb_messages_completes(base_url: str) -> None:
    turns, text = 200, "lorem ipsum " * 8_534  # 102,408 bytes a message
    async with rpc.sdk_client(base_url, "JSONRPC 1.0", streaming=False) as agent:
        task = await _send(agent, _message(Part(text=f"[input] 0 {text}")))
        for turn in range(1, turns):
            marker = "[input] " if turn < turns - 1 else ""
            task = await _send(
                agent, _message(Part(text=f"{marker}{turn} {text}"), task_id=task.id)
            )
            expected = (
                TaskState.TASK_STATE_INPUT_REQUIRED if marker else TaskState.TASK_STATE_COMPLETED
            )
            assert task.status.state == expected, (turn, task.status)
        full = await agent.client.get_task(GetTaskRequest(id=task.id))
    assert len([m for m in full.history if m.role == Role.ROLE_USER]) == turns
    assert _artifact_text(full).endswith(f"{turns - 1} {text}")
    last = [m for m in full.history if m.role == Role.ROLE_USER][-1]
    status, _, body = _download(last.parts[0].url)
    assert status == 200 and body.decode() == f"{turns - 1} {text}"


def _send_body(part: dict[str, Any]) -> dict[str, Any]:
    """An HTTP+JSON SendMessage body of one part (a new messageId each time)."""
    return {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [part]}}


@pytest.fixture
def connect(digest_server: DevServer) -> Iterator[Callable[[str], httpx.Client]]:
    """Checked HTTP+JSON clients of the digest server, each a principal of its own."""
    clients: list[httpx.Client] = []

    def make(prefix: str) -> httpx.Client:
        client = checked_client(digest_server.base_url, principal=new_principal(prefix))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def test_an_expired_url_is_refused_and_a_fresh_read_signs_a_new_one(
    connect: Callable[[str], httpx.Client],
) -> None:
    client = connect("expiry")
    task = client.post("/message:send", json=_send_body({"raw": "QUJD" * 20_000})).json()["task"]
    url = task["history"][0]["parts"][0]["url"]
    assert _download(url)[0] == 200
    time.sleep(4)  # CONTENT_URL_SECONDS is 3 on this server
    status, _, answer = _download(url)
    assert status == 403 and b"Request has expired" in answer
    fresh = client.get(f"/tasks/{task['id']}").json()["history"][0]["parts"][0]["url"]
    assert _download(fresh)[0] == 200


def test_no_caller_reaches_another_owners_content(connect: Callable[[str], httpx.Client]) -> None:
    owner, other = connect("owner"), connect("other")
    secret = {"raw": "U0VDUkVU" * 20_000, "filename": "secret.bin"}
    task = owner.post("/message:send", json=_send_body(secret)).json()["task"]
    url = task["history"][0]["parts"][0]["url"]
    # Another owner cannot read the task, list it, nor name its content in a message.
    assert other.get(f"/tasks/{task['id']}").status_code == 404
    assert other.get("/tasks", params={"historyLength": 10}).json()["tasks"] == []
    name = url.split("?")[0].rsplit("/", 1)[1]
    refused = other.post("/message:send", json=_send_body({"url": f"a2a-content:{name}"}))
    assert refused.status_code == 400 and "parts[0].url" in refused.text
    # Its own URL, pointed at the owner's object, no longer verifies.
    mine = other.post("/message:send", json=_send_body(secret)).json()["task"]
    own_url = mine["history"][0]["parts"][0]["url"]
    path, query = own_url.split("?")
    tampered = f"{path.replace(mine['id'], task['id'])}?{query}"
    status, _, answer = _download(tampered)
    assert status == 403 and b"SignatureDoesNotMatch" in answer


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_a_body_past_the_limit_is_413_on_every_binding(
    connect: Callable[[str], httpx.Client], version: str
) -> None:
    """6,000,000 bytes (MAX_BODY_BYTES) is what a deployed function can take; past it, 413 on
    HTTP+JSON and JSON-RPC alike, the JSON-RPC error in the body."""
    client = connect("big")
    body = _send_body({"raw": "A" * 6_000_000})
    rest = client.post("/message:send", json=body)
    assert rest.status_code == 413 and "6000000 bytes" in rest.json()["error"]["message"]
    method = "SendMessage" if version == "1.0" else "message/send"
    call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": body}
    rpc_answer = client.post("/", json=call, headers={"A2A-Version": version})
    assert rpc_answer.status_code == 413
    assert rpc_answer.json()["error"]["code"] == -32600
    assert client.get("/tasks").json()["totalSize"] == 0


class _FileServer:
    """One file served over HTTP on loopback (the local stack's egress policy allows http to
    it, as a deployed one allows https to public hosts)."""

    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/file.bin"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_a_file_larger_than_a_body_goes_as_a_url_part_the_flow_fetches(
    digest_server: DevServer,
) -> None:
    """Past the ~4.49 MB a body carries as raw, a client sends a url part: the flow reads it
    through the egress guard, byte-exact, and the part is kept as given."""
    data = random.Random(11).randbytes(12_000_000)
    files = _FileServer(data)
    try:
        async with rpc.sdk_client(
            digest_server.base_url, "HTTP+JSON 1.0", streaming=False
        ) as agent:
            part = Part(url=files.url, media_type="application/octet-stream", filename="b.bin")
            task = await _send(agent, _message(part))
    finally:
        files.close()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
    assert _artifact_text(task) == f"{hashlib.sha256(data).hexdigest()} {len(data)}"
    assert [p.url for m in task.history for p in m.parts if p.url] == [files.url]
