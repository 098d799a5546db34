"""Tailing a task's event log: the one mechanism behind blocking sends and every stream.

Readers start after a known seq (the seq a snapshot was folded at), so nothing between the
snapshot and the tail is lost or repeated. Polling is adaptive: `min` while events flow,
growing by half per empty read up to `max` while idle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from a2a_serverless.models import INTERRUPTED_STATES, TERMINAL_STATES, StreamResponse
from a2a_serverless.store import TaskStore

SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES


@dataclass(frozen=True)
class PollPolicy:
    min_seconds: float = 0.025
    max_seconds: float = 1.0
    growth: float = 1.5


@dataclass(frozen=True)
class WaitPolicy:
    """How blocking calls and streams tail the event log."""

    max_wait_seconds: float = 120.0
    poll: PollPolicy = field(default_factory=PollPolicy)
    stream_max_seconds: float = 840.0
    heartbeat_seconds: float = 15.0


def settles(event: StreamResponse) -> bool:
    """A status update that ends a stream (terminal or interrupted state)."""
    update = event.status_update
    return update is not None and update.status.state in SETTLED_STATES


@dataclass
class StreamEnd:
    """Where a stream closes: at a terminal status, and at an interrupted one — except that a
    subscription opened on an interrupted task stays open through the follow-up turn and
    closes at the next terminal or interrupted status after new work began (§7.6.1)."""

    awaiting_work: bool = False

    def reached(self, event: StreamResponse) -> bool:
        update = event.status_update
        if update is None:
            return False
        state = update.status.state
        if state in TERMINAL_STATES:
            return True
        if state in INTERRUPTED_STATES:
            return not self.awaiting_work
        self.awaiting_work = False  # the follow-up turn began
        return False


class LogTail:
    """Reads a task's events after `after_seq`, in order, each once."""

    def __init__(
        self,
        store: TaskStore,
        task_id: str,
        after_seq: int,
        policy: PollPolicy | None = None,
        present: Callable[[StreamResponse], StreamResponse] | None = None,
    ) -> None:
        self.store = store
        self.task_id = task_id
        self.seq = after_seq
        self.policy = policy or PollPolicy()
        self.interval = self.policy.min_seconds
        # How an event is answered (stored content as links: core/content.py).
        self.present = present

    def poll(self) -> list[StreamResponse]:
        """One read of the log; the next interval adapts to what it found."""
        found = self.store.read_events(self.task_id, self.seq)
        if found:
            self.seq = found[-1][0]
            self.interval = self.policy.min_seconds
        else:
            self.interval = min(self.interval * self.policy.growth, self.policy.max_seconds)
        if self.present is None:
            return [event for _, event in found]
        return [self.present(event) for _, event in found]


class SettleWait:
    """A blocking send's wait: reads of the log until a settling status or `max_seconds`.

    One read per `step()`, with the pause in between left to the caller, so a synchronous
    caller sleeps and an HTTP binding can await (and stop reading when its client is gone).
    """

    def __init__(self, tail: LogTail, max_seconds: float) -> None:
        self.tail = tail
        self.deadline = time.monotonic() + max_seconds

    def step(self) -> bool:
        """One read of the log; True when the wait is over (settled, or the limit reached)."""
        if any(settles(event) for event in self.tail.poll()):
            return True
        return self.deadline - time.monotonic() <= 0

    def pause(self) -> float:
        """How long to wait before the next `step()`: the tail's interval, up to the limit."""
        return max(0.0, min(self.tail.interval, self.deadline - time.monotonic()))
