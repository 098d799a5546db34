"""No secret in any log line: a push delivery and a request with an Authorization header,
through the real handlers against the local stack (moto)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_serverless import wiring
from a2a_serverless.bindings.lambda_adapter import mangum_handler, web_adapter_app
from a2a_serverless.bindings.rest import create_app, get_task_router
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import (
    AuthenticationInfo,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a_serverless.observability import invocation
from a2a_serverless.push.delivery import DeliveryResult
from a2a_serverless.push.sender import DeliveryFailed, SenderConfig, WebhookSender
from tests.unit.test_observability import (
    BEARER,
    CREDENTIALS,
    TOKEN,
    captured_logs,
    emf_blobs,
    metric_points,
)

ROOT = Path(__file__).resolve().parents[2]


# -- no secrets in logs --------------------------------------------------------------------


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack(event_sources=False) as stack:
        yield stack


def test_push_delivery_logs_carry_no_secret(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3

    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="obs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    request = SendMessageRequest.model_validate(
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": True},
        }
    )
    task = wiring.get_service().sender.send(RequestContext.of_owner("alice"), request).task
    assert task is not None
    task_id = task.id
    config = TaskPushNotificationConfig(
        id="c1",
        task_id=task_id,
        url="http://127.0.0.1:9/hook?token=" + TOKEN,
        token=TOKEN,
        authentication=AuthenticationInfo(scheme="Bearer", credentials=CREDENTIALS),
    )
    wiring.get_store().put_push_config(config)
    answers = [
        DeliveryResult(status=503, retryable=True, error="HTTP 503"),
        DeliveryResult(status=503, retryable=True, error="HTTP 503"),
        DeliveryResult(status=401, retryable=False, error="HTTP 401"),
        DeliveryResult(status=503, retryable=True, error="HTTP 503"),
    ]
    seen_headers: list[dict[str, str]] = []

    def post(target: Any, body: bytes, headers: Any, **_: Any) -> DeliveryResult:
        seen_headers.append(dict(headers))
        return answers.pop(0)

    sender = WebhookSender(
        wiring.get_store(),
        sqs,
        SenderConfig(
            egress=EgressPolicy(allow_http=True, allow_hosts=frozenset({"127.0.0.1"})),
            retry_queue_url=queue,
            max_attempts=1,
        ),
        post=post,
        sleep=lambda _: None,
    )
    with captured_logs() as lines, invocation(correlation_id="push"):
        # Stream path: two failed attempts, parked (warning); a refusal (warning).
        sender.deliver_stream_event(task_id, 1, b"{}", [(config, False)], set())
        sender.deliver_stream_event(task_id, 2, b"{}", [(config, False)], set())
        # Queue path: fails, and with max_attempts=1 is dead-lettered (error log).
        with contextlib.suppress(DeliveryFailed):
            sender.deliver_queued({"taskId": task_id, "configId": "c1", "seq": 1}, "r", 1)
    # The secrets were really sent (so the test would see them if they were logged) ...
    assert seen_headers and seen_headers[0]["X-A2A-Notification-Token"] == TOKEN
    assert seen_headers[0]["Authorization"] == f"Bearer {CREDENTIALS}"
    assert not answers  # every scripted attempt was made
    messages = " ".join(line["message"] for line in lines)
    assert "parking" in messages and "refused" in messages and "dead-letter" in messages
    assert all(line["correlation_id"] == "push" for line in lines)
    points = metric_points(emf_blobs(out := capsys.readouterr().out))
    assert sorted(name for name, *_ in points) == ["WebhookDeadLetters"] + ["WebhookFailures"] * 4
    text = json.dumps(lines) + out
    for secret in (TOKEN, CREDENTIALS):
        assert secret not in text


def test_requests_with_an_authorization_header_log_no_secret(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Even with Powertools told to log incoming events, the handlers never do.
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    headers = {"Authorization": f"Bearer {BEARER}", "A2A-Version": "1.0"}
    event = json.loads((ROOT / "events" / "get_task.json").read_text())
    event["headers"] = {**(event.get("headers") or {}), **headers}
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
    handler = mangum_handler(create_app(get_task_router(wiring.get_service())))
    context = type(
        "Context",
        (),
        {
            "function_name": "GetTaskFunction",
            "memory_limit_in_mb": 512,
            "invoked_function_arn": "arn:aws:lambda:us-east-1:1:function:GetTaskFunction",
            "aws_request_id": str(uuid.uuid4()),
        },
    )()
    app = web_adapter_app(create_app(get_task_router(wiring.get_service())))

    async def web_adapter_request() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://a") as client:
            response = await client.get(
                "/tasks/no-such-task",
                headers={
                    **headers,
                    "x-amzn-request-context": json.dumps(event["requestContext"]),
                },
            )
        return response.status_code

    with captured_logs() as lines:
        loop = asyncio.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            result = handler(event, context)
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        status = asyncio.run(web_adapter_request())
    assert result["statusCode"] == 404 and status == 404
    handled = [line for line in lines if line["message"] == "request handled"]
    assert len(handled) == 2
    assert handled[0]["correlation_id"] == event["requestContext"]["requestId"]
    assert handled[0]["function_name"] == "GetTaskFunction"
    assert BEARER not in json.dumps(lines)
