"""The store contract: what every TaskStore (tests/fakes.py and the DynamoDB one) must do.

Test functions over a `store` fixture (and `api_key_store` for the ApiKeyStore), imported by
tests/unit/test_store_contract.py (the fakes, unit speed) and
tests/integration/test_store_contract.py (DynamoDB on the template's table in moto). Every test
uses fresh ids, so one table can serve a whole module.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from a2a_serverless.models import (
    Artifact,
    Message,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from a2a_serverless.store import (
    ApiKeyRecord,
    ApiKeyStore,
    ConflictError,
    Dedupe,
    DelegationRecord,
    DelegationState,
    InvalidPageToken,
    ListQuery,
    StatusChange,
    TaskRecord,
    TaskStore,
    TooLarge,
    status_update,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def message(text: str, task_id: str | None = None) -> Message:
    return Message(message_id=uid("m"), role="user", parts=[Part(text=text)], task_id=task_id)


def chunk(task_id: str, text: str, append: bool, artifact_id: str = "a1") -> StreamResponse:
    artifact = Artifact(artifact_id=artifact_id, parts=[Part(text=text)])
    return StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id=task_id, context_id="ctx", artifact=artifact, append=append
        )
    )


def create(
    store: TaskStore,
    owner: str,
    context_id: str = "ctx",
    at: datetime = T0,
    dedupe: Dedupe | None = None,
    push: TaskPushNotificationConfig | None = None,
    task_id: str | None = None,
    text: str = "hello",
) -> TaskRecord:
    task_id = task_id or uid("task")
    status = TaskStatus(state=TaskState.SUBMITTED, timestamp=at)
    record = TaskRecord.submitted(task_id, context_id, owner, status, metadata={"k": "v"})
    store.create_task(
        record, message(text, task_id), status_update(task_id, context_id, status), dedupe, push
    )
    return record


def move(
    store: TaskStore,
    record: TaskRecord,
    to: TaskState,
    seq: int,
    at: datetime = T0,
    **extra: Any,
) -> TaskStatus:
    status = TaskStatus(state=to, timestamp=at)
    store.apply_status(
        StatusChange(
            task_id=record.task_id,
            owner=record.owner,
            context_id=record.context_id,
            from_state=extra.pop("from_state", record.state),
            to_status=status,
            seq=seq,
            turn=extra.pop("turn", record.turn),
            event=status_update(record.task_id, record.context_id, status),
            **extra,
        )
    )
    record.state = to
    return status


def config(task_id: str, config_id: str, url: str = "https://example.com/hook") -> Any:
    return TaskPushNotificationConfig(id=config_id, task_id=task_id, url=url, token="tok")


# -- task log --------------------------------------------------------------------------------


def test_create_then_read_record_and_snapshot(store: TaskStore) -> None:
    record = create(store, uid("owner"))
    got = store.get_record(record.task_id)
    assert got is not None
    assert (got.owner, got.context_id, got.state, got.turn) == (
        record.owner,
        "ctx",
        TaskState.SUBMITTED,
        1,
    )
    assert got.metadata == {"k": "v"} and got.history_count == 1 and got.created_at
    snapshot = store.get_snapshot(record.task_id, None)
    assert snapshot is not None
    assert snapshot.seq == 1 and snapshot.status.state is TaskState.SUBMITTED
    assert [m.parts[0].text for m in snapshot.history] == ["hello"]
    assert store.get_record(uid("missing")) is None
    assert store.get_snapshot(uid("missing"), None) is None


def test_create_twice_conflicts_on_header(store: TaskStore) -> None:
    record = create(store, uid("owner"))
    with pytest.raises(ConflictError) as raised:
        create(store, record.owner, task_id=record.task_id)
    assert "header" in raised.value.failed


def test_dedupe_record_lives_for_its_window_then_is_replaced(store: TaskStore) -> None:
    owner = uid("owner")
    now = int(time.time())
    live = Dedupe(owner=owner, message_id=uid("msg"), content_hash="h1", expires_at=now + 600)
    first = create(store, owner, dedupe=live)
    assert store.find_dedupe(owner, live.message_id) == (first.task_id, "h1")
    with pytest.raises(ConflictError):
        create(store, owner, dedupe=live)

    expired = Dedupe(owner=owner, message_id=uid("msg"), content_hash="h2", expires_at=now - 1)
    create(store, owner, dedupe=expired)
    assert store.find_dedupe(owner, expired.message_id) is None
    again = create(store, owner, dedupe=dataclasses.replace(expired, expires_at=now + 600))
    assert store.find_dedupe(owner, expired.message_id) == (again.task_id, "h2")


def test_dedupe_record_is_found_and_unique(store: TaskStore) -> None:
    owner = uid("owner")
    dedupe = Dedupe(owner=owner, message_id=uid("msg"), content_hash="h1")
    record = create(store, owner, dedupe=dedupe)
    assert store.find_dedupe(owner, dedupe.message_id) == (record.task_id, "h1")
    assert store.find_dedupe(uid("other"), dedupe.message_id) is None
    with pytest.raises(ConflictError) as raised:
        create(store, owner, dedupe=dedupe)
    assert raised.value.failed == ("dedupe",)
    assert store.find_dedupe(owner, dedupe.message_id) == (record.task_id, "h1")


def test_apply_status_moves_state_and_is_conditional(store: TaskStore) -> None:
    record = create(store, uid("owner"))
    move(store, record, TaskState.WORKING, 2, execution="exec-1", flow_state={"step": 1})
    got = store.get_record(record.task_id)
    assert got is not None
    assert (got.state, got.status_seq, got.execution, got.flow_state) == (
        TaskState.WORKING,
        2,
        "exec-1",
        {"step": 1},
    )
    # From a state it is no longer in: the header condition fails, nothing is written.
    with pytest.raises(ConflictError) as raised:
        move(store, record, TaskState.COMPLETED, 3, from_state=TaskState.SUBMITTED)
    assert raised.value.failed == ("header",)
    assert store.last_seq(record.task_id) == 2
    # A wrong turn fails the same way.
    with pytest.raises(ConflictError) as raised:
        move(store, record, TaskState.COMPLETED, 3, expected_turn=7)
    assert raised.value.failed == ("header",)
    # An event seq already taken fails on the event.
    with pytest.raises(ConflictError) as raised:
        move(store, record, TaskState.COMPLETED, 2)
    assert raised.value.failed == ("event",)
    move(store, record, TaskState.COMPLETED, 3, expected_turn=1)
    assert store.get_record(record.task_id).state is TaskState.COMPLETED  # type: ignore[union-attr]


def test_history_append_is_conditional_on_the_count(store: TaskStore) -> None:
    record = create(store, uid("owner"))
    move(store, record, TaskState.INPUT_REQUIRED, 2)
    with pytest.raises(ConflictError) as raised:  # index 3 while the count is 1
        move(store, record, TaskState.WORKING, 3, history_message=message("x"), history_index=3)
    assert raised.value.failed == ("header",)
    move(store, record, TaskState.WORKING, 3, history_message=message("again"), history_index=2)
    assert store.get_record(record.task_id).history_count == 2  # type: ignore[union-attr]
    assert [m.parts[0].text for m in store.read_history(record.task_id, None)] == [
        "hello",
        "again",
    ]
    assert [m.parts[0].text for m in store.read_history(record.task_id, 1)] == ["again"]
    assert store.read_history(record.task_id, 0) == []


@pytest.mark.parametrize("first", ["hi", "x" * 3000], ids=["small", "large"])
def test_history_reads_every_message_however_the_first_is_kept(
    store: TaskStore, first: str
) -> None:
    """A small first message may be kept with the task (keys.with_first_message), a large one
    apart: every history read gives the same messages either way."""
    owner = uid("owner")
    record = create(store, owner, text=first)
    move(store, record, TaskState.INPUT_REQUIRED, 2, history_message=message("q"), history_index=2)
    move(store, record, TaskState.WORKING, 3, history_message=message("a"), history_index=3)
    everything = [first, "q", "a"]

    def texts(messages: list[Message]) -> list[str | None]:
        return [m.parts[0].text for m in messages]

    for length, expected in [(None, everything), (0, []), (1, ["a"]), (2, ["q", "a"])] + [
        (n, everything) for n in (3, 4, 50)
    ]:
        assert texts(store.read_history(record.task_id, length)) == expected, length
        snapshot = store.get_snapshot(record.task_id, length)
        assert snapshot is not None and texts(snapshot.history) == expected, length
        if length:
            listed, _ = store.list_tasks(ListQuery(owner))
            (contents,) = store.read_listed(listed, include_artifacts=False, history_length=length)
            assert texts(contents.history) == expected, length
            (contents,) = store.read_listed(listed, include_artifacts=True, history_length=length)
            assert texts(contents.history) == expected, length


def test_events_in_order_and_seq_conflicts(store: TaskStore) -> None:
    record = create(store, uid("owner"))
    move(store, record, TaskState.WORKING, 2)
    for seq, (text, append) in enumerate([("a", False), ("b", True), ("c", True)], start=3):
        store.append_event(record.task_id, seq, chunk(record.task_id, text, append))
    with pytest.raises(ConflictError) as raised:
        store.append_event(record.task_id, 4, chunk(record.task_id, "dup", True))
    assert raised.value.failed == ("event",)
    assert store.last_seq(record.task_id) == 5
    assert [seq for seq, _ in store.read_events(record.task_id, 0)] == [1, 2, 3, 4, 5]
    assert [seq for seq, _ in store.read_events(record.task_id, 2, limit=2)] == [3, 4]
    assert store.read_events(record.task_id, 5) == []
    (artifact,) = store.read_artifacts(record.task_id)
    assert [p.text for p in artifact.parts] == ["a", "b", "c"]
    stored = store.get_event_json(record.task_id, 3)
    assert stored is not None
    assert StreamResponse.model_validate_json(stored) == chunk(record.task_id, "a", False)
    assert store.get_event_json(record.task_id, 99) is None
    assert store.last_seq(uid("missing")) == 0


@pytest.mark.parametrize("bare", [True, False], ids=["bare", "with-message"])
def test_the_first_events_read_back_everywhere(store: TaskStore, bare: bool) -> None:
    """Events 1 and 2 as every read gives them back, whether they are the bare creation and
    WORKING statuses (which a store may keep in the header rather than as items) or carry a
    message; then with more events than one read returns."""
    task_id, context_id, owner = uid("task"), "ctx", uid("owner")
    status = TaskStatus(state=TaskState.SUBMITTED, timestamp=T0)
    first = status_update(task_id, context_id, status)
    working_status = TaskStatus(state=TaskState.WORKING, timestamp=T0 + timedelta(seconds=1))
    working = status_update(task_id, context_id, working_status)
    if not bare:  # a status message: no longer a bare status
        for event in (first, working):
            event.status_update.status.message = message("note", task_id)  # type: ignore[union-attr]
    record = TaskRecord.submitted(task_id, context_id, owner, status)
    store.create_task(record, message("hello", task_id), first, None)
    assert store.last_seq(task_id) == 1
    assert store.read_events(task_id, 0) == [(1, first)]
    stored = store.get_event_json(task_id, 1)
    assert stored is not None and StreamResponse.model_validate_json(stored) == first
    as_of = store.task_as_of(task_id, 1)
    assert as_of is not None and as_of.status == first.status_update.status  # type: ignore[union-attr]
    snapshot = store.get_snapshot(task_id, 0)
    assert snapshot is not None and snapshot.seq == 1
    store.apply_status(
        StatusChange(
            task_id=task_id,
            owner=owner,
            context_id=context_id,
            from_state=TaskState.SUBMITTED,
            to_status=working_status,
            seq=2,
            turn=1,
            event=working,
        )
    )
    assert store.last_seq(task_id) == 2
    assert store.read_events(task_id, 0) == [(1, first), (2, working)]
    assert store.read_events(task_id, 1) == [(2, working)]
    assert store.read_events(task_id, 0, limit=1) == [(1, first)]
    assert store.read_events(task_id, 2) == []
    stored = store.get_event_json(task_id, 2)
    assert stored is not None and StreamResponse.model_validate_json(stored) == working
    as_of = store.task_as_of(task_id, 2)
    assert as_of is not None and as_of.status == working_status
    snapshot = store.get_snapshot(task_id, None)
    assert snapshot is not None and snapshot.seq == 2 and snapshot.status == working_status
    # More events than one read returns: the first reads still start at events 1 and 2.
    for seq in range(3, 153):
        store.append_event(task_id, seq, chunk(task_id, str(seq), seq > 3))
    assert [seq for seq, _ in store.read_events(task_id, 0)] == list(range(1, 101))
    assert [seq for seq, _ in store.read_events(task_id, 1)] == list(range(2, 102))
    assert [seq for seq, _ in store.read_events(task_id, 1, limit=2)] == [2, 3]
    assert [seq for seq, _ in store.read_events(task_id, 2, limit=2)] == [3, 4]
    assert store.last_seq(task_id) == 152
    as_of = store.task_as_of(task_id, 3)
    assert as_of is not None and as_of.status == working_status
    assert [p.text for p in as_of.artifacts[0].parts] == ["3"]  # type: ignore[index]
    # Event 2 is taken: a writer that read the log before it (a cancel) loses, as for any event.
    with pytest.raises(ConflictError):
        store.append_event(task_id, 2, chunk(task_id, "late", False))


def test_an_early_event_with_the_same_id_is_written_once(store: TaskStore) -> None:
    """An event at seq 2 that is not a WORKING status (a store may check such early seqs
    against its header): written once per writer identity, like any event."""
    record = create(store, uid("owner"))
    note = chunk(record.task_id, "early", False)
    assert store.append_event(record.task_id, 2, note, event_id="1.0.0") is True
    assert store.append_event(record.task_id, 2, note, event_id="1.0.0") is False  # a re-run
    with pytest.raises(ConflictError):
        store.append_event(record.task_id, 2, note, event_id="1.0.1")
    assert [seq for seq, _ in store.read_events(record.task_id, 0)] == [1, 2]
    assert store.last_seq(record.task_id) == 2


def test_snapshot_folds_events_and_limits_history(store: TaskStore) -> None:
    record = create(store, uid("owner"))
    move(store, record, TaskState.WORKING, 2)
    store.append_event(record.task_id, 3, chunk(record.task_id, "one", False))
    store.append_event(record.task_id, 4, chunk(record.task_id, "two", False))  # replaces
    move(store, record, TaskState.COMPLETED, 5)
    for history_length, texts in ((None, ["hello"]), (0, []), (5, ["hello"])):
        snapshot = store.get_snapshot(record.task_id, history_length)
        assert snapshot is not None
        assert snapshot.seq == 5 and snapshot.status.state is TaskState.COMPLETED
        assert [p.text for a in snapshot.artifacts for p in a.parts] == ["two"]
        assert [m.parts[0].text for m in snapshot.history] == texts
    as_of = store.task_as_of(record.task_id, 3)
    assert as_of is not None and as_of.status.state is TaskState.WORKING
    assert as_of.context_id == "ctx"
    assert [p.text for p in as_of.artifacts[0].parts] == ["one"]  # type: ignore[index]
    assert store.task_as_of(uid("missing"), 3) is None


def test_flow_state_saves_only_on_the_working_turn(store: TaskStore) -> None:
    record = create(store, uid("owner"))
    with pytest.raises(ConflictError):  # not working yet
        store.save_flow_state(record.task_id, 1, {"x": 1})
    move(store, record, TaskState.WORKING, 2)
    store.save_flow_state(record.task_id, 1, {"x": 2})
    assert store.get_record(record.task_id).flow_state == {"x": 2}  # type: ignore[union-attr]
    with pytest.raises(ConflictError) as raised:
        store.save_flow_state(record.task_id, 2, {"x": 3})
    assert raised.value.failed == ("header",)


def test_event_with_the_same_id_is_written_once(store: TaskStore) -> None:
    """A re-run of a flow step repeats its writes with the same event ids: the repeat writes
    nothing and says so; another id (or none) at a taken seq is still a conflict."""
    record = create(store, uid("owner"))
    move(store, record, TaskState.WORKING, 2)
    assert store.append_event(record.task_id, 3, chunk(record.task_id, "a", False), "1.0.0")
    assert store.append_event(record.task_id, 4, chunk(record.task_id, "b", True)) is True
    # The same write again (a re-run's copy may differ in content, e.g. a timestamp).
    assert not store.append_event(record.task_id, 3, chunk(record.task_id, "a2", False), "1.0.0")
    for event_id in ("1.0.1", ""):
        with pytest.raises(ConflictError):
            store.append_event(record.task_id, 3, chunk(record.task_id, "x", True), event_id)
    with pytest.raises(ConflictError):  # an event written without an id matches no id
        store.append_event(record.task_id, 4, chunk(record.task_id, "b", True), "1.0.1")
    assert [seq for seq, _ in store.read_events(record.task_id, 0)] == [1, 2, 3, 4]
    (artifact,) = store.read_artifacts(record.task_id)
    assert [p.text for p in artifact.parts] == ["a", "b"]
    snapshot = store.get_snapshot(record.task_id, 0)
    assert snapshot is not None and snapshot.event_ids == frozenset({"1.0.0"})


def test_flow_state_saves_once_per_step(store: TaskStore) -> None:
    """A step's outcome is saved once per (turn, step): a re-run finds it done."""
    record = create(store, uid("owner"))
    move(store, record, TaskState.WORKING, 2)
    assert store.get_record(record.task_id).flow_step is None  # type: ignore[union-attr]
    store.save_flow_state(record.task_id, 1, {"x": 1}, step=0)
    with pytest.raises(ConflictError) as raised:  # step 0 again: already saved
        store.save_flow_state(record.task_id, 1, {"x": 2}, step=0)
    assert raised.value.failed == ("header",)
    saved = store.get_record(record.task_id)
    assert saved is not None and saved.flow_state == {"x": 1} and saved.flow_step == (1, 0)
    store.save_flow_state(record.task_id, 1, {"x": 3}, step=1)
    with pytest.raises(ConflictError):  # an earlier step, late: also done
        store.save_flow_state(record.task_id, 1, {"x": 4}, step=0)
    snapshot = store.get_snapshot(record.task_id, 0)
    assert snapshot is not None and snapshot.record.flow_step == (1, 1)
    assert snapshot.record.flow_state == {"x": 3}


# -- listing ---------------------------------------------------------------------------------


def _tasks(store: TaskStore, owner: str) -> list[TaskRecord]:
    """Five tasks a minute apart: contexts c0/c1 alternating, the last two completed."""
    records = [
        create(store, owner, context_id=f"c{i % 2}", at=T0 + timedelta(minutes=i)) for i in range(5)
    ]
    for record in records[3:]:
        move(store, record, TaskState.COMPLETED, 2, at=T0 + timedelta(minutes=10))
    return records


def _ids(store: TaskStore, query: ListQuery) -> list[str]:
    records, _ = store.list_tasks(query)
    return [r.task_id for r in records]


def test_listing_filters_and_counts(store: TaskStore) -> None:
    owner = uid("owner")
    records = _tasks(store, owner)
    create(store, uid("other"))
    ids = [r.task_id for r in records]
    newest_first = [ids[4], ids[3], ids[2], ids[1], ids[0]]
    # Equal status times order by task id (descending).
    newest_first[:2] = sorted(newest_first[:2], reverse=True)
    cases = [
        (ListQuery(owner=owner), newest_first),
        (ListQuery(owner=owner, context_id="c0"), [i for i in newest_first if i in ids[::2]]),
        (ListQuery(owner=owner, state=TaskState.SUBMITTED), [ids[2], ids[1], ids[0]]),
        (
            ListQuery(owner=owner, context_id="c1", state=TaskState.SUBMITTED),
            [ids[1]],
        ),
        # At or after (the proto's "greater than or equal"): the task of that very time too;
        # stored times are whole milliseconds, so a microsecond later leaves it out.
        (ListQuery(owner=owner, status_after=T0 + timedelta(minutes=1)), [*newest_first[:4]]),
        (
            ListQuery(owner=owner, status_after=T0 + timedelta(minutes=1, microseconds=1)),
            [*newest_first[:3]],
        ),
        (
            ListQuery(owner=owner, status_after=T0 + timedelta(minutes=1, microseconds=-999)),
            [*newest_first[:4]],
        ),
        (ListQuery(owner=owner, context_id="none"), []),
    ]
    for query, expected in cases:
        assert _ids(store, query) == expected, query
        assert store.count_tasks(query) == len(expected), query


def test_expired_tasks_leave_the_counts_once(
    store: TaskStore, expire: Callable[[str], dict[str, Any]]
) -> None:
    """TTL removes a task's header; its stream record's old image takes it off the counts,
    once however often the record comes."""
    owner = uid("owner")
    kept = create(store, owner, "c1")
    gone = create(store, owner, "c1")
    move(store, gone, TaskState.WORKING, seq=2)
    elsewhere = create(store, owner, "c2")

    def counts() -> tuple[int, ...]:
        return tuple(
            store.count_tasks(ListQuery(owner, context_id=context, state=state))
            for context, state in [
                (None, None),
                (None, TaskState.WORKING),
                (None, TaskState.SUBMITTED),
                ("c1", None),
                ("c1", TaskState.SUBMITTED),
                ("c2", None),
            ]
        )

    assert counts() == (3, 1, 2, 2, 1, 1)
    image = expire(gone.task_id)
    assert store.forget_expired({**image, "sk": "E#0000000001"}) is False  # not a header
    assert store.forget_expired(image) is True
    assert counts() == (2, 0, 2, 1, 1, 1)
    assert store.forget_expired(image) is False  # the stream delivered it again
    assert counts() == (2, 0, 2, 1, 1, 1)
    assert sorted(_ids(store, ListQuery(owner))) == sorted([kept.task_id, elsewhere.task_id])


def test_a_context_counts_the_task_that_opened_it(
    store: TaskStore, expire: Callable[[str], dict[str, Any]]
) -> None:
    """A task whose contextId is its own id opened that context (SendMessage names new
    contexts so): the context's count holds it and the tasks that joined later, for its owner
    only, and each leaves the count once when TTL removes it."""
    owner, other = uid("owner"), uid("other")
    opener_id = uid("task")
    opener = create(store, owner, opener_id, task_id=opener_id)
    joined = create(store, owner, opener_id)
    create(store, other, opener_id)  # another owner's task naming the same context
    create(store, owner, uid("ctx"))  # another context

    def count(who: str = owner) -> int:
        return store.count_tasks(ListQuery(who, context_id=opener_id))

    assert (count(), count(other), store.count_tasks(ListQuery(owner))) == (2, 1, 3)
    assert sorted(_ids(store, ListQuery(owner, context_id=opener_id))) == sorted(
        [opener.task_id, joined.task_id]
    )
    image = expire(opener.task_id)
    assert store.forget_expired(image) is True
    assert store.forget_expired(image) is False  # the stream delivered it again
    assert (count(), count(other), store.count_tasks(ListQuery(owner))) == (1, 1, 2)
    assert store.forget_expired(expire(joined.task_id)) is True
    assert (count(), count(other), store.count_tasks(ListQuery(owner))) == (0, 1, 1)


def test_listing_pages_with_opaque_tokens(store: TaskStore) -> None:
    owner = uid("owner")
    _tasks(store, owner)
    everything = _ids(store, ListQuery(owner=owner))
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        records, token = store.list_tasks(ListQuery(owner=owner, page_size=2, page_token=token))
        seen += [r.task_id for r in records]
        pages += 1
        if token is None:
            break
        assert isinstance(token, str) and owner not in token
    assert seen == everything and pages == 3


def test_filtered_listing_pages_to_the_same_answer(store: TaskStore) -> None:
    """Paging a filtered listing to its end gives exactly the tasks that pass, newest first,
    whatever the page size (a page may be short, even empty, and still have a next one)."""
    owner = uid("owner")
    records = _tasks(store, owner)
    for query in (
        ListQuery(owner=owner, context_id="c0"),
        ListQuery(owner=owner, state=TaskState.SUBMITTED),
        ListQuery(owner=owner, context_id="c1", state=TaskState.COMPLETED),
    ):
        expected = _ids(store, dataclasses.replace(query, page_size=50))
        assert expected and set(expected) <= {r.task_id for r in records}
        for page_size in (1, 2):
            seen: list[str] = []
            token = None
            for _ in range(20):
                page, token = store.list_tasks(
                    dataclasses.replace(query, page_size=page_size, page_token=token)
                )
                assert len(page) <= page_size
                seen += [r.task_id for r in page]
                if token is None:
                    break
            assert seen == expected, (query, page_size)


def test_bad_page_tokens_are_rejected(store: TaskStore) -> None:
    owner = uid("owner")
    _tasks(store, owner)
    for token in ("not base64!", "bm90IGpzb24", "e30"):  # garbage, "not json", "{}"
        with pytest.raises(InvalidPageToken):
            store.list_tasks(ListQuery(owner=owner, page_token=token))


def test_another_owners_token_never_yields_their_tasks(store: TaskStore) -> None:
    alice, bob = uid("alice"), uid("bob")
    bob_ids = {r.task_id for r in _tasks(store, bob)}
    alice_ids = {r.task_id for r in _tasks(store, alice)}
    _, bob_token = store.list_tasks(ListQuery(owner=bob, page_size=1))
    assert bob_token is not None
    try:
        records, _ = store.list_tasks(ListQuery(owner=alice, page_size=10, page_token=bob_token))
    except InvalidPageToken:
        return
    got = {r.task_id for r in records}
    assert not got & bob_ids and got <= alice_ids


# -- push configs and delivery state ---------------------------------------------------------


def test_push_config_crud(store: TaskStore) -> None:
    task_id = uid("task")
    first, second = config(task_id, "c1"), config(task_id, "c2", "https://example.com/2")
    store.put_push_config(first)
    store.put_push_config(second.for_payload_version("0.3"))
    assert store.get_push_config(task_id, "c1") == first
    assert store.get_push_config(task_id, "c2").payload_version == "0.3"  # type: ignore[union-attr]
    listed = store.list_push_configs(task_id)
    assert sorted((c.id, parked) for c, parked in listed) == [("c1", False), ("c2", False)]
    store.put_push_config(config(task_id, "c1", "https://example.com/new"))
    assert store.get_push_config(task_id, "c1").url == "https://example.com/new"  # type: ignore[union-attr]
    store.delete_push_config(task_id, "c1")
    assert store.get_push_config(task_id, "c1") is None
    assert [c.id for c, _ in store.list_push_configs(task_id)] == ["c2"]
    assert store.list_push_configs(uid("none")) == []


def test_a_push_config_keeps_the_event_it_was_made_after(store: TaskStore) -> None:
    """`after_seq` (the sender skips a config's events up to it) is stored with the config by
    every path that writes one, read back by every path that reads one, kept while the
    config is parked, and made anew when the config is replaced."""
    owner = uid("owner")
    task_id = create(store, owner).task_id
    store.put_push_config(config(task_id, "late").for_events_after(7))
    store.put_push_config(config(task_id, "v03").for_payload_version("0.3").for_events_after(3))
    later = create(store, owner)
    move(store, later, TaskState.INPUT_REQUIRED, 2)
    turn_2 = config(later.task_id, "turn-2").for_events_after(2)
    move(store, later, TaskState.WORKING, 3, turn=2, push_config=turn_2)

    def afters(task: str) -> dict[str | None, int]:
        return {c.id: c.after_seq for c, _ in store.list_push_configs(task)}

    assert afters(task_id) == {"late": 7, "v03": 3}
    assert afters(later.task_id) == {"turn-2": 2}
    assert store.get_push_config(task_id, "late") == config(task_id, "late").for_events_after(7)
    v03 = store.get_push_config(task_id, "v03")
    assert v03 is not None and (v03.payload_version, v03.after_seq) == ("0.3", 3)
    both = store.push_configs_of([task_id, later.task_id])
    assert {t: {c.id: c.after_seq for c, _ in got} for t, got in both.items()} == {
        task_id: {"late": 7, "v03": 3},
        later.task_id: {"turn-2": 2},
    }
    store.park_push_config(task_id, "late", 9)
    delivery = store.get_push_delivery(task_id, "late")
    assert delivery is not None and delivery.config.after_seq == 7
    assert afters(task_id)["late"] == 7
    store.put_push_config(config(task_id, "late"))  # replaced: a config made anew
    assert afters(task_id) == {"late": 0, "v03": 3}


def test_push_configs_of_a_batch_s_tasks(store: TaskStore) -> None:
    """What the webhook sender reads for a stream batch: each task's configs, as
    `list_push_configs` gives them, however they came (none, inline at creation or at a
    later turn, created, deleted, on a task that does not exist, an over-long id)."""
    owner = uid("owner")
    plain = create(store, owner).task_id
    inline = uid("task")
    create(store, owner, task_id=inline, push=config(inline, "inline"))
    later = create(store, owner)
    move(store, later, TaskState.INPUT_REQUIRED, 2)
    move(store, later, TaskState.WORKING, 3, turn=2, push_config=config(later.task_id, "turn-2"))
    created = create(store, owner).task_id
    store.put_push_config(config(created, "a"))
    store.park_push_config(created, "a", 1)
    store.put_push_config(config(created, "b"))
    deleted = create(store, owner).task_id
    store.put_push_config(config(deleted, "gone"))
    store.delete_push_config(deleted, "gone")
    headless = uid("task")  # no such task: its config is still listed
    store.put_push_config(config(headless, "orphan"))
    asked = [plain, inline, later.task_id, created, deleted, headless, uid("none"), "t" * 3000]
    got = store.push_configs_of([*asked, plain])  # a task twice: once in the answer
    assert got == {task_id: store.list_push_configs(task_id) for task_id in asked}
    assert [len(got[t]) for t in asked] == [0, 1, 1, 2, 0, 1, 0, 0]
    assert got[created] == [(config(created, "a"), True), (config(created, "b"), False)]
    assert store.push_configs_of([]) == {}


def test_inline_push_config_is_written_with_the_task(store: TaskStore) -> None:
    task_id = uid("task")
    create(store, uid("owner"), task_id=task_id, push=config(task_id, "inline"))
    assert store.get_push_config(task_id, "inline") == config(task_id, "inline")


def test_delivery_park_queue_unpark_and_failures(store: TaskStore) -> None:
    task_id = uid("task")
    store.put_push_config(config(task_id, "c"))
    delivery = store.get_push_delivery(task_id, "c")
    assert delivery is not None and (delivery.failures, delivery.queued_through) == (0, None)
    assert store.queue_behind(task_id, "c", 4) is False  # not parked: deliver directly

    store.park_push_config(task_id, "c", 3)
    assert store.list_push_configs(task_id)[0][1] is True
    assert store.queue_behind(task_id, "c", 4) is True
    assert store.queue_behind(task_id, "c", 4) is True  # a retried batch: queued again
    assert store.get_push_delivery(task_id, "c").queued_through == 4  # type: ignore[union-attr]
    assert store.count_push_failure(task_id, "c") == 1
    assert store.count_push_failure(task_id, "c") == 2
    store.reset_push_failures(task_id, "c")
    assert store.get_push_delivery(task_id, "c").failures == 0  # type: ignore[union-attr]

    assert store.unpark_if_drained(task_id, "c", 3) is False  # 4 is still queued
    assert store.count_push_failure(task_id, "c") == 1
    assert store.unpark_if_drained(task_id, "c", 4) is True
    delivery = store.get_push_delivery(task_id, "c")
    assert delivery is not None and (delivery.failures, delivery.queued_through) == (0, None)
    assert store.list_push_configs(task_id)[0][1] is False
    assert store.queue_behind(task_id, "c", 5) is False


def test_delivery_state_of_a_deleted_config(store: TaskStore) -> None:
    task_id = uid("task")
    store.put_push_config(config(task_id, "c"))
    store.delete_push_config(task_id, "c")
    store.park_push_config(task_id, "c", 1)  # stays deleted
    assert store.get_push_delivery(task_id, "c") is None
    assert store.queue_behind(task_id, "c", 2) is False
    assert store.unpark_if_drained(task_id, "c", 1) is False
    assert store.count_push_failure(task_id, "c") is None
    store.reset_push_failures(task_id, "c")
    assert store.get_push_config(task_id, "c") is None


# -- keys: owners and ids never collide, over-long ids name nothing --------------------------


def test_owner_and_context_parts_never_collide(store: TaskStore) -> None:
    """`{owner}#{contextId}` unescaped: (`x#proj`, `1`) and (`x`, `proj#1`) shared a listing."""
    base = uid("alice2")
    pairs = [(f"{base}#proj", "1"), (base, "proj#1"), (f"{base}%23proj", "1"), (base, "proj%231")]
    tasks = {pair: create(store, *pair) for pair in pairs}
    for (owner, context_id), record in tasks.items():
        for state in (None, TaskState.SUBMITTED):
            query = ListQuery(owner=owner, context_id=context_id, state=state)
            assert _ids(store, query) == [record.task_id], query
            assert store.count_tasks(query) == 1, query
        owned = sorted(r.task_id for (o, _), r in tasks.items() if o == owner)
        assert sorted(_ids(store, ListQuery(owner=owner))) == owned, owner
        assert store.count_tasks(ListQuery(owner=owner)) == len(owned), owner


def test_owner_and_message_id_parts_never_collide(store: TaskStore) -> None:
    base = uid("alice2")
    first = Dedupe(owner=f"{base}#proj", message_id="m", content_hash="h")
    record = create(store, first.owner, dedupe=first)
    assert store.find_dedupe(base, "proj#m") is None
    assert store.find_dedupe(f"{base}%23proj", "m") is None
    second = Dedupe(owner=base, message_id="proj#m", content_hash="h")
    other = create(store, base, dedupe=second)  # no dedupe conflict with the first
    assert store.find_dedupe(first.owner, "m") == (record.task_id, "h")
    assert store.find_dedupe(base, "proj#m") == (other.task_id, "h")


def test_tricky_owner_pages_with_tokens(store: TaskStore) -> None:
    owner = uid("o#%23%") + "#😀"
    records = [
        create(store, owner, context_id="#%", at=T0 + timedelta(minutes=i)) for i in range(3)
    ]
    for context_id in (None, "#%"):
        seen: list[str] = []
        token = None
        while True:
            page, token = store.list_tasks(
                ListQuery(owner=owner, context_id=context_id, page_size=1, page_token=token)
            )
            seen += [r.task_id for r in page]
            if token is None:
                break
        assert seen == [r.task_id for r in reversed(records)]


def test_ids_longer_than_a_key_can_hold_name_nothing(store: TaskStore) -> None:
    """Reads with ids DynamoDB could not even key answer "not found", never an error."""
    task_id = uid("task")
    store.put_push_config(config(task_id, "c"))
    huge_task, huge_config = "t" * 3000, "😀" * 300  # 3000 B > 2048, 1200 B > 1024
    assert store.get_record(huge_task) is None
    assert store.get_snapshot(huge_task, None) is None
    assert store.list_push_configs(huge_task) == []
    assert store.get_push_config(task_id, huge_config) is None
    assert store.get_push_delivery(task_id, huge_config) is None
    store.delete_push_config(task_id, huge_config)
    assert store.count_push_failure(task_id, huge_config) is None
    assert store.queue_behind(task_id, huge_config, 1) is False
    assert store.find_dedupe("o" * 3000, "m") is None
    assert [c.id for c, _ in store.list_push_configs(task_id)] == ["c"]


# -- delegations -----------------------------------------------------------------------------


def working(store: TaskStore) -> TaskRecord:
    """A new task, WORKING in turn 1 (its first step running)."""
    record = create(store, uid("owner"))
    move(store, record, TaskState.WORKING, 2)
    return record


def delegation(task_id: str, key: str, **fields: Any) -> DelegationRecord:
    text = {"messageId": uid("m"), "role": "ROLE_USER", "parts": [{"text": f"to {key}"}]}
    values: dict[str, Any] = {"agent_url": "https://agent.example/", "token": uid("tok")}
    return DelegationRecord(task_id, key, **{**values, "message": text, **fields})


def begin(
    store: TaskStore, task_id: str, turn: int, step: int, count: int = 1, **fields: Any
) -> list[DelegationRecord]:
    """Begin round `turn.step` of `count` delegations; returns them as given."""
    records = [
        delegation(task_id, f"{turn}.{step}.{i}", count=count, **fields) for i in range(count)
    ]
    assert store.begin_round(task_id, turn, step, records, {"at": f"{turn}.{step}"}) is True
    return records


def test_a_round_begins_once_and_the_header_shows_it(store: TaskStore) -> None:
    record = working(store)
    task_id = record.task_id
    before = store.get_record(task_id)
    assert before is not None and (before.delegation_round, before.waiting) == (None, False)
    records = begin(store, task_id, 1, 1, count=2, wait="first")
    got = store.get_record(task_id)
    assert got is not None
    assert (got.delegation_round, got.waiting) == ("1.1", True)
    assert (got.flow_step, got.flow_state) == ((1, 1), {"at": "1.1"})
    assert [(d.key, d.token, d.state) for d in store.round_delegations(task_id, "1.1")] == [
        (r.key, r.token, DelegationState.SENDING) for r in records
    ]
    # A re-run of the step (new tokens, another state): nothing written, the first kept.
    again = [delegation(task_id, r.key, count=2) for r in records]
    assert store.begin_round(task_id, 1, 1, again, {"at": "again"}) is False
    assert [d.token for d in store.round_delegations(task_id, "1.1")] == [r.token for r in records]
    kept = store.get_record(task_id)
    assert kept is not None and kept.flow_state == {"at": "1.1"}
    with pytest.raises(ConflictError):  # the step's outcome is saved
        store.save_flow_state(task_id, 1, {"at": "late"}, step=1)


def test_a_delegation_reads_back_as_written(store: TaskStore) -> None:
    task_id = working(store).task_id
    given = delegation(
        task_id,
        "1.1.0",
        agent_url="https://b.example/agent/",
        wait="first",
        count=1,
        forward=True,
        timeout_seconds=90,
        credentials="stack/agents/b.example",
        turn_context={"caller": {"owner": "o"}, "metadata": {"k": ["v", 1, None]}},
        updated_at="2026-01-01T00:00:00.000Z",
    )
    assert store.begin_round(task_id, 1, 1, [given], {}) is True
    assert store.get_delegation(task_id, "1.1.0") == given
    assert store.task_delegations(task_id) == [given]
    assert given.round == "1.1"


def test_a_round_does_not_begin_on_a_task_that_moved_on(store: TaskStore) -> None:
    submitted = create(store, uid("owner"))
    with pytest.raises(ConflictError) as raised:
        store.begin_round(submitted.task_id, 1, 1, [delegation(submitted.task_id, "1.1.0")], {})
    assert raised.value.failed == ("header",)
    assert store.task_delegations(submitted.task_id) == []

    record = working(store)
    task_id = record.task_id
    with pytest.raises(ConflictError):  # another turn
        store.begin_round(task_id, 2, 1, [delegation(task_id, "2.1.0")], {})
    store.save_flow_state(task_id, 1, {}, step=2)
    with pytest.raises(ConflictError):  # a step whose outcome is saved, with no round
        store.begin_round(task_id, 1, 2, [delegation(task_id, "1.2.0")], {})
    begin(store, task_id, 1, 3)
    move(store, record, TaskState.CANCELED, 3)
    with pytest.raises(ConflictError):  # begun, then canceled: a re-run goes no further
        store.begin_round(task_id, 1, 3, [delegation(task_id, "1.3.0")], {})
    with pytest.raises(ConflictError):  # canceled: no new round
        store.begin_round(task_id, 1, 4, [delegation(task_id, "1.4.0")], {})
    assert [d.key for d in store.task_delegations(task_id)] == ["1.3.0"]
    got = store.get_record(task_id)
    assert got is not None and got.delegation_round == "1.3"


def test_a_delegation_past_the_item_budget_is_refused(store: TaskStore) -> None:
    task_id = working(store).task_id
    huge = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * 400_000}]}
    small = delegation(task_id, "1.1.0")
    with pytest.raises(TooLarge):
        store.begin_round(task_id, 1, 1, [small, delegation(task_id, "1.1.1", message=huge)], {})
    assert store.task_delegations(task_id) == []
    got = store.get_record(task_id)
    assert got is not None and (got.flow_step, got.delegation_round, got.waiting) == (
        None,
        None,
        False,
    )
    assert store.begin_round(task_id, 1, 1, [small], {}) is True  # nothing was written


def test_mark_sent_moves_only_a_sending_delegation(store: TaskStore) -> None:
    task_id = working(store).task_id
    begin(store, task_id, 1, 1, count=2)
    assert store.mark_sent(task_id, "1.1.0", "push", 1_800_000_000.25, "rt-1", "rc-1") is True
    got = store.get_delegation(task_id, "1.1.0")
    assert got is not None
    assert (got.state, got.mode, got.deadline, got.remote_task_id, got.remote_context_id) == (
        DelegationState.WAITING,
        "push",
        1_800_000_000.25,
        "rt-1",
        "rc-1",
    )
    assert store.mark_sent(task_id, "1.1.0", "poll", 1.0, "rt-2", None) is False
    assert store.get_delegation(task_id, "1.1.0") == got
    assert store.settle(task_id, "1.1.1", "unreachable", error="connection refused") is True
    assert store.mark_sent(task_id, "1.1.1", "push", 1.0, None, None) is False
    assert store.mark_sent(task_id, "1.1.9", "push", 1.0, None, None) is False  # none
    assert store.get_delegation(task_id, "1.1.9") is None


def test_remote_statuses_apply_in_time_order(store: TaskStore) -> None:
    task_id = working(store).task_id
    begin(store, task_id, 1, 1)
    key, at = "1.1.0", "2026-01-01T00:00:01Z"
    # Before the send's answer (a fast remote), then after it.
    assert store.record_status(task_id, key, "TASK_STATE_SUBMITTED", at, None) is True
    store.mark_sent(task_id, key, "push", 1.0, "rt", "rc")
    assert store.record_status(task_id, key, "TASK_STATE_WORKING", at, None) is False  # equal
    got = store.get_delegation(task_id, key)
    assert got is not None and (got.state, got.remote_state) == (
        DelegationState.WAITING,
        "TASK_STATE_SUBMITTED",
    )
    question = {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "which?"}]}
    assert store.record_status(task_id, key, "TASK_STATE_COMPLETED", at, None) is False  # equal
    # Older, though later as a string ("." sorts before "Z"); the same time with an offset.
    older = "2026-01-01T00:00:00.500Z"
    assert store.record_status(task_id, key, "TASK_STATE_FAILED", older, None) is False
    same = "2026-01-01T01:00:01+01:00"
    assert store.record_status(task_id, key, "TASK_STATE_FAILED", same, None) is False
    newer = "2026-01-01T00:00:01.000001Z"
    assert store.record_status(task_id, key, "TASK_STATE_INPUT_REQUIRED", newer, question)
    got = store.get_delegation(task_id, key)
    assert got is not None
    assert (got.remote_state, got.remote_status_at, got.remote_message) == (
        "TASK_STATE_INPUT_REQUIRED",
        newer,
        question,
    )
    later = "2026-01-01T00:00:02+00:00"
    assert store.record_status(task_id, key, "TASK_STATE_WORKING", later, None) is True
    got = store.get_delegation(task_id, key)
    assert got is not None and (got.remote_state, got.remote_message) == (
        "TASK_STATE_WORKING",
        None,
    )
    store.settle(task_id, key, "completed")
    last = "2026-01-01T00:00:03Z"
    assert store.record_status(task_id, key, "TASK_STATE_WORKING", last, None) is False
    assert store.record_status(task_id, "1.1.5", "TASK_STATE_WORKING", last, None) is False


def test_a_delegation_settles_once(store: TaskStore) -> None:
    task_id = working(store).task_id
    begin(store, task_id, 1, 1, count=2)
    store.mark_sent(task_id, "1.1.0", "poll", 1.0, "rt", "rc")
    answer = {"messageId": "a", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}
    assert store.settle(task_id, "1.1.0", "completed", None, "TASK_STATE_COMPLETED", answer)
    assert store.settle(task_id, "1.1.0", "failed", "late", "TASK_STATE_FAILED") is False
    got = store.get_delegation(task_id, "1.1.0")
    assert got is not None
    assert (got.state, got.outcome, got.error, got.remote_state, got.remote_message) == (
        DelegationState.SETTLED,
        "completed",
        None,
        "TASK_STATE_COMPLETED",
        answer,
    )
    # From SENDING too (the send failed), with an error kept to its bound.
    assert store.settle(task_id, "1.1.1", "unreachable", error="é" * 5000) is True
    failed = store.get_delegation(task_id, "1.1.1")
    assert failed is not None and failed.state is DelegationState.SETTLED
    assert failed.error and failed.error == "é" * len(failed.error)
    assert 0 < len(failed.error.encode()) <= 2048
    assert store.settle(task_id, "1.1.7", "failed") is False  # none


def test_the_wait_ends_once_and_only_for_the_current_round(store: TaskStore) -> None:
    task_id = working(store).task_id
    assert store.end_wait(task_id, "1.1") is False  # no round yet
    begin(store, task_id, 1, 1)
    assert store.end_wait(task_id, "1.2") is False
    assert store.end_wait(task_id, "1.1") is True
    assert store.end_wait(task_id, "1.1") is False
    got = store.get_record(task_id)
    assert got is not None and (got.delegation_round, got.waiting) == ("1.1", False)
    begin(store, task_id, 1, 3)
    assert store.end_wait(task_id, "1.1") is False  # an older round: not the task's wait
    got = store.get_record(task_id)
    assert got is not None and (got.delegation_round, got.waiting) == ("1.3", True)
    assert store.end_wait(task_id, "1.3") is True
    assert store.end_wait(uid("missing"), "1.3") is False


def test_a_wait_resumes_only_on_its_working_round(store: TaskStore) -> None:
    """`resume_wait` undoes `end_wait` (its waker could not start the next step): one caller
    ends the wait again. Not for another round, nor a task that moved on."""
    record = working(store)
    task_id = record.task_id
    begin(store, task_id, 1, 1)
    assert store.end_wait(task_id, "1.1") is True
    store.resume_wait(task_id, "1.2")
    assert store.end_wait(task_id, "1.1") is False
    store.resume_wait(task_id, "1.1")
    got = store.get_record(task_id)
    assert got is not None and (got.delegation_round, got.waiting) == ("1.1", True)
    store.resume_wait(task_id, "1.1")  # waiting already: unchanged
    assert store.end_wait(task_id, "1.1") is True
    assert store.end_wait(task_id, "1.1") is False
    move(store, record, TaskState.CANCELED, 3)
    store.resume_wait(task_id, "1.1")
    got = store.get_record(task_id)
    assert got is not None and got.waiting is False
    store.resume_wait(uid("missing"), "1.1")
    store.resume_wait("t" * 3000, "1.1")


def test_a_notification_is_seen_once(store: TaskStore) -> None:
    task_id = working(store).task_id
    begin(store, task_id, 1, 1, count=2)
    assert store.note_seen(task_id, "1.1.0", "d1") is True
    assert store.note_seen(task_id, "1.1.0", "d1") is False
    assert store.note_seen(task_id, "1.1.0", "d2") is True
    assert store.note_seen(task_id, "1.1.1", "d1") is True  # another delegation's
    long = "x" * 5000  # any digest, however long
    assert store.note_seen(task_id, "1.1.0", long) is True
    assert store.note_seen(task_id, "1.1.0", long) is False
    assert [d.key for d in store.task_delegations(task_id)] == ["1.1.0", "1.1.1"]
    # The task's reads see none of its delegation items.
    snapshot = store.get_snapshot(task_id, None)
    assert snapshot is not None and snapshot.seq == 2
    assert [m.parts[0].text for m in snapshot.history] == ["hello"]
    assert [seq for seq, _ in store.read_events(task_id, 0)] == [1, 2]
    assert store.last_seq(task_id) == 2 and store.read_history(task_id, None) == snapshot.history


def test_a_delegation_binds_one_remote_task(store: TaskStore) -> None:
    task_id = working(store).task_id
    begin(store, task_id, 1, 1)
    assert store.bind_remote_task(task_id, "1.1.0", "rt-1", "rc-1") is True
    assert store.bind_remote_task(task_id, "1.1.0", "rt-1", "rc-other") is True  # same task
    assert store.bind_remote_task(task_id, "1.1.0", "rt-2", "rc-1") is False
    # The send's answer comes after a notification: the bound task stays.
    assert store.mark_sent(task_id, "1.1.0", "push", 1.0, "rt-1", "rc-1") is True
    got = store.get_delegation(task_id, "1.1.0")
    assert got is not None and (got.remote_task_id, got.remote_context_id) == ("rt-1", "rc-1")
    assert store.bind_remote_task(task_id, "1.1.4", "rt-1", "rc-1") is False  # none


def test_polls_are_counted(store: TaskStore) -> None:
    task_id = working(store).task_id
    begin(store, task_id, 1, 1)
    store.count_poll(task_id, "1.1.0")
    store.count_poll(task_id, "1.1.0")
    store.count_poll(task_id, "1.1.3")  # none: nothing made
    got = store.get_delegation(task_id, "1.1.0")
    assert got is not None and got.polls == 2
    assert store.get_delegation(task_id, "1.1.3") is None


def test_delegations_read_by_round_and_in_order(store: TaskStore) -> None:
    """Numbers order as numbers (index 10 after 2, step 10 after 9), and a round is exactly
    its own delegations (round 1.1 is no prefix of round 1.10)."""
    task_id = working(store).task_id
    first = [delegation(task_id, f"1.1.{i}", count=4) for i in (10, 2, 0, 1)]
    assert store.begin_round(task_id, 1, 1, first, {}) is True
    begin(store, task_id, 1, 9)
    begin(store, task_id, 1, 10, count=2)
    assert [d.key for d in store.round_delegations(task_id, "1.1")] == [
        "1.1.0",
        "1.1.1",
        "1.1.2",
        "1.1.10",
    ]
    assert [d.key for d in store.round_delegations(task_id, "1.10")] == ["1.10.0", "1.10.1"]
    assert [d.key for d in store.task_delegations(task_id)] == [
        "1.1.0",
        "1.1.1",
        "1.1.2",
        "1.1.10",
        "1.9.0",
        "1.10.0",
        "1.10.1",
    ]
    assert store.round_delegations(task_id, "1.2") == []
    assert store.task_delegations(working(store).task_id) == []


def test_keys_that_name_no_delegation_find_none(store: TaskStore) -> None:
    """The receiver's path names a delegation: any text that is not one finds nothing."""
    task_id = working(store).task_id
    begin(store, task_id, 1, 1)
    for key in ("1.1", "01.1.0", "1.1.0.0", "1.1.x", "-1.1.0", "1.1.100", "", "1.1.0#", "😀"):
        assert store.get_delegation(task_id, key) is None, key
        assert store.mark_sent(task_id, key, "push", 1.0, None, None) is False, key
        assert store.bind_remote_task(task_id, key, "rt", "rc") is False, key
    for round in ("1", "1.1.0", "01.1", "x"):
        assert store.round_delegations(task_id, round) == [], round
    huge = "t" * 3000
    assert store.get_delegation(huge, "1.1.0") is None
    assert store.task_delegations(huge) == [] and store.round_delegations(huge, "1.1") == []
    assert store.end_wait(huge, "1.1") is False
    assert store.mark_sent(huge, "1.1.0", "push", 1.0, None, None) is False
    at = "2026-01-01T00:00:00Z"
    assert store.record_status(huge, "1.1.0", "TASK_STATE_WORKING", at, None) is False
    assert store.bind_remote_task(huge, "1.1.0", "rt", "rc") is False
    assert store.settle(huge, "1.1.0", "failed") is False
    assert store.note_seen(huge, "1.1.0", "d") is False
    store.count_poll(huge, "1.1.0")
    store.resume_wait(huge, "1.1")
    assert store.get_delegation(task_id, "1.1.0") is not None


# -- API keys (ApiKeyStore; fixture `api_key_store`) -----------------------------------------


def key_id() -> str:
    return uuid.uuid4().hex[:12]


def api_key(principal: str, **fields: Any) -> ApiKeyRecord:
    values: dict[str, Any] = {
        "key_id": key_id(),
        "principal": principal,
        "secret_hash": uuid.uuid4().hex * 2,
        "usage_key_id": uid("uk"),
        "usage_key": uuid.uuid4().hex + "abcdefgh",
        "description": "ci key",
        "created_at": "2026-01-01T00:00:00.000Z",
    }
    return ApiKeyRecord(**{**values, **fields})


def test_api_key_round_trips_and_unknown_is_none(api_key_store: ApiKeyStore) -> None:
    record = api_key(uid("owner"), description="déjà #%")
    api_key_store.put_api_key(record)
    assert api_key_store.get_api_key(record.key_id) == record
    assert api_key_store.get_api_key(key_id()) is None


def test_api_key_put_never_overwrites(api_key_store: ApiKeyStore) -> None:
    record = api_key(uid("owner"))
    api_key_store.put_api_key(record)
    api_key_store.revoke_api_key(record.key_id)
    revoked = api_key_store.get_api_key(record.key_id)
    with pytest.raises(ConflictError):
        api_key_store.put_api_key(api_key(uid("thief"), key_id=record.key_id))
    assert api_key_store.get_api_key(record.key_id) == revoked  # still revoked, same owner


def test_api_key_revoke_is_idempotent(api_key_store: ApiKeyStore) -> None:
    record = api_key(uid("owner"))
    api_key_store.put_api_key(record)
    assert api_key_store.revoke_api_key(record.key_id) is True
    first = api_key_store.get_api_key(record.key_id)
    assert first is not None and first.revoked and first.revoked_at
    assert dataclasses.replace(first, revoked_at=None) == record  # nothing else changed
    assert api_key_store.revoke_api_key(record.key_id) is True
    assert api_key_store.get_api_key(record.key_id) == first  # first revocation time kept
    assert api_key_store.revoke_api_key(key_id()) is False
    listed = api_key_store.list_api_keys(record.principal)
    assert [k.revoked_at for k in listed] == [first.revoked_at]


def test_api_keys_list_by_exact_principal(api_key_store: ApiKeyStore) -> None:
    owner = uid("alice")
    mine = [api_key(owner) for _ in range(3)]
    others = [api_key(owner + "2"), api_key(owner[:-1]), api_key(uid("bob"))]
    for record in [*mine, *others]:
        api_key_store.put_api_key(record)
    api_key_store.revoke_api_key(mine[0].key_id)
    listed = api_key_store.list_api_keys(owner)
    assert [k.key_id for k in listed] == sorted(k.key_id for k in mine)  # revoked ones too
    assert all(k.principal == owner for k in listed)
    everyone = {k.key_id for k in api_key_store.list_api_keys()}
    assert {k.key_id for k in [*mine, *others]} <= everyone
    assert api_key_store.list_api_keys(uid("nobody")) == []


def test_api_key_ids_no_key_can_hold_name_nothing(api_key_store: ApiKeyStore) -> None:
    assert api_key_store.get_api_key("k" * 3000) is None
    assert api_key_store.revoke_api_key("😀" * 600) is False
