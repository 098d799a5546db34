"""The local stack's `/_local/invoke` (what `a2a-serverless invoke --url` calls) runs a
function on an event inside the stack, so an event can name the stack's own tasks; and the
Bedrock flow on the local stack, which has no Bedrock: its turn fails saying so, unless the
developer opts in to the real one (the wiring checked here without any call to AWS)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest

from a2a_serverless.flows import bedrock
from a2a_serverless.local.stack import REAL_BEDROCK_ENV, LocalStack
from tests.asgi_client import AsgiClient
from tests.integration.harness import A2A, load_event, wait_state

LOOPBACK = "http://127.0.0.1:8000"


def run_remotely(stack: LocalStack, function: str, event: Any, base_url: str = LOOPBACK) -> Any:
    return AsgiClient(stack.gateway(), base_url=base_url).request(
        "POST", "/_local/invoke", json={"function": function, "event": event}
    )


def test_invoke_runs_a_function_on_a_task_of_the_stack(local_stack: LocalStack, alice: A2A) -> None:
    task_id = alice.send("hello").task["id"]
    # A Web Adapter function (through its app) and a Mangum one (its handler).
    got = run_remotely(local_stack, "GetTaskFunction", load_event("get_task.json", task_id=task_id))
    assert got.status_code == 200, got.text
    assert got.json()["handled"] is True
    result = got.json()["result"]
    assert result["statusCode"] == 200, result
    assert json.loads(result["body"])["id"] == task_id
    listed = run_remotely(local_stack, "ListTasksFunction", load_event("list_tasks.json", query={}))
    assert listed.status_code == 200, listed.text
    body = json.loads(listed.json()["result"]["body"])
    assert [task["id"] for task in body["tasks"]] == [task_id]


def test_a_handler_that_raises_is_reported_as_lambda_reports_it(local_stack: LocalStack) -> None:
    answered = run_remotely(local_stack, "FlowWorkerFunction", {"turn": 1})  # no taskId
    assert answered.status_code == 200, answered.text
    assert answered.json() == {
        "handled": False,
        "result": {"errorType": "KeyError", "errorMessage": "'taskId'"},
    }


def test_invoke_names_the_stacks_functions_when_one_is_unknown(local_stack: LocalStack) -> None:
    answered = run_remotely(local_stack, "NoSuchFunction", {})
    assert answered.status_code == 404
    assert "GetTaskFunction" in answered.json()["error"]["message"]


def test_invoke_runs_nothing_for_a_request_from_elsewhere(
    local_stack: LocalStack, alice: A2A
) -> None:
    task_id = alice.send("hello").task["id"]
    cancel = load_event("cancel_task.json", task_id=task_id)
    # The stack reached on an outside address (dev --host 0.0.0.0), or relayed by a proxy.
    outside = run_remotely(
        local_stack, "StreamFunction", cancel, base_url="http://192.168.1.5:8000"
    )
    assert outside.status_code == 403, outside.text
    relayed = AsgiClient(local_stack.gateway(), base_url=LOOPBACK).request(
        "POST",
        "/_local/invoke",
        json={"function": "StreamFunction", "event": cancel},
        headers={"x-forwarded-for": "203.0.113.9"},
    )
    assert relayed.status_code == 403, relayed.text
    assert "loopback" in relayed.json()["error"]["message"]
    assert alice.get(task_id).task["status"]["state"] == "TASK_STATE_COMPLETED"


# -- Bedrock -----------------------------------------------------------------------------------


def test_the_bedrock_flow_says_bedrock_is_not_emulated_and_how_to_run_it(
    monkeypatch: pytest.MonkeyPatch, make_stack: Callable[..., LocalStack]
) -> None:
    monkeypatch.delenv(REAL_BEDROCK_ENV, raising=False)
    stack = make_stack(Flow="a2a_serverless.flows.bedrock:flow")
    client = A2A(stack, "alice")
    task_id = client.send("hello", blocking=False).task["id"]
    task = wait_state(client, task_id, {"TASK_STATE_FAILED"})
    said = task["status"]["message"]["parts"][0]["text"]
    assert "not emulated by the local stack" in said
    assert f"{REAL_BEDROCK_ENV}=1" in said
    assert "NotImplementedError" not in said


class _Sent(Exception):
    def __init__(self, request: Any) -> None:
        super().__init__("sent")
        self.request = request


def test_opted_in_the_bedrock_client_goes_to_the_real_endpoint_with_the_users_credentials(
    monkeypatch: pytest.MonkeyPatch, make_stack: Callable[..., LocalStack]
) -> None:
    # The developer's shell: their own credentials and region, and the opt-in.
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "BEDROCK_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADEVELOPERSOWN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "developers-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv(REAL_BEDROCK_ENV, "1")
    stack = make_stack(Flow="a2a_serverless.flows.bedrock:flow")
    # Every other client of the stack has moto's credentials and goes to moto.
    assert os.environ["AWS_ACCESS_KEY_ID"] != "AKIADEVELOPERSOWN"
    config = bedrock.BedrockFlow(model_id="amazon.nova-lite-v1:0").config
    client = bedrock.new_client(config)
    assert client.meta.region_name == "eu-west-1"

    def capture(request: Any, **kwargs: Any) -> None:
        raise _Sent(request)

    # Registered after moto's stub: reached only when moto lets the request go out.
    client.meta.events.register("before-send.bedrock-runtime", capture)
    with pytest.raises(_Sent) as sent:
        client.converse_stream(
            modelId=config.model_id, messages=[{"role": "user", "content": [{"text": "hi"}]}]
        )
    request = sent.value.request
    assert request.url.startswith("https://bedrock-runtime.eu-west-1.amazonaws.com/")
    assert "Credential=AKIADEVELOPERSOWN/" in request.headers["Authorization"].decode()
    assert stack.functions  # the stack stays up for the test
