"""scripts/bench.py's DynamoDB unit calculator against AWS's documented rules.

Sources (DynamoDB developer guide): "DynamoDB item sizes and formats" (sizes), "DynamoDB read
and write operations" (1 KB write units / 4 KB read units, the larger of the item before and
after, a failed condition still charged, eventually consistent reads half, transactional
twice), and "Provisioned throughput considerations for global secondary indexes" (index
writes: put, delete, delete + put on a key change, nothing when no index attribute changes,
nothing for an item without the index key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


bench = load_script("bench.py", "scripts_bench", register=True)

# A table like template.yaml's: pk/sk, one INCLUDE index, one KEYS_ONLY, one ALL.
SCHEMA = bench.TableSchema(
    keys=("pk", "sk"),
    indexes=(
        bench.Index("inc", ("g1pk", "gsk"), "INCLUDE", ("state",)),
        bench.Index("keys", ("g2pk", "gsk"), "KEYS_ONLY"),
        bench.Index("all", ("g3pk",), "ALL"),
    ),
)


def s(text: str) -> dict[str, str]:
    return {"S": text}


def item(**attributes: Any) -> dict[str, Any]:
    return {name: s(v) if isinstance(v, str) else v for name, v in attributes.items()}


# -- sizes -------------------------------------------------------------------------------------


def test_string_size_is_name_plus_utf8_bytes() -> None:
    assert bench.item_size({"ab": s("xyz")}) == 2 + 3
    assert bench.item_size({"é": s("€")}) == 2 + 3  # UTF-8 bytes, not characters


def test_number_size_one_byte_per_two_significant_digits_plus_one() -> None:
    assert bench.value_size({"N": "7"}) == 2
    assert bench.value_size({"N": "1234"}) == 3
    assert bench.value_size({"N": "12345"}) == 4
    # Leading and trailing zeroes are trimmed.
    assert bench.value_size({"N": "1000"}) == bench.value_size({"N": "1"}) == 2
    assert bench.value_size({"N": "-0.0012"}) == 2


def test_binary_bool_null_sizes() -> None:
    assert bench.value_size({"B": b"\x00\x01\x02"}) == 3  # raw bytes, not base64
    assert bench.value_size({"BOOL": True}) == 1
    assert bench.value_size({"NULL": True}) == 1


def test_list_and_map_cost_three_bytes_plus_one_per_element() -> None:
    assert bench.value_size({"M": {}}) == 3
    assert bench.value_size({"L": []}) == 3
    assert bench.value_size({"L": [s("ab"), s("c")]}) == 3 + (2 + 1) + (1 + 1)
    assert bench.value_size({"M": {"k": s("vv")}}) == 3 + (1 + 2 + 1)
    assert bench.item_size({"m": {"M": {"k": s("vv")}}}) == 1 + 7


def test_sets_are_the_sum_of_their_members() -> None:
    assert bench.value_size({"SS": ["ab", "cde"]}) == 5
    assert bench.value_size({"NS": ["1", "12345"]}) == 2 + 4


# -- units -------------------------------------------------------------------------------------


def test_write_units_round_up_per_kilobyte_at_least_one() -> None:
    assert bench.write_units(0) == 1
    assert bench.write_units(1024) == 1
    assert bench.write_units(1025) == 2
    assert bench.write_units(3500) == 4


def test_read_units_round_up_per_4kb_consistency_and_transactions() -> None:
    assert bench.read_units(0) == 1  # an item that is not there still costs a read
    assert bench.read_units(4096) == 1
    assert bench.read_units(4097) == 2
    assert bench.read_units(3500, consistent=False) == 0.5
    assert bench.read_units(10 * 1024, consistent=False) == 1.5  # 12 KB / 4 KB / 2
    assert bench.read_units(3500, transactional=True) == 2


def big(n: int) -> dict[str, str]:
    return s("x" * n)


# -- writes: table -----------------------------------------------------------------------------


def test_put_of_a_new_item_without_index_keys_costs_its_size_only() -> None:
    new = item(pk="T#1", sk="E#1", ev=big(1500))
    cost = bench.write_cost(SCHEMA, None, new)
    assert (cost.table, cost.indexes) == (2, {})


def test_update_costs_the_larger_of_before_and_after() -> None:
    before = item(pk="T#1", sk="H", body=big(3000))
    after = item(pk="T#1", sk="H", body=big(10))
    assert bench.write_cost(SCHEMA, before, after).table == 3
    assert bench.write_cost(SCHEMA, after, before).table == 3


def test_delete_costs_the_deleted_item() -> None:
    old = item(pk="T#1", sk="E#1", ev=big(2100))
    assert bench.write_cost(SCHEMA, old, None).table == 3


def test_failed_condition_charges_the_existing_item_and_no_index() -> None:
    existing = item(pk="T#1", sk="H", g1pk="o", gsk="1", body=big(2000))
    failed = bench.write_cost(SCHEMA, existing, None, failed=True)
    assert (failed.table, failed.indexes) == (2, {})
    # No item there: the minimum, one unit.
    assert bench.write_cost(SCHEMA, None, None, failed=True).table == 1


def test_transaction_items_cost_twice_on_the_table() -> None:
    new = item(pk="T#1", sk="E#1", ev=big(1500))
    assert bench.write_cost(SCHEMA, None, new, transactional=True).table == 4
    assert bench.condition_check_cost(new).table == 4
    assert bench.write_cost(SCHEMA, new, None, transactional=True, failed=True).table == 4


# -- writes: global secondary indexes -----------------------------------------------------------


HEADER = item(pk="T#1", sk="H", g1pk="alice", g2pk="alice#c", g3pk="alice#W", gsk="t1")


def test_new_item_with_index_keys_is_one_put_per_index() -> None:
    cost = bench.write_cost(SCHEMA, None, HEADER)
    assert cost.indexes == {"inc": 1, "keys": 1, "all": 1}
    assert cost.total == 4


def test_item_lacking_an_index_key_is_not_in_that_index() -> None:
    partial = {k: v for k, v in HEADER.items() if k != "gsk"}  # inc and keys need gsk
    assert bench.write_cost(SCHEMA, None, partial).indexes == {"all": 1}


def test_changing_an_index_key_is_a_delete_plus_a_put_there() -> None:
    after = {**HEADER, "g3pk": s("alice#C")}
    assert bench.write_cost(SCHEMA, HEADER, after).indexes == {"all": 2}


def test_changing_a_projected_attribute_is_one_write_and_others_nothing() -> None:
    with_state = {**HEADER, "state": s("W"), "note": s("a")}
    # state is projected into inc (INCLUDE) and all (ALL); keys (KEYS_ONLY) holds no state.
    changed_state = {**with_state, "state": s("C")}
    assert bench.write_cost(SCHEMA, with_state, changed_state).indexes == {"inc": 1, "all": 1}
    # note is only in the ALL index.
    changed_note = {**with_state, "note": s("b")}
    assert bench.write_cost(SCHEMA, with_state, changed_note).indexes == {"all": 1}


def test_removing_an_index_key_deletes_the_entry() -> None:
    after = {k: v for k, v in HEADER.items() if k != "g2pk"}
    # Out of `keys` (a delete); `all` projects every attribute, g2pk too (one write); `inc`
    # holds neither (nothing).
    assert bench.write_cost(SCHEMA, HEADER, after).indexes == {"keys": 1, "all": 1}


def test_deleting_an_indexed_item_deletes_its_entries() -> None:
    assert bench.write_cost(SCHEMA, HEADER, None).indexes == {"inc": 1, "keys": 1, "all": 1}


def test_index_write_size_is_the_projected_entry() -> None:
    fat = {**HEADER, "state": s("W"), "body": big(3000)}
    cost = bench.write_cost(SCHEMA, None, fat)
    # ALL copies the 3 KB body; INCLUDE (state) and KEYS_ONLY do not.
    assert cost.indexes == {"inc": 1, "keys": 1, "all": 3}
    entry = SCHEMA.indexes[0].entry(fat, SCHEMA.keys)
    assert set(entry) == {"pk", "sk", "g1pk", "gsk", "state"}


def test_index_writes_are_not_doubled_in_a_transaction() -> None:
    cost = bench.write_cost(SCHEMA, None, HEADER, transactional=True)
    assert cost.table == 2
    assert cost.indexes == {"inc": 1, "keys": 1, "all": 1}


# -- the template's table -----------------------------------------------------------------------


def test_schema_from_the_template() -> None:
    from a2a_serverless.local.template import load_template

    schema = bench.table_schema(load_template(ROOT / "template.yaml"))
    assert schema.keys == ("pk", "sk")
    assert schema.indexes, "the template's table has global secondary indexes"
    for index in schema.indexes:
        assert index.projection in ("ALL", "KEYS_ONLY", "INCLUDE")
        assert 1 <= len(index.keys) <= 2


# -- prices ------------------------------------------------------------------------------------


def _units(**overrides: Any) -> dict[str, Any]:
    units = {
        "api_requests": 1,
        "lambda": {"F": {"invocations": 2, "billed_ms": 1000, "memory_mb": 1024, "gb_seconds": 1}},
        "dynamodb": {"wru": 10, "rru": 4.0},
        "stepfunctions": {"executions": 1, "state_transitions": 3, "express_gb_seconds": 0.1},
        "sqs_requests": {},
        "log_bytes": 0,
    }
    return {**units, **overrides}


def test_price_per_million_tasks() -> None:
    standard = bench.price(_units(), "STANDARD")
    assert standard["apigateway"] == pytest.approx(3.50)
    assert standard["stepfunctions"] == pytest.approx(75.0)  # 3 transitions x $25/M
    assert standard["dynamodb"] == pytest.approx(10 * 0.625 + 4 * 0.125)
    assert standard["lambda"] == pytest.approx(2 * 0.20 + 13.3334, abs=0.01)
    express = bench.price(_units(), "EXPRESS")
    assert express["stepfunctions"] == pytest.approx(1.0 + 0.1 * 16.67, abs=0.01)
    for prices in (standard, express):
        parts = sum(v for k, v in prices.items() if k != "total")
        assert prices["total"] == pytest.approx(parts, abs=0.05)


def test_report_has_the_stable_keys_even_when_parts_are_skipped() -> None:
    cost = {
        "wru_per_task": 1,
        "usd_per_million_tasks": {"STANDARD": 1.0, "EXPRESS": 0.5},
        "sfn_transitions_per_turn": 3,
    }
    report = bench.build_report(cost)
    assert set(bench.TOP_LEVEL_KEYS) <= set(report)
    assert report["cold_start_ratio"] == {}
    assert report["local_tasks_per_second"] is None
    assert "n/a" in bench.render_text(report)


# -- what a deployed stack bills beside the tasks (read from the template) ---------------------
# Sources: API Gateway pricing ("Streaming enabled REST APIs are metered in 10MB response payload
# increments"); Lambda developer guide, "Response streaming for Lambda functions" (a streaming
# function is billed for its whole duration, the client gone or not); X-Ray developer guide
# (the default sampling rule: the first request each second, then 5 %).

MB = 1024 * 1024


def test_a_streamed_response_is_one_request_per_10_mb_started() -> None:
    assert bench.streamed_requests(0) == 1
    assert bench.streamed_requests(10 * MB) == 1
    assert bench.streamed_requests(10 * MB + 1) == 2
    assert bench.streamed_requests(25 * MB) == 3


def test_a_held_request_bills_its_whole_time_at_the_functions_memory() -> None:
    usd = bench.held_open_usd(512, 840)
    assert usd == pytest.approx(3.50e-6 + 0.20e-6 + 0.5 * 840 * 0.0000133334)
    assert bench.held_open_usd(256, 840) < usd  # half the memory, half the duration charge
    assert bench.held_open_usd(512, 840, 11 * MB) == pytest.approx(usd + 3.50e-6)


def test_xray_default_sampling() -> None:
    assert bench.xray_traces_per_second(0.5) == 0.5
    assert bench.xray_traces_per_second(1) == 1
    assert bench.xray_traces_per_second(21) == pytest.approx(2.0)  # 1 + 5 % of 20


def _stack(**overrides: Any) -> dict[str, Any]:
    """A template with what stack_features reads, its options behind parameters."""

    def function(memory: int | None, **env: str) -> dict[str, Any]:
        props: dict[str, Any] = {"Environment": {"Variables": env}}
        if memory:
            props["MemorySize"] = memory
        return {"Type": "AWS::Serverless::Function", "Properties": props}

    template: dict[str, Any] = {
        "Parameters": {
            "BlockingMaxWaitSeconds": {"Type": "Number", "Default": 600},
            "Trace": {"Type": "String", "Default": "off", "AllowedValues": ["off", "on"]},
            "Backups": {"Type": "String", "Default": "false", "AllowedValues": ["true", "false"]},
            "Key": {"Type": "String", "Default": "owned", "AllowedValues": ["owned", "managed"]},
            "WaitMemory": {"Type": "Number", "Default": 384},
            "Logs": {"Type": "String", "Default": "false", "AllowedValues": ["true", "false"]},
        },
        "Conditions": {
            "Traced": {"Fn::Equals": [{"Ref": "Trace"}, "on"]},
            "Managed": {"Fn::Equals": [{"Ref": "Key"}, "managed"]},
            "Logged": {"Fn::Equals": [{"Ref": "Logs"}, "true"]},
        },
        "Globals": {
            "Function": {
                "MemorySize": 512,
                "Tracing": {"Fn::If": ["Traced", "Active", "PassThrough"]},
            }
        },
        "Resources": {
            "Table": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "PointInTimeRecoverySpecification": {
                        "PointInTimeRecoveryEnabled": {"Ref": "Backups"}
                    },
                    "SSESpecification": {
                        "Fn::If": [
                            "Managed",
                            {"SSEEnabled": True, "SSEType": "KMS"},
                            {"SSEEnabled": False},
                        ]
                    },
                },
            },
            "StreamFunction": function(None, STREAM_MAX_SECONDS="700"),
            "GetTaskFunction": function(256, STREAM_MAX_SECONDS="700"),
            "SendMessageFunction": function({"Ref": "WaitMemory"}),  # type: ignore[arg-type]
            "Api": {
                "Type": "AWS::Serverless::Api",
                "Properties": {
                    "AccessLogSetting": {
                        "Fn::If": ["Logged", {"Format": "{}"}, {"Ref": "AWS::NoValue"}]
                    }
                },
            },
            "Always": {"Type": "AWS::CloudWatch::Alarm", "Properties": {}},
            "WhenTraced": {"Type": "AWS::CloudWatch::Alarm", "Condition": "Traced"},
        },
    }
    template["Resources"].update(overrides)
    return template


def test_stack_features_are_the_templates_defaults() -> None:
    features = bench.stack_features(_stack())
    assert features["memory_mb"] == {
        "StreamFunction": 512,
        "GetTaskFunction": 256,
        "SendMessageFunction": 384,
    }
    assert features["stream_max_seconds"] == {"StreamFunction": 700, "GetTaskFunction": 700}
    assert features["blocking_max_wait_seconds"] == 600
    assert (features["tracing"], features["pitr"], features["table_key"]) == (
        False,
        False,
        "aws-owned",
    )
    assert (features["alarms"], features["access_log"]) == (1, False)
    on = bench.stack_features(
        _stack(), {"Trace": "on", "Backups": "true", "Key": "managed", "Logs": "true"}
    )
    assert (on["tracing"], on["pitr"], on["table_key"], on["alarms"], on["access_log"]) == (
        True,
        True,
        "aws-managed",
        2,
        True,
    )


def test_stack_doc_prices_held_requests_at_the_templates_memory_and_names_each_option() -> None:
    text = bench.stack_table(_stack())
    assert "SendMessageFunction (384 MB)" in text
    assert "GetTaskFunction (256 MB)" in text
    held = bench._usd(bench.held_open_usd(384, 600) * 1e6)  # the longest blocking wait
    assert f"| 600 | {held} |" in text
    assert "`Trace=on`: on: $5.00 per 1M traces recorded" in text
    assert "`Backups=true`: on: $0.20 per GB" in text
    assert "`Key=managed`: AWS managed key" in text
    assert "| 1 alarms: $0.10 | `Trace=on`: 2 alarms, $0.20 |" in text
    assert "`Logs=true`: on: 776 bytes per request: $0.36 per 1M requests" in text
    # Lowering the default memory lowers what a held request costs.
    lowered = _stack()
    lowered["Parameters"]["WaitMemory"]["Default"] = 128
    assert "SendMessageFunction (128 MB)" in bench.stack_table(lowered)


def test_cost_doc_has_the_current_templates_section() -> None:
    """docs/cost.md's template section is what `scripts/bench --stack-doc` makes of
    template.yaml now: after a change to the template's defaults, run it."""
    from a2a_serverless.local.template import load_template

    section = bench.stack_table(load_template(ROOT / "template.yaml"))
    assert section in (ROOT / "docs" / "cost.md").read_text()


def test_s3_requests_by_class_and_their_price() -> None:
    """S3's pricing page: PUT, COPY, POST, LIST (and a multipart upload's steps) at $0.005 per
    1,000, GET and HEAD at $0.0004 per 1,000, DELETE free; storage $0.023 per GB-month; data
    transfer out $0.09 per GB."""
    requests = {
        "PutObject": 1,
        "CreateMultipartUpload": 1,
        "UploadPart": 4,
        "CompleteMultipartUpload": 1,
        "GetObject": 2,
        "HeadObject": 1,
        "DeleteObject": 3,
    }
    assert bench.s3_request_classes(requests) == {"put": 7, "get": 3, "free": 3}
    units = _units(
        s3_requests=requests,
        s3_stored_bytes=1024**3,
        retention_days=bench.DAYS_PER_MONTH,
        downloads={"requests": 1, "bytes": 2 * 1024**3},
    )
    usd = bench.price(units, "STANDARD")
    assert usd["s3"] == pytest.approx((7 * 0.005 / 1000 + 4 * 0.0004 / 1000 + 0.023) * 1e6)
    assert usd["data_transfer_out"] == pytest.approx(2 * 0.09 * 1e6)
    assert bench.price(_units(), "STANDARD")["s3"] == 0
