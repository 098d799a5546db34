"""Presigned URLs of the content bucket, served by the local stack as S3 serves them: the
functions sign for `{public URL}/_s3`, a client downloads over HTTP from the stack's own
server (signature checked, expiry honoured, the object streamed), and the S3 calls and
presigns are recorded for the IAM check."""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pytest
import uvicorn

from a2a_serverless import wiring
from a2a_serverless.local.calls import CALL_LOG_ENV, acting_as
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.store.content import object_key
from tests.integration.harness import wait_for

BUCKET = "a2a-local-contentbucket"


@dataclass
class Served:
    stack: LocalStack
    url: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """A stack of its own behind uvicorn, its gateway given the server's URL as public one."""
    stack = LocalStack(event_sources=False).start()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(stack.gateway(url), lifespan="off", log_level="warning", http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=10, interval=0.01)
        yield Served(stack, url)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        stack.stop()


def _store() -> Any:
    store = wiring.get_content_store()
    assert store is not None
    return store


def _error_code(response: httpx.Response) -> str:
    assert response.headers["content-type"] == "application/xml"
    return response.text.split("<Code>", 1)[1].split("</Code>", 1)[0]


def _with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(changes)
    return parts._replace(query=urlencode(query)).geturl()


def test_the_functions_sign_for_the_stack_s_own_server(served: Served) -> None:
    assert served.stack.env["CONTENT_BUCKET"] == BUCKET
    assert os.environ["CONTENT_URL_ENDPOINT"] == f"{served.url}/_s3"
    link = _store().link("task-1", "raw.a")
    assert link.startswith(f"{served.url}/_s3/{BUCKET}/tasks/task-1/raw.a?X-Amz-Algorithm=")


def test_a_link_downloads_the_object_and_head_describes_it(served: Served) -> None:
    body = b"\x89PNG\r\n" + bytes(range(256)) * 40
    _store().put("task/1", "raw.png", body, "image/png")  # a task id that needs quoting
    link = _store().link("task/1", "raw.png")
    response = httpx.get(link)
    assert response.status_code == 200, response.text
    assert response.content == body
    assert response.headers["content-type"] == "image/png"
    assert response.headers["content-length"] == str(len(body))
    assert response.headers["etag"] == f'"{hashlib.md5(body).hexdigest()}"'
    head = httpx.head(link)
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-length"] == str(len(body))
    assert head.headers["etag"] == response.headers["etag"]
    ranged = httpx.get(link, headers={"Range": "bytes=10-19"})
    assert ranged.status_code == 206
    assert ranged.content == body[10:20]
    assert ranged.headers["content-range"] == f"bytes 10-19/{len(body)}"
    past = httpx.get(link, headers={"Range": f"bytes={len(body)}-"})
    assert past.status_code == 416 and _error_code(past) == "InvalidRange"


def test_a_20_mb_file_streams_back_byte_exact(served: Served) -> None:
    data = os.urandom(20 * 1024 * 1024)  # over one part: a multipart upload
    assert _store().put_stream("task-big", "raw.big", io.BytesIO(data), "video/mp4") == len(data)
    digest = hashlib.sha256()
    pieces = 0
    with httpx.stream("GET", _store().link("task-big", "raw.big"), timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-length"] == str(len(data))
        for piece in response.iter_raw():
            digest.update(piece)
            pieces += 1
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert pieces > 1  # sent as it is read, not as one body


def test_a_tampered_url_is_refused(served: Served) -> None:
    _store().put("task-2", "raw.a", b"first", "text/plain")
    _store().put("task-2", "raw.b", b"second", "text/plain")
    link = _store().link("task-2", "raw.a")
    assert httpx.get(link).status_code == 200
    signature = dict(parse_qsl(urlsplit(link).query))["X-Amz-Signature"]
    flipped = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    other_key = link.replace("/raw.a?", "/raw.b?")
    other_task = link.replace("/task-2/", "/task-3/")
    for url in (
        _with_query(link, **{"X-Amz-Signature": flipped}),
        _with_query(link, **{"X-Amz-Expires": "604800"}),  # a longer life than signed
        other_key,  # another object with the same query
        other_task,
    ):
        response = httpx.get(url)
        assert response.status_code == 403, url
        assert _error_code(response) == "SignatureDoesNotMatch"
    unsigned = link.split("?", 1)[0]
    response = httpx.get(unsigned)
    assert response.status_code == 403 and _error_code(response) == "AccessDenied"


def test_a_missing_object_is_404(served: Served) -> None:
    response = httpx.get(_store().link("task-4", "raw.never"))
    assert response.status_code == 404
    assert _error_code(response) == "NoSuchKey"
    assert "<Key>tasks/task-4/raw.never</Key>" in response.text
    assert httpx.head(_store().link("task-4", "raw.never")).status_code == 404


def test_an_expired_url_is_refused(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTENT_URL_SECONDS", "3")
    wiring.reset()
    try:
        _store().put("task-5", "raw.a", b"soon gone", "text/plain")
        link = _store().link("task-5", "raw.a")
        assert dict(parse_qsl(urlsplit(link).query))["X-Amz-Expires"] == "3"
        assert httpx.get(link).status_code == 200  # valid 2 s at least (whole-second dates)
        time.sleep(4.1)
        response = httpx.get(link)
        assert response.status_code == 403
        assert _error_code(response) == "AccessDenied"
        assert "<Message>Request has expired</Message>" in response.text
    finally:
        monkeypatch.undo()
        wiring.reset()


def _recorded(stack: LocalStack) -> list[dict[str, Any]]:
    path = Path(os.environ[CALL_LOG_ENV])
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("stack") == stack.stack_id]


def test_s3_calls_and_presigns_are_recorded_for_the_iam_check(served: Served) -> None:
    assert served.stack.recorder is not None  # the session's call log (tests/conftest.py)
    key = object_key("task-6", "raw.big")
    resource = f"arn:aws:s3:::{BUCKET}/{key}"
    with acting_as("FlowWorkerFunction", served.stack.stack_id):
        _store().put_stream("task-6", "raw.big", io.BytesIO(os.urandom(17 << 20)), "x/y")
    with acting_as("GetTaskFunction", served.stack.stack_id):
        _store().link("task-6", "raw.big")
    calls = {
        (c["principal"], c["action"], c["resource"], c["operation"])
        for c in _recorded(served.stack)
        if c["kind"] == "call" and c["resource"] == resource
    }
    assert calls == {
        ("FlowWorkerFunction", "s3:PutObject", resource, "s3:CreateMultipartUpload"),
        ("GetTaskFunction", "s3:GetObject", resource, "s3:GetObject (presigned)"),
    }  # UploadPart and CompleteMultipartUpload: the same authorization, recorded once
    assert not [c for c in _recorded(served.stack) if c["kind"] == "error"]


def test_reset_empties_the_bucket(served: Served) -> None:
    _store().put("task-7", "raw.a", b"before the reset", "text/plain")
    served.stack.reset()
    response = httpx.get(_store().link("task-7", "raw.a"))
    assert response.status_code == 404 and _error_code(response) == "NoSuchKey"
    _store().put("task-7", "raw.a", b"after", "text/plain")  # the bucket is there again
    assert httpx.get(_store().link("task-7", "raw.a")).content == b"after"
