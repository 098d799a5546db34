"""The delegation cases of the store contract (tests/contract/cases.py) can fail: each
deliberately broken in-memory store fails the case that pins what it breaks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a_serverless.store import DelegationRecord, DelegationState
from tests.contract import cases
from tests.fakes import InMemoryTaskStore


class ComparesTimesAsText(InMemoryTaskStore):
    """Orders remote statuses by their timestamps' text ("...00.5Z" after "...01Z")."""

    def record_status(
        self, task_id: str, key: str, state: str, at: str, message: dict[str, Any] | None
    ) -> bool:
        found = self.delegations.get((task_id, key))
        if found is None or found.state == DelegationState.SETTLED:
            return False
        if found.remote_status_at is not None and found.remote_status_at >= at:
            return False
        found.remote_state, found.remote_status_at, found.remote_message = state, at, message
        return True


class SettlesTwice(InMemoryTaskStore):
    def settle(self, task_id: str, key: str, outcome: str, *args: Any) -> bool:
        found = self.delegations.get((task_id, key))
        if found is not None:
            found.state = DelegationState.WAITING  # as if it were still open
        return super().settle(task_id, key, outcome, *args)


class EndsAnyRound(InMemoryTaskStore):
    def end_wait(self, task_id: str, round: str) -> bool:
        task = self.tasks.get(task_id)
        if task is None or not task.record.waiting:
            return False
        task.record.waiting = False
        return True


class ResumesAnyTask(InMemoryTaskStore):
    def resume_wait(self, task_id: str, round: str) -> None:
        if task_id in self.tasks:
            self.tasks[task_id].record.waiting = True


class Rebinds(InMemoryTaskStore):
    def bind_remote_task(
        self, task_id: str, key: str, remote_task_id: str, context_id: str
    ) -> bool:
        found = self.delegations.get((task_id, key))
        if found is None:
            return False
        found.remote_task_id = remote_task_id
        return True


class BeginsAgain(InMemoryTaskStore):
    """A re-run writes its round again (new tokens: the first send's pushes are refused)."""

    def begin_round(
        self,
        task_id: str,
        turn: int,
        step: int,
        records: list[DelegationRecord],
        flow_state: dict[str, Any],
    ) -> bool:
        if (task_id, records[0].key) in self.delegations:
            for record in records:
                self.delegations[(task_id, record.key)] = record
            return False
        return super().begin_round(task_id, turn, step, records, flow_state)


class SeesAgain(InMemoryTaskStore):
    def note_seen(self, task_id: str, key: str, digest: str) -> bool:
        super().note_seen(task_id, key, digest)
        return True


class OrdersAsText(InMemoryTaskStore):
    def task_delegations(self, task_id: str) -> list[DelegationRecord]:
        return sorted(super().task_delegations(task_id), key=lambda d: d.key)


class MarksAnySent(InMemoryTaskStore):
    def mark_sent(self, task_id: str, key: str, *args: Any) -> bool:
        found = self.delegations.get((task_id, key))
        if found is not None:
            found.state = DelegationState.SENDING
        return super().mark_sent(task_id, key, *args)


@pytest.mark.parametrize(
    ("broken", "case"),
    [
        (ComparesTimesAsText, cases.test_remote_statuses_apply_in_time_order),
        (SettlesTwice, cases.test_a_delegation_settles_once),
        (EndsAnyRound, cases.test_the_wait_ends_once_and_only_for_the_current_round),
        (ResumesAnyTask, cases.test_a_wait_resumes_only_on_its_working_round),
        (Rebinds, cases.test_a_delegation_binds_one_remote_task),
        (BeginsAgain, cases.test_a_round_begins_once_and_the_header_shows_it),
        (SeesAgain, cases.test_a_notification_is_seen_once),
        (OrdersAsText, cases.test_delegations_read_by_round_and_in_order),
        (MarksAnySent, cases.test_mark_sent_moves_only_a_sending_delegation),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_a_broken_delegation_store_fails_the_contract(
    broken: type[InMemoryTaskStore], case: Callable[[Any], Any]
) -> None:
    with pytest.raises(AssertionError):
        case(broken())
