"""ListTasks against many tasks: every filter combination equals a brute-force answer."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest

from a2a_serverless import wiring
from a2a_serverless.local.stack import LocalStack
from a2a_serverless.models import TaskState
from a2a_serverless.store import ListQuery, TaskStore
from a2a_serverless.store.dynamodb import DynamoDBTaskStore, keys
from tests.contract.cases import T0, chunk, create, message, move, uid
from tests.fakes import InMemoryTaskStore
from tests.integration.harness import (
    A2A,
    ddb,
    header,
    invoke_mangum,
    load_event,
    wait_idle,
)

CONTEXTS = ["ctx-a", "ctx-b", "ctx-c"]
# directive -> final state (a "cancel" entry is [input] then CancelTask)
KINDS = [
    ("done", "TASK_STATE_COMPLETED"),
    ("no [fail]", "TASK_STATE_FAILED"),
    ("no [reject]", "TASK_STATE_REJECTED"),
    ("ask [input]", "TASK_STATE_INPUT_REQUIRED"),
    ("ask [auth]", "TASK_STATE_AUTH_REQUIRED"),
    ("cancel [input]", "TASK_STATE_CANCELED"),
]
STATES = sorted({state for _, state in KINDS} | {"TASK_STATE_WORKING"})


def _populate(alice: A2A) -> list[dict[str, Any]]:
    def one(i: int) -> dict[str, Any]:
        text, state = KINDS[(i * 7) % len(KINDS)]
        task = alice.send(f"#{i} {text}", context_id=CONTEXTS[i % 3]).task
        if state == "TASK_STATE_CANCELED":
            task = alice.cancel(task["id"]).task
        assert task["status"]["state"] == state, (i, task["status"])
        return task

    with ThreadPoolExecutor(6) as pool:
        return list(pool.map(one, range(30)))


def _order_key(task: dict[str, Any]) -> tuple[str, str]:
    return task["status"]["timestamp"], task["id"]


def test_list_tasks_matches_brute_force(local_stack: LocalStack, alice: A2A) -> None:
    bob = alice.as_("bob")
    bob_task = bob.send("bob in ctx-a", context_id="ctx-a").task
    _populate(alice)
    wait_idle(local_stack)
    truth = [alice.get(t["id"]).json for t in alice.list_all(page_size=100)[0]]
    assert len(truth) == 30
    ordered = sorted(truth, key=_order_key, reverse=True)
    midpoint = ordered[12]["status"]["timestamp"]

    combos = itertools.product([None, *CONTEXTS, "ctx-none"], [None, *STATES], [None, midpoint])
    for context_id, state, after in combos:
        expected = [
            t
            for t in ordered
            if (context_id is None or t["contextId"] == context_id)
            and (state is None or t["status"]["state"] == state)
            and (after is None or t["status"]["timestamp"] >= after)
        ]
        page_size = 4 if context_id is None and state is None else 9
        listed, total = alice.list_all(
            page_size=page_size, contextId=context_id, status=state, statusTimestampAfter=after
        )
        label = (context_id, state, after)
        assert [t["id"] for t in listed] == [t["id"] for t in expected], label
        assert total == len(expected), label
        for got in listed:
            want = next(t for t in expected if t["id"] == got["id"])
            assert got["status"] == want["status"] and got["contextId"] == want["contextId"]
            assert "history" not in got and "artifacts" not in got
        stamps = [t["status"]["timestamp"] for t in listed]
        assert stamps == sorted(stamps, reverse=True), label

    # A filtered page reads a bounded number of index entries: with a budget of 3, most
    # filtered pages stop short (some empty) with a token, and paging on gives the same answer.
    store = wiring.get_store()
    store.filtered_page_max_examined = 3
    try:
        short_pages = 0
        filters = itertools.product([None, CONTEXTS[0], "ctx-none"], [None, *STATES])
        for context_id, state in filters:
            if context_id is None and state is None:
                continue
            expected_ids = [
                t["id"]
                for t in ordered
                if (context_id is None or t["contextId"] == context_id)
                and (state is None or t["status"]["state"] == state)
            ]
            query = {"contextId": context_id, "status": state}
            listed, total = alice.list_all(page_size=2, **query)
            assert [t["id"] for t in listed] == expected_ids, query
            assert total == len(expected_ids), query
            first = alice.list(pageSize=2, **query).json
            short_pages += len(first.get("tasks", [])) < 2 and bool(first["nextPageToken"])
        assert short_pages > 0  # the budget did cut pages short
    finally:
        del store.filtered_page_max_examined

    # The liberal spelling of a state filter, and includeArtifacts / historyLength.
    short = alice.list(status="input-required", pageSize=100).json
    assert {t["id"] for t in short["tasks"]} == {
        t["id"] for t in truth if t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    }
    rich = alice.list(
        status="TASK_STATE_COMPLETED", includeArtifacts="true", historyLength=1, pageSize=100
    ).json
    for task in rich["tasks"]:
        want = next(t for t in truth if t["id"] == task["id"])
        assert task["artifacts"] == want["artifacts"]
        assert task["history"] == want["history"][-1:]
    assert bob_task["id"] not in {t["id"] for t in truth}
    assert [t["id"] for t in bob.list_all()[0]] == [bob_task["id"]]


def _token(cursor: dict[str, str]) -> str:
    raw = json.dumps(cursor, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_page_tokens_cannot_be_forged_or_garbled(local_stack: LocalStack, alice: A2A) -> None:
    bob = alice.as_("bob")
    bob_ids = [bob.send(f"bob {i}", context_id="shared").task["id"] for i in range(3)]
    alice_ids = [alice.send(f"alice {i}", context_id="shared").task["id"] for i in range(3)]
    wait_idle(local_stack)

    for bob_id in bob_ids:
        gsk = header(local_stack, bob_id)["gsk"]["S"]
        for query in ({}, {"contextId": "shared"}, {"status": "TASK_STATE_COMPLETED"}):
            forged = alice.list(pageToken=_token({"k": gsk, "id": bob_id}), **query)
            assert forged.status == 200, forged.body
            seen = {t["id"] for t in forged.json.get("tasks", [])}
            assert seen <= set(alice_ids), (query, seen)
            assert "bob" not in forged.body.decode()

    for bad in ("not-a-token", "%%%", _token({"k": "x"}), base64.b64encode(b"[1,2]").decode()):
        response = alice.list(pageToken=bad)
        assert response.status == 400, (bad, response.body)
        assert response.reason == "INVALID_PARAMS"
        violations = [
            v["field"]
            for d in response.json["error"]["details"]
            if d["@type"].endswith("BadRequest")
            for v in d["fieldViolations"]
        ]
        assert violations == ["pageToken"], response.body


# -- a page's contents without a read per task ---------------------------------------------


@pytest.fixture(params=["dynamodb", "fake"])
def store(request: pytest.FixtureRequest, local_stack: LocalStack) -> TaskStore:
    if request.param == "fake":
        return InMemoryTaskStore()
    return DynamoDBTaskStore(ddb(), local_stack.env["TABLE_NAME"])


def test_read_listed_equals_the_per_task_reads(store: TaskStore) -> None:
    """Artifacts and recent history read for a whole page equal each task's own reads: a
    live task with more chunks than any probe window, a settled one with a chunk written
    after its last status change, one with no events but its first, and a long history."""
    owner = uid("owner")
    live = create(store, owner)
    move(store, live, TaskState.WORKING, seq=2)
    for seq in range(3, 3 + 40):  # 40 chunks: several doubling probe windows
        store.append_event(live.task_id, seq, chunk(live.task_id, f"{seq} ", append=seq > 3))
    settled = create(store, owner)
    move(store, settled, TaskState.WORKING, seq=2)
    store.append_event(settled.task_id, 3, chunk(settled.task_id, "one", append=False))
    move(store, settled, TaskState.COMPLETED, seq=4)
    store.append_event(
        settled.task_id, 5, chunk(settled.task_id, "late", append=False, artifact_id="a2")
    )
    bare = create(store, owner)
    talky = create(store, owner)
    move(store, talky, TaskState.INPUT_REQUIRED, seq=2)
    for index in range(2, 7):
        move(
            store,
            talky,
            TaskState.WORKING
            if talky.state is TaskState.INPUT_REQUIRED
            else TaskState.INPUT_REQUIRED,
            seq=index + 1,
            history_message=message(f"turn {index}", talky.task_id),
            history_index=index,
        )
    records, _ = store.list_tasks(ListQuery(owner=owner, page_size=10))
    assert {r.task_id for r in records} == {t.task_id for t in (live, settled, bare, talky)}
    for history_length in (0, 1, 3, 50):
        contents = store.read_listed(records, True, history_length)
        for record, got in zip(records, contents, strict=True):
            assert got.artifacts == store.read_artifacts(record.task_id), record.task_id
            want = store.read_history(record.task_id, history_length) if history_length else []
            assert got.history == want, (record.task_id, history_length)
    without = store.read_listed(records, False, 2)
    assert all(c.artifacts == [] for c in without)
    (live_parts,) = [c for r, c in zip(records, contents, strict=True) if r.task_id == live.task_id]
    assert len(live_parts.artifacts[0].parts) == 40


# -- a page within the function's response limit -------------------------------------------

BUDGET = 100_000  # LIST_MAX_RESPONSE_BYTES, scaled down from 5 MB


def test_pages_stay_within_the_response_budget() -> None:
    """Tasks with large artifacts: a page ends early (nextPageToken) before its payload passes
    LIST_MAX_RESPONSE_BYTES, and paging on lists every task exactly once with its artifacts;
    a task too large on its own is listed alone, without its artifacts."""
    stack = LocalStack(
        # Without a content bucket: the artifacts stay inline, as large as the test makes them.
        env_overrides={"LIST_MAX_RESPONSE_BYTES": str(BUDGET), "CONTENT_BUCKET": ""},
        event_sources=False,
    ).start()
    try:
        alice = A2A(stack, "alice")
        words = " ".join(f"w{i:05d}" for i in range(4_000))  # ~28 KB, echoed as the artifact
        ids = [alice.send(f"#{i} {words}").task["id"] for i in range(6)]
        huge = alice.send("huge " + words * 5).task["id"]  # ~140 KB of artifact alone
        wait_idle(stack)
        truth = {i: alice.get(i).json for i in [*ids, huge]}

        listed: list[dict[str, Any]] = []
        token = None
        pages = []
        for _ in range(20):
            response = alice.list(pageSize=100, includeArtifacts="true", pageToken=token)
            assert response.status == 200, response.body[:300]
            payload = len(json.dumps(response.body.decode()))  # as Lambda carries the body
            assert payload <= BUDGET, payload
            page = response.json
            pages.append(len(page["tasks"]))
            listed.extend(page["tasks"])
            assert page["totalSize"] == 7
            token = page.get("nextPageToken")
            if not token:
                break
        assert sorted(t["id"] for t in listed) == sorted(truth), pages
        # The huge task (newest) alone, then ~28 KB tasks a few to a 100 KB page.
        assert pages[0] == 1 and len(pages) >= 3 and all(pages), pages
        for task in listed:
            if task["id"] == huge:
                assert "artifacts" not in task  # alone over the budget: listed without them
                assert task["status"] == truth[huge]["status"]
            else:
                assert task["artifacts"] == truth[task["id"]]["artifacts"]
        # Without includeArtifacts the same tasks are small: one page holds them all.
        plain = alice.list(pageSize=100).json
        assert len(plain["tasks"]) == 7 and not plain.get("nextPageToken")
    finally:
        wait_idle(stack)
        stack.stop()


# -- GET /tasks/ --------------------------------------------------------------------------


def test_trailing_slash_lists_like_tasks(local_stack: LocalStack, alice: A2A) -> None:
    """`GET /tasks/` answers as `GET /tasks` does: at the local gateway, and in the function
    given the path API Gateway passes on (no redirect, whose Location would drop the stage)."""
    task_id = alice.send("listed").task["id"]

    async def call(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=local_stack.gateway())
        async with httpx.AsyncClient(transport=transport, base_url="http://local") as client:
            return await client.get(
                path, headers={"A2A-Version": "1.0", "x-local-principal": "alice"}
            )

    bare = asyncio.run(call("/tasks"))
    slashed = asyncio.run(call("/tasks/"))
    assert slashed.status_code == 200, (slashed.status_code, slashed.headers, slashed.text)
    assert [t["id"] for t in slashed.json()["tasks"]] == [task_id]
    assert slashed.json() == bare.json()

    event = load_event("list_tasks.json", principal="alice", query={"pageSize": "5"})
    event["path"] = "/tasks/"
    direct = invoke_mangum(local_stack.handler_for("ListTasksFunction"), event)
    assert direct.status == 200, direct.body
    assert [t["id"] for t in direct.json["tasks"]] == [task_id]


# -- a filtered page reads a bounded part of the owner's index -------------------------------


def test_a_filtered_page_examines_a_bounded_number_of_entries(local_stack: LocalStack) -> None:
    """An owner whose one task of a context is the oldest of many: each page of that context
    stops within its budget of index entries (a few Query calls of growing Limit, not one per
    `pageSize` entries to the end), returns a token where it stopped, and paging on finds the
    task. An unfiltered page is one Query, as before."""
    client = ddb()
    store = DynamoDBTaskStore(client, local_stack.env["TABLE_NAME"])
    store.filtered_page_max_examined = 40
    owner = uid("owner")
    wanted = create(store, owner, context_id="rare", at=T0)
    for i in range(100):
        create(store, owner, context_id="common", at=T0 + timedelta(seconds=i + 1))
    calls: list[dict[str, Any]] = []

    def on_call(params: dict[str, Any], **_: Any) -> None:
        calls.append(dict(params))

    client.meta.events.register("before-parameter-build.dynamodb.Query", on_call)
    try:
        pages: list[tuple[list[str], int]] = []
        token = None
        while True:
            calls.clear()
            records, token = store.list_tasks(
                ListQuery(owner=owner, context_id="rare", page_size=1, page_token=token)
            )
            pages.append(([r.task_id for r in records], len(calls)))
            assert [c["Limit"] for c in calls][:3] == [2, 8, 30][: len(calls)]
            if token is None:
                break
        calls.clear()
        everything, _ = store.list_tasks(ListQuery(owner=owner, page_size=50))
        unfiltered_calls = len(calls)
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb.Query", on_call)
    # 101 entries, 40 a page: two empty pages with tokens, then the task (the last page).
    assert pages == [([], 3), ([], 3), ([wanted.task_id], 3)], pages
    assert len(everything) == 50 and unfiltered_calls == 1


def test_a_count_by_time_reads_the_smaller_side_of_it(local_stack: LocalStack) -> None:
    """`totalSize` with statusTimestampAfter: the entries from the time on, or the counters minus
    the entries before it, read a COUNT call at a time in turn; the first side to end answers.
    Exact at every cut, with a state or a context too, and a cut near either end costs a
    couple of calls (with 4 entries a call here), not one per 4 entries of the whole range."""
    client = ddb()
    store = DynamoDBTaskStore(client, local_stack.env["TABLE_NAME"])
    store.count_page_entries = 4  # and the first call of each side examines pageSize + 1 (2)
    owner = uid("owner")
    records = [
        create(store, owner, context_id=f"c{i % 2}", at=T0 + timedelta(seconds=i))
        for i in range(30)
    ]
    for i, record in enumerate(records):
        if i % 3 == 0:  # the status time stays the task's creation time
            move(store, record, TaskState.COMPLETED, 2, at=T0 + timedelta(seconds=i))
    create(store, uid("other"), at=T0 + timedelta(seconds=5))
    calls: list[dict[str, Any]] = []

    def on_call(params: dict[str, Any], **_: Any) -> None:
        calls.append(dict(params))

    def expected(cut: int, context_id: str | None, state: TaskState | None) -> int:
        return sum(
            1
            for i in range(cut, 30)
            if (context_id is None or f"c{i % 2}" == context_id)
            and (state is None or (state == TaskState.COMPLETED) == (i % 3 == 0))
        )

    client.meta.events.register("before-parameter-build.dynamodb.Query", on_call)
    try:
        cost: dict[int, int] = {}
        for cut in (-1, 0, 1, 2, 14, 15, 27, 28, 29, 30, 31):
            after = T0 + timedelta(seconds=cut)
            for context_id, state in itertools.product(
                [None, "c1"], [None, TaskState.COMPLETED, TaskState.SUBMITTED]
            ):
                calls.clear()
                query = ListQuery(
                    owner=owner, context_id=context_id, state=state, status_after=after, page_size=1
                )
                assert store.count_tasks(query) == expected(max(cut, 0), context_id, state), query
                if context_id is None and state is None:
                    cost[cut] = len(calls)
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb.Query", on_call)
    # Near either end: a call a side (the first examines pageSize + 1 = 2), and the counters'
    # read when the side before the time is the one that ends.
    assert [cost[c] for c in (28, 29, 30, 31)] == [1, 1, 1, 1], cost  # 2, 1, 0, 0 from the cut
    assert [cost[c] for c in (-1, 0, 1)] == [3, 3, 3], cost  # 0, 0, 1 before it
    assert cost[2] <= 5, cost  # 2 before it: a full first call says "more", one more call
    # In the middle both sides are read to their halfway point, with calls of 2, 4, 4, ...
    assert cost[15] <= 2 * (1 + 15 // 4 + 1) + 1, cost


def test_a_context_opened_by_a_task_is_read_from_its_opening_on(local_stack: LocalStack) -> None:
    """A page (and a count with a state) of a context that a task opened stops where the index
    reaches that task's creation (less a minute for clocks): an owner with many older tasks
    gets the context's tasks and no token from one page, not short pages to page through
    until the budget or the end. A joiner stamped within the clock margin before the opener
    is still found; a context named by a client, or another owner's task id, reads as before."""
    client = ddb()
    store = DynamoDBTaskStore(client, local_stack.env["TABLE_NAME"])
    owner = uid("owner")
    for i in range(120):  # older than the context: never examined once the floor is known
        create(store, owner, context_id="old", at=T0 - timedelta(hours=1, seconds=i))
    opener_id = uid("task")
    opener = create(store, owner, context_id=opener_id, task_id=opener_id, at=T0)
    joiners = [
        create(store, owner, context_id=opener_id, at=T0 + timedelta(seconds=s)) for s in (-30, 5)
    ]
    for i in range(30):  # newer tasks of other contexts
        create(store, owner, context_id="new", at=T0 + timedelta(minutes=5, seconds=i))
    move(store, joiners[1], TaskState.COMPLETED, 2, at=T0 + timedelta(seconds=6))
    examined: list[int] = []

    def on_call(parsed: dict[str, Any], **_: Any) -> None:
        examined.append(parsed.get("ScannedCount", 0))

    client.meta.events.register("after-call.dynamodb.Query", on_call)
    try:
        records, token = store.list_tasks(
            ListQuery(owner=owner, context_id=opener_id, page_size=10)
        )
        page_examined = sum(examined)
        examined.clear()
        count = store.count_tasks(
            ListQuery(owner=owner, context_id=opener_id, state=TaskState.SUBMITTED)
        )
        count_examined = sum(examined)
    finally:
        client.meta.events.unregister("after-call.dynamodb.Query", on_call)
    ids = [r.task_id for r in records]
    assert ids == [joiners[1].task_id, opener.task_id, joiners[0].task_id] and token is None
    assert count == 2  # the opener and the early joiner are still SUBMITTED
    # 30 newer + the context's 3 (+ the first Query's overshoot), never the 120 older ones.
    assert page_examined <= 30 + 3 + 11, page_examined
    assert count_examined <= 30 + 3, count_examined

    # An opener whose creation time does not parse (odd stored data): the whole index.
    client.update_item(
        TableName=local_stack.env["TABLE_NAME"],
        Key={"pk": {"S": f"T#{opener_id}"}, "sk": {"S": "H"}},
        UpdateExpression="SET createdAt = :odd",
        ExpressionAttributeValues={":odd": {"S": "not a time"}},
    )
    records, token = store.list_tasks(ListQuery(owner=owner, context_id=opener_id, page_size=10))
    assert [r.task_id for r in records] == ids and token is None

    # Without an opener of this owner: the whole index, as before.
    for context_id, who in (("old", owner), (opener_id, uid("mallory"))):
        records, token = store.list_tasks(
            ListQuery(owner=who, context_id=context_id, page_size=200)
        )
        assert len(records) == (120 if who == owner else 0) and token is None


def test_a_context_a_client_named_is_read_from_its_counters_first_task_on(
    local_stack: LocalStack,
) -> None:
    """A context the client named (no task opened it): its counter keeps the creation time of
    the first task it counted (`keys.context_since`), so a page and a count with a state stop
    there, less the clock margin, as for a context opened by a task; still so after a task of
    it expired. A counter from before that time was kept (tasks it counts may be older) reads
    the whole index, as does another owner's listing of the same context id."""
    from boto3.dynamodb.types import TypeDeserializer

    client = ddb()
    table_name = local_stack.env["TABLE_NAME"]
    store = DynamoDBTaskStore(client, table_name)
    owner = uid("owner")
    for i in range(120):  # older than the context: never examined once the floor is known
        create(store, owner, context_id="elsewhere", at=T0 - timedelta(hours=1, seconds=120 - i))
    first = create(store, owner, context_id="conv-1", at=T0)
    later = [
        create(store, owner, context_id="conv-1", at=T0 + timedelta(seconds=s)) for s in (5, 9)
    ]
    early = create(store, owner, context_id="conv-1", at=T0 - timedelta(seconds=30))  # clocks
    for i in range(30):  # newer tasks of other contexts
        create(store, owner, context_id="new", at=T0 + timedelta(minutes=5, seconds=i))
    move(store, later[0], TaskState.COMPLETED, 2, at=T0 + timedelta(seconds=6))

    # The task created at T0 + 9 s expires: the counter still says since when it counts.
    gone = later[1]
    old = client.get_item(
        TableName=table_name, Key={"pk": {"S": f"T#{gone.task_id}"}, "sk": {"S": "H"}}
    )
    client.delete_item(TableName=table_name, Key={"pk": old["Item"]["pk"], "sk": old["Item"]["sk"]})
    image = {k: TypeDeserializer().deserialize(v) for k, v in old["Item"].items()}
    assert store.forget_expired(image) is True
    counter_key = {"pk": {"S": f"O#{owner}"}, "sk": {"S": "X#conv-1"}}
    counter = client.get_item(TableName=table_name, Key=counter_key)["Item"]
    assert keys.context_since(counter) == "2026-01-01T00:00:00.000Z"
    assert (counter["all"], counter["sinceN"], counter["gone"]) == (
        {"N": "3"},
        {"N": "4"},
        {"N": "1"},
    )

    def reads(query: ListQuery) -> tuple[list[str], str | None, int, int, int]:
        examined: list[int] = []

        def on_call(parsed: dict[str, Any], **_: Any) -> None:
            examined.append(parsed.get("ScannedCount", 0))

        client.meta.events.register("after-call.dynamodb.Query", on_call)
        try:
            records, token = store.list_tasks(query)
            page_examined = sum(examined)
            examined.clear()
            count = store.count_tasks(replace(query, state=TaskState.SUBMITTED))
            count_examined = sum(examined)
        finally:
            client.meta.events.unregister("after-call.dynamodb.Query", on_call)
        return [r.task_id for r in records], token, count, page_examined, count_examined

    expected = [later[0].task_id, first.task_id, early.task_id]
    ids, token, count, page_examined, count_examined = reads(
        ListQuery(owner=owner, context_id="conv-1", page_size=10)
    )
    assert ids == expected and token is None
    assert count == 2  # the first and the early one are still SUBMITTED
    # 30 newer + the context's 3 (+ the first Query's overshoot), never the 120 older ones.
    assert page_examined <= 30 + 3 + 11, page_examined
    assert count_examined <= 30 + 3, count_examined

    # A counter kept from before `since` (simulated: its new attributes taken off, then one
    # more task counted): the tasks it counts may be older than its `since`, so no floor.
    client.update_item(
        TableName=table_name, Key=counter_key, UpdateExpression="REMOVE since, sinceN, gone"
    )
    joined = create(store, owner, context_id="conv-1", at=T0 + timedelta(seconds=20))
    counter = client.get_item(TableName=table_name, Key=counter_key)["Item"]
    assert (
        counter["since"] == {"S": "2026-01-01T00:00:20.000Z"}
        and keys.context_since(counter) is None
    )
    ids, token, count, page_examined, count_examined = reads(
        ListQuery(owner=owner, context_id="conv-1", page_size=10)
    )
    assert ids == [joined.task_id, *expected] and token is None and count == 3
    assert page_examined >= 150 and count_examined >= 150  # the whole index

    # Another owner's listing of the same context id: its own (absent) counter, nothing.
    ids, token, count, _, _ = reads(
        ListQuery(owner=uid("mallory"), context_id="conv-1", page_size=10)
    )
    assert ids == [] and token is None and count == 0


def test_listing_a_context_through_the_function(local_stack: LocalStack, alice: A2A) -> None:
    """The same through ListTasksFunction (its role checked against every call it makes): a
    context opened by alice's first task, listed a page of 1 after newer tasks elsewhere."""
    first = alice.send("opens a context").task
    joined = alice.send("joins it", context_id=first["contextId"]).task
    for i in range(4):
        alice.send(f"elsewhere {i}")
    response = alice.list(contextId=first["contextId"], pageSize=1)
    assert response.status == 200, response.json
    assert [t["id"] for t in response.json["tasks"]] == [joined["id"]]
    listed, total = alice.list_all(page_size=1, contextId=first["contextId"])
    assert [t["id"] for t in listed] == [joined["id"], first["id"]] and total == 2
