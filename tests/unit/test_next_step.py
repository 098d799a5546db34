"""The flow worker starts the next step's execution (flows/runtime.py, one execution per step),
over the in-memory store: once the step's outcome is saved, never for a canceled turn, again on
a re-run only while the next step has not finished, and a failed start is retried by the state
machine (NextStepNotStarted)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_serverless.core.executor import TurnContext
from a2a_serverless.core.tasklog import transition
from a2a_serverless.flows import Outcome, StepContext
from a2a_serverless.flows.base import load_flow
from a2a_serverless.flows.runtime import FlowWorker, NextStepNotStarted, _failure_text
from a2a_serverless.models import Message, TaskState
from tests.fakes import InMemoryTaskStore
from tests.helpers import add_submitted_task


class Starts:
    """An executor that records the steps it was asked to start (or fails them)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.started: list[tuple[str, int, int]] = []
        self.error = error

    def start(
        self, task_id: str, turn: int, context: TurnContext | None = None, step: int = 0
    ) -> str:
        if self.error is not None:
            raise self.error
        self.started.append((task_id, turn, step))
        return f"{task_id}-{turn}-{step}"


def two_steps(ctx: StepContext) -> Outcome:
    ctx.state["seen"] = ctx.step
    return Outcome.next_step() if ctx.step == 0 else Outcome.completed("done")


def _store() -> InMemoryTaskStore:
    store = InMemoryTaskStore()
    message = Message.model_validate(
        {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "go"}]}
    )
    add_submitted_task(store, message)
    return store


def _worker(store: InMemoryTaskStore, starts: Starts) -> FlowWorker:
    return FlowWorker(store, load_flow(f"{__name__}:two_steps"), lambda: starts)


def _step(step: int) -> dict[str, Any]:
    return {"taskId": "t-1", "turn": 1, "step": step}


def test_a_step_asking_for_another_starts_it_once_saved() -> None:
    store, starts = _store(), Starts()
    assert _worker(store, starts).handle(_step(0))["continue"] is True
    assert starts.started == [("t-1", 1, 1)]
    assert (store.get_record("t-1") or pytest.fail()).flow_step == (1, 0)
    assert _worker(store, starts).handle(_step(1))["continue"] is False
    assert starts.started == [("t-1", 1, 1)]  # the last step starts nothing


def test_a_rerun_starts_the_next_step_only_while_it_has_not_finished() -> None:
    store, starts = _store(), Starts()
    _worker(store, starts).handle(_step(0))
    _worker(store, starts).handle(_step(0))  # re-run: step 1 may not have started
    assert starts.started == [("t-1", 1, 1)] * 2  # the same name: STANDARD refuses the second
    _worker(store, starts).handle(_step(1))
    _worker(store, starts).handle(_step(0))  # step 1 finished (the turn ended)
    assert len(starts.started) == 2


def test_a_canceled_turn_starts_no_next_step() -> None:
    store, starts = _store(), Starts()
    record = store.get_record("t-1") or pytest.fail()
    transition(store, record, TaskState.CANCELED, seq=store.last_seq("t-1") + 1)
    assert _worker(store, starts).handle(_step(0))["continue"] is False
    assert starts.started == []


def test_a_failed_start_is_raised_for_the_state_machine_to_retry() -> None:
    store = _store()
    failing = Starts(error=RuntimeError("throttled"))
    with pytest.raises(NextStepNotStarted, match="RuntimeError"):
        _worker(store, failing).handle(_step(0))
    # The retry finds step 0 done and starts step 1.
    starts = Starts()
    assert _worker(store, starts).handle(_step(0))["continue"] is True
    assert starts.started == [("t-1", 1, 1)]
    assert "could not be started" in _failure_text("NextStepNotStarted")


def test_a_worker_without_an_executor_cannot_go_on() -> None:
    worker = FlowWorker(_store(), load_flow(f"{__name__}:two_steps"))
    with pytest.raises(NextStepNotStarted):
        worker.handle(_step(0))
