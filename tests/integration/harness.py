"""Driving the real handlers the way AWS does, against the in-process moto stack.

- Mangum functions get API Gateway REST (v1) proxy events from `events/` and answer with
  proxy results (decoded here as API Gateway would decode them).
- Web Adapter functions (SendMessage, Stream) get what the Lambda Web Adapter makes of the
  same events: an HTTP request with API Gateway's requestContext in `x-amzn-request-context`.
- Every response body goes through `tests.wire.check_response`.
- DynamoDB calls are counted with a botocore `before-call` hook on the store's client,
  attributed to the operation being measured through a context variable (threads started by
  moto's Step Functions interpreter have no context: their calls are the worker's).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode, urlparse

import boto3
import httpx

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless import wiring
from a2a_serverless.local.resources import LambdaContext
from a2a_serverless.local.stack import REGION, LocalStack
from tests.helpers import user_message  # also imported from here by the tests
from tests.wire import check_response

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
SAMPLE_TASK_ID = "3f0c9a8e-5b1d-4c2e-9f7a-1b2c3d4e5f60"
SAMPLE_CONTEXT_ID = "b7e2d4a1-9c3f-4e8a-8d6b-2f1a0c9e7d35"
TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
SETTLED = TERMINAL | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}


# -- events ---------------------------------------------------------------------------------


def load_event(
    name: str,
    *,
    task_id: str | None = None,
    principal: str | None = "alice",
    query: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An event file with the task id substituted (and principal/query/body replaced)."""
    text = (EVENTS / name).read_text()
    if task_id is not None:
        text = text.replace(SAMPLE_TASK_ID, task_id)
    event = json.loads(text)
    context = event.get("requestContext")
    if isinstance(context, dict):
        context["requestId"] = str(uuid.uuid4())
        if principal is None:
            context.pop("authorizer", None)
        elif "authorizer" in context:
            context["authorizer"]["principalId"] = principal
    if query is not None:
        event["queryStringParameters"] = dict(query) or None
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} or None
    if body is not None:
        event["body"] = json.dumps(body)
    return event


@dataclass
class Resp:
    status: int
    body: bytes  # checked against the wire schema when the response was made
    raw: dict[str, Any] | None = None  # the Lambda proxy result (Mangum functions)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def reason(self) -> str | None:
        for detail in self.json.get("error", {}).get("details", []):
            if detail["@type"].endswith("ErrorInfo"):
                return detail["reason"]
        return None

    @property
    def task(self) -> dict[str, Any]:
        data = self.json
        return data.get("task", data)


def _wire_path(event: dict[str, Any]) -> str:
    query = event.get("queryStringParameters") or {}
    return event["path"] + ("?" + urlencode(query) if query else "")


def invoke_mangum(handler: Callable[..., Any], event: dict[str, Any]) -> Resp:
    """Invoke a Mangum function handler (in any thread) and check its response body."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        result = handler(event, LambdaContext("fn"))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    body = result.get("body") or ""
    raw_body = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
    check_response(event["httpMethod"], _wire_path(event), result["statusCode"], raw_body)
    return Resp(result["statusCode"], raw_body, result)


def invoke_web_adapter(app: Any, event: dict[str, Any]) -> Resp:
    """What the Lambda Web Adapter does with a REST proxy event: an HTTP request to the
    app, API Gateway's requestContext passed in `x-amzn-request-context`."""
    headers = {k: v[-1] for k, v in (event.get("multiValueHeaders") or {}).items()}
    headers.update(event.get("headers") or {})
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    query = event.get("multiValueQueryStringParameters") or {}
    params = [(k, v) for k, values in query.items() for v in values]
    body = event.get("body") or ""
    content = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
            return await c.request(
                event["httpMethod"],
                event["path"],
                params=params,
                headers=headers,
                content=content,
                timeout=60,
            )

    response = asyncio.run(call())
    check_response(event["httpMethod"], _wire_path(event), response.status_code, response.content)
    return Resp(response.status_code, response.content)


# -- A2A client over the real handlers ----------------------------------------------------


@contextlib.contextmanager
def _labelled(operation: str) -> Iterator[None]:
    """Client calls not inside a `measure` block still count as the client's, not the worker's."""
    if _MEASURING.get() is not None:
        yield
        return
    token = _MEASURING.set(f"client {operation}")
    try:
        yield
    finally:
        _MEASURING.reset(token)


class A2A:
    """The operations, each through its function's real entry point, as one principal."""

    def __init__(self, stack: LocalStack, principal: str = "alice") -> None:
        self.stack = stack
        self.principal = principal

    def as_(self, principal: str) -> A2A:
        return A2A(self.stack, principal)

    def send(
        self,
        text: str,
        *,
        blocking: bool = True,
        task_id: str | None = None,
        context_id: str | None = None,
        message_id: str | None = None,
    ) -> Resp:
        message = user_message(text, message_id=message_id, task_id=task_id, context_id=context_id)
        return self.send_message(message, blocking=blocking)

    def send_message(
        self,
        message: dict[str, Any],
        *,
        blocking: bool = True,
        push_config: dict[str, Any] | None = None,
    ) -> Resp:
        configuration: dict[str, Any] = {"returnImmediately": not blocking}
        if push_config is not None:  # an inline webhook
            configuration["taskPushNotificationConfig"] = push_config
        body = {"message": message, "configuration": configuration}
        event = load_event("send_message.json", principal=self.principal, body=body)
        with _labelled("send"):
            return invoke_web_adapter(self.stack.app_for("SendMessageFunction"), event)

    def get(self, task_id: str, history_length: int | None = None) -> Resp:
        query = {"historyLength": str(history_length)} if history_length is not None else None
        event = load_event("get_task.json", task_id=task_id, principal=self.principal, query=query)
        with _labelled("get"):
            return invoke_web_adapter(self.stack.app_for("GetTaskFunction"), event)

    def list(self, **query: Any) -> Resp:
        params = {k: str(v) for k, v in query.items() if v is not None}
        event = load_event("list_tasks.json", principal=self.principal, query=params)
        with _labelled("list"):
            return invoke_mangum(self.stack.handler_for("ListTasksFunction"), event)

    def cancel(self, task_id: str) -> Resp:
        event = load_event("cancel_task.json", task_id=task_id, principal=self.principal)
        with _labelled("cancel"):
            return invoke_web_adapter(self.stack.app_for("StreamFunction"), event)

    def list_all(self, page_size: int = 50, **query: Any) -> tuple[list[dict[str, Any]], int]:
        """Every page of a listing: (tasks in order, totalSize of the first page)."""
        tasks: list[dict[str, Any]] = []
        token = None
        total = None
        for _ in range(1000):
            response = self.list(pageSize=page_size, pageToken=token, **query)
            assert response.status == 200, response.body
            page = response.json
            assert page["pageSize"] == page_size
            total = page.get("totalSize", 0) if total is None else total
            assert page.get("totalSize", 0) == total, "totalSize changed between pages"
            tasks.extend(page.get("tasks", []))
            token = page.get("nextPageToken")
            if not token:
                return tasks, total
        raise AssertionError("pagination does not end")


def invoke_worker(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    return stack.handler_for("FlowWorkerFunction")(event, LambdaContext("FlowWorkerFunction"))


# -- waiting ----------------------------------------------------------------------------------


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(interval)


def wait_state(client: A2A, task_id: str, states: set[str], timeout: float = 20.0) -> dict:
    def settled() -> dict | None:
        task = client.get(task_id).json
        return task if task["status"]["state"] in states else None

    return wait_for(settled, timeout)


def sfn() -> Any:
    return boto3.client("stepfunctions", region_name=REGION)


def executions(stack: LocalStack, client: Any = None) -> list[dict[str, Any]]:
    pages = (client or sfn()).get_paginator("list_executions")
    arn = stack.env["STATE_MACHINE_ARN"]
    return [e for page in pages.paginate(stateMachineArn=arn) for e in page["executions"]]


def wait_idle(stack: LocalStack, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Until no execution of the flow state machine is RUNNING."""
    client = sfn()  # one for every poll: a client costs milliseconds of CPU to build

    def idle() -> tuple[list[dict[str, Any]]] | None:
        found = executions(stack, client)
        return (found,) if all(e["status"] != "RUNNING" for e in found) else None

    return wait_for(idle, timeout, interval=0.05)[0]


# -- the table, read directly -------------------------------------------------------------


def ddb() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def sqs() -> Any:
    return boto3.client("sqs", region_name=REGION)


def queue_depth(url: str) -> int:
    """Messages in a queue, visible or in flight."""
    attributes = sqs().get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def table(stack: LocalStack) -> str:
    return stack.env["TABLE_NAME"]


def partition(stack: LocalStack, task_id: str) -> list[dict[str, Any]]:
    pages = ddb().get_paginator("query")
    return [
        item
        for page in pages.paginate(
            TableName=table(stack),
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"T#{task_id}"}},
            ConsistentRead=True,
        )
        for item in page["Items"]
    ]


def scan(stack: LocalStack) -> list[dict[str, Any]]:
    pages = ddb().get_paginator("scan")
    return [item for page in pages.paginate(TableName=table(stack)) for item in page["Items"]]


def list_totals(client: A2A, context_id: str) -> tuple[int, int, int]:
    """ListTasks' totalSize for the caller: all its tasks, the context's, the completed ones."""
    queries: list[dict[str, str]] = [
        {},
        {"contextId": context_id},
        {"status": "TASK_STATE_COMPLETED"},
    ]
    a, b, c = (client.list(**q).json.get("totalSize", 0) for q in queries)
    return a, b, c


def header(stack: LocalStack, task_id: str) -> dict[str, Any]:
    return ddb().get_item(
        TableName=table(stack),
        Key={"pk": {"S": f"T#{task_id}"}, "sk": {"S": "H"}},
        ConsistentRead=True,
    )["Item"]


def one_header_deleted(
    stack: LocalStack, client: A2A, context_id: str
) -> tuple[str, dict[str, Any]]:
    """Two settled tasks of `client` in `context_id`, then the second one's header item
    deleted as a TTL expiry would: the id of the task kept and the deleted item."""
    kept = client.send("stays", context_id=context_id).task["id"]
    gone = client.send("goes", context_id=context_id).task["id"]
    wait_idle(stack)
    assert list_totals(client, context_id) == (2, 2, 2)
    old = header(stack, gone)
    ddb().delete_item(TableName=table(stack), Key={"pk": old["pk"], "sk": old["sk"]})
    return kept, old


def event_log(stack: LocalStack, task_id: str) -> list[tuple[int, dict[str, Any]]]:
    """(seq, StreamResponse JSON) for every `E#` item of the task and every event its header
    stands for (the first ones, which have no items: `keys.header_events`), in seq order."""
    stored = partition(stack, task_id)
    items = [i for i in stored if i["sk"]["S"].startswith("E#")]
    header = next((i for i in stored if i["sk"]["S"] == keys.HEADER), None)
    in_header = keys.header_events(header) if header else []
    in_items = {i["sk"]["S"] for i in items}
    assert not any(keys.event_sk(seq) in in_items for seq, _ in in_header), "an event twice"
    log = [(seq, event.wire()) for seq, event in in_header]
    for item in items:
        seq = int(item["seq"]["N"])
        assert item["sk"]["S"] == f"E#{seq:010d}", item["sk"]
        log.append((seq, json.loads(item["ev"]["S"])))
    return sorted(log, key=lambda entry: entry[0])


def status_states(log: list[tuple[int, dict[str, Any]]]) -> list[str]:
    return [ev["statusUpdate"]["status"]["state"] for _, ev in log if "statusUpdate" in ev]


def assert_log_consistent(stack: LocalStack, task_id: str) -> list[tuple[int, dict[str, Any]]]:
    """Contiguous seqs 1..N, at most one terminal status, header state = last status."""
    log = event_log(stack, task_id)
    seqs = [seq for seq, _ in log]
    assert seqs == list(range(1, len(seqs) + 1)), f"gaps in the event log of {task_id}: {seqs}"
    states = status_states(log)
    terminal = [s for s in states if s in TERMINAL]
    assert len(terminal) <= 1, f"{task_id}: several terminal status events {states}"
    if terminal:
        assert states[-1] == terminal[0], f"{task_id}: status after the terminal one {states}"
    head = header(stack, task_id)
    assert head["state"]["S"] == states[-1], (task_id, head["state"]["S"], states)
    assert int(head["statusSeq"]["N"]) <= seqs[-1]
    return log


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (UTF-8 strings, numbers ~ digits)."""

    def value_size(value: dict[str, Any]) -> int:
        ((kind, data),) = value.items()
        if kind == "S":
            return len(data.encode())
        if kind == "N":
            return len(data) // 2 + 1
        if kind == "B":
            return len(data)
        if kind == "M":
            return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in data.items())
        if kind == "L":
            return 3 + sum(value_size(v) + 1 for v in data)
        return 1

    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


# -- counting DynamoDB calls --------------------------------------------------------------

_MEASURING: contextvars.ContextVar[str | None] = contextvars.ContextVar("measuring", default=None)
WORKER = "worker (Step Functions thread)"


class CallCounter:
    """Counts the store client's DynamoDB API calls per measured operation."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._client = wiring.get_store()._db
        self._client.meta.events.register("before-call.dynamodb", self._on_call)

    def _on_call(self, model: Any = None, **_: Any) -> None:
        self.calls.append((_MEASURING.get() or WORKER, model.name))

    def close(self) -> None:
        self._client.meta.events.unregister("before-call.dynamodb", self._on_call)

    def of(self, label: str) -> Counter[str]:
        return Counter(op for who, op in self.calls if who == label)

    @contextlib.contextmanager
    def measure(self, label: str) -> Iterator[Counter[str]]:
        """Count the calls made on behalf of the block (any thread it hands work to)."""
        result: Counter[str] = Counter()
        token = _MEASURING.set(label)
        try:
            yield result
        finally:
            _MEASURING.reset(token)
            result.update(self.of(label))

    def reset_worker(self) -> None:
        self.calls = [c for c in self.calls if c[0] != WORKER]


@dataclass(frozen=True)
class DynamoCall:
    at: float  # time.monotonic() when the call was made
    who: str  # the measured operation (see CallCounter), or WORKER
    operation: str
    params: dict[str, Any]

    @property
    def partition(self) -> str | None:
        value = (self.params.get("ExpressionAttributeValues") or {}).get(":pk") or {}
        key = (self.params.get("Key") or {}).get("pk") or {}
        return value.get("S") or key.get("S")

    @property
    def reads_event_log(self) -> bool:
        """A Query for the log after some seq (`sk BETWEEN E#.. AND E#..`): LogTail.poll."""
        values = self.params.get("ExpressionAttributeValues") or {}
        return (
            self.operation == "Query"
            and "BETWEEN" in self.params.get("KeyConditionExpression", "")
            and str(values.get(":from", {}).get("S", "")).startswith("E#")
        )


class CallLog:
    """Every DynamoDB call of the store's client with its parameters and time, from any
    thread (a uvicorn server's too, whose calls have no measured label: they are WORKER)."""

    def __init__(self) -> None:
        self.calls: list[DynamoCall] = []
        self._lock = threading.Lock()
        self._client = wiring.get_store()._db
        self._client.meta.events.register("before-parameter-build.dynamodb", self._on_call)

    def _on_call(self, params: dict[str, Any], model: Any = None, **_: Any) -> None:
        call = DynamoCall(time.monotonic(), _MEASURING.get() or WORKER, model.name, dict(params))
        with self._lock:
            self.calls.append(call)

    def close(self) -> None:
        self._client.meta.events.unregister("before-parameter-build.dynamodb", self._on_call)

    def of_task(self, task_id: str, since: float = 0.0, until: float = float("inf")) -> list:
        with self._lock:
            return [
                c for c in self.calls if c.partition == f"T#{task_id}" and since <= c.at < until
            ]

    def log_reads(self, task_id: str, since: float = 0.0, until: float = float("inf")) -> list:
        """The event-log tail reads of one task in a time window."""
        return [c for c in self.of_task(task_id, since, until) if c.reads_event_log]


def stored_object(stack: LocalStack, url: str) -> bytes:
    """The bytes a URL to stored content downloads, read from the stack's bucket (the URL's
    path ends with the object key, `tasks/...`)."""
    path = unquote(urlparse(url).path)
    key = path[path.index("/tasks/") + 1 :]
    answer = boto3.client("s3").get_object(Bucket=stack.env["CONTENT_BUCKET"], Key=key)
    return bytes(answer["Body"].read())
