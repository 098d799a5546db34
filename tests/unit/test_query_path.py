"""The QUERY path (core/query.py) over the in-memory store: owner scoping, the task-id guard,
snapshots streams start from, ListTasks paging and parameter checks, CancelTask."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from a2a_serverless.core.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_serverless.core.query import MAX_ID_LENGTH, TaskQueries, require_task_id
from a2a_serverless.core.tail import PollPolicy
from a2a_serverless.core.tasklog import status_event, transition
from a2a_serverless.models import ListTasksRequest, Message, TaskState, TaskStatus
from a2a_serverless.store import TaskRecord
from tests.fakes import InMemoryTaskStore


class StoppingExecutor:
    def __init__(self) -> None:
        self.stopped: list[str] = []

    def start(  # pragma: no cover - not on this path
        self, task_id: str, turn: int, caller: object = None
    ) -> str:
        raise AssertionError("queries start nothing")

    def stop(self, name: str, cause: str) -> None:
        self.stopped.append(name)


def add_task(store: InMemoryTaskStore, task_id: str, owner: str = "alice") -> TaskRecord:
    status = TaskStatus(state=TaskState.SUBMITTED)
    record = TaskRecord(
        task_id=task_id,
        context_id="ctx",
        owner=owner,
        state=TaskState.SUBMITTED,
        status=status,
        status_seq=1,
        turn=1,
        execution=f"{task_id}-1",
    )
    message = Message.model_validate(
        {"messageId": f"m-{task_id}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    )
    store.create_task(record, message, status_event(record, status), None)
    return record


@dataclass
class Setup:
    """A TaskQueries over the in-memory store, with both at hand."""

    store: InMemoryTaskStore = field(default_factory=InMemoryTaskStore)
    executor: StoppingExecutor = field(default_factory=StoppingExecutor)

    @property
    def queries(self) -> TaskQueries:
        return TaskQueries(self.store, self.executor, PollPolicy())


@pytest.fixture
def setup() -> Setup:
    return Setup()


@pytest.mark.parametrize("task_id", ["", "x" * (MAX_ID_LENGTH + 1)])
def test_ids_that_name_no_task_are_refused_without_a_read(task_id: str) -> None:
    with pytest.raises(TaskNotFoundError):
        require_task_id(task_id)


def test_someone_elses_task_does_not_exist(setup: Setup) -> None:
    add_task(setup.store, "t1", owner="bob")
    for read in (
        lambda: setup.queries.get_task("alice", "t1"),
        lambda: setup.queries.load("alice", "t1"),
        lambda: setup.queries.subscribe("alice", "t1"),
        lambda: setup.queries.cancel_task("alice", "t1"),
    ):
        with pytest.raises(TaskNotFoundError):
            read()
    assert setup.queries.get_task("bob", "t1").id == "t1"


def test_snapshot_of_a_live_task_is_tailed_a_settled_one_is_not(setup: Setup) -> None:
    record = add_task(setup.store, "t1")
    start = setup.queries.snapshot_start("alice", "t1", None)
    assert start.open and start.after_seq == 1
    assert start.first.task is not None and start.first.task.history is not None
    record, _ = transition(setup.store, record, TaskState.INPUT_REQUIRED)
    # A subscription to an interrupted task stays open for the turn the reply starts; a
    # stream of the send that reached the interruption does not.
    subscribed = setup.queries.subscribe("alice", "t1")
    assert subscribed.open and subscribed.resume
    streamed = setup.queries.snapshot_start("alice", "t1", None)
    assert not streamed.open and not streamed.resume


def test_subscribing_to_a_finished_task_is_refused(setup: Setup) -> None:
    record = add_task(setup.store, "t1")
    transition(setup.store, record, TaskState.COMPLETED)
    with pytest.raises(UnsupportedOperationError, match="terminal"):
        setup.queries.subscribe("alice", "t1")


def test_list_pages_through_the_owners_tasks(setup: Setup) -> None:
    for index in range(3):
        add_task(setup.store, f"t{index}")
    add_task(setup.store, "other", owner="bob")
    first = setup.queries.list_tasks("alice", ListTasksRequest(page_size=2))
    assert len(first.tasks) == 2 and first.total_size == 3 and first.next_page_token
    rest = setup.queries.list_tasks(
        "alice", ListTasksRequest(page_size=2, page_token=first.next_page_token)
    )
    assert len(rest.tasks) == 1 and rest.next_page_token == ""
    seen = {task.id for task in first.tasks + rest.tasks}
    assert seen == {"t0", "t1", "t2"}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"pageSize": 0}, "pageSize"),
        ({"pageSize": 101}, "pageSize"),
        ({"historyLength": -1}, "historyLength"),
        ({"contextId": "c" * (MAX_ID_LENGTH + 1)}, "contextId"),
        ({"pageToken": "not-a-token"}, "pageToken"),
    ],
)
def test_list_parameters_out_of_range_name_their_field(
    setup: Setup, params: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidParamsError) as info:
        setup.queries.list_tasks("alice", ListTasksRequest.model_validate(params))
    assert info.value.violations[0][0] == field


def test_cancel_ends_the_task_and_stops_no_execution(setup: Setup) -> None:
    add_task(setup.store, "t1")
    task = setup.queries.cancel_task("alice", "t1")
    assert task.status.state is TaskState.CANCELED
    # EXPRESS has no StopExecution: the running step sees the cancel and starts no next step.
    assert setup.executor.stopped == []
    with pytest.raises(TaskNotCancelableError):
        setup.queries.cancel_task("alice", "t1")
