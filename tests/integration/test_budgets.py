"""DynamoDB call budgets per operation: cost regressions fail the build.

Counted with a botocore `before-call` hook on the store's own client (nothing mocked). The
table printed under `pytest -s` is the one in docs/budgets.md; keep both in step.
"""

from __future__ import annotations

import http.server
import threading
from collections import Counter
from typing import Any, ClassVar

from a2a_serverless import wiring
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import TaskState
from tests.contract.cases import chunk, create, move
from tests.integration.harness import (
    A2A,
    ROOT,
    WORKER,
    CallCounter,
    event_log,
    user_message,
    wait_idle,
    wait_state,
)

OPS = ("GetItem", "Query", "PutItem", "UpdateItem", "TransactWriteItems")

# operation -> exact DynamoDB calls (k = artifact chunks of the step)
EXPECTED: dict[str, dict[str, int]] = {
    "SendMessage, new task, non-blocking": {"TransactWriteItems": 1},
    "SendMessage, follow-up to input-required, non-blocking": {
        "GetItem": 1,
        "TransactWriteItems": 1,
        "Query": 1,
    },
    "FlowWorker, one echo step, k=3 chunks": {
        "Query": 1,
        "TransactWriteItems": 2,
        "PutItem": 3,
    },
    "GetTask": {"Query": 1},
    "ListTasks (no includeArtifacts, no historyLength)": {"Query": 2},
    "CancelTask (input-required task)": {"GetItem": 1, "Query": 2, "TransactWriteItems": 1},
}


def _row(name: str, calls: Counter[str]) -> str:
    return (
        f"| {name} | "
        + " | ".join(str(calls.get(op, 0)) for op in OPS)
        + f" | {sum(calls.values())} |"
    )


def table(measured: dict[str, Counter[str]]) -> str:
    lines = [
        "| operation | " + " | ".join(OPS) + " | total |",
        "|---|" + "---|" * (len(OPS) + 1),
    ]
    lines += [_row(name, calls) for name, calls in measured.items()]
    return "\n".join(lines)


def _measure(stack: LocalStack) -> dict[str, Counter[str]]:
    alice = A2A(stack, "alice")
    counter = CallCounter()
    measured: dict[str, Counter[str]] = {}
    try:
        with counter.measure("send") as calls:
            sent = alice.send("a b c d e f g h", blocking=False)
        measured["SendMessage, new task, non-blocking"] = calls
        task_id = sent.task["id"]
        done = wait_state(alice, task_id, {"TASK_STATE_COMPLETED"})
        wait_idle(stack)
        chunks = len(done["artifacts"][0]["parts"])
        assert chunks == 3
        measured["FlowWorker, one echo step, k=3 chunks"] = counter.of(WORKER)

        with counter.measure("get") as calls:
            assert alice.get(task_id).status == 200
        measured["GetTask"] = calls
        with counter.measure("list") as calls:
            assert alice.list().json["totalSize"] == 1
        measured["ListTasks (no includeArtifacts, no historyLength)"] = calls

        asking = alice.send("more [input]").task["id"]
        wait_idle(stack)
        with counter.measure("follow") as calls:
            assert alice.send("x", task_id=asking, blocking=False).status == 200
        measured["SendMessage, follow-up to input-required, non-blocking"] = calls
        wait_state(alice, asking, {"TASK_STATE_COMPLETED"})

        to_cancel = alice.send("wait [input]").task["id"]
        wait_idle(stack)
        with counter.measure("cancel") as calls:
            assert alice.cancel(to_cancel).status == 200
        measured["CancelTask (input-required task)"] = calls
    finally:
        counter.close()
    return {name: measured[name] for name in EXPECTED}


def test_context_count_is_one_read(local_stack: LocalStack) -> None:
    """ListTasks by contextId: the page's Query and one BatchGetItem for `totalSize` (the
    context's counter and the header of the task that opened it; docs/budgets.md)."""
    alice, bob = A2A(local_stack, "alice"), A2A(local_stack, "bob")
    opened = alice.send("first", blocking=False).task
    assert opened["contextId"] == opened["id"]  # a new context is named after its first task
    context = opened["contextId"]
    alice.send("second", context_id=context, blocking=False)
    bob.send("bob's", context_id=context, blocking=False)
    counter = CallCounter()
    try:
        with counter.measure("list") as calls:
            assert alice.list(contextId=context).json["totalSize"] == 2
    finally:
        counter.close()
    assert dict(calls) == {"Query": 1, "BatchGetItem": 1}
    assert bob.list(contextId=context).json["totalSize"] == 1


def test_a_context_page_and_its_count_read_the_context_once(local_stack: LocalStack) -> None:
    """A context page that reads past its first Query (newer tasks of other contexts fill it)
    needs the context's floor, and its `totalSize` the same context's counter and opener: one
    BatchGetItem serves both, with a state filter (a COUNT Query from the floor) or without
    (the counters)."""
    alice = A2A(local_stack, "alice")
    context = alice.send("opens it").task["contextId"]
    alice.send("joins it", context_id=context)
    for i in range(3):  # newer, elsewhere: the page's first Query (2 entries) finds none
        alice.send(f"other {i}")
    counter = CallCounter()
    try:
        with counter.measure("by context") as calls:
            page = alice.list(contextId=context, pageSize=1).json
        with counter.measure("by context and state") as by_state:
            by_completed = alice.list(
                contextId=context, pageSize=1, status="TASK_STATE_COMPLETED"
            ).json
    finally:
        counter.close()
    assert len(page["tasks"]) == 1 and page["totalSize"] == 2
    assert dict(calls) == {"Query": 2, "BatchGetItem": 1}
    assert len(by_completed["tasks"]) == 1 and by_completed["totalSize"] == 2
    assert dict(by_state) == {"Query": 3, "BatchGetItem": 1}


def test_dynamodb_call_budgets(local_stack: LocalStack) -> None:
    measured = _measure(local_stack)
    rendered = table(measured)
    print("\nDynamoDB calls per operation (measured)\n" + rendered)
    assert {k: dict(v) for k, v in measured.items()} == EXPECTED
    # The brief's ceilings, stated separately so a reader sees the headroom.
    assert sum(measured["GetTask"].values()) <= 1
    assert sum(measured["ListTasks (no includeArtifacts, no historyLength)"].values()) <= 2
    assert sum(measured["CancelTask (input-required task)"].values()) <= 5
    assert measured["SendMessage, new task, non-blocking"]["TransactWriteItems"] <= 1
    docs = (ROOT / "docs" / "budgets.md").read_text()
    for line in rendered.splitlines()[2:]:
        assert line in docs, f"docs/budgets.md is out of date; measured row:\n{line}"


def test_list_page_contents_cost_no_call_per_task(local_stack: LocalStack) -> None:
    """ListTasks with includeArtifacts and historyLength reads a page's contents by
    BatchGetItem (headers and recent history, then events): no Query or GetItem per task.
    What still grows is BatchGetItem's 100 keys per call, with the keys (items) read: here
    pageSize 50 reads 100 keys and then 250 (four events and one probe key per task)."""
    alice = A2A(local_stack, "alice")
    store = wiring.get_store()
    for i in range(50):
        record = create(store, "alice")
        move(store, record, TaskState.WORKING, seq=2)
        store.append_event(record.task_id, 3, chunk(record.task_id, f"task {i}", append=False))
        move(store, record, TaskState.COMPLETED, seq=4)
    counter = CallCounter()
    measured: dict[int, Counter[str]] = {}
    try:
        for page_size in (1, 50):
            with counter.measure(f"list {page_size}") as calls:
                page = alice.list(pageSize=page_size, includeArtifacts="true", historyLength=1)
            assert page.status == 200, page.body
            assert len(page.json["tasks"]) == page_size
            assert all(t["artifacts"] and t["history"] for t in page.json["tasks"])
            measured[page_size] = calls
    finally:
        counter.close()
    # Queries: the index page and the counters, whatever the page size.
    assert measured[1] == {"Query": 2, "BatchGetItem": 2}, measured[1]
    assert measured[50] == {"Query": 2, "BatchGetItem": 1 + 3}, measured[50]


def test_non_blocking_send_reads_nothing(local_stack: LocalStack) -> None:
    alice = A2A(local_stack, "alice")
    counter = CallCounter()
    with counter.measure("send") as calls:
        assert alice.send("hi", blocking=False).status == 200
    counter.close()
    assert dict(calls) == {"TransactWriteItems": 1}


# -- webhook sender ------------------------------------------------------------------------------


class _Receiver(http.server.BaseHTTPRequestHandler):
    """A webhook that accepts everything (what the sender reads, not what it posts, counts)."""

    posted: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        self.posted.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_webhook_sender_budgets() -> None:
    """Per stream batch: one BatchGetItem of its tasks' headers (whether each may have a
    webhook), then one Query per task that may (its configs), nothing per event; per queued
    delivery: two GetItems (config and event). The batch is polled by hand from the table's
    stream, with the template's mapping settings (filter, batch size)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        with LocalStack(event_sources="manual") as stack:
            assert stack.event_sources is not None
            stream = stack.event_sources.by_name("WebhookSenderFunction.TaskEvents")
            queue = stack.event_sources.by_name("WebhookSenderFunction.Retries")
            alice = A2A(stack, "alice")
            with_hook = user_message("a b c d e f g h")
            first = alice.send_message(with_hook, push_config={"url": hook}).json["task"]["id"]
            second = alice.send("i j k l").json["task"]["id"]
            push = wiring.get_push()
            counter = CallCounter()
            with counter.measure("stream batch") as batch:
                while stream.poll_once():
                    pass
            assert stream.invocations == 1  # two tasks' events in one filtered batch
            # The second task has no webhook: its header says so, and it costs no Query.
            assert dict(batch) == {"BatchGetItem": 1, "Query": 1}, batch
            events = len(event_log(stack, first))
            assert len(_Receiver.posted) == events  # only the first task has a webhook
            wiring.get_webhook_sender().enqueue(first, push.list("alice", first).configs[0].id, 1)
            with counter.measure("queued delivery") as queued:
                assert queue.poll_once()
            assert dict(queued) == {"GetItem": 2}, queued
            assert len(_Receiver.posted) == events + 1
            assert second  # its events were read in the batch, and cost no call of their own
            counter.close()
    finally:
        server.shutdown()
