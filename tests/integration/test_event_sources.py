"""The emulated Lambda event source mappings (local/events.py) against moto's real stream and
queues: a scripted function stands in for the handler, and the mapping is polled by hand
(`poll_once`) so that every batch boundary is deterministic. The last test looks at the
mappings the stack builds from template.yaml."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from a2a_serverless.local import events
from a2a_serverless.local.events import QueueMapping, StreamMapping, parse_filters
from a2a_serverless.local.stack import ACCOUNT, REGION, LocalStack
from a2a_serverless.local.template import load_template
from tests.integration.harness import ROOT, queue_depth, sqs, wait_for

Result = Any  # what the scripted function returns (or an exception it raises)


# -- fixtures and helpers -------------------------------------------------------------------


@pytest.fixture(scope="class")
def stack() -> Iterator[LocalStack]:
    """One stack per class of tests (each test reads the stream from LATEST, and uses its own
    queues). Class-scoped, not module-scoped: two stacks cannot run at once (they share
    moto's backends), and the wiring test starts its own. PushMaxAttempts=2 makes the
    template's retry queue dead-letter on the third receive."""
    with LocalStack(event_sources=False, parameters={"PushMaxAttempts": "2"}) as stack:
        yield stack


@pytest.fixture(autouse=True)
def _no_retry_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lambda backs off between retries of a failing stream batch; not worth waiting for."""
    monkeypatch.setattr(events, "RETRY_PAUSE_SECONDS", 0.0)


def ddb() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def stream_arn(stack: LocalStack) -> str:
    return ddb().describe_table(TableName=stack.env["TABLE_NAME"])["Table"]["LatestStreamArn"]


def template_filters() -> list[dict[str, Any]]:
    resources = load_template(ROOT / "template.yaml")["Resources"]
    properties = resources["WebhookSenderFunctionTaskEvents"]["Properties"]
    return parse_filters(properties["FilterCriteria"])


class Function:
    """The scripted function of a mapping: records every batch it is invoked with; `answer`
    decides what each invocation returns (an exception is raised)."""

    def __init__(self, answer: Callable[[list[dict[str, Any]]], Result] | None = None) -> None:
        self.answer = answer or (lambda _records: None)
        self.batches: list[list[dict[str, Any]]] = []

    def __call__(self, event: dict[str, Any]) -> Any:
        records = event["Records"]
        self.batches.append(records)
        result = self.answer(records)
        if isinstance(result, Exception):
            raise result
        return result

    def sks(self) -> list[list[str]]:
        """Each batch as its records' sort keys."""
        return [[r["dynamodb"]["Keys"]["sk"]["S"] for r in batch] for batch in self.batches]

    def bodies(self) -> list[list[str]]:
        return [[r["body"] for r in batch] for batch in self.batches]


def item_failures(*identifiers: str) -> dict[str, Any]:
    return {"batchItemFailures": [{"itemIdentifier": i} for i in identifiers]}


def seq(record: dict[str, Any]) -> str:
    return record["dynamodb"]["SequenceNumber"]


def sk_of(record: dict[str, Any]) -> str:
    return record["dynamodb"]["Keys"]["sk"]["S"]


def write(stack: LocalStack, *sks: str, pk: str | None = None) -> str:
    """Put one item per sort key (in order) in a fresh partition; returns its pk."""
    pk = pk or f"T#{uuid.uuid4()}"
    for sk in sks:
        ddb().put_item(
            TableName=stack.env["TABLE_NAME"],
            Item={"pk": {"S": pk}, "sk": {"S": sk}, "ev": {"S": json.dumps({"sk": sk})}},
        )
    return pk


def events_sks(count: int) -> list[str]:
    return [f"E#{n:010d}" for n in range(1, count + 1)]


def failing_to_queue(
    stack: LocalStack, answer: Callable[[list[dict[str, Any]]], Result], **settings: Any
) -> tuple[Function, StreamMapping, str]:
    """A scripted function's stream mapping whose failed batches go to a fresh queue (its
    URL is the third value)."""
    function = Function(answer)
    failure_queue, _ = new_queue()
    mapping = stream_mapping(stack, function, on_failure_queue_url=failure_queue, **settings)
    return function, mapping, failure_queue


def write_events_and_pump(stack: LocalStack, mapping: StreamMapping, count: int) -> list[str]:
    """Write `count` events to a fresh task partition and run the mapping until idle; their
    sort keys."""
    sks = events_sks(count)
    write(stack, *sks)
    pump(mapping)
    return sks


def stream_mapping(stack: LocalStack, function: Function, **settings: Any) -> StreamMapping:
    """A mapping of the table's stream that starts after everything written so far."""
    return StreamMapping(
        name="test.stream",
        invoke=function,
        streams=boto3.client("dynamodbstreams", region_name=REGION),
        sqs=sqs(),
        stream_arn=stream_arn(stack),
        starting_position=settings.pop("starting_position", "LATEST"),
        **settings,
    )


def pump(mapping: StreamMapping | QueueMapping, limit: int = 200) -> int:
    """Poll until the mapping finds no work; the number of polls that found some."""
    for polls in range(limit):
        if not mapping.poll_once():
            return polls
    raise AssertionError(f"{mapping.name} still busy after {limit} polls")


def new_queue(fifo: bool = False, **attributes: str) -> tuple[str, str]:
    """A fresh queue: (url, arn)."""
    name = f"test-{uuid.uuid4().hex[:12]}" + (".fifo" if fifo else "")
    if fifo:
        attributes = {"FifoQueue": "true", **attributes}
    url = sqs().create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs().get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return url, arn["QueueArn"]


def queue_mapping(url: str, arn: str, function: Function, batch_size: int = 10) -> QueueMapping:
    return QueueMapping(
        name="test.queue",
        invoke=function,
        sqs=sqs(),
        queue_url=url,
        queue_arn=arn,
        batch_size=batch_size,
        report_item_failures=True,
    )


def receive_all(url: str) -> list[dict[str, Any]]:
    """Every message of a queue, read and deleted (FIFO groups need the deletes)."""
    found: list[dict[str, Any]] = []
    while True:
        messages = (
            sqs()
            .receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
            .get("Messages", [])
        )
        if not messages:
            return found
        found.extend(messages)
        for message in messages:
            sqs().delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def send(url: str, *bodies: str, group: str | None = None) -> list[str]:
    ids = []
    for body in bodies:
        extra = (
            {"MessageGroupId": group, "MessageDeduplicationId": uuid.uuid4().hex} if group else {}
        )
        ids.append(sqs().send_message(QueueUrl=url, MessageBody=body, **extra)["MessageId"])
    return ids


def poll_until_redelivered(
    mapping: QueueMapping, function: Function, count: int, after: int = 1, timeout: float = 5.0
) -> list[str]:
    """Poll until `count` messages came back after the first `after` batches (they reappear
    as their visibility timeouts run out, not necessarily in one batch); their bodies."""

    def redelivered() -> list[str] | None:
        mapping.poll_once()
        bodies = [body for batch in function.bodies()[after:] for body in batch]
        return bodies if len(bodies) >= count else None

    return wait_for(redelivered, timeout=timeout, interval=0.05)


# -- DynamoDB stream ------------------------------------------------------------------------


@pytest.mark.usefixtures("stack")
class TestStreamMapping:
    """DynamoDB stream -> scripted function."""

    def test_batch_size_is_honoured(self, stack: LocalStack) -> None:
        function = Function()
        mapping = stream_mapping(stack, function, batch_size=3)
        sks = events_sks(8)
        write(stack, *sks)
        assert pump(mapping) == math.ceil(8 / 3)
        assert [len(b) for b in function.batches] == [3, 3, 2]
        assert [sk for batch in function.sks() for sk in batch] == sks  # in order, once each

    def test_starting_position(self, stack: LocalStack) -> None:
        before = write(stack, "E#0000000001")
        latest, horizon = Function(), Function()
        from_latest = stream_mapping(stack, latest)
        from_horizon = stream_mapping(stack, horizon, starting_position="TRIM_HORIZON")
        after = write(stack, "E#0000000001")
        pump(from_latest)
        pump(from_horizon)
        assert [r["dynamodb"]["Keys"]["pk"]["S"] for b in latest.batches for r in b] == [after]
        seen = [r["dynamodb"]["Keys"]["pk"]["S"] for b in horizon.batches for r in b]
        assert before in seen and seen[-1] == after
        shard = boto3.client("dynamodbstreams", region_name=REGION).describe_stream(
            StreamArn=stream_arn(stack)
        )["StreamDescription"]["Shards"][0]
        first = horizon.batches[0][0]
        assert seq(first) == shard["SequenceNumberRange"]["StartingSequenceNumber"]

    def test_filters_drop_records_before_batching(self, stack: LocalStack) -> None:
        function = Function()
        mapping = stream_mapping(stack, function, batch_size=2, filters=template_filters())
        pk = write(stack, "H", "E#0000000001", "M#0000000001", "P#config", "E#0000000002")
        write(stack, "M#0000000002", "E#0000000003", "H", pk=pk)  # a second H: a MODIFY
        ddb().delete_item(
            TableName=stack.env["TABLE_NAME"], Key={"pk": {"S": pk}, "sk": {"S": "E#0000000001"}}
        )
        ddb().update_item(  # a MODIFY of an event item
            TableName=stack.env["TABLE_NAME"],
            Key={"pk": {"S": pk}, "sk": {"S": "E#0000000002"}},
            UpdateExpression="SET x = :x",
            ExpressionAttributeValues={":x": {"S": "changed"}},
        )
        pump(mapping)
        # Filtered records take no place in a batch: two full batches of event inserts only.
        assert function.sks() == [["E#0000000001", "E#0000000002"], ["E#0000000003"]]
        assert {r["eventName"] for b in function.batches for r in b} == {"INSERT"}

    def test_a_poll_that_sees_only_filtered_records_invokes_nothing(
        self, stack: LocalStack
    ) -> None:
        function = Function()
        mapping = stream_mapping(stack, function, filters=template_filters())
        write(stack, "H", "M#0000000001", "P#config")
        assert mapping.poll_once()  # it read (and skipped) them...
        assert function.batches == [] and mapping.invocations == 0  # ...without an invoke
        assert not mapping.poll_once()  # and they are behind it
        write(stack, "E#0000000001")
        pump(mapping)
        assert function.sks() == [["E#0000000001"]]

    def test_records_are_lambda_shaped(self, stack: LocalStack) -> None:
        function = Function()
        mapping = stream_mapping(stack, function)
        pk = write(stack, "E#0000000001")
        table = stack.env["TABLE_NAME"]
        key = {"pk": {"S": pk}, "sk": {"S": "E#0000000001"}}
        ddb().update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET x = :x",
            ExpressionAttributeValues={":x": {"N": "5"}},
        )
        ddb().delete_item(TableName=table, Key=key)
        pump(mapping)
        (batch,) = function.batches
        json.dumps({"Records": batch})  # what Lambda sends is JSON
        assert [r["eventName"] for r in batch] == ["INSERT", "MODIFY", "REMOVE"]
        sequence_numbers = [int(seq(r)) for r in batch]
        assert sequence_numbers == sorted(sequence_numbers)
        for record in batch:
            assert record["eventSource"] == "aws:dynamodb"
            assert record["eventSourceARN"] == stream_arn(stack)
            assert record["awsRegion"] == REGION
            assert isinstance(record["eventID"], str) and record["eventID"]
            dynamodb = record["dynamodb"]
            assert dynamodb["Keys"] == key
            assert dynamodb["StreamViewType"] == "NEW_AND_OLD_IMAGES"
            assert isinstance(dynamodb["SequenceNumber"], str)
            created = dynamodb["ApproximateCreationDateTime"]
            assert isinstance(created, int | float) and abs(created - time.time()) < 120
        assert batch[0]["dynamodb"]["NewImage"]["ev"] == {"S": json.dumps({"sk": "E#0000000001"})}
        assert batch[1]["dynamodb"]["NewImage"]["x"] == {"N": "5"}
        assert "OldImage" not in batch[0]["dynamodb"]  # an INSERT had no item before
        assert batch[1]["dynamodb"]["OldImage"]["ev"] == batch[0]["dynamodb"]["NewImage"]["ev"]
        assert "NewImage" not in batch[2]["dynamodb"]  # a REMOVE leaves no item: only its old image
        assert batch[2]["dynamodb"]["OldImage"]["x"] == {"N": "5"}

    def test_partial_failure_resumes_at_the_lowest_failed_record(self, stack: LocalStack) -> None:
        def answer(records: list[dict[str, Any]]) -> Result:
            if len(function.batches) == 1:  # the first batch: fail the 4th and 3rd (any order)
                return item_failures(seq(records[3]), seq(records[2]))
            return None

        function = Function(answer)
        mapping = stream_mapping(
            stack, function, report_item_failures=True, maximum_retry_attempts=0
        )
        sks = write_events_and_pump(stack, mapping, 5)
        # Records before the lowest failure are not delivered again; it and all later ones are.
        assert function.sks() == [sks, sks[2:]]
        assert mapping.retries == 0  # moving past records is progress, not a retry

    def test_partial_failure_of_the_first_record_is_a_retry(self, stack: LocalStack) -> None:
        failures_left = [2]

        def answer(records: list[dict[str, Any]]) -> Result:
            if failures_left[0]:
                failures_left[0] -= 1
                return item_failures(seq(records[0]))
            return None

        function, mapping, failure_queue = failing_to_queue(
            stack, answer, report_item_failures=True, maximum_retry_attempts=2
        )
        sks = write_events_and_pump(stack, mapping, 3)
        assert function.sks() == [sks, sks, sks]  # two retries, then it went through
        assert receive_all(failure_queue) == []

    @pytest.mark.parametrize(
        "response",
        [
            pytest.param("event-id", id="eventID-not-sequence-number"),
            pytest.param(item_failures(""), id="empty-identifier"),
            pytest.param({"batchItemFailures": [{"itemIdentifier": None}]}, id="null-identifier"),
            pytest.param({"batchItemFailures": [{"id": "1"}]}, id="wrong-key"),
            pytest.param(item_failures("99999999999999999999999"), id="unknown-sequence-number"),
            pytest.param({"batchItemFailures": "all"}, id="not-a-list"),
        ],
    )
    def test_an_invalid_partial_batch_response_fails_the_whole_batch(
        self, stack: LocalStack, response: Any
    ) -> None:
        def answer(records: list[dict[str, Any]]) -> Result:
            if len(function.batches) > 1:
                return None
            if response == "event-id":  # a classic mistake: the record's eventID
                return item_failures(records[2]["eventID"])
            return response

        function = Function(answer)
        mapping = stream_mapping(
            stack, function, report_item_failures=True, maximum_retry_attempts=3
        )
        sks = write_events_and_pump(stack, mapping, 4)
        assert function.sks() == [sks, sks]  # every record again, not a partial retry

    def test_bisect_isolates_the_poison_record(self, stack: LocalStack) -> None:
        sks = events_sks(8)
        poison = sks[5]

        def answer(records: list[dict[str, Any]]) -> Result:
            if poison in [sk_of(r) for r in records]:
                return RuntimeError("poison")
            return None

        function, mapping, failure_queue = failing_to_queue(
            stack, answer, bisect=True, report_item_failures=True, maximum_retry_attempts=1
        )
        write(stack, *sks)
        pump(mapping)
        index = {sk: i for i, sk in enumerate(sks)}
        batches = [[index[sk] for sk in batch] for batch in function.sks()]
        # Each erroring batch is split in two and each half processed on its own (splits are no
        # retries); the isolated record is retried once (MaximumRetryAttempts=1), then skipped.
        assert batches == [
            [0, 1, 2, 3, 4, 5, 6, 7],
            [0, 1, 2, 3],
            [4, 5, 6, 7],
            [4, 5],
            [4],
            [5],
            [5],
            [6, 7],
        ]
        succeeded = [sk for batch in function.sks() if poison not in batch for sk in batch]
        assert sorted(succeeded) == [sk for sk in sks if sk != poison]
        assert len(succeeded) == len(set(succeeded))  # each good record went through once
        (failure,) = receive_all(failure_queue)
        info = json.loads(failure["Body"])["DDBStreamBatchInfo"]
        assert info["batchSize"] == 1
        poison_seq = next(seq(r) for b in function.batches for r in b if sk_of(r) == poison)
        assert info["startSequenceNumber"] == info["endSequenceNumber"] == poison_seq

    def test_exhausted_retries_send_batch_info_to_the_on_failure_queue(
        self, stack: LocalStack
    ) -> None:
        broken = {"on": True}
        function, mapping, failure_queue = failing_to_queue(
            stack,
            lambda _records: RuntimeError("down") if broken["on"] else None,
            maximum_retry_attempts=2,
        )
        sks = write_events_and_pump(stack, mapping, 3)
        assert function.sks() == [sks] * 3  # the first attempt and two retries
        (message,) = receive_all(failure_queue)
        record = json.loads(message["Body"])
        info = record["DDBStreamBatchInfo"]
        records = function.batches[0]
        assert info["startSequenceNumber"] == seq(records[0])
        assert info["endSequenceNumber"] == seq(records[-1])
        assert info["batchSize"] == 3
        assert info["streamArn"] == stream_arn(stack)
        assert info["shardId"] == mapping.shard_id
        for field in ("approximateArrivalOfFirstRecord", "approximateArrivalOfLastRecord"):
            assert info[field].endswith("Z"), info[field]  # ISO 8601 UTC, as Lambda writes it
        assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
        assert record["requestContext"]["approximateInvokeCount"] == 3
        assert record["responseContext"]["functionError"] == "Unhandled"
        # Processing moves on: the lost batch is not delivered again, later records are.
        broken["on"] = False
        later = write(stack, "E#0000000001")
        pump(mapping)
        assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in function.batches[-1]] == [later]
        assert len(function.batches) == 4
        assert receive_all(failure_queue) == []

    def test_idle_polls_do_not_pile_up_shard_iterators(self, stack: LocalStack) -> None:
        from moto.dynamodbstreams.models import dynamodbstreams_backends

        known = dynamodbstreams_backends[ACCOUNT][REGION].shard_iterators
        mapping = stream_mapping(stack, Function())
        before = len(known)
        for _ in range(50):
            mapping.poll_once()
        assert len(known) <= before + 2

    def test_records_read_from_moto_are_those_the_streams_api_gives(
        self, stack: LocalStack
    ) -> None:
        """The mapping takes records from moto's shard, not through GetRecords (whose JSON round
        trip was most of its CPU): same records, same shape (binary values in base64), TTL's
        identity included, as a function is given them."""
        mapping = stream_mapping(stack, Function())
        start = events._stream_end(mapping.stream_arn)
        key = {"pk": {"S": write(stack, "E#0000000001")}, "sk": {"S": "E#0000000001"}}
        table = stack.env["TABLE_NAME"]
        ddb().update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET x = :x, l = :l, b = :b, bs = :bs",
            ExpressionAttributeValues={
                ":x": {"N": "5"},
                ":l": {"L": [{"BOOL": True}, {"B": b"\x01"}]},
                ":b": {"B": b"\x00\xff"},
                ":bs": {"BS": [b"\x02"]},
            },
        )
        ddb().delete_item(TableName=table, Key=key)
        direct = events._fresh(mapping._read(start, 10))
        through_api = mapping._read_api(start, 10)
        assert [r["eventName"] for r in direct] == ["INSERT", "MODIFY", "REMOVE"]
        assert through_api[1]["dynamodb"]["NewImage"]["b"] == {"B": "AP8="}
        for record in (*direct, *through_api):  # the API's dates are whole or fractional seconds
            record["dynamodb"]["ApproximateCreationDateTime"] = round(
                record["dynamodb"]["ApproximateCreationDateTime"]
            )
        assert direct == through_api
        (again,) = mapping._read(start + 1, 1)  # from a sequence number on
        assert again["eventID"] == through_api[1]["eventID"]
        # Filters read binary values as the JSON carries them.
        for value, matches in (("AP8=", True), ("AAE=", False)):
            pattern = {"dynamodb": {"NewImage": {"b": {"B": [value]}}}}
            assert events.passes([pattern], again) is matches
        assert events.passes([{"dynamodb": {"NewImage": {"bs": {"BS": ["Ag=="]}}}}], again)

    def test_a_function_is_given_records_of_its_own(self, stack: LocalStack) -> None:
        """A function that changes the records it was given changes nothing the mapping reads
        next (a retried batch is the records as written)."""

        given: list[str] = []

        def vandal(records: list[dict[str, Any]]) -> Exception:
            given.append(json.dumps(records, sort_keys=True))
            for record in records:
                record["dynamodb"]["Keys"]["sk"]["S"] = "changed"
                record["dynamodb"]["NewImage"].clear()
            return RuntimeError("try again")

        mapping = stream_mapping(stack, Function(vandal))
        write(stack, "E#0000000001")
        mapping.poll_once()
        mapping.poll_once()  # the same batch again
        first, again = (json.loads(records) for records in given)
        assert first == again
        assert first[0]["dynamodb"]["Keys"]["sk"]["S"] == "E#0000000001"
        assert first[0]["dynamodb"]["NewImage"]

    def test_each_record_is_read_once_however_many_batches_it_takes(
        self, stack: LocalStack, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Batches are cut from what was read ahead (a read of up to STREAM_READ_LIMIT
        records), not read again per poll: reading a backlog costs one read per record."""
        function = Function()
        mapping = stream_mapping(stack, function, batch_size=3, filters=template_filters())
        reads: list[int] = []
        read = mapping._read

        def counted(start: int | None, limit: int) -> list[dict[str, Any]]:
            found = read(start, limit)
            reads.append(len(found))
            return found

        monkeypatch.setattr(mapping, "_read", counted)
        monkeypatch.setattr(events, "STREAM_READ_LIMIT", 7)
        pk = write(stack, *events_sks(10))
        write(stack, "H", "M#1", pk=pk)  # filtered out, read once all the same
        write(stack, *events_sks(10)[:4], pk=f"{pk}-2")
        pump(mapping)
        assert [len(b) for b in function.batches] == [3, 3, 3, 3, 2]
        assert sum(reads) == 16, reads  # 10 + 2 + 4 records, each once


# -- SQS queue ------------------------------------------------------------------------------


@pytest.mark.usefixtures("stack")
class TestQueueMapping:
    """SQS queue -> scripted function."""

    def test_sqs_records_are_lambda_shaped_and_batched(self) -> None:
        url, arn = new_queue()
        function = Function()
        mapping = queue_mapping(url, arn, function, batch_size=4)
        sqs().send_message(
            QueueUrl=url,
            MessageBody="with attributes",
            MessageAttributes={"kind": {"DataType": "String", "StringValue": "retry"}},
        )
        send(url, *(f"m{n}" for n in range(9)))
        pump(mapping)
        assert all(len(batch) <= 4 for batch in function.batches)
        assert len(function.batches) == math.ceil(10 / 4)
        records = [r for batch in function.batches for r in batch]
        assert sorted(r["body"] for r in records) == sorted(
            ["with attributes"] + [f"m{n}" for n in range(9)]
        )
        for record in records:
            assert record["eventSource"] == "aws:sqs"
            assert record["eventSourceARN"] == arn
            assert record["awsRegion"] == REGION
            assert record["messageId"] and record["receiptHandle"] and record["md5OfBody"]
            assert record["attributes"]["ApproximateReceiveCount"] == "1"
            assert "SentTimestamp" in record["attributes"]
        (tagged,) = [r for r in records if r["body"] == "with attributes"]
        assert tagged["messageAttributes"] == {
            "kind": {
                "stringValue": "retry",
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "String",
            }
        }
        assert queue_depth(url) == 0  # all succeeded: all deleted

    def test_an_empty_queue_is_not_asked(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Lambda long-polls: an empty queue costs nothing. Locally a poll of a queue moto
        holds nothing for skips ReceiveMessage; one with a message (even in flight) asks."""
        url, arn = new_queue()
        mapping = queue_mapping(url, arn, Function())
        receives: list[str] = []
        receive = mapping.sqs.receive_message
        monkeypatch.setattr(
            mapping.sqs, "receive_message", lambda **kw: receives.append(url) or receive(**kw)
        )
        assert events._queue_is_empty(url)
        assert not mapping.poll_once() and receives == []
        send(url, "one")
        assert not events._queue_is_empty(url)
        assert mapping.poll_once() and receives == [url]
        assert events._queue_is_empty(url)  # the function took it: deleted

    def test_sqs_item_failures_are_kept_and_come_back(self) -> None:
        url, arn = new_queue(VisibilityTimeout="1")
        ids = send(url, "a", "b", "c", "d")
        function = Function(
            lambda records: item_failures(ids[1], ids[3]) if len(function.batches) == 1 else None
        )
        mapping = queue_mapping(url, arn, function)
        assert mapping.poll_once()
        assert queue_depth(url) == 2  # a and c deleted
        assert not mapping.poll_once()  # b and d are invisible for now
        assert sorted(poll_until_redelivered(mapping, function, 2)) == ["b", "d"]
        again = [r for batch in function.batches[1:] for r in batch]
        assert {r["attributes"]["ApproximateReceiveCount"] for r in again} == {"2"}
        assert queue_depth(url) == 0

    def test_sqs_a_raising_function_deletes_nothing(self) -> None:
        url, arn = new_queue(VisibilityTimeout="1")
        send(url, "a", "b", "c")
        function = Function(lambda _r: RuntimeError("boom") if len(function.batches) == 1 else None)
        mapping = queue_mapping(url, arn, function)
        assert mapping.poll_once()
        assert queue_depth(url) == 3
        assert sorted(poll_until_redelivered(mapping, function, 3)) == ["a", "b", "c"]
        assert queue_depth(url) == 0

    def test_sqs_unknown_failure_identifier_fails_the_whole_batch(self) -> None:
        url, arn = new_queue(VisibilityTimeout="1")
        send(url, "a", "b")
        function = Function(
            lambda _r: item_failures("nope") if len(function.batches) == 1 else None
        )
        mapping = queue_mapping(url, arn, function)
        assert mapping.poll_once()
        assert queue_depth(url) == 2
        assert sorted(poll_until_redelivered(mapping, function, 2)) == ["a", "b"]

    def test_fifo_group_order_is_kept_under_failure(self) -> None:
        url, arn = new_queue(fifo=True, VisibilityTimeout="1")
        send(url, "a1", "a2", "a3", group="A")
        send(url, "b1", "b2", group="B")

        def answer(records: list[dict[str, Any]]) -> Result:
            if len(function.batches) > 1:
                return None
            # As a FIFO consumer must: a2 fails, so a3 (behind it in its group) fails too.
            failing = [r["messageId"] for r in records if r["body"] in ("a2", "a3")]
            return item_failures(*failing)

        function = Function(answer)
        mapping = queue_mapping(url, arn, function)
        assert mapping.poll_once()
        assert sorted(function.bodies()[0]) == ["a1", "a2", "a3", "b1", "b2"]
        send(url, "a4", group="A")  # queued behind the failed ones
        send(url, "b3", group="B")
        assert mapping.poll_once()
        assert function.bodies()[1] == ["b3"]  # group A is held while a2 is in flight
        assert poll_until_redelivered(mapping, function, 3, after=2) == ["a2", "a3", "a4"]
        assert queue_depth(url) == 0

    def test_redrive_to_the_dead_letter_queue_after_max_receives(self, stack: LocalStack) -> None:
        """A FIFO queue whose redrive policy moves a message after 2 receives."""
        dead_letters, dead_arn = new_queue(fifo=True)
        policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 2})
        url, arn = new_queue(fifo=True, RedrivePolicy=policy)
        (message_id,) = send(url, '{"seq": 1}', group="task#config")

        def answer(records: list[dict[str, Any]]) -> Result:
            for record in records:  # back off by nothing (as the sender does with base 0)
                sqs().change_message_visibility(
                    QueueUrl=url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0
                )
            return item_failures(*(r["messageId"] for r in records))

        function = Function(answer)
        mapping = queue_mapping(url, arn, function)
        pump(mapping)
        assert len(function.batches) == 2  # maxReceiveCount receives, then the queue moved it
        (dead,) = receive_all(dead_letters)
        assert dead["MessageId"] == message_id and dead["Body"] == '{"seq": 1}'
        assert queue_depth(url) == 0


# -- the stack's mappings -------------------------------------------------------------------


def test_stack_builds_the_template_mappings(stack_with_event_sources: LocalStack) -> None:
    stack = stack_with_event_sources
    assert stack.event_sources is not None
    stream = stack.event_sources.by_name("WebhookSenderFunction.TaskEvents")
    retries = stack.event_sources.by_name("WebhookSenderFunction.Retries")
    assert isinstance(stream, StreamMapping) and isinstance(retries, QueueMapping)
    assert stream.stream_arn == stream_arn(stack)
    assert stream.batch_size == 100
    assert stream.filters == template_filters()
    assert stream.bisect is True
    assert stream.report_item_failures is True
    assert stream.maximum_retry_attempts == 10
    assert stream.starting_position == "TRIM_HORIZON"
    assert stream.on_failure_queue_url == stack.queues["PushStreamFailureQueue"]
    assert retries.queue_url == stack.queues["PushRetryQueue"]
    assert retries.queue_arn.endswith(":a2a-local-PushRetryQueue.fifo")
    assert retries.batch_size == 10
    assert retries.report_item_failures is True
    assert all(m.thread is not None and m.thread.is_alive() for m in stack.event_sources.mappings)
    # The running stream poller hands inserted event items to the real sender (a task with
    # no webhook: nothing to do) and skips the rest.
    write(stack, "H", "E#0000000001")
    wait_for(lambda: stream.invocations == 1, timeout=15)
    stack.event_sources.drain()
    assert stream.invocations == 1 and stream.retries == 0
