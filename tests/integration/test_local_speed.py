"""moto_speedups' shortcuts for the local stack's throughput give the answers
moto gives without them: the direct DynamoDB path (no signing, retries, URL routing), the kept
update-expression parse trees, the kept validator maps and walks, and the kept response
member names. The same calls run on a fresh moto with and without the patches; parsed
responses, errors and the table's items must match, and each patch must be the path the calls
took (counted, not timed)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from a2a_serverless.core.context import RequestContext
from a2a_serverless.local import moto_fidelity, moto_speedups
from a2a_serverless.local.patching import Patches
from tests.helpers import create_indexed_table
from tests.integration.harness import wait_idle
from tests.ports import listen_port
from tests.scripts import load_script

TABLE = "speed"
KEY = {"pk": {"S": "T#1"}, "sk": {"S": "H"}}
# Updates moto's validators refuse, each in its own walk of the tree: two SET clauses,
# overlapping paths, a key attribute, an operand of the wrong type.
VALIDATOR_REFUSALS = [
    (
        "SET #s = :s SET #n = :one",
        {"#s": "state", "#n": "n"},
        {":s": {"S": "v"}, ":one": {"N": "1"}},
    ),
    ("SET #s = :s, #s = :one", {"#s": "state"}, {":s": {"S": "v"}, ":one": {"N": "1"}}),
    ("SET #k = :s", {"#k": "sk"}, {":s": {"S": "v"}}),
    ("SET #n = #n + :s", {"#n": "n"}, {":s": {"S": "v"}}),
]


def _patched(patches: Patches) -> None:
    moto_fidelity.serialize_calls(patches)
    moto_speedups.direct_dynamodb_calls(patches)
    moto_speedups.dynamodb_bodies_read_once(patches)
    moto_speedups.parsed_conditions_kept(patches)
    moto_speedups.parsed_update_expressions_kept(patches)
    moto_speedups.processing_maps_kept(patches)
    moto_speedups.planned_updates(patches)
    moto_speedups.handler_methods_kept(patches)
    moto_speedups.cheap_transactions(patches)


@contextmanager
def _moto(patch: Callable[[Patches], None] | None) -> Iterator[Any]:
    patches = Patches()
    with mock_aws():
        if patch is not None:
            patch(patches)
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            create_indexed_table(
                client,
                TABLE,
                "byG",
                "gpk",
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            )
            yield client
        finally:
            patches.undo()


def _outcome(call: Callable[[], dict[str, Any]]) -> Any:
    """A call's parsed response (without the request id and dates), or its error as parsed."""
    try:
        response = call()
    except ClientError as error:
        parsed = dict(error.response)
        parsed.pop("ResponseMetadata", None)
        return ("error", type(error).__name__, parsed)
    metadata = response.pop("ResponseMetadata", {})
    return ("ok", metadata.get("HTTPStatusCode"), response)


def _scenario(client: Any) -> list[Any]:
    """Writes and reads as the store makes them, with binary values, conditions that fail,
    an expression moto refuses, a cancelled transaction and a paged query."""
    update = {
        "TableName": TABLE,
        "Key": KEY,
        "UpdateExpression": (
            "SET #s = :s, #h = list_append(if_not_exists(#h, :empty), :h), #n = #n + :one "
            "REMOVE #gone ADD #tags :tag"
        ),
        "ExpressionAttributeNames": {
            "#s": "state",
            "#h": "history",
            "#n": "n",
            "#gone": "gone",
            "#tags": "tags",
        },
        "ExpressionAttributeValues": {
            ":s": {"S": "working"},
            ":empty": {"L": []},
            ":h": {"L": [{"M": {"b": {"B": b"\x00\xff"}}}]},
            ":one": {"N": "1"},
            ":tag": {"SS": ["x"]},
        },
        "ReturnValues": "ALL_NEW",
    }
    calls: list[Callable[[], dict[str, Any]]] = [
        lambda: client.put_item(
            TableName=TABLE,
            Item={
                **KEY,
                "n": {"N": "1"},
                "gone": {"S": "soon"},
                "blob": {"B": b"\x01\x02"},
                "blobs": {"BS": [b"a", b"b"]},
            },
        ),
        lambda: client.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True),
        lambda: client.update_item(**update),
        lambda: client.update_item(**update),  # the same expression again (a kept tree)
        lambda: client.update_item(  # a new item, made by the update
            TableName=TABLE,
            Key={"pk": {"S": "T#2"}, "sk": {"S": "H"}},
            UpdateExpression="SET #s = :s",
            ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues={":s": {"S": "submitted"}},
            ReturnValues="ALL_NEW",
        ),
        lambda: client.update_item(
            **{
                **update,
                "ConditionExpression": "#s = :other",
                "ExpressionAttributeValues": {
                    **update["ExpressionAttributeValues"],
                    ":other": {"S": "done"},
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        ),
        lambda: client.update_item(  # moto refuses the expression
            TableName=TABLE, Key=KEY, UpdateExpression="SET = :s", ExpressionAttributeValues={}
        ),
        lambda: client.update_item(  # a path into an attribute that is not there
            TableName=TABLE,
            Key=KEY,
            UpdateExpression="SET #m.#x = :s",
            ExpressionAttributeNames={"#m": "missing", "#x": "x"},
            ExpressionAttributeValues={":s": {"S": "v"}},
        ),
        *(
            partial(
                client.update_item,
                TableName=TABLE,
                Key=KEY,
                UpdateExpression=expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
            for expression, names, values in VALIDATOR_REFUSALS
        ),
        lambda: client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "T#3"}, "sk": {"S": "H"}}}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": KEY,
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        ),
        lambda: client.transact_write_items(TransactItems=_conditional_writes()),
        lambda: client.transact_write_items(TransactItems=_conditional_writes()),  # refused
        lambda: client.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": {"pk": {"S": "T#1"}, "sk": {"S": f"E#{i}"}, "i": {"N": str(i)}},
                    }
                }
                for i in range(5)
            ]
        ),
        lambda: client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
            ExpressionAttributeValues={":pk": {"S": "T#1"}, ":e": {"S": "E#"}},
            Limit=2,
            ConsistentRead=True,
        ),
        lambda: client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "T#1"}},
            ExclusiveStartKey={"pk": {"S": "T#1"}, "sk": {"S": "E#1"}},
            ScanIndexForward=False,
        ),
        lambda: client.get_item(TableName="no-such-table", Key=KEY),
        lambda: client.delete_item(TableName=TABLE, Key=KEY, ReturnValues="ALL_OLD"),
        lambda: client.scan(TableName=TABLE, ConsistentRead=True),
    ]
    return [_outcome(call) for call in calls]


def _conditional_writes() -> list[dict[str, Any]]:
    """A transaction whose writes are all conditional: it passes once, then is cancelled."""
    return [
        {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": {"S": "T#4"}, "sk": {"S": "H"}},
                "UpdateExpression": "SET #v = :v",
                "ConditionExpression": "attribute_not_exists(#v) OR #v < :v",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": {":v": {"N": "1"}},
            }
        },
        {
            "Put": {
                "TableName": TABLE,
                "Item": {"pk": {"S": "T#4"}, "sk": {"S": "E#1"}, "b": {"B": b"\x00"}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
    ]


def test_the_patched_path_answers_as_moto_does() -> None:
    with _moto(None) as client:
        expected = _scenario(client)
    with _moto(_patched) as client:
        got = _scenario(client)
    assert [o[0] for o in expected].count("error") == 10  # the scenario's refusals happened
    assert got == expected


def _planned_scenario(client: Any) -> list[Any]:
    """Updates of the shape planned_updates applies itself (as the store writes them: SET,
    if_not_exists, ADD of a number, REMOVE, in transactions too) and, next to each, the
    updates of that shape moto refuses or answers its own way, which it leaves to moto."""
    key = {"pk": {"S": "T#9"}, "sk": {"S": "H"}}
    names = {"#s": "state", "#n": "n", "#at": "at", "#since": "since", "#gone": "gone"}

    def update(expression: str, values: dict[str, Any] | None = None, **extra: Any) -> Any:
        written = set(re.findall(r"#\w+", expression + extra.get("ConditionExpression", "")))
        used = {k: v for k, v in names.items() if k in written}
        arguments: dict[str, Any] = {
            "TableName": TABLE,
            "Key": key,
            "UpdateExpression": expression,
            "ReturnValues": "ALL_NEW",
            **({"ExpressionAttributeNames": used} if used else {}),
            **({"ExpressionAttributeValues": values} if values else {}),
            **extra,
        }
        return partial(client.update_item, **arguments)

    one, text = {"N": "1"}, {"S": "x"}
    big = {"S": "b" * 300_000}
    calls: list[Callable[[], dict[str, Any]]] = [
        # a new item, then the same plan on it: ADD counts on, if_not_exists keeps the first
        update("SET #s = :s, #at = :t ADD #n :one", {":s": text, ":t": {"S": "1"}, ":one": one}),
        update("SET #s = :s, #at = :t ADD #n :one", {":s": text, ":t": {"S": "2"}, ":one": one}),
        update("SET #since = if_not_exists(#since, :t)", {":t": {"S": "first"}}),
        update("SET #since = if_not_exists(#since, :t)", {":t": {"S": "second"}}),
        update("SET mirror = if_not_exists(#s, :t), parked = :t", {":t": text}),
        update("REMOVE parked, #gone"),  # one there, one not
        update("ADD #n :minus", {":minus": {"N": "-2.5"}}),
        update("SET gpk = :g, gsk = :g", {":g": text}),  # index keys of the right type
        update("SET #g = :num", {":num": one}, ExpressionAttributeNames={"#g": "gsk"}),
        # refused (or answered) by moto's validators: left to them
        update("SET state = :s", {":s": text}),  # a reserved word
        update("SET #s = :s, #at = :t", {":s": text}),  # a value not given
        update(
            "SET #s = :s, #t = :t",
            {":s": text, ":t": text},
            ExpressionAttributeNames={"#s": "state", "#t": "state"},
        ),  # the same attribute twice
        update("SET #k = :s", {":s": text}, ExpressionAttributeNames={"#k": "pk"}),
        update("ADD #s :one", {":one": one}),  # a number added to a string
        update("ADD #n :x", {":x": text}),  # a string added to a number
        update("ADD #tags :t", {":t": {"SS": ["a"]}}, ExpressionAttributeNames={"#tags": "t"}),
        update("SET gpk = :num", {":num": one}),  # an index key of another type
        update("SET gsk = :empty", {":empty": {"S": ""}}),  # an empty index key
        update("SET #b1 = :big", {":big": big}, ExpressionAttributeNames={"#b1": "b1"}),
        update("SET #b2 = :big", {":big": big}, ExpressionAttributeNames={"#b2": "b2"}),  # too big
        update(
            "SET #b1 = :half",
            {":half": {"S": "h" * 150_000}},
            ExpressionAttributeNames={"#b1": "b1"},
        ),  # moto counts the old value and the new one
        update("SET #s = :s", {":s": text, ":o": one}, ConditionExpression="#n = :o"),  # fails
        lambda: client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "O#1"}, "sk": {"S": f"C#{shard}"}},
                        "UpdateExpression": "ADD #c0 :v0, #c1 :v1 SET #ttl = :ttl",
                        "ExpressionAttributeNames": {"#c0": "all", "#c1": "w", "#ttl": "ttl"},
                        "ExpressionAttributeValues": {
                            ":v0": one,
                            ":v1": {"N": "-1"},
                            ":ttl": {"N": "99"},
                        },
                    }
                }
                for shard in (1, 2)
            ]
        ),
        lambda: client.scan(TableName=TABLE, ConsistentRead=True),
        lambda: client.query(
            TableName=TABLE,
            IndexName="byG",
            KeyConditionExpression="gpk = :g",
            ExpressionAttributeValues={":g": text},
        ),
    ]
    return [_outcome(call) for call in calls]


def test_planned_updates_answer_as_moto_does(monkeypatch: Any) -> None:
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    validated: list[str] = []
    original = UpdateExpressionValidator.__init__

    def counted(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        validated.append(type(expression).__name__)
        original(self, expression, *args, **kwargs)

    monkeypatch.setattr(UpdateExpressionValidator, "__init__", counted)
    with _moto(None) as client:
        expected = _planned_scenario(client)
    assert len(validated) > 20  # every update of the scenario, a new item twice
    validated.clear()
    with _moto(_patched) as client:
        got = _planned_scenario(client)
    assert [o[0] for o in expected].count("error") == 11
    assert got == expected
    # moto's validators ran only for the 12 updates left to them (the 11 refused, the set added
    # to, the index key set through a placeholder), never for the planned ones
    assert len(validated) == 12


def test_update_plans_cover_the_store_s_expressions_only() -> None:
    plan = moto_speedups.update_plan
    assert plan("ADD #c0 :v0, #c1 :v1 SET #ttl = :ttl, #since = if_not_exists(#since, :s)") == (
        ("add", "#c0", ":v0"),
        ("add", "#c1", ":v1"),
        ("set", "#ttl", ("value", ":ttl")),
        ("set", "#since", ("if_not_exists", "#since", ":s")),
    )
    assert plan("REMOVE parked, queuedThrough") == (
        ("remove", "parked", None),
        ("remove", "queuedThrough", None),
    )
    for other in (
        "SET #a = :a SET #b = :b",
        "SET #n = #n + :one",
        "SET #m.#x = :s",
        "SET #l[0] = :s",
        "SET #h = list_append(#h, :x)",
        "DELETE #t :x",
        "SET #a = :a,",
        "SET #a = if_not_exists(#a)",
        "ADD #a",
        "",
    ):
        assert plan(other) is None, other


def test_dynamodb_calls_skip_the_http_path() -> None:
    """Under the patch no DynamoDB request is signed or sent through botocore's send event
    (where moto's stubber sits); another service's still is."""
    sent: list[str] = []
    with _moto(_patched) as client:
        events = boto3._get_default_session().events  # clients made from now on hear it
        events.register("before-send", lambda request, **_: sent.append(request.url) and None)
        fresh = boto3.client("dynamodb", region_name="us-east-1")
        fresh.get_item(TableName=TABLE, Key=KEY)
        fresh.put_item(TableName=TABLE, Item=KEY)
        boto3.client("sqs", region_name="us-east-1").list_queues()
        assert client is not None
    assert len(sent) == 1 and "sqs" in sent[0]


def test_an_update_expression_is_parsed_once() -> None:
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    with _moto(_patched):
        first = UpdateExpressionParser.make("SET #a = :v")
        assert UpdateExpressionParser.make("SET #a = :v") is first
        for _ in range(2):  # a refused expression raises every time, is never kept
            with pytest.raises(Exception, match="Invalid UpdateExpression"):
                UpdateExpressionParser.make("SET = :v")
    assert UpdateExpressionParser.make("SET #a = :v") is not first  # undone with the stack


def test_a_validator_builds_its_processing_map_once(monkeypatch: Any) -> None:
    from moto.dynamodb.parsing.validators import ExpressionAttributeValueProcessor

    built: list[int] = []
    original = ExpressionAttributeValueProcessor._processing_map

    def counted(self: Any) -> Any:
        built.append(id(self))
        return original(self)

    monkeypatch.setattr(ExpressionAttributeValueProcessor, "_processing_map", counted)
    with _moto(_patched) as client:
        client.update_item(
            TableName=TABLE,
            Key=KEY,
            # list_append: a shape planned_updates leaves to moto's validators
            UpdateExpression="SET #a = :a, #b = :b, #c = list_append(if_not_exists(#c, :e), :c)",
            ExpressionAttributeNames={"#a": "a", "#b": "b", "#c": "c"},
            ExpressionAttributeValues={
                ":a": {"S": "1"},
                ":b": {"S": "2"},
                ":c": {"L": [{"S": "3"}]},
                ":e": {"L": []},
            },
        )
    # Two validations (the item is new), each one traverser: one map each, not one per node.
    assert len(built) == len(set(built)) == 2


def test_validators_walk_without_moto_s_recursion(monkeypatch: Any) -> None:
    """Under the patch a validator's walk is the kept one: moto's recursive walk (counted) is
    not called for an update; without the patch it is, at every node."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser

    walked: list[int] = []
    original = DepthFirstTraverser.traverse_node_recursively

    def counted(self: Any, node: Any, child_id: int = -1) -> Any:
        walked.append(1)
        return original(self, node, child_id)

    monkeypatch.setattr(DepthFirstTraverser, "traverse_node_recursively", counted)
    update = {
        "TableName": TABLE,
        "Key": KEY,
        "UpdateExpression": "SET #a = :a, #b = list_append(if_not_exists(#b, :e), :b)",
        "ExpressionAttributeNames": {"#a": "a", "#b": "b"},
        "ExpressionAttributeValues": {":a": {"S": "1"}, ":b": {"L": [{"S": "x"}]}, ":e": {"L": []}},
    }
    with _moto(None) as client:
        client.update_item(**update)
    assert len(walked) > 10
    walked.clear()
    with _moto(_patched) as client:
        client.update_item(**update)
        assert client.get_item(TableName=TABLE, Key=KEY)["Item"]["b"] == {"L": [{"S": "x"}]}
    assert walked == []


def test_a_condition_is_parsed_once(monkeypatch: Any) -> None:
    """Under the patch each condition (expression, names, values) is parsed once for the life
    of the stack: moto's own path parses a transaction's conditions several times each, and
    again in the next transaction; a condition that does not parse raises every time."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    parsed: list[str] = []
    original = ConditionExpressionParser.parse

    def counted(self: Any) -> Any:
        if self.condition_expression:  # moto parses a missing condition too (to nothing)
            parsed.append(self.condition_expression)
        return original(self)

    monkeypatch.setattr(ConditionExpressionParser, "parse", counted)
    with _moto(None) as client:
        client.transact_write_items(TransactItems=_conditional_writes())
    assert len(parsed) > 2  # moto's own path: each condition more than once
    parsed.clear()
    conditions = [next(iter(w.values()))["ConditionExpression"] for w in _conditional_writes()]
    with _moto(_patched) as client:
        client.transact_write_items(TransactItems=_conditional_writes())
        with pytest.raises(ClientError, match="TransactionCanceled"):
            client.transact_write_items(TransactItems=_conditional_writes())
        assert sorted(parsed) == sorted(conditions)
        update = dict(_conditional_writes()[0]["Update"])
        client.update_item(**{**update, "ExpressionAttributeValues": {":v": {"N": "2"}}})
        assert sorted(parsed) == sorted([*conditions, conditions[0]])  # new values: parsed
        # Values the condition does not name (what an update sets: a status, a flow's state)
        # are no part of its parse: new ones, large ones, parse nothing again.
        for i in range(2):
            client.update_item(
                **{
                    **update,
                    "ConditionExpression": "#v < :v",
                    "UpdateExpression": "SET #big = :big",
                    "ExpressionAttributeNames": {"#v": "version", "#big": "big"},
                    "ExpressionAttributeValues": {":v": {"N": "9"}, ":big": {"S": f"{i}" * 5000}},
                }
            )
        assert parsed.count("#v < :v") == 1
        refused = "attribute_exists(state)"  # a reserved word
        for _ in range(2):
            with pytest.raises(ClientError, match="reserved keyword"):
                client.put_item(TableName=TABLE, Item=KEY, ConditionExpression=refused)
        large = "attribute_not_exists(pk) OR #b <> :big"  # with values too large to keep
        for i in range(2):
            client.put_item(
                TableName=TABLE,
                Item={"pk": {"S": f"L#{i}"}, "sk": {"S": "H"}},
                ConditionExpression=large,
                ExpressionAttributeNames={"#b": "b"},
                ExpressionAttributeValues={":big": {"S": "x" * 5000}},
            )
    assert parsed.count(refused) == 2
    assert parsed.count(large) == 4  # request validation and the put's check, each time


@contextmanager
def _bench_local() -> Iterator[Any]:
    """scripts/bench_local.py, imported as a module (a script is no package of the tests)."""
    import sys

    try:
        yield load_script("bench_local.py", "bench_local_under_test", register=True)
    finally:
        sys.modules.pop("bench_local_under_test", None)


def test_bench_clients_run_in_a_process_of_their_own() -> None:
    """scripts/bench_local.py measures from a client process (the server keeps its own GIL):
    a workload run that way against a served app gives its figure back, and a failing one
    raises with the client's error."""
    with _bench_local() as bench, bench._serving(bench.sdk_app(), listen_port()) as url:
        rate = bench.run_clients("non_blocking", url, clients=2, tasks=4, headers=bench.HEADERS)
        assert rate > 0
        with pytest.raises(RuntimeError, match="bench client non_blocking failed"):
            nobody = f"http://127.0.0.1:{bench._free_port()}"  # nothing listens there
            bench.run_clients("non_blocking", nobody, clients=1, tasks=1, headers=bench.HEADERS)


def test_bench_runs_the_functions_quiet_and_restores_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A timed run (scripts/bench, or scripts/bench_local.py run directly) starts the stack with
    its functions at WARNING and without metric blobs; the settings come back after it."""
    import inspect
    import logging
    import os

    from a2a_serverless.local.stack import LocalStack

    monkeypatch.setenv("LOG_LEVEL", "DEBUG")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    package_logger = logging.getLogger("a2a_serverless")
    before = package_logger.level
    with _bench_local() as bench:
        with bench.functions_quiet():
            assert package_logger.level == logging.WARNING
            with LocalStack(event_sources=False):  # what its functions read: os.environ
                assert os.environ["LOG_LEVEL"] == "WARNING"
                assert os.environ["POWERTOOLS_METRICS_DISABLED"] == "true"
        main = inspect.getsource(bench.main)
        assert main.index("functions_quiet()") < main.index("local_figures(")
    assert os.environ["LOG_LEVEL"] == "DEBUG"
    assert "POWERTOOLS_METRICS_DISABLED" not in os.environ
    assert package_logger.level == before


def test_bench_stored_tasks_go_in_and_come_out_again() -> None:
    """The bench alternates runs without and with the stored tasks: `preload` copies a real
    task's items under new ids (listed, readable), `unload` takes exactly those out again (the
    owner's list and the table as before, the stack's own index of moto's table too)."""
    with _bench_local() as bench, bench._local_stack() as (stack, url):
        headers = {**bench.HEADERS, "X-Local-Principal": bench.PRINCIPAL}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:

            def listed() -> list[str]:
                page = client.get("/tasks", params={"pageSize": 100}).json()
                return [task["id"] for task in page.get("tasks", [])]

            table = bench._table(stack)
            keys = bench.preload(stack, 20, headers, url)
            before_unload = listed()
            copied = {k.value.removeprefix("T#") for k, _ in keys}  # the task partitions
            assert len(copied) == 20 and copied <= set(before_unload)
            one = next(iter(copied))
            copy = client.get(f"/tasks/{one}").json()
            assert copy["id"] == one
            # Stamped STORED_AGE earlier: listed after every task of the run's own.
            assert set(before_unload[-len(copied) :]) == copied
            newest = client.get(f"/tasks/{before_unload[0]}").json()["status"]["timestamp"]
            age = datetime.fromisoformat(newest) - datetime.fromisoformat(
                copy["status"]["timestamp"]
            )
            assert bench.STORED_AGE <= age < bench.STORED_AGE + timedelta(minutes=1)
            items = sum(len(partition) for partition in table.items.values())
            bench.unload(stack, keys)
            assert sorted(listed()) == sorted(set(before_unload) - copied)
            assert client.get(f"/tasks/{one}").status_code == 404
            after = sum(len(partition) for partition in table.items.values())
            assert items - after == len(keys)


@pytest.mark.parametrize("setting", ["switch interval", "gc threshold"])
def test_a_stack_runs_with_its_interpreter_setting_and_restores_the_interpreter_s(
    monkeypatch: Any, setting: str
) -> None:
    import gc
    import sys

    from a2a_serverless.local import stack as local_stack

    # (its environment variable, how to read it, what the stack sets from the value before)
    cases: dict[str, tuple[str, Callable[[], Any], Callable[[Any], Any]]] = {
        "switch interval": (
            local_stack.SWITCH_INTERVAL_ENV,
            sys.getswitchinterval,
            lambda _: pytest.approx(local_stack.SWITCH_INTERVAL_SECONDS),
        ),
        "gc threshold": (
            local_stack.GC_THRESHOLD_ENV,
            gc.get_threshold,
            lambda before: (local_stack.GC_THRESHOLD, *before[1:]),
        ),
    }
    env, read, by_the_stack = cases[setting]
    before = read()
    monkeypatch.delenv(env, raising=False)
    with local_stack.LocalStack(event_sources=False):
        assert read() == by_the_stack(before)
    assert read() == before
    monkeypatch.setenv(env, "0")  # the interpreter's own
    with local_stack.LocalStack(event_sources=False):
        assert read() == before


def test_a_transaction_item_with_an_unused_placeholder_is_refused_as_dynamodb_does() -> None:
    """moto lets an unused ExpressionAttributeValues entry through in a transaction item (it
    checks only the update expression's names there); DynamoDB refuses the request."""

    def update(extra_values: dict[str, Any], extra_names: dict[str, str]) -> list[Any]:
        return [
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": {"pk": {"S": "p"}, "sk": {"S": "s"}},
                    "UpdateExpression": "SET #a = :a",
                    "ConditionExpression": "attribute_not_exists(pk) OR #a <> :b",
                    "ExpressionAttributeNames": {"#a": "a", **extra_names},
                    "ExpressionAttributeValues": {
                        ":a": {"S": "1"},
                        ":b": {"S": "2"},
                        **extra_values,
                    },
                }
            }
        ]

    unused_value = update({":w1": {"N": "2"}}, {})
    unused_name = update({}, {"#never": "never"})
    with _moto(None) as client:
        client.transact_write_items(TransactItems=unused_value)  # moto alone lets it through
    patch = moto_fidelity.transaction_placeholders_checked
    with _moto(patch) as client:
        client.transact_write_items(TransactItems=update({}, {}))  # all used: written
        for items, message in (
            (unused_value, "ExpressionAttributeValues unused in expressions: keys: {:w1}"),
            (unused_name, "ExpressionAttributeNames unused in expressions: keys: {#never}"),
        ):
            with pytest.raises(ClientError, match="ValidationException") as refused:
                client.transact_write_items(TransactItems=items)
            assert message in str(refused.value)


def test_a_stack_s_executions_parse_their_definition_once() -> None:
    """On the stack: turns of the template's state machine, one after another, do not parse
    its definition again (parsed_definitions_kept), and every task completes."""
    from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser

    from a2a_serverless import wiring
    from a2a_serverless.local.stack import LocalStack
    from a2a_serverless.models import SendMessageRequest

    parsed: list[int] = []
    original = ASLParser.state_machine

    def counted(self: Any) -> Any:
        parsed.append(1)
        return original(self)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(ASLParser, "state_machine", counted)
        monkeypatch.setenv(moto_speedups.ENV, "all")  # the suite may run with them off
        with LocalStack(event_sources=False) as stack:
            parsed.clear()  # creating the state machines parsed their definitions
            service = wiring.get_service()
            states = []
            for n in range(4):
                request = SendMessageRequest.model_validate(
                    {
                        "message": {
                            "messageId": f"m{n}",
                            "role": "ROLE_USER",
                            "parts": [{"text": "hi"}],
                        }
                    }
                )
                task = service.sender.send(RequestContext.of_owner("alice"), request).task
                assert task is not None and task.status is not None
                states.append(task.status.state)
                wait_idle(stack)
    assert states == ["TASK_STATE_COMPLETED"] * 4
    assert parsed == [], parsed


def test_a_dynamodb_body_without_blobs_is_read_as_moto_s_parser_reads_it(
    monkeypatch: Any,
) -> None:
    """Under the patch a body that names no member moto's parser converts (B, BS for items)
    is taken as `json.loads` reads it, and that is what moto's walk along the input shape
    gives; any other body is walked by moto as before."""
    from types import SimpleNamespace

    from botocore.serialize import create_serializer
    from moto.core.parse import JSONParser
    from moto.core.utils import get_service_model
    from moto.dynamodb.responses import DynamoHandler

    model = get_service_model("dynamodb")
    walked: list[str] = []

    def moto_walk(handler: Any, request: Any) -> None:  # what moto's parse_parameters does
        walked.append(handler.action)
        handler.params = JSONParser(model.operation_model(handler.action)).parse(
            {"body": request.data}
        )

    monkeypatch.setattr(DynamoHandler, "parse_parameters", moto_walk)
    patches = Patches()
    moto_speedups.dynamodb_bodies_read_once(patches)
    item = {
        **KEY,
        "n": {"N": "1.5"},
        "s": {"S": 'a "quoted" \u00e9 string'},
        "t": {"BOOL": True},
        "z": {"NULL": True},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2"]},
        "deep": {"L": [{"M": {"x": {"L": [{"S": "y"}, {"N": "0"}]}}}]},
    }
    blob = {**KEY, "b": {"B": b"\x00\xff"}}
    blob_set = {**KEY, "bs": {"BS": [b"\x01"]}}
    cases = [
        (
            "PutItem",
            {
                "TableName": TABLE,
                "Item": item,
                "ConditionExpression": "a <> :v",
                "ExpressionAttributeValues": {":v": {"S": "Bee"}},
            },
            True,
        ),
        (
            "Query",
            {
                "TableName": TABLE,
                "KeyConditionExpression": "pk = :p",
                "Limit": 5,
                "ScanIndexForward": False,
                "ConsistentRead": True,
                "ExpressionAttributeValues": {":p": {"S": "T#1"}},
            },
            True,
        ),
        (
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"TableName": TABLE, "Item": item}},
                    {"Delete": {"TableName": TABLE, "Key": KEY}},
                ]
            },
            True,
        ),
        (
            "BatchGetItem",
            {
                "RequestItems": {
                    TABLE: {
                        "Keys": [KEY],
                        "ConsistentRead": True,
                        "ProjectionExpression": "#a",
                        "ExpressionAttributeNames": {"#a": "a"},
                    }
                }
            },
            True,
        ),
        ("PutItem", {"TableName": TABLE, "Item": blob}, False),
        ("PutItem", {"TableName": TABLE, "Item": blob_set}, False),
        # A string value "B" reads like a blob member on the wire: walked (the check reads
        # the text only); quotes inside a string are escaped, so they never do.
        ("PutItem", {"TableName": TABLE, "Item": {**KEY, "s": {"S": "B"}}}, False),
        ("PutItem", {"TableName": TABLE, "Item": {**KEY, "s": {"S": '"B"'}}}, True),
    ]
    serializer = create_serializer("json")
    try:
        for action, params, direct in cases:
            operation = model.operation_model(action)
            body = serializer.serialize_to_request(params, operation)["body"]
            handler = SimpleNamespace(action=action, params=None)
            handler._get_action = lambda handler=handler: handler.action
            walked.clear()
            DynamoHandler.parse_parameters(handler, SimpleNamespace(data=body))
            assert walked == ([] if direct else [action]), (action, params)
            assert handler.params == JSONParser(operation).parse({"body": body}), action
    finally:
        patches.undo()
