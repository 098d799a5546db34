"""`ParallelizationFactor` in the local stream mapping (local/events.py), against moto's real
stream with a scripted function: records split into lanes by a stable hash of the item's key
(partition and sort key: the only order AWS documents for DynamoDB streams with concurrent
batches), each lane batched, invoked concurrently with the others, retried and checkpointed
on its own. The template keeps 1 (tests/template/test_push_parallelization.py says why; the
last test here shows it)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from a2a_serverless.local import events
from a2a_serverless.local.events import EventSources, StreamMapping, lane_of
from a2a_serverless.local.stack import LocalStack
from tests.integration.test_event_sources import (
    Function,
    ddb,
    events_sks,
    new_queue,
    pump,
    receive_all,
    seq,
    sk_of,
    stream_mapping,
    template_filters,
    write,
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(event_sources=False) as stack:
        yield stack


@pytest.fixture(autouse=True)
def _no_retry_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "RETRY_PAUSE_SECONDS", 0.0)


def keys_of(record: dict[str, Any]) -> tuple[str, str]:
    k = record["dynamodb"]["Keys"]
    return k["pk"]["S"], k["sk"]["S"]


class Concurrent(Function):
    """A scripted function that also measures how many of its invocations overlap."""

    def __init__(self, seconds: float = 0.0, fail_pk: str | None = None) -> None:
        super().__init__()
        self.seconds = seconds
        self.fail_pk = fail_pk
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0

    def __call__(self, event: dict[str, Any]) -> Any:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.batches.append(event["Records"])
        try:
            time.sleep(self.seconds)
            if self.fail_pk and any(keys_of(r)[0] == self.fail_pk for r in event["Records"]):
                raise RuntimeError("poison")
            return None
        finally:
            with self.lock:
                self.running -= 1


def test_lane_of_is_stable_per_item_and_spreads_items() -> None:
    def record(pk: str, sk: str) -> dict[str, Any]:
        return {"dynamodb": {"Keys": {"sk": {"S": sk}, "pk": {"S": pk}}}}

    same = [lane_of(record("T#a", "E#1"), 10) for _ in range(5)]
    assert len(set(same)) == 1
    # Key order in the record does not matter (Lambda's JSON has no fixed key order).
    flipped = {"dynamodb": {"Keys": {"pk": {"S": "T#a"}, "sk": {"S": "E#1"}}}}
    assert lane_of(flipped, 10) == same[0]
    spread = Counter(lane_of(record(f"T#{n}", "E#1"), 4) for n in range(200))
    assert sorted(spread) == [0, 1, 2, 3] and min(spread.values()) > 20, spread
    assert lane_of(record("T#a", "E#1"), 1) == 0


def test_a_factor_of_one_is_one_mapping_as_before(stack: LocalStack) -> None:
    mapping = stream_mapping(stack, Function())
    assert mapping.parallelization_factor == 1 and mapping.lanes == []
    with pytest.raises(ValueError, match="not in 1-10"):
        stream_mapping(stack, Function(), parallelization_factor=11)


def test_lanes_run_their_batches_concurrently_each_record_once(stack: LocalStack) -> None:
    """Four lanes, three items in each: every record reaches the function exactly once, every
    batch holds records of one lane only, and the four lanes' invocations overlap (one poll
    of 0.5 s batches takes about 0.5 s, not four times that)."""
    function = Concurrent(seconds=0.5)
    mapping = stream_mapping(stack, function, parallelization_factor=4, batch_size=100)
    assert [lane.lane for lane in mapping.lanes] == [0, 1, 2, 3]
    pks = [write(stack, "E#0000000001", pk=pk) for pk in _pks_per_lane(4, 3)]
    started = time.monotonic()
    assert mapping.poll_once()
    took = time.monotonic() - started
    delivered = [keys_of(r) for batch in function.batches for r in batch]
    assert sorted(delivered) == sorted((pk, "E#0000000001") for pk in pks)
    for batch in function.batches:
        assert len({lane_of(r, 4) for r in batch}) == 1
    assert sorted(lane_of(batch[0], 4) for batch in function.batches) == [0, 1, 2, 3]
    assert function.most == 4
    assert took < 4 * 0.5 - 0.5, took  # one after another: at least 2 s
    assert pump(mapping) == 0  # nothing left, nothing delivered twice
    assert mapping.checkpoint is not None
    assert all(lane.position == mapping.checkpoint for lane in mapping.lanes)


def _pks_per_lane(lanes: int, each: int) -> list[str]:
    """Fresh partition keys, `each` of them in every lane of `lanes` (for an E#1 item)."""
    found: dict[int, list[str]] = {lane: [] for lane in range(lanes)}
    for _ in range(100 * lanes * each):  # a fair hash fills them long before
        if all(len(pks) == each for pks in found.values()):
            break
        pk = f"T#{uuid.uuid4()}"
        record = {"dynamodb": {"Keys": {"pk": {"S": pk}, "sk": {"S": "E#0000000001"}}}}
        lane = found[lane_of(record, lanes)]
        if len(lane) < each:
            lane.append(pk)
    assert all(len(pks) == each for pks in found.values()), "lane_of leaves lanes empty"
    return [pk for pks in found.values() for pk in pks]


def test_one_items_records_stay_in_order_in_one_lane(stack: LocalStack) -> None:
    """Modifications of one item (no filter: every INSERT and MODIFY) go to one lane, in
    stream order, across several batches of two."""
    function = Function()
    mapping = stream_mapping(stack, function, parallelization_factor=3, batch_size=2)
    pk = f"T#{uuid.uuid4()}"
    for version in range(7):
        ddb().put_item(
            TableName=stack.env["TABLE_NAME"],
            Item={"pk": {"S": pk}, "sk": {"S": "E#1"}, "v": {"N": str(version)}},
        )
    pump(mapping)
    versions = [
        int(r["dynamodb"]["NewImage"]["v"]["N"]) for batch in function.batches for r in batch
    ]
    assert versions == list(range(7))
    assert [len(b) for b in function.batches] == [2, 2, 2, 1]
    numbers = [int(seq(r)) for batch in function.batches for r in batch]
    assert numbers == sorted(numbers)


def test_a_failing_lane_retries_alone_while_the_others_move_on(stack: LocalStack) -> None:
    """A poison item's lane retries (MaximumRetryAttempts 2) and then sends its batch info to
    the on-failure queue; the other lanes deliver their records once, unaffected, and the
    shard's checkpoint is the furthest-behind lane."""
    poison = f"T#poison-{uuid.uuid4()}"
    function = Concurrent(fail_pk=poison)
    failures, _ = new_queue()
    mapping = stream_mapping(
        stack,
        function,
        parallelization_factor=2,
        maximum_retry_attempts=2,
        on_failure_queue_url=failures,
        batch_size=1,
    )
    write(stack, "E#0000000001", pk=poison)
    poison_lane = mapping.lanes[lane_of(function_record(stack, mapping, poison), 2)]
    healthy = [write(stack, "E#0000000001") for _ in range(6)]
    pump(mapping)
    delivered = Counter(keys_of(r)[0] for batch in function.batches for r in batch)
    assert delivered[poison] == 3  # the first attempt and two retries
    assert all(delivered[pk] == 1 for pk in healthy), delivered
    (info,) = [json.loads(m["Body"])["DDBStreamBatchInfo"] for m in receive_all(failures)]
    assert info["batchSize"] == 1
    assert poison_lane.retries == 0 and poison_lane.position is not None
    assert mapping.checkpoint == min(lane.position or 0 for lane in mapping.lanes)


def function_record(stack: LocalStack, mapping: StreamMapping, pk: str) -> dict[str, Any]:
    """The stream record of `pk`'s item as a lane sees it (to know its lane)."""
    for record in mapping.lanes[0]._read(None, 1000):
        if keys_of(record)[0] == pk:
            return record
    raise AssertionError(f"no record of {pk}")


def test_threaded_lanes_drain_like_one_mapping(stack: LocalStack) -> None:
    """Started as the stack starts its mappings: each lane polls in its own thread, `drain`
    waits for all of them, `stop` ends them."""
    function = Function()
    mapping = stream_mapping(stack, function, parallelization_factor=3)
    sources = EventSources([mapping])
    sources.start()
    try:
        pks = [write(stack, "E#0000000001") for _ in range(9)]
        sources.drain(timeout=20)
    finally:
        sources.stop()
    assert all(lane.thread is not None and not lane.thread.is_alive() for lane in mapping.lanes)
    delivered = sorted(keys_of(r)[0] for batch in function.batches for r in batch)
    assert delivered == sorted(pks)


def test_concurrent_batches_split_one_tasks_events(stack: LocalStack) -> None:
    """Why the template keeps one batch per shard: with the template's filter (task event
    items) and a factor of 10, twenty events of ONE task go to several lanes, i.e. to
    concurrent invocations, so nothing keeps them in order for the webhook sender."""
    function = Function()
    mapping = stream_mapping(stack, function, parallelization_factor=10, filters=template_filters())
    pk = write(stack, *events_sks(20))
    pump(mapping)
    lanes = {lane_of(r, 10) for batch in function.batches for r in batch}
    assert sorted(sk_of(r) for batch in function.batches for r in batch) == events_sks(20)
    assert all(keys_of(r)[0] == pk for batch in function.batches for r in batch)
    assert len(lanes) > 1, lanes
