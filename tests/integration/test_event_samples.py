"""Every sample event in `events/` through its function's real entry point on the local stack.

`SAMPLES` says which function each file is for; a file without a row, or a function of the
template without a sample, fails here, so a new sample (or function) cannot go untested. The
REST samples must also match a route of their function in the template. Each sample runs as
AWS would deliver it (placeholders swapped for a live task's id, the webhook URL for a local
receiver) and its answer is checked: status codes and A2A bodies (strictly, see tests/wire.py),
the authorizer's policy for a key made through `ApiKeyAdmin`, the flow worker's result, and
the webhook sender's partial-batch answer plus what a local receiver was POSTed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from a2a_serverless import wiring
from a2a_serverless.auth import ApiKeyAdmin
from a2a_serverless.local.resources import LambdaContext
from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import (
    A2A,
    EVENTS,
    SAMPLE_CONTEXT_ID,
    SAMPLE_TASK_ID,
    Resp,
    event_log,
    invoke_mangum,
    invoke_web_adapter,
    invoke_worker,
    load_event,
    partition,
    user_message,
    wait_idle,
    wait_state,
)
from tests.integration.webhooks import Webhooks, always
from tests.template.sam import FUNCTIONS
from tests.wire import check_jsonrpc_response, check_sse_frames, rpc_request, unrecorded

# The config id and webhook URL of push_config_create.json (the retry batch names the id).
SAMPLE_CONFIG_ID = "c2d4e6f8-1a3b-4c5d-8e9f-0a1b2c3d4e5f"
SAMPLE_HOOK_URL = f"https://hooks.example.com/a2a/{SAMPLE_TASK_ID}"
SAMPLE_API_KEY = "a2a_k7p2m9x4q1z8_REPLACE-with-the-key-that-scripts-print-000"

# File in events/ -> the function (template logical id) it is an event of.
SAMPLES: dict[str, str] = {
    "agent_card.json": "AgentCardFunction",
    "extended_agent_card.json": "AgentCardFunction",
    "authorizer_request.json": "AuthorizerFunction",
    "send_message.json": "SendMessageFunction",
    "get_task.json": "GetTaskFunction",
    "list_tasks.json": "ListTasksFunction",
    "cancel_task.json": "StreamFunction",
    "stream_message.json": "StreamFunction",
    "jsonrpc_send_message.json": "StreamFunction",
    "subscribe_task.json": "StreamFunction",
    "push_config_create.json": "PushConfigFunction",
    "push_config_list.json": "PushConfigFunction",
    "flow_worker_step.json": "FlowWorkerFunction",
    "flow_worker_fail.json": "FlowWorkerFunction",
    "webhook_stream_batch.json": "WebhookSenderFunction",
    "webhook_retry_batch.json": "WebhookSenderFunction",
    "delegation_notification.json": "DelegationReceiverFunction",
}


# -- the table itself -------------------------------------------------------------------------


def test_every_file_in_events_has_a_row() -> None:
    files = {p.name for p in EVENTS.iterdir() if not p.name.startswith(".")}
    assert files - set(SAMPLES) == set(), "sample events without a row in SAMPLES"
    assert set(SAMPLES) - files == set(), "rows of SAMPLES without a file in events/"


def test_every_function_of_the_template_has_a_sample() -> None:
    assert set(SAMPLES.values()) <= set(FUNCTIONS), "SAMPLES names a function not in FUNCTIONS"
    missing = set(FUNCTIONS) - set(SAMPLES.values())
    assert missing == set(), f"functions without a sample event: {sorted(missing)}"


def test_rest_samples_match_a_route_of_their_function(local_stack: LocalStack) -> None:
    """An API event is for the function whose template route has its method and resource."""
    for name, function in SAMPLES.items():
        event = json.loads((EVENTS / name).read_text())
        if "httpMethod" not in event or event.get("type") == "REQUEST":
            continue  # not a proxy event (the authorizer's is checked by its own test)
        route = (event["httpMethod"], event["resource"])
        assert route in local_stack.functions[function].events, (name, function, route)
        assert event["requestContext"]["resourcePath"] == event["resource"], name
        assert event["requestContext"]["path"] == "/prod" + event["path"], name


# -- calling the functions --------------------------------------------------------------------


def sample(name: str, *, task_id: str | None = None, hook: str | None = None) -> dict[str, Any]:
    """A sample as `load_event` gives it, the webhook URL swapped for a local one."""
    event = load_event(name, task_id=task_id)
    if hook is not None:
        # load_event has put the task id into the URL too.
        url = SAMPLE_HOOK_URL.replace(SAMPLE_TASK_ID, task_id or SAMPLE_TASK_ID)
        event = json.loads(json.dumps(event).replace(url, hook))
    return event


def call_api(stack: LocalStack, name: str, event: dict[str, Any]) -> Resp:
    """A proxy event through the entry point its function has in the template: the handler
    (Mangum), or the app behind the Lambda Web Adapter."""
    function = SAMPLES[name]
    if stack.functions[function].is_web_adapter:
        return invoke_web_adapter(stack.app_for(function), event)
    return invoke_mangum(stack.handler_for(function), event)


def adapter_raw(stack: LocalStack, name: str, event: dict[str, Any]) -> httpx.Response:
    """What the Lambda Web Adapter gets back for a streamed or JSON-RPC answer (the harness's
    `invoke_web_adapter` checks HTTP+JSON bodies only)."""
    function = SAMPLES[name]
    assert stack.functions[function].is_web_adapter, function
    headers = {k: v[-1] for k, v in (event.get("multiValueHeaders") or {}).items()}
    headers.update(event.get("headers") or {})
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=stack.app_for(function))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
            return await c.request(
                event["httpMethod"],
                event["path"],
                headers=headers,
                content=(event.get("body") or "").encode(),
                timeout=60,
            )

    return asyncio.run(call())


def invoke(stack: LocalStack, name: str, event: dict[str, Any]) -> Any:
    function = SAMPLES[name]
    return stack.handler_for(function)(event, LambdaContext(function))


# -- a webhook receiver -------------------------------------------------------------------------

HOOK = "samples"  # the receiver's one hook


@pytest.fixture
def receiver() -> Iterator[Webhooks]:
    hooks = Webhooks()
    yield hooks
    hooks.close()


# -- what each sample must do -------------------------------------------------------------------


@dataclass
class Run:
    stack: LocalStack
    alice: A2A  # the principal of the samples' authorizer context
    receiver: Webhooks
    monkeypatch: pytest.MonkeyPatch

    @property
    def hook_url(self) -> str:
        """The receiver's hook: it answers 200 to every POST."""
        return self.receiver.hook(HOOK, always(200))


def texts(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def completed_task(run: Run, text: str = "sample", **kwargs: Any) -> str:
    response = run.alice.send(text, **kwargs)
    assert response.status == 200, response.body
    assert response.task["status"]["state"] == "TASK_STATE_COMPLETED"
    return str(response.task["id"])


def check_agent_card(run: Run) -> None:
    card = call_api(run.stack, "agent_card.json", sample("agent_card.json"))
    assert card.status == 200
    assert card.json["name"] and card.json["capabilities"]["streaming"] is True
    urls = [i["url"] for i in card.json["supportedInterfaces"]]
    assert urls and all(
        u.startswith("https://abc123.execute-api.us-east-1.amazonaws.com/prod") for u in urls
    )


def check_extended_agent_card(run: Run) -> None:
    # The local stack runs Auth=None: there is no extended card to give (README).
    extended = call_api(run.stack, "extended_agent_card.json", sample("extended_agent_card.json"))
    assert extended.status == 400 and extended.reason == "UNSUPPORTED_OPERATION"


def check_authorizer_request(run: Run) -> None:
    run.monkeypatch.setenv("AUTH_MODE", "ApiKey")
    wiring.reset()
    try:
        issued = ApiKeyAdmin(wiring.get_store()).create("alice", "events sample")
        event = sample("authorizer_request.json")
        text = json.dumps(event).replace(SAMPLE_API_KEY, issued.api_key)
        answer = invoke(run.stack, "authorizer_request.json", json.loads(text))
        assert answer["principalId"] == "alice"
        assert answer["policyDocument"] == {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow",
                    # The whole stage: API Gateway caches the answer for every route.
                    "Resource": "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/*/*",
                }
            ],
        }
        assert json.loads(answer["context"]["claims"]) == {"keyId": issued.key_id}
        # The placeholder itself is no key: API Gateway answers 401.
        with pytest.raises(Exception, match=r"^Unauthorized$"):
            invoke(run.stack, "authorizer_request.json", sample("authorizer_request.json"))
    finally:
        run.monkeypatch.delenv("AUTH_MODE")
        wiring.reset()


def check_send_message(run: Run) -> None:
    sent = call_api(run.stack, "send_message.json", sample("send_message.json"))
    assert sent.status == 200, sent.body
    assert sent.task["status"]["state"] == "TASK_STATE_COMPLETED"  # returnImmediately: false
    assert sent.task["contextId"] == SAMPLE_CONTEXT_ID
    assert "hello from sam local invoke" in texts(sent.task)


def check_get_task(run: Run) -> None:
    task_id = completed_task(run)
    got = call_api(run.stack, "get_task.json", sample("get_task.json", task_id=task_id))
    assert got.status == 200
    assert got.json["id"] == task_id and got.json["status"]["state"] == "TASK_STATE_COMPLETED"
    # The placeholder names no task of alice's.
    missing = call_api(run.stack, "get_task.json", sample("get_task.json"))
    assert missing.status == 404 and missing.reason == "TASK_NOT_FOUND"


def check_list_tasks(run: Run) -> None:
    # The sample lists alice's completed tasks of the sample context.
    listed_id = completed_task(run, context_id=SAMPLE_CONTEXT_ID)
    completed_task(run)  # another context: not listed
    page = call_api(run.stack, "list_tasks.json", sample("list_tasks.json"))
    assert page.status == 200
    assert [t["id"] for t in page.json["tasks"]] == [listed_id]
    assert page.json["totalSize"] == 1 and page.json["pageSize"] == 10


def check_cancel_task(run: Run) -> None:
    task_id = run.alice.send("wait for me [input]").task["id"]
    canceled = call_api(run.stack, "cancel_task.json", sample("cancel_task.json", task_id=task_id))
    assert canceled.status == 200, canceled.body
    assert canceled.json["id"] == task_id
    assert canceled.json["status"]["state"] == "TASK_STATE_CANCELED"


def sse_events(response: httpx.Response, path: str) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    assert response.headers["content-type"].startswith("text/event-stream")
    with unrecorded():  # not an e2e client's response (tests/e2e/coverage.py)
        frames = check_sse_frames(response.content, complete=True, path=path)
    return [f.payload for f in frames if f.payload is not None]


def check_stream_message(run: Run) -> None:
    event = sample("stream_message.json")
    events = sse_events(adapter_raw(run.stack, "stream_message.json", event), event["path"])
    task = events[0]["task"]
    assert task["contextId"] == SAMPLE_CONTEXT_ID
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    chunks = [
        p["text"]
        for e in events
        if "artifactUpdate" in e
        for p in e["artifactUpdate"]["artifact"]["parts"]
    ]
    assert "stream this from sam local invoke" in "".join(chunks)
    # What was streamed is the task's event log, in order.
    assert events[1:] == [ev for _, ev in event_log(run.stack, task["id"])][1:]


def check_jsonrpc_send_message(run: Run) -> None:
    event = sample("jsonrpc_send_message.json")
    response = adapter_raw(run.stack, "jsonrpc_send_message.json", event)
    request = rpc_request(event["body"].encode(), "1.0")
    with unrecorded():
        result = check_jsonrpc_response(request, response.status_code, response.content)
    assert result is not None
    payload = json.loads(response.content)
    assert payload["id"] == 1 and "error" not in payload
    task = payload["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "hello over JSON-RPC" in texts(task)


def check_subscribe_task(run: Run) -> None:
    task_id = run.alice.send("take your time [slow=1]", blocking=False).task["id"]
    event = sample("subscribe_task.json", task_id=task_id)
    events = sse_events(adapter_raw(run.stack, "subscribe_task.json", event), event["path"])
    assert events[0]["task"]["id"] == task_id
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def create_config(run: Run, task_id: str) -> Resp:
    event = sample("push_config_create.json", task_id=task_id, hook=run.hook_url)
    return call_api(run.stack, "push_config_create.json", event)


def check_push_config_create(run: Run) -> None:
    task_id = completed_task(run)
    created = create_config(run, task_id)
    assert created.status == 200, created.body
    assert created.json == {
        "id": SAMPLE_CONFIG_ID,
        "taskId": task_id,
        "url": run.hook_url,
        "token": "notification-token-7f3e",
        "authentication": {"scheme": "Bearer", "credentials": "webhook-secret-2b9d"},
    }
    # As written, the sample's webhook (a public host this machine cannot resolve) is vetted
    # and refused before anything is stored.
    refused = call_api(
        run.stack, "push_config_create.json", sample("push_config_create.json", task_id=task_id)
    )
    assert refused.status == 400, refused.body


def check_push_config_list(run: Run) -> None:
    task_id = completed_task(run)
    assert create_config(run, task_id).status == 200
    listed = call_api(
        run.stack, "push_config_list.json", sample("push_config_list.json", task_id=task_id)
    )
    assert listed.status == 200
    assert [c["id"] for c in listed.json["configs"]] == [SAMPLE_CONFIG_ID]


def check_flow_worker_step(run: Run) -> None:
    # A turn whose step already ran (the execution retried it late) writes nothing.
    task_id = completed_task(run)
    wait_idle(run.stack)
    before = partition(run.stack, task_id)
    result = invoke_worker(run.stack, sample("flow_worker_step.json", task_id=task_id))
    assert result == {"taskId": task_id, "turn": 1, "step": 0, "continue": False}
    assert partition(run.stack, task_id) == before


def check_flow_worker_fail(run: Run) -> None:
    task_id = run.alice.send("slowly now [slow=1.5]", blocking=False).task["id"]
    wait_state(run.alice, task_id, {"TASK_STATE_WORKING"})
    result = invoke_worker(run.stack, sample("flow_worker_fail.json", task_id=task_id))
    assert result == {"taskId": task_id, "turn": 1, "continue": False}
    task = run.alice.get(task_id).json
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "timed out" in task["status"]["message"]["parts"][0]["text"]


def check_webhook_stream_batch(run: Run) -> None:
    # The sample's config, inline: a webhook gets the events written after it was made, and
    # the sample's records are the task's first three.
    config = json.loads(sample("push_config_create.json", hook=run.hook_url)["body"])
    response = run.alice.send_message(user_message("sample"), push_config=config)
    assert response.task["status"]["state"] == "TASK_STATE_COMPLETED"
    task_id = str(response.task["id"])
    event = sample("webhook_stream_batch.json", task_id=task_id)
    answer = invoke(run.stack, "webhook_stream_batch.json", event)
    assert answer == {"batchItemFailures": []}  # Lambda's partial-batch response: none failed
    # Each record's event, as stored in the item, POSTed once, in stream order.
    images = [r["dynamodb"]["NewImage"] for r in event["Records"]]
    assert run.receiver.delivered(HOOK) == [json.loads(i["ev"]["S"]) for i in images]
    for post in run.receiver.posts_to(HOOK):
        assert post.headers["content-type"] == "application/a2a+json"
        assert post.headers["x-a2a-notification-token"] == "notification-token-7f3e"
        assert post.headers["authorization"] == "Bearer webhook-secret-2b9d"


def check_webhook_retry_batch(run: Run) -> None:
    task_id = completed_task(run)
    assert create_config(run, task_id).status == 200
    answer = invoke(
        run.stack, "webhook_retry_batch.json", sample("webhook_retry_batch.json", task_id=task_id)
    )
    assert answer == {"batchItemFailures": []}
    # The queued event (seq 1 of the task, read from the table) went to the config's webhook.
    first = event_log(run.stack, task_id)[0][1]
    assert run.receiver.delivered(HOOK) == [first]
    assert first["statusUpdate"]["status"]["state"] == "TASK_STATE_SUBMITTED"


def check_delegation_notification(run: Run) -> None:
    # A remote agent's notification with a token no delegation of the task was given: refused,
    # and the task (a live one of the stack) untouched.
    task_id = completed_task(run)
    before = partition(run.stack, task_id)
    event = sample("delegation_notification.json", task_id=task_id)
    answer = call_api(run.stack, "delegation_notification.json", event)
    assert answer.status == 401
    assert partition(run.stack, task_id) == before


CHECKS: dict[str, Callable[[Run], None]] = {
    "agent_card.json": check_agent_card,
    "extended_agent_card.json": check_extended_agent_card,
    "authorizer_request.json": check_authorizer_request,
    "send_message.json": check_send_message,
    "get_task.json": check_get_task,
    "list_tasks.json": check_list_tasks,
    "cancel_task.json": check_cancel_task,
    "stream_message.json": check_stream_message,
    "jsonrpc_send_message.json": check_jsonrpc_send_message,
    "subscribe_task.json": check_subscribe_task,
    "push_config_create.json": check_push_config_create,
    "push_config_list.json": check_push_config_list,
    "flow_worker_step.json": check_flow_worker_step,
    "flow_worker_fail.json": check_flow_worker_fail,
    "webhook_stream_batch.json": check_webhook_stream_batch,
    "webhook_retry_batch.json": check_webhook_retry_batch,
    "delegation_notification.json": check_delegation_notification,
}


def test_every_sample_has_a_check() -> None:
    assert set(CHECKS) == set(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_on_its_function(
    name: str,
    local_stack: LocalStack,
    alice: A2A,
    receiver: Webhooks,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    CHECKS[name](Run(local_stack, alice, receiver, monkeypatch))
