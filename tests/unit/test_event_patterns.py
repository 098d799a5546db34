"""The filter-pattern matcher of the local event source mappings (EventBridge-pattern subset
that Lambda's FilterCriteria accept), including the template's own stream filter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from a2a_serverless.local.events import matches_pattern, parse_filters, passes
from a2a_serverless.local.template import load_template

ROOT = Path(__file__).resolve().parents[2]


def _template_filters() -> list[dict[str, Any]]:
    resources = load_template(ROOT / "template.yaml")["Resources"]
    mapping = resources["WebhookSenderFunctionTaskEvents"]["Properties"]
    return parse_filters(mapping["FilterCriteria"])


def stream_record(event_name: str, sk: str, **image: Any) -> dict[str, Any]:
    """A DynamoDB stream record as Lambda delivers it (NEW_IMAGE view; none for REMOVE)."""
    keys = {"pk": {"S": "T#task-1"}, "sk": {"S": sk}}
    dynamodb: dict[str, Any] = {
        "ApproximateCreationDateTime": 1_764_000_000.0,
        "Keys": keys,
        "SequenceNumber": "1100000000017454423009",
        "SizeBytes": 120,
        "StreamViewType": "NEW_IMAGE",
    }
    if event_name != "REMOVE":
        dynamodb["NewImage"] = {**keys, **image}
    return {
        "eventID": "0f1e2d3c",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x",
    }


# -- the template's filter ------------------------------------------------------------------


def test_template_filter_is_the_documented_pattern() -> None:
    assert _template_filters() == [
        {"eventName": ["INSERT"], "dynamodb": {"Keys": {"sk": {"S": [{"prefix": "E#"}]}}}},
        # A task header's writes that add an event it stands for (no item of its own).
        {
            "eventName": ["INSERT"],
            "dynamodb": {"Keys": {"sk": {"S": ["H"]}}, "NewImage": {"e1": {"BOOL": [True]}}},
        },
        {
            "eventName": ["MODIFY"],
            "dynamodb": {
                "Keys": {"sk": {"S": ["H"]}},
                "NewImage": {"w1": {"N": [{"exists": True}]}},
                "OldImage": {"w1": {"N": [{"exists": False}]}},
            },
        },
        # TTL's removals of task headers (tests/integration/test_ttl_counters.py).
        {
            "eventName": ["REMOVE"],
            "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
            "dynamodb": {"Keys": {"sk": {"S": ["H"]}}},
        },
    ]


@pytest.mark.parametrize("event_name", ["INSERT", "MODIFY", "REMOVE"])
@pytest.mark.parametrize("sk", ["E#0000000001", "H", "M#0000000001", "P#config-1"])
def test_template_filter_passes_only_inserted_event_items_and_no_user_removal(
    event_name: str, sk: str
) -> None:
    record = stream_record(event_name, sk, ev={"S": "{}"})
    expected = event_name == "INSERT" and sk.startswith("E#")
    assert passes(_template_filters(), record) is expected


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ({}, {"w1": {"N": "2"}}, True),  # the first WORKING status went in
        ({"w1": {"N": "2"}}, {"w1": {"N": "2"}}, False),  # a later write of the header
        ({}, {}, False),  # a write that adds no event (say, the flow's state)
    ],
)
def test_template_filter_passes_a_header_update_only_when_it_adds_the_working_event(
    before: dict[str, Any], after: dict[str, Any], expected: bool
) -> None:
    record = stream_record("MODIFY", "H", **after)
    record["dynamodb"]["OldImage"] = {**record["dynamodb"]["Keys"], **before}
    assert passes(_template_filters(), record) is expected
    record["eventName"] = "INSERT"  # only an update adds it
    del record["dynamodb"]["OldImage"]
    assert not passes(_template_filters(), record)


@pytest.mark.parametrize("event_name", ["INSERT", "MODIFY", "REMOVE"])
@pytest.mark.parametrize("mark", [{"BOOL": True}, {"BOOL": False}, {"S": "true"}, {"N": "1"}, None])
def test_template_filter_passes_a_header_only_when_inserted_standing_for_event_1(
    event_name: str, mark: dict[str, Any] | None
) -> None:
    """A header marked `e1` is its task's first event: its INSERT only (the task's creation),
    never a later write of the header, nor an unmarked header (whose event 1 is an item)."""
    record = stream_record(event_name, "H", **({"e1": mark} if mark else {}))
    expected = event_name == "INSERT" and mark == {"BOOL": True}
    assert passes(_template_filters(), record) is expected


def test_template_filter_reads_the_key_not_the_image() -> None:
    """A header whose image carries an `E#`-looking attribute is still not an event item."""
    record = stream_record("INSERT", "H", note={"S": "E#0000000001"})
    assert not passes(_template_filters(), record)


# -- operators ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        (["INSERT"], "INSERT", True),
        (["INSERT", "MODIFY"], "MODIFY", True),
        (["INSERT"], "insert", False),
        ([1], 1, True),
        ([1], True, False),  # JSON true is not 1
        ([True], 1, False),
        ([None], None, True),
        ([{"prefix": "E#"}], "E#0001", True),
        ([{"prefix": "E#"}], "H", False),
        ([{"prefix": "E#"}], 7, False),
        ([{"suffix": ".png"}], "a.png", True),
        ([{"suffix": ".png"}], "a.jpg", False),
        ([{"equals-ignore-case": "Working"}], "WORKING", True),
        ([{"equals-ignore-case": "Working"}], "WORKED", False),
        ([{"anything-but": "REMOVE"}], "INSERT", True),
        ([{"anything-but": "REMOVE"}], "REMOVE", False),
        ([{"anything-but": ["REMOVE", "MODIFY"]}], "MODIFY", False),
        ([{"anything-but": [1]}], True, True),
        ([{"anything-but": {"prefix": "M#"}}], "E#1", True),
        ([{"anything-but": {"prefix": "M#"}}], "M#1", False),
        ([{"numeric": [">", 0, "<=", 5]}], 5, True),
        ([{"numeric": [">", 0, "<=", 5]}], 0, False),
        ([{"numeric": ["=", 3]}], 3.0, True),
        ([{"numeric": [">=", 1]}], "2", False),  # a string is no number
        ([{"numeric": [">=", 1]}], True, False),
        ([{"prefix": "a"}, {"suffix": "z"}], "xyz", True),  # any rule of the list
        (["b"], ["a", "b"], True),  # any element of an event list
        (["c"], ["a", "b"], False),
    ],
)
def test_operator(rule: list[Any], value: Any, expected: bool) -> None:
    assert matches_pattern({"field": rule}, {"field": value}) is expected


def test_exists() -> None:
    assert matches_pattern({"a": [{"exists": True}]}, {"a": "x"})
    assert matches_pattern({"a": [{"exists": True}]}, {"a": None})
    assert not matches_pattern({"a": [{"exists": True}]}, {"b": "x"})
    assert matches_pattern({"a": [{"exists": False}]}, {"b": "x"})
    assert not matches_pattern({"a": [{"exists": False}]}, {"a": "x"})


def test_nested_fields_are_matched_by_path() -> None:
    pattern = {"dynamodb": {"NewImage": {"state": {"S": ["TASK_STATE_COMPLETED"]}}}}
    completed = stream_record("INSERT", "H", state={"S": "TASK_STATE_COMPLETED"})
    working = stream_record("INSERT", "H", state={"S": "TASK_STATE_WORKING"})
    assert matches_pattern(pattern, completed)
    assert not matches_pattern(pattern, working)
    # REMOVE records have no NewImage: every field below it is missing.
    assert not matches_pattern(pattern, stream_record("REMOVE", "H"))
    absent = {"dynamodb": {"NewImage": {"state": [{"exists": False}]}}}
    assert matches_pattern(absent, stream_record("REMOVE", "H"))
    assert not matches_pattern(absent, completed)
    # A scalar where the pattern expects an object: its "fields" are missing too.
    assert not matches_pattern({"eventName": {"S": ["INSERT"]}}, {"eventName": "INSERT"})


def test_missing_keys_match_nothing_but_exists_false() -> None:
    record = stream_record("INSERT", "E#0000000001")
    for rule in (
        ["x"],
        [None],
        [{"prefix": ""}],
        [{"suffix": ""}],
        [{"anything-but": "x"}],
        [{"equals-ignore-case": "x"}],
        [{"numeric": [">", 0]}],
    ):
        assert not matches_pattern({"missing": rule}, record), rule
        assert not matches_pattern({"dynamodb": {"OldImage": {"a": {"S": rule}}}}, record), rule


def test_every_field_of_a_pattern_must_match() -> None:
    pattern = {"eventName": ["INSERT"], "eventSource": ["aws:dynamodb"]}
    assert matches_pattern(pattern, stream_record("INSERT", "E#1"))
    assert not matches_pattern(
        {**pattern, "eventSource": ["aws:sqs"]}, stream_record("INSERT", "E#1")
    )


def test_filters_are_ored() -> None:
    filters = parse_filters(
        {
            "Filters": [
                {"Pattern": json.dumps({"eventName": ["REMOVE"]})},
                {"Pattern": {"dynamodb": {"Keys": {"sk": {"S": [{"prefix": "P#"}]}}}}},
            ]
        }
    )
    assert passes(filters, stream_record("REMOVE", "E#1"))
    assert passes(filters, stream_record("INSERT", "P#c1"))
    assert not passes(filters, stream_record("INSERT", "E#1"))


def test_no_filters_pass_everything() -> None:
    assert parse_filters(None) == [] and parse_filters({}) == []
    assert passes([], stream_record("REMOVE", "H"))


def test_unsupported_patterns_are_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="wildcard"):
        matches_pattern({"a": [{"wildcard": "x*"}]}, {"a": "xy"})
    with pytest.raises(ValueError, match="list"):
        matches_pattern({"a": "x"}, {"a": "x"})
