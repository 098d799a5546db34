"""What the local stack records for the inspector while it runs: every webhook delivery
attempt (and which events were parked on the retry queue or dead-lettered) and the flow state
saved after each step, per task, in memory.

`install(stack, patches)` wraps the sender's and the store's methods for the stack's life
(undone with its other patches at stop). Memory is bounded: at most `per_task` entries of each
kind per task and `max_tasks` tasks, the oldest dropped first; each payload or state text cut
at `TEXT_MAX_CHARS`, and past `TEXT_BUDGET_CHARS` of them in all the oldest texts dropped.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from a2a_serverless.local.patching import Patches
from a2a_serverless.observability import current_log_keys

MAX_TASKS = 200
PER_TASK = 1000
TEXT_MAX_CHARS = 256 * 1024
TEXT_BUDGET_CHARS = 64 * 1024 * 1024
# What a text cut at TEXT_MAX_CHARS ends with.
CUT = "\n[cut: {size:,} characters in all]"

DELIVERED = "delivered"
FAILED = "failed"
PARKED = "parked"
DEAD_LETTERED = "dead-lettered"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Delivery:
    """One attempt to deliver an event (`attempt` >= 1: a POST, or a URL the egress policy
    refused, `error` "refused: ..."), or an event queued behind a parked webhook without one
    (`attempt` 0). `outcome`: delivered, failed, parked (the webhook was parked on the retry
    queue with this event) or dead-lettered (given up after this attempt)."""

    time: str
    task_id: str
    config_id: str
    url: str
    seq: int | None
    status_code: int | None
    latency_ms: float | None  # the attempt's duration (the URL's check and the POST)
    error: str | None  # DeliveryResult.error: secret-free
    attempt: int  # the count of POSTs of this event to this config so far
    # The body sent, as text; None without a POST, or once dropped (memory budget).
    payload: str | None
    outcome: str


@dataclass
class FlowStateRecord:
    """The flow state a step saved: for the next step (`next-step`), with a delegation round
    (`delegation`), or with the turn's final status (`final`)."""

    time: str
    task_id: str
    turn: int
    step: int | None
    state: str | None  # JSON (cut past TEXT_MAX_CHARS); None once dropped (memory budget)
    saved_by: str


@dataclass
class _Task:
    deliveries: deque[Delivery]
    flow_states: deque[FlowStateRecord]
    attempts: OrderedDict[tuple[str, int | None], int] = field(default_factory=OrderedDict)


class InspectorRecords:
    """Deliveries and flow states per task, oldest tasks and entries dropped past the bounds.
    Thread-safe: the sender's lanes and the flow steps record from their threads."""

    def __init__(
        self,
        max_tasks: int = MAX_TASKS,
        per_task: int = PER_TASK,
        text_max_chars: int = TEXT_MAX_CHARS,
        text_budget_chars: int = TEXT_BUDGET_CHARS,
    ) -> None:
        self.max_tasks = max_tasks
        self.per_task = per_task
        self.text_max_chars = text_max_chars
        self.text_budget_chars = text_budget_chars
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._lock = threading.Lock()
        # Entries holding a text, oldest first, and the characters they hold together.
        self._texts: deque[Delivery | FlowStateRecord] = deque()
        self._text_chars = 0

    # -- reads -----------------------------------------------------------------------------

    def deliveries(self, task_id: str) -> list[Delivery]:
        """The task's delivery attempts and queued events, in the order they happened."""
        with self._lock:
            found = self._tasks.get(task_id)
            return [dataclasses.replace(d) for d in found.deliveries] if found else []

    def flow_states(self, task_id: str) -> list[FlowStateRecord]:
        """The flow states the task's steps saved, in order."""
        with self._lock:
            found = self._tasks.get(task_id)
            return [dataclasses.replace(r) for r in found.flow_states] if found else []

    def clear(self) -> None:
        with self._lock:
            self._tasks.clear()
            self._texts.clear()
            self._text_chars = 0

    # -- writes ----------------------------------------------------------------------------

    def _cut(self, text: str) -> str:
        if len(text) <= self.text_max_chars:
            return text
        return text[: self.text_max_chars] + CUT.format(size=len(text))

    def _kept(self, entry: Delivery | FlowStateRecord, chars: int) -> None:
        """Count an entry's text in the budget, dropping the oldest texts past it; call with
        the lock held. Entries that left their task stay counted until dropped here."""
        self._texts.append(entry)
        self._text_chars += chars
        while self._text_chars > self.text_budget_chars or len(self._texts) > (
            self.max_tasks * self.per_task * 2
        ):
            old = self._texts.popleft()
            if isinstance(old, Delivery):
                self._text_chars -= len(old.payload or "")
                old.payload = None
            else:
                self._text_chars -= len(old.state or "")
                old.state = None

    def _task(self, task_id: str) -> _Task:
        """The task's entries (made, or moved to the newest end); call with the lock held."""
        found = self._tasks.get(task_id)
        if found is None:
            found = self._tasks[task_id] = _Task(
                deque(maxlen=self.per_task), deque(maxlen=self.per_task)
            )
            while len(self._tasks) > self.max_tasks:
                self._tasks.popitem(last=False)
        else:
            self._tasks.move_to_end(task_id)
        return found

    def record_attempt(
        self,
        task_id: str,
        config_id: str,
        url: str,
        seq: int | None,
        status_code: int | None,
        latency_ms: float,
        error: str | None,
        payload: bytes,
        at: str | None = None,
    ) -> Delivery:
        """One POST (begun `at`, default now) and its result: delivered when it had no
        error, else failed."""
        with self._lock:
            task = self._task(task_id)
            key = (config_id, seq)
            count = task.attempts.pop(key, 0) + 1
            task.attempts[key] = count
            while len(task.attempts) > self.per_task:
                task.attempts.popitem(last=False)
            delivery = Delivery(
                time=at or _now(),
                task_id=task_id,
                config_id=config_id,
                url=url,
                seq=seq,
                status_code=status_code,
                latency_ms=round(latency_ms, 1),
                error=error,
                attempt=count,
                payload=self._cut(payload.decode("utf-8", "replace")),
                outcome=DELIVERED if error is None else FAILED,
            )
            task.deliveries.append(delivery)
            self._kept(delivery, len(delivery.payload or ""))
            return dataclasses.replace(delivery)

    def mark(self, task_id: str, config_id: str, seq: int, outcome: str) -> None:
        """Event `seq` was parked on the retry queue or dead-lettered: its last failed attempt
        says so, or an entry without a POST does (queued behind a parked webhook). Marking
        again what is already marked changes nothing."""
        with self._lock:
            task = self._task(task_id)
            url = ""
            for delivery in reversed(task.deliveries):
                if delivery.config_id != config_id:
                    continue
                url = url or delivery.url
                if delivery.seq != seq:
                    continue
                if delivery.outcome == outcome:
                    return
                if delivery.outcome == FAILED:
                    delivery.outcome = outcome
                    return
                break
            task.deliveries.append(
                Delivery(
                    time=_now(),
                    task_id=task_id,
                    config_id=config_id,
                    url=url,
                    seq=seq,
                    status_code=None,
                    latency_ms=None,
                    error=None,
                    attempt=task.attempts.get((config_id, seq), 0),
                    payload=None,
                    outcome=outcome,
                )
            )

    def record_flow_state(
        self, task_id: str, turn: int, step: int | None, state: Any, saved_by: str
    ) -> None:
        text = self._cut(json.dumps(state, sort_keys=True, default=str))
        record = FlowStateRecord(_now(), task_id, turn, step, text, saved_by)
        with self._lock:
            self._task(task_id).flow_states.append(record)
            self._kept(record, len(text))


# -- the wrappers ------------------------------------------------------------------------------


def _log_int(name: str) -> int | None:
    value = current_log_keys().get(name)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _wrap_attempt(records: InspectorRecords, attempt: Callable[..., Any]) -> Callable[..., Any]:
    """`WebhookSender.attempt`: every POST of both paths, each retry included, goes through it
    once. The task and event come from the log keys both paths set around it."""

    def wrapped(self: Any, config: Any, body: bytes, *args: Any, **kwargs: Any) -> Any:
        at, started = _now(), time.perf_counter()
        result = attempt(self, config, body, *args, **kwargs)
        elapsed = (time.perf_counter() - started) * 1000
        task_id = str(current_log_keys().get("task_id") or config.task_id or "")
        records.record_attempt(
            task_id,
            config.id or "",
            config.url,
            _log_int("seq"),
            result.status,
            elapsed,
            result.error,
            body,
            at,
        )
        return result

    return wrapped


def _wrap_enqueue(records: InspectorRecords, enqueue: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(self: Any, task_id: str, config_id: str, seq: int) -> Any:
        answer = enqueue(self, task_id, config_id, seq)
        records.mark(task_id, config_id, seq, PARKED)
        return answer

    return wrapped


def _wrap_send(records: InspectorRecords, send: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(self: Any, messages: list[tuple[str, str, int]]) -> Any:
        answer = send(self, messages)
        for task_id, config_id, seq in messages:  # all sent: it raises otherwise
            records.mark(task_id, config_id, seq, PARKED)
        return answer

    return wrapped


def _wrap_dead_letter(records: InspectorRecords, dead_letter: Callable[..., Any]) -> Any:
    def wrapped(
        self: Any, task_id: str, config_id: str, seq: int, attempts: int, error: str
    ) -> Any:
        answer = dead_letter(self, task_id, config_id, seq, attempts, error)
        records.mark(task_id, config_id, seq, DEAD_LETTERED)
        return answer

    return wrapped


def _wrap_save_flow_state(records: InspectorRecords, save: Callable[..., Any]) -> Any:
    def wrapped(
        self: Any, task_id: str, turn: int, flow_state: dict[str, Any], step: int | None = None
    ) -> Any:
        answer = save(self, task_id, turn, flow_state, step)
        records.record_flow_state(task_id, turn, step, flow_state, "next-step")
        return answer

    return wrapped


def _wrap_begin_round(records: InspectorRecords, begin: Callable[..., Any]) -> Any:
    def wrapped(
        self: Any,
        task_id: str,
        turn: int,
        step: int,
        delegations: list[Any],
        flow_state: dict[str, Any],
    ) -> Any:
        begun = begin(self, task_id, turn, step, delegations, flow_state)
        if begun:  # False: begun before (a re-run), nothing written
            records.record_flow_state(task_id, turn, step, flow_state, "delegation")
        return begun

    return wrapped


def _wrap_apply_status(records: InspectorRecords, apply: Callable[..., Any]) -> Any:
    """A status change that carries the flow state is the one that ends a turn's last step;
    that step is the one the worker's log keys name."""

    def wrapped(self: Any, change: Any, *args: Any, **kwargs: Any) -> Any:
        answer = apply(self, change, *args, **kwargs)
        if change.flow_state is not None:
            records.record_flow_state(
                change.task_id, change.turn, _log_int("step"), change.flow_state, "final"
            )
        return answer

    return wrapped


def install(stack: Any, patches: Patches) -> InspectorRecords:
    """Record into a new `InspectorRecords`, set as `stack.records`, until `patches` are
    undone."""
    from a2a_serverless.push.sender import WebhookSender
    from a2a_serverless.store.dynamodb.delegations import DynamoDBDelegations
    from a2a_serverless.store.dynamodb.tasks import DynamoDBTaskLog

    records = InspectorRecords()
    wraps: list[tuple[Any, str, Callable[[InspectorRecords, Callable[..., Any]], Any]]] = [
        (WebhookSender, "attempt", _wrap_attempt),
        (WebhookSender, "enqueue", _wrap_enqueue),
        (WebhookSender, "_send", _wrap_send),
        (WebhookSender, "_dead_letter", _wrap_dead_letter),
        (DynamoDBTaskLog, "save_flow_state", _wrap_save_flow_state),
        (DynamoDBTaskLog, "apply_status", _wrap_apply_status),
        (DynamoDBDelegations, "begin_round", _wrap_begin_round),
    ]
    for target, name, wrap in wraps:
        patches.replace(target, name, wrap(records, getattr(target, name)))
    stack.records = records
    return records
