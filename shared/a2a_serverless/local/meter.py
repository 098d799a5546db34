"""The AWS meter: the units a stack's calls consume, sized by AWS's billing rules, and their price.

Local only (scripts/bench and the local stack; never in the Lambda layer). `DynamoMeter`,
`LambdaMeter` and `ApiCounter` count what the functions of a local stack do; `price` turns one
task's units into $ per 1M such tasks; docs/cost.md explains the model. `TaskMeter` attributes
the same units to the task each call served, on a running local stack (`LocalStack(meter=True)`).

`scripts/dev` and `a2a-serverless dev` meter by default (`--no-meter` turns it off; what it
costs the local stack: docs/cost.md, "Each task's cost, locally"). A `LocalStack` meters only
when asked (tests).
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import json
import math
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# -- prices ----------------------------------------------------------------------------------
# us-east-1, on-demand list prices, read 2026-11 from:
#   https://aws.amazon.com/api-gateway/pricing/   (REST API, first 333M requests/month)
#   https://aws.amazon.com/lambda/pricing/        (Arm, first 7.5B GB-s/month; 1 ms granularity)
#   https://aws.amazon.com/step-functions/pricing/ (Standard transitions; Express requests and
#       duration: $0.06/GB-hour for the first 1,000 GB-hours, memory billed in 64 MB chunks
#       (50 MB + definition + payload), duration rounded up to 100 ms)
#   https://aws.amazon.com/dynamodb/pricing/on-demand/ (Standard table class)
#   https://aws.amazon.com/sqs/pricing/ , https://aws.amazon.com/cloudwatch/pricing/
# Free tiers are ignored: the figures are for a stack past them.
PRICES: dict[str, float] = {
    "apigateway_rest_request": 3.50e-6,
    "lambda_request": 0.20e-6,
    "lambda_arm64_gb_second": 0.0000133334,
    "sfn_standard_transition": 25.0e-6,
    "sfn_express_request": 1.00e-6,
    "sfn_express_gb_second": 0.06 / 3600,  # $0.00001667
    "dynamodb_wru": 0.625e-6,
    "dynamodb_rru": 0.125e-6,
    "sqs_request": 0.40e-6,
    "cloudwatch_logs_ingested_byte": 0.50 / 1024**3,
    # The stack's other lines (docs/cost.md "What else the stack bills"): X-Ray traces recorded
    # and a KMS key's month from https://aws.amazon.com/xray/pricing/ and /kms/pricing/; KMS
    # (symmetric) requests, a standard alarm's month (/cloudwatch/pricing/) and continuous
    # backups per GB-month (/dynamodb/pricing/on-demand/) as summaries of those pages quote them.
    "xray_trace_recorded": 5.00e-6,
    "kms_key_month": 1.00,
    "kms_request": 0.03 / 10_000,
    "cloudwatch_alarm_month": 0.10,
    "dynamodb_pitr_gb_month": 0.20,
    # https://aws.amazon.com/s3/pricing/ (S3 Standard; as summaries of that page quote it):
    # PUT, COPY, POST and LIST requests $0.005 per 1,000, GET and the others $0.0004 per 1,000
    # (DELETE and aborting an upload are free); storage $0.023 per GB-month (first 50 TB);
    # data transfer out to the internet $0.09 per GB (after the 100 GB a month that are free
    # across the account, up to 10 TB). Data transfer in, and S3 to Lambda in one Region, free.
    "s3_put_request": 0.005 / 1000,
    "s3_get_request": 0.0004 / 1000,
    "s3_storage_gb_month": 0.023,
    "data_transfer_out_gb": 0.09,
    # https://aws.amazon.com/dynamodb/pricing/ : data storage, Standard table class, past the
    # first 25 GB a month ("from $0.25 per GB-month").
    "dynamodb_storage_gb_month": 0.25,
}
PRICES_SOURCE_DATE = "2026-11"
# API Gateway meters a streamed REST response in 10 MB increments of its payload, each billed as
# one request (its pricing page); Lambda bills a streamed response's bytes past its first 6 MB
# (Lambda pricing; no rate is priced here: an A2A stream stays far below).
APIGATEWAY_STREAM_METERING_BYTES = 10 * 1024**2
LAMBDA_STREAM_UNBILLED_BYTES = 6 * 1024**2
# X-Ray's default sampling rule: the first request each second, then 5 % of the rest.
XRAY_RESERVOIR_PER_SECOND = 1
XRAY_FIXED_RATE = 0.05
# Step Functions Express: workflow memory = 50 MB + definition + execution data, billed per 64 MB.
EXPRESS_BASE_MEMORY_MB = 50
EXPRESS_MEMORY_CHUNK_MB = 64
EXPRESS_DURATION_STEP_S = 0.1
# Lines outside the functions' own output: Lambda's START/END/REPORT (REPORT with its X-Ray
# segment), one API Gateway access log line when the template's defaults write the access log
# (its AccessLogSetting, filled in), and CloudWatch Logs' 26 bytes billed per event.
LAMBDA_PLATFORM_LOG_BYTES = 110 + 60 + 300
ACCESS_LOG_LINE_BYTES = 750
LOG_EVENT_OVERHEAD_BYTES = 26
# S3's request classes (its pricing page): these are free; GET_CLASS at the GET rate; any other
# request (PUT, COPY, POST, LIST, a multipart upload's create, parts and completion) at the PUT
# rate. Storage is billed per GB-month: a 30-day month here.
S3_FREE_REQUESTS = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})
S3_GET_CLASS = frozenset({"GetObject", "HeadObject", "GetObjectTagging", "HeadBucket"})
DAYS_PER_MONTH = 30


# -- DynamoDB units: the calculator ----------------------------------------------------------
# AWS's rules (developer guide, "DynamoDB item sizes and formats" and "DynamoDB read and write
# operations"; "Global secondary indexes: provisioned throughput considerations"):
# - item size = sum of attribute name bytes + value sizes; strings UTF-8 bytes; numbers 1 byte
#   per 2 significant digits + 1; binary raw bytes; null/bool 1; list/map 3 + per element
#   (its size + 1); sets the sum of their members.
# - a write costs 1 unit per 1 KB (rounded up, at least 1) of the larger of the item before and
#   after (PutItem replacing, UpdateItem); DeleteItem the deleted item; a failed condition still
#   charges the existing item's size (at least 1); a transaction item costs twice.
# - an index write costs 1 unit per 1 KB of the index entry (table keys + index keys + projected
#   attributes): a new entry is one put, a removed one a delete, a changed index key a delete
#   plus a put, a change to projected attributes one write, and a write that touches none of the
#   index's attributes nothing; an item without the index key is not in the index.
# - a read costs 1 unit per 4 KB (rounded up, at least 1) per GetItem, per item of a
#   BatchGetItem, and per Query over the sum of the items it evaluated (before any filter or
#   projection; index entries on an index); eventually consistent reads half, transactional
#   twice.

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
TRANSACTION_FACTOR = 2
# Index writes of a transaction are not doubled: the table's prepare and commit are what makes
# a transactional write cost twice; the index is then maintained as for any write. (AWS does not
# document it either way; this is the conservative reading of "each item costs two writes".)
TRANSACTION_INDEX_FACTOR = 1


def number_size(text: str) -> int:
    digits = text.lstrip("+-").replace(".", "").split("e")[0].split("E")[0]
    significant = digits.strip("0") or "0"
    return math.ceil(len(significant) / 2) + 1


def value_size(value: dict[str, Any]) -> int:
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "N":
        return number_size(data)
    if kind == "B":
        return len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in data)
    if kind == "NS":
        return sum(number_size(n) for n in data)
    if kind == "BS":
        return sum(len(b) for b in data)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in data.items())
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in data)
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: dict[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool = True, transactional: bool = False) -> float:
    units = float(max(1, math.ceil(size / READ_UNIT_BYTES)))
    if transactional:
        return units * TRANSACTION_FACTOR
    return units if consistent else units / 2


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]  # partition key, then sort key if any
    projection: str  # ALL, KEYS_ONLY or INCLUDE
    non_key: tuple[str, ...] = ()

    def entry(self, item: dict[str, Any] | None, table_keys: tuple[str, ...]) -> dict | None:
        """The item's entry in the index; None when it lacks an index key (not in the index)."""
        if not item or any(key not in item for key in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        kept = set(table_keys) | set(self.keys)
        if self.projection == "INCLUDE":
            kept |= set(self.non_key)
        return {name: value for name, value in item.items() if name in kept}


@dataclass(frozen=True)
class TableSchema:
    keys: tuple[str, ...]
    indexes: tuple[Index, ...] = ()

    @classmethod
    def from_properties(cls, properties: dict[str, Any]) -> TableSchema:
        """From an AWS::DynamoDB::Table's Properties (template.yaml)."""

        def keys_of(schema: list[dict[str, str]]) -> tuple[str, ...]:
            order = {"HASH": 0, "RANGE": 1}
            return tuple(
                k["AttributeName"] for k in sorted(schema, key=lambda k: order[k["KeyType"]])
            )

        indexes = tuple(
            Index(
                name=index["IndexName"],
                keys=keys_of(index["KeySchema"]),
                projection=index["Projection"]["ProjectionType"],
                non_key=tuple(index["Projection"].get("NonKeyAttributes") or ()),
            )
            for index in properties.get("GlobalSecondaryIndexes") or ()
        )
        return cls(keys_of(properties["KeySchema"]), indexes)

    def key_of(self, item: dict[str, Any]) -> dict[str, Any]:
        return {name: item[name] for name in self.keys}


@dataclass
class WriteCost:
    table: int = 0
    indexes: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.table + sum(self.indexes.values())


def index_write_units(
    index: Index, table_keys: tuple[str, ...], old: dict | None, new: dict | None
) -> int:
    before = index.entry(old, table_keys)
    after = index.entry(new, table_keys)
    if before is None and after is None:
        return 0
    if before is None:
        return write_units(item_size(after))  # put
    if after is None:
        return write_units(item_size(before))  # delete
    if any(before[k] != after[k] for k in index.keys):
        return write_units(item_size(before)) + write_units(item_size(after))  # delete + put
    if before == after:
        return 0  # nothing the index holds changed
    return write_units(max(item_size(before), item_size(after)))


def write_cost(
    schema: TableSchema,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    *,
    transactional: bool = False,
    failed: bool = False,
) -> WriteCost:
    """One item's write: `new` None is a delete; `failed` a condition that did not hold (the
    item stays `old`)."""
    factor = TRANSACTION_FACTOR if transactional else 1
    if failed:
        return WriteCost(table=factor * write_units(item_size(old)))
    table = factor * write_units(max(item_size(old), item_size(new)))
    indexes = {
        index.name: TRANSACTION_INDEX_FACTOR * index_write_units(index, schema.keys, old, new)
        for index in schema.indexes
    }
    return WriteCost(table, {name: units for name, units in indexes.items() if units})


def condition_check_cost(old: dict[str, Any] | None) -> WriteCost:
    """A transaction's ConditionCheck is billed as a transactional write of the item."""
    return WriteCost(table=TRANSACTION_FACTOR * write_units(item_size(old)))


# -- DynamoDB units: observed calls -----------------------------------------------------------

WRITE_OPS = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")


@dataclass
class ItemCost:
    """The units of one item of a call: `key` the item's key (a Query: the partition it read;
    None: no one partition, e.g. an index's or a Scan's)."""

    key: dict[str, Any] | None
    wru_table: int = 0
    wru_indexes: dict[str, int] = field(default_factory=dict)
    rru: float = 0.0


@dataclass
class CallCost:
    operation: str
    wru_table: int = 0
    wru_indexes: dict[str, int] = field(default_factory=dict)
    rru: float = 0.0
    items: list[ItemCost] = field(default_factory=list)

    @property
    def wru(self) -> int:
        return self.wru_table + sum(self.wru_indexes.values())


class DynamoMeter:
    """DynamoDB request units of every call the stack's functions make, via botocore events on
    the default session (their clients are made after `attach`). The item before a write is
    read before the call and the item after it once the call returned, by a client of its own
    (not metered); reads are repeated by that client without projection or filter, so that the
    items DynamoDB would charge for are the ones sized."""

    def __init__(self, schema: TableSchema, table_name: str, reader: Any) -> None:
        self.schema = schema
        self.table_name = table_name
        self.reader = reader
        self.calls: list[CallCost] = []
        self._lock = threading.Lock()
        self._pending = threading.local()

    def attach(self, events: Any) -> None:
        events.register("provide-client-params.dynamodb", self._before)
        events.register("after-call.dynamodb", self._after)
        events.register("after-call-error.dynamodb", self._dropped)

    def _dropped(self, **_: Any) -> None:
        """A call that never got an answer (connection error): it charged nothing."""
        stack = getattr(self._pending, "stack", None)
        if stack:
            stack.pop()

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()

    # -- the item as it is now -----------------------------------------------------------

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item = self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return item or None

    def _write_keys(self, operation: str, params: dict[str, Any]) -> list[tuple[str, dict]]:
        if operation == "PutItem":
            return [(params["TableName"], self.schema.key_of(params["Item"]))]
        if operation in ("UpdateItem", "DeleteItem"):
            return [(params["TableName"], params["Key"])]
        if operation == "TransactWriteItems":
            keys = []
            for entry in params["TransactItems"]:
                ((kind, body),) = entry.items()
                key = self.schema.key_of(body["Item"]) if kind == "Put" else body["Key"]
                keys.append((body["TableName"], key))
            return keys
        if operation == "BatchWriteItem":
            keys = []
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        keys.append((table, self.schema.key_of(request["PutRequest"]["Item"])))
                    else:
                        keys.append((table, request["DeleteRequest"]["Key"]))
            return keys
        return []

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        stack = getattr(self._pending, "stack", None)
        if stack is None:
            stack = self._pending.stack = []
        keys = self._write_keys(model.name, params)
        olds = [self._get(table, key) for table, key in keys]
        stack.append((model.name, dict(params), keys, olds))

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        stack = getattr(self._pending, "stack", None)
        if not stack:
            return
        operation, params, keys, olds = stack.pop()
        if operation != model.name:  # not ours (an event of another call): leave it alone
            return
        error = (parsed.get("Error") or {}).get("Code")
        cost = CallCost(operation)
        if operation in WRITE_OPS:
            self._write(cost, operation, params, keys, olds, error, parsed)
        else:
            cost.items = self._reads(operation, params, parsed)
            cost.rru = sum(item.rru for item in cost.items)
        self._record(cost)

    def _record(self, cost: CallCost) -> None:
        with self._lock:
            self.calls.append(cost)

    def _write(
        self,
        cost: CallCost,
        operation: str,
        params: dict[str, Any],
        keys: list[tuple[str, dict]],
        olds: list[dict | None],
        error: str | None,
        parsed: dict[str, Any],
    ) -> None:
        news = [self._get(table, key) for table, key in keys]
        costs: list[tuple[dict[str, Any], WriteCost]] = []
        if operation == "TransactWriteItems":
            cancelled = error is not None
            for i, entry in enumerate(params["TransactItems"]):
                key = keys[i][1]
                if "ConditionCheck" in entry:
                    costs.append((key, condition_check_cost(olds[i])))
                elif cancelled:
                    # Cancelled: nothing is written; each item is charged as a failed
                    # conditional write (the one whose condition failed, and the others).
                    failed_cost = write_cost(
                        self.schema, olds[i], None, transactional=True, failed=True
                    )
                    costs.append((key, failed_cost))
                else:
                    new = None if "Delete" in entry else news[i]
                    costs.append((key, write_cost(self.schema, olds[i], new, transactional=True)))
        else:
            failed = error == "ConditionalCheckFailedException"
            for (_, key), old, new in zip(keys, olds, news, strict=True):
                if error is not None and not failed:
                    continue  # a rejected request (validation, throttling) writes nothing
                costs.append((key, write_cost(self.schema, old, new, failed=failed)))
        for key, one in costs:
            cost.items.append(ItemCost(key, one.table, dict(one.indexes)))
            cost.wru_table += one.table
            for name, units in one.indexes.items():
                cost.wru_indexes[name] = cost.wru_indexes.get(name, 0) + units

    def _reads(
        self, operation: str, params: dict[str, Any], parsed: dict[str, Any]
    ) -> list[ItemCost]:
        if operation == "GetItem":
            item = self._get(params["TableName"], params["Key"])
            consistent = bool(params.get("ConsistentRead"))
            return [ItemCost(params["Key"], rru=read_units(item_size(item), consistent=consistent))]
        if operation == "BatchGetItem":
            items = []
            for table, request in params["RequestItems"].items():
                for key in request["Keys"]:
                    size = item_size(self._get(table, key))
                    consistent = bool(request.get("ConsistentRead"))
                    items.append(ItemCost(key, rru=read_units(size, consistent=consistent)))
            return items
        if operation == "TransactGetItems":
            return [
                ItemCost(
                    e["Get"]["Key"],
                    rru=read_units(
                        item_size(self._get(e["Get"]["TableName"], e["Get"]["Key"])),
                        transactional=True,
                    ),
                )
                for e in params["TransactItems"]
            ]
        if operation in ("Query", "Scan"):
            units = self._query_units(operation, params, parsed)
            return [ItemCost(self._partition(operation, params), rru=units)]
        return []

    def _partition(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The table partition a Query reads (its key condition's equality on the partition
        key); None for a Scan or an index's Query."""
        if operation != "Query" or params.get("IndexName"):
            return None
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        condition = params.get("KeyConditionExpression", "")
        for name, value in re.findall(r"(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)", condition):
            if names.get(name, name) == self.schema.keys[0] and value in values:
                return {self.schema.keys[0]: values[value]}
        return None

    def _query_units(self, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
        """The same page again, without filter, projection or Select: the items evaluated."""
        replay: dict[str, Any] = {
            k: params[k]
            for k in (
                "TableName",
                "IndexName",
                "KeyConditionExpression",
                "ExclusiveStartKey",
                "Limit",
                "ScanIndexForward",
                "ConsistentRead",
            )
            if k in params
        }
        used = set(re.findall(r"[#:][A-Za-z0-9_]+", replay.get("KeyConditionExpression", "")))
        names = {
            k: v for k, v in (params.get("ExpressionAttributeNames") or {}).items() if k in used
        }
        values = {
            k: v for k, v in (params.get("ExpressionAttributeValues") or {}).items() if k in used
        }
        if names:
            replay["ExpressionAttributeNames"] = names
        if values:
            replay["ExpressionAttributeValues"] = values
        page = getattr(self.reader, "query" if operation == "Query" else "scan")(**replay)
        index = next((i for i in self.schema.indexes if i.name == params.get("IndexName")), None)
        size = 0
        for item in page.get("Items", []):
            entry = index.entry(item, self.schema.keys) if index else item
            size += item_size(entry)
        consistent = bool(params.get("ConsistentRead")) and index is None
        return read_units(size, consistent=consistent)

    def detach(self, events: Any) -> None:
        events.unregister("provide-client-params.dynamodb", self._before)
        events.unregister("after-call.dynamodb", self._after)
        events.unregister("after-call-error.dynamodb", self._dropped)

    def summary(self, start: int = 0, end: int | None = None) -> dict[str, Any]:
        """The calls from the `start`-th to before the `end`-th (default: all)."""
        with self._lock:
            calls = self.calls[start:end]
        indexes: Counter[str] = Counter()
        for call in calls:
            indexes.update(call.wru_indexes)
        return {
            "calls": dict(Counter(call.operation for call in calls)),
            "wru": sum(call.wru for call in calls),
            "wru_table": sum(call.wru_table for call in calls),
            "wru_indexes": dict(indexes),
            "rru": sum(call.rru for call in calls),
            "per_call": [
                {
                    "operation": c.operation,
                    "wru_table": c.wru_table,
                    "wru_indexes": c.wru_indexes,
                    "rru": c.rru,
                }
                for c in calls
            ],
        }


# -- Lambda invocations, API requests, SQS requests, log bytes: observed ---------------------


def template_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: resource.get("Properties") or {}
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def function_memory(template: dict[str, Any]) -> dict[str, int]:
    """Each function's MemorySize (its own, or the Globals'; a parameter's default)."""
    defaults = {
        name: spec.get("Default") for name, spec in (template.get("Parameters") or {}).items()
    }

    mappings = template.get("Mappings") or {}

    def megabytes(value: Any) -> int:
        # A parameter's default, or a project's setting (a FindInMap of its Mappings).
        if isinstance(value, dict) and "Ref" in value:
            return megabytes(defaults[value["Ref"]])
        if isinstance(value, dict) and "Fn::FindInMap" in value:
            name, key, field = value["Fn::FindInMap"]
            return megabytes(mappings[name][key][field])
        return int(value)

    default = megabytes(
        ((template.get("Globals") or {}).get("Function") or {}).get("MemorySize", 128)
    )
    return {
        name: megabytes(props["MemorySize"]) if "MemorySize" in props else default
        for name, props in template_functions(template).items()
    }


def resolved_memory(template: dict[str, Any], resolver: Any) -> dict[str, int]:
    """Each function's MemorySize as a stack resolves it (a parameter, a mapping, any
    intrinsic), its own or the Globals'."""
    default = ((template.get("Globals") or {}).get("Function") or {}).get("MemorySize", 128)
    return {
        name: int(resolver.resolve(props.get("MemorySize", default)))
        for name, props in template_functions(template).items()
    }


def table_schema(template: dict[str, Any]) -> TableSchema:
    tables = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::DynamoDB::Table"
    ]
    if len(tables) != 1:
        raise ValueError(f"expected one DynamoDB table in the template, found {len(tables)}")
    return TableSchema.from_properties(tables[0])


class LambdaMeter:
    """Every invocation of the stack's functions with its handler time: wraps the stack's
    `handler_for` (Step Functions tasks, event sources, authorizers) and `app_for` (the
    gateway's routes, one invocation per request)."""

    def __init__(self, memory_mb: dict[str, int]) -> None:
        self.memory_mb = memory_mb
        self.invocations: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def record(self, logical_id: str, seconds: float) -> None:
        with self._lock:
            self.invocations.append((logical_id, seconds))

    def reset(self) -> None:
        with self._lock:
            self.invocations.clear()

    def wrap(self, stack: Any) -> None:
        handler_for, app_for = stack.handler_for, stack.app_for
        meter = self

        def timed_handler_for(logical_id: str) -> Callable[..., Any]:
            handler = handler_for(logical_id)

            def invoke(event: Any, context: Any) -> Any:
                start = time.perf_counter()
                try:
                    return handler(event, context)
                finally:
                    meter.record(logical_id, time.perf_counter() - start)

            return invoke

        class TimedApp:
            def __init__(self, app: Any, logical_id: str) -> None:
                self.app, self.logical_id = app, logical_id

            async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
                if scope["type"] != "http":
                    await self.app(scope, receive, send)
                    return
                start = time.perf_counter()
                try:
                    await self.app(scope, receive, send)
                finally:
                    meter.record(self.logical_id, time.perf_counter() - start)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.app, name)

        stack.handler_for = timed_handler_for
        stack.app_for = lambda logical_id: TimedApp(app_for(logical_id), logical_id)

    def summary(self, start: int = 0, end: int | None = None) -> dict[str, Any]:
        """Per function, the invocations from the `start`-th to before the `end`-th (default:
        all)."""
        rows: dict[str, dict[str, Any]] = {}
        with self._lock:
            invocations = self.invocations[start:end]
        for logical_id, seconds in invocations:
            row = rows.setdefault(
                logical_id,
                {"invocations": 0, "billed_ms": 0, "memory_mb": self.memory_mb[logical_id]},
            )
            row["invocations"] += 1
            row["billed_ms"] += math.ceil(seconds * 1000)  # Lambda bills per 1 ms, rounded up
        for row in rows.values():
            row["gb_seconds"] = row["billed_ms"] / 1000 * row["memory_mb"] / 1024
        return rows


class ApiCounter:
    """The local gateway, counting the HTTP requests it is sent (API Gateway's billed unit)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


def states_entered(sfn: Any, execution_arn: str) -> int:
    """State transitions of an execution so far: the states it entered (its history)."""
    history = sfn.get_execution_history(executionArn=execution_arn)["events"]
    return sum(1 for e in history if e["type"].endswith("StateEntered"))


def execution_units(sfn: Any, machine: str, task_id: str) -> dict[str, Any]:
    """The task's executions of `machine` (named after it): how many, their state
    transitions (STANDARD's unit), and their GB-s as EXPRESS bills them."""
    pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=machine)
    executions = [
        e
        for page in pages
        for e in page["executions"]
        if e["name"].startswith(f"{task_id}-")  # execution_name, wait_name
    ]
    definition_bytes = len(sfn.describe_state_machine(stateMachineArn=machine)["definition"])
    transitions = 0
    express_gb_s = 0.0
    for execution in executions:
        transitions += states_entered(sfn, execution["executionArn"])
        described = sfn.describe_execution(executionArn=execution["executionArn"])
        stopped = described.get("stopDate") or datetime.now(UTC)  # still running: so far
        seconds = (stopped - described["startDate"]).total_seconds()
        billed_s = math.ceil(seconds / EXPRESS_DURATION_STEP_S - 1e-9) * EXPRESS_DURATION_STEP_S
        used_mb = (
            EXPRESS_BASE_MEMORY_MB + (definition_bytes + len(described.get("input", ""))) / 1024**2
        )
        billed_mb = math.ceil(used_mb / EXPRESS_MEMORY_CHUNK_MB) * EXPRESS_MEMORY_CHUNK_MB
        express_gb_s += max(billed_s, EXPRESS_DURATION_STEP_S) * billed_mb / 1024
    return {
        "executions": len(executions),
        "state_transitions": transitions,
        "express_gb_seconds": express_gb_s,
    }


def price(units: dict[str, Any], workflow: str) -> dict[str, float]:
    """$ per 1M tasks, per service, from one task's units."""
    p = PRICES
    functions = units["lambda"].values()
    sfn = units["stepfunctions"]
    ddb = units["dynamodb"]
    if workflow == "STANDARD":
        stepfunctions = sfn["state_transitions"] * p["sfn_standard_transition"]
    else:
        stepfunctions = (
            sfn["executions"] * p["sfn_express_request"]
            + sfn["express_gb_seconds"] * p["sfn_express_gb_second"]
        )
    per_task = {
        "apigateway": units["api_requests"] * p["apigateway_rest_request"],
        "lambda": sum(
            f["invocations"] * p["lambda_request"] + f["gb_seconds"] * p["lambda_arm64_gb_second"]
            for f in functions
        ),
        "stepfunctions": stepfunctions,
        "dynamodb": ddb["wru"] * p["dynamodb_wru"] + ddb["rru"] * p["dynamodb_rru"],
        "sqs": sum(units["sqs_requests"].values()) * p["sqs_request"],
        "cloudwatch_logs": units["log_bytes"] * p["cloudwatch_logs_ingested_byte"],
        **s3_usd(units),
    }
    per_million = {name: round(usd * 1e6, 2) for name, usd in per_task.items()}
    per_million["total"] = round(sum(per_task.values()) * 1e6, 2)
    return per_million


def s3_request_classes(requests: dict[str, int]) -> dict[str, int]:
    """S3 requests by pricing class: {"put": n, "get": n, "free": n}."""
    classes = {"put": 0, "get": 0, "free": 0}
    for operation, count in requests.items():
        if operation in S3_FREE_REQUESTS:
            classes["free"] += count
        elif operation in S3_GET_CLASS:
            classes["get"] += count
        else:
            classes["put"] += count
    return classes


def s3_usd(units: dict[str, Any]) -> dict[str, float]:
    """$ of one task's S3 lines: "s3" (the functions' requests, the bytes stored for
    `retention_days`, and the GET of each download) and "data_transfer_out" (the downloads'
    bytes, to the internet). Units without S3 figures cost $0 here."""
    p = PRICES
    classes = s3_request_classes(units.get("s3_requests") or {})
    downloads = units.get("downloads") or {"requests": 0, "bytes": 0}
    gb_months = (
        units.get("s3_stored_bytes", 0) / 1024**3 * units.get("retention_days", 0) / DAYS_PER_MONTH
    )
    return {
        "s3": classes["put"] * p["s3_put_request"]
        + (classes["get"] + downloads["requests"]) * p["s3_get_request"]
        + gb_months * p["s3_storage_gb_month"],
        "data_transfer_out": downloads["bytes"] / 1024**3 * p["data_transfer_out_gb"],
    }


class TemplateValues:
    """template.yaml's values as CloudFormation deploys them with `parameters` (else each
    parameter's default): Ref of a parameter, Fn::If on a condition, AWS::NoValue (None)."""

    def __init__(self, template: dict[str, Any], parameters: dict[str, str] | None = None):
        self.template = template
        self.values = {
            name: str(spec.get("Default", ""))
            for name, spec in (template.get("Parameters") or {}).items()
        }
        self.values.update(parameters or {})

    def condition(self, name: str) -> bool:
        return self._holds(self.template["Conditions"][name])

    def _holds(self, expression: Any) -> bool:
        ((function, args),) = expression.items()
        if function == "Condition":
            return self.condition(args)
        if function == "Fn::Equals":
            return str(self.resolve(args[0])) == str(self.resolve(args[1]))
        if function == "Fn::Not":
            return not self._holds(args[0])
        if function == "Fn::And":
            return all(self._holds(a) for a in args)
        if function == "Fn::Or":
            return any(self._holds(a) for a in args)
        raise ValueError(f"unsupported condition function {function}")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict) and list(value) == ["Ref"]:
            name = value["Ref"]
            if name == "AWS::NoValue":
                return None
            return self.values.get(name, value)
        if isinstance(value, dict) and list(value) == ["Fn::If"]:
            name, if_true, if_false = value["Fn::If"]
            return self.resolve(if_true if self.condition(name) else if_false)
        return value

    def get(self, *path: str) -> Any:
        """The value at `path` under Resources (or Globals), each step resolved."""
        value: Any = self.template
        for key in path:
            value = self.resolve(value)
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return self.resolve(value)

    def exists(self, logical_id: str) -> bool:
        condition = self.template["Resources"][logical_id].get("Condition")
        return condition is None or self.condition(condition)


def truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "active", "1")


def stack_features(template: dict[str, Any], parameters: dict[str, str] | None = None) -> dict:
    """What the template deploys, at its defaults (or `parameters`), that the bill depends on."""
    at = TemplateValues(template, parameters)
    resources = template["Resources"]
    (table,) = [n for n, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table"]
    sse = at.get("Resources", table, "Properties", "SSESpecification") or {}
    if not truthy(at.resolve(sse.get("SSEEnabled", False))):
        table_key = "aws-owned"
    elif sse.get("KMSMasterKeyId") is None:
        table_key = "aws-managed"
    else:
        table_key = "customer-managed"
    memory = function_memory(
        {**template, "Parameters": {k: {"Default": v} for k, v in at.values.items()}}
    )
    env = {
        name: at.get("Resources", name, "Properties", "Environment", "Variables") or {}
        for name in template_functions(template)
    }
    return {
        "memory_mb": memory,
        "stream_max_seconds": {
            name: float(at.resolve(e["STREAM_MAX_SECONDS"]))
            for name, e in env.items()
            if "STREAM_MAX_SECONDS" in e
        },
        "blocking_max_wait_seconds": float(at.values["BlockingMaxWaitSeconds"]),
        "tracing": truthy(at.get("Globals", "Function", "Tracing")),
        "pitr": truthy(
            at.get(
                "Resources",
                table,
                "Properties",
                "PointInTimeRecoverySpecification",
                "PointInTimeRecoveryEnabled",
            )
        ),
        "table_key": table_key,
        "alarms": sum(
            1
            for n, r in resources.items()
            if r["Type"] == "AWS::CloudWatch::Alarm" and at.exists(n)
        ),
        "card_signing": at.values.get("CardSigningKeyArn", "") != "",
        "access_log": any(
            at.get("Resources", name, "Properties", "AccessLogSetting") is not None
            for name, r in resources.items()
            if r["Type"] == "AWS::Serverless::Api"
        ),
    }


# -- per task, on a running local stack ----------------------------------------------------------

TASK_PREFIX = "T#"  # store/dynamodb/keys.py: a task's partition
OBJECT_PREFIX = "tasks/"  # store/content.py: a task's stored content
MAX_TASKS = 1000  # tasks metered at once; the oldest are dropped first
_PATH_TASK = re.compile(r"/(?:tasks|delegations)/([^/:]+)")
_SKIPPED_PATHS = ("/_local/", "/_s3/")  # the local stack's own endpoints: no AWS request

# Counts by key: ("api",), ("lambda", function, "invocations" | "billed_ms"), ("dynamodb",
# "wru_table" | "rru"), ("dynamodb_index", name), ("dynamodb_call" | "sqs" | "s3", operation).
Units = dict[tuple[str, ...], float]


def _add(into: Units, units: Units, share: float = 1.0) -> None:
    for key, value in units.items():
        into[key] = into.get(key, 0) + value * share


def _task_of_key(key: dict[str, Any] | None, partition_key: str) -> str | None:
    value = (key or {}).get(partition_key) or {}
    text = value.get("S") if isinstance(value, dict) else None
    if isinstance(text, str) and text.startswith(TASK_PREFIX):
        return text.removeprefix(TASK_PREFIX)
    return None


def tasks_in_event(event: Any) -> set[str]:
    """The tasks a Lambda event is about: `taskId` fields (the flow worker's, a retry queue
    message's body) and task partition keys (a table stream's records)."""
    found: set[str] = set()

    def walk(value: Any, name: str = "") -> None:
        if isinstance(value, dict):
            if isinstance(value.get("taskId"), str):
                found.add(value["taskId"])
            for key, inner in value.items():
                walk(inner, key)
        elif isinstance(value, list):
            for inner in value:
                walk(inner, name)
        elif isinstance(value, str):
            if name == "S" and value.startswith(TASK_PREFIX) and "#" not in value[2:]:
                found.add(value.removeprefix(TASK_PREFIX))
            elif name == "body" and value.startswith("{"):
                with contextlib.suppress(ValueError):
                    walk(json.loads(value))

    walk(event)
    return found


class _Scope:
    """One Lambda invocation or API request: units that name no task wait here until it ends,
    then go to the tasks it served (split evenly), else to the enclosing scope."""

    def __init__(self, parent: _Scope | None, tasks: set[str]) -> None:
        self.parent = parent
        self.explicit = set(tasks)
        self.named: set[str] = set()
        self.pending: Units = {}
        self.closed = False

    def tasks(self) -> set[str]:
        return self.explicit or self.named


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "a2a_local_meter_scope", default=None
)


class TaskMeter(DynamoMeter):
    """The units of a running local stack, per task: DynamoDB items by their task partition
    (sized as the bench sizes them), S3 requests by object key, Lambda invocations and API
    requests by the task they served (the event's, the path's, else the tasks the call's items
    name; a webhook batch's tasks share its invocation evenly), Step Functions from the
    executions named after the task (read when asked). Units that name no task are
    `unattributed`; every unit is counted once: sum over tasks + unattributed = total.
    Not metered: what the functions print (log bytes are Lambda's and API Gateway's own lines)
    and downloads of stored content through presigned URLs."""

    def __init__(self, stack: Any) -> None:
        import boto3

        from a2a_serverless.local.resources import REGION

        session = boto3.session.Session(region_name=REGION)  # its calls are not metered
        super().__init__(
            table_schema(stack.template), stack.env["TABLE_NAME"], session.client("dynamodb")
        )
        self.stack = stack
        self._sfn = session.client("stepfunctions")
        self._s3 = session.client("s3")
        self.memory_mb = resolved_memory(stack.template, stack.resolver)
        self.access_log = stack_features(stack.template, stack.parameters)["access_log"]
        self._tasks: OrderedDict[str, Units] = OrderedDict()
        self.unattributed: Units = {}
        self.total: Units = {}
        self._events: Any = None

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        """The item as the reader would get it, read from moto's table directly (a client's
        round trip per write would more than halve the stack's speed)."""
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        from a2a_serverless.local.patching import DYNAMODB_LOCK
        from a2a_serverless.local.resources import ACCOUNT, REGION

        keys = self.schema.keys
        with DYNAMODB_LOCK:
            found = (
                dynamodb_backends[ACCOUNT][REGION]
                .get_table(table)
                .get_item(
                    DynamoType(key[keys[0]]), DynamoType(key[keys[1]]) if len(keys) > 1 else None
                )
            )
            attributes = found.to_json()["Attributes"] if found is not None else None
        return {name: as_read(value) for name, value in attributes.items()} if attributes else None

    def _query_units(self, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
        """The items the page answered, when nothing left any out (no filter, projection or
        Select): the items it evaluated, without a second query."""
        narrowed = ("FilterExpression", "ProjectionExpression", "Select", "AttributesToGet")
        if any(name in params for name in narrowed) or "Items" not in parsed:
            return super()._query_units(operation, params, parsed)
        index = next((i for i in self.schema.indexes if i.name == params.get("IndexName")), None)
        size = 0
        for item in parsed["Items"]:
            size += item_size(index.entry(item, self.schema.keys) if index else item)
        consistent = bool(params.get("ConsistentRead")) and index is None
        return read_units(size, consistent=consistent)

    # -- installing ----------------------------------------------------------------------

    def install(self, events: Any, patches: Any) -> None:
        """Meter the clients of `events` (boto3's default session) and the stack's functions
        and gateway until `patches` are undone (`detach` for the events)."""
        self._events = events
        self.attach(events)
        events.register("before-call.s3", self._s3_call)
        events.register("before-call.sqs", self._sqs_call)
        stack, meter = self.stack, self
        handler_for, app_for, gateway = stack.handler_for, stack.app_for, stack.gateway

        def metered_handler_for(logical_id: str) -> Callable[..., Any]:
            handler = handler_for(logical_id)

            def invoke(event: Any, context: Any) -> Any:
                with meter.scope(tasks_in_event(event)):
                    start = time.perf_counter()
                    try:
                        return handler(event, context)
                    finally:
                        meter.invoked(logical_id, time.perf_counter() - start)

            return invoke

        patches.replace(stack, "handler_for", metered_handler_for)
        patches.replace(
            stack, "app_for", lambda logical_id: _MeteredApp(app_for(logical_id), logical_id, meter)
        )
        patches.replace(stack, "gateway", lambda *a, **k: _MeteredGateway(gateway(*a, **k), meter))

    def uninstall(self) -> None:
        if self._events is not None:
            self.detach(self._events)
            self._events.unregister("before-call.s3", self._s3_call)
            self._events.unregister("before-call.sqs", self._sqs_call)
            self._events = None

    def clear(self) -> None:
        with self._lock:
            self._tasks.clear()
            self.unattributed.clear()
            self.total.clear()

    # -- attributing ---------------------------------------------------------------------

    @contextlib.contextmanager
    def scope(self, tasks: set[str]) -> Iterator[_Scope]:
        scope = _Scope(_scope.get(), tasks)
        token = _scope.set(scope)
        try:
            yield scope
        finally:
            _scope.reset(token)
            self._close(scope)

    def _close(self, scope: _Scope) -> None:
        with self._lock:
            scope.closed = True
            pending, scope.pending = scope.pending, {}
            self._settle(scope, pending)
            tasks = scope.tasks()
            if tasks and scope.parent is not None:  # e.g. the gateway's request, for its authorizer
                scope.parent.named |= tasks

    def _settle(self, ended: _Scope, units: Units) -> None:
        """Units of a scope that has ended: to its tasks, else to the enclosing scope's (pending
        while that one runs), else unattributed. The caller holds the lock."""
        scope: _Scope | None = ended
        while scope is not None:
            tasks = scope.tasks()
            if tasks:
                for task in sorted(tasks):
                    _add(self._task(task), units, 1 / len(tasks))
                return
            scope = scope.parent
            if scope is not None and not scope.closed:
                _add(scope.pending, units)
                return
        _add(self.unattributed, units)

    def _task(self, task_id: str) -> Units:
        units = self._tasks.get(task_id)
        if units is None:
            units = self._tasks[task_id] = {}
            while len(self._tasks) > MAX_TASKS:
                self._tasks.popitem(last=False)
        return units

    def _charge(self, task_id: str | None, units: Units) -> None:
        """Units of one task, or (None) of the scope running now."""
        with self._lock:
            _add(self.total, units)
            if task_id is not None:
                _add(self._task(task_id), units)
                scope = _scope.get()
                if scope is not None:
                    scope.named.add(task_id)
                return
            scope = _scope.get()
            if scope is None:
                _add(self.unattributed, units)
            elif scope.closed:  # work its invocation left running (a thread) charges late
                self._settle(scope, units)
            else:
                _add(scope.pending, units)

    def invoked(self, logical_id: str, seconds: float) -> None:
        """One invocation of a function, in the scope running now."""
        billed_ms = math.ceil(seconds * 1000)  # Lambda bills per 1 ms, rounded up
        self._charge(
            None,
            {
                ("lambda", logical_id, "invocations"): 1,
                ("lambda", logical_id, "billed_ms"): billed_ms,
            },
        )

    def api_request(self) -> None:
        """One API Gateway request, in the scope running now."""
        self._charge(None, {("api",): 1})

    def _record(self, cost: CallCost) -> None:
        partition = self.schema.keys[0]
        shares: dict[str | None, Units] = {}
        for item in cost.items:
            units = shares.setdefault(_task_of_key(item.key, partition), {})
            one: Units = {("dynamodb", "wru_table"): item.wru_table, ("dynamodb", "rru"): item.rru}
            one.update({("dynamodb_index", name): wru for name, wru in item.wru_indexes.items()})
            _add(units, one)
        if not shares:
            shares[None] = {}
        for task_id, units in shares.items():
            _add(units, {("dynamodb_call", cost.operation): 1 / len(shares)})
            self._charge(task_id, units)

    def _s3_call(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        key = params.get("Key")
        task_id = None
        if isinstance(key, str) and key.startswith(OBJECT_PREFIX):
            task_id = key.removeprefix(OBJECT_PREFIX).split("/", 1)[0] or None
        self._charge(task_id, {("s3", model.name): 1})

    def _sqs_call(self, model: Any, **_: Any) -> None:
        self._charge(None, {("sqs", model.name): 1})

    # -- reading -------------------------------------------------------------------------

    def tasks(self) -> list[str]:
        with self._lock:
            return list(self._tasks)

    def counts(self, task_id: str) -> Units:
        """The task's raw counts (keys as in `total`)."""
        with self._lock:
            return dict(self._tasks.get(task_id) or {})

    def units(self, task_id: str) -> dict[str, Any]:
        """The task's units so far, in the shape of scripts/bench's (`price` reads them)."""
        units = self._shape(self.counts(task_id))
        env = self.stack.env
        units["stepfunctions"] = execution_units(self._sfn, env["STATE_MACHINE_ARN"], task_id)
        if env.get("TIMER_STATE_MACHINE_ARN"):
            units["timer"] = execution_units(self._sfn, env["TIMER_STATE_MACHINE_ARN"], task_id)
        units.update(self._stored(task_id))
        return units

    def _shape(self, counted: Units) -> dict[str, Any]:
        functions: dict[str, dict[str, Any]] = {}
        indexes: dict[str, float] = {}
        calls: dict[str, float] = {}
        sqs: dict[str, float] = {}
        s3: dict[str, float] = {}
        for key, value in sorted(counted.items()):
            kind = key[0]
            if kind == "lambda":
                row = functions.setdefault(
                    key[1],
                    {
                        "invocations": 0,
                        "billed_ms": 0,
                        "memory_mb": self.memory_mb.get(key[1], 128),
                    },
                )
                row[key[2]] = _whole(value)
            elif kind == "dynamodb_index":
                indexes[key[1]] = _whole(value)
            elif kind == "dynamodb_call":
                calls[key[1]] = _whole(value)
            elif kind == "sqs":
                sqs[key[1]] = _whole(value)
            elif kind == "s3":
                s3[key[1]] = _whole(value)
        for row in functions.values():
            row["gb_seconds"] = row["billed_ms"] / 1000 * row["memory_mb"] / 1024
        wru_table = _whole(counted.get(("dynamodb", "wru_table"), 0))
        api_requests = _whole(counted.get(("api",), 0))
        invocations = sum(row["invocations"] for row in functions.values())
        return {
            "api_requests": api_requests,
            "lambda": functions,
            "dynamodb": {
                "calls": calls,
                "wru": _whole(wru_table + sum(indexes.values())),
                "wru_table": wru_table,
                "wru_indexes": indexes,
                "rru": counted.get(("dynamodb", "rru"), 0.0),
            },
            "sqs_requests": sqs,
            "s3_requests": s3,
            "log_bytes": platform_log_bytes(invocations, api_requests, access_log=self.access_log),
        }

    def _stored(self, task_id: str) -> dict[str, Any]:
        bucket = self.stack.env.get("CONTENT_BUCKET")
        stored: list[dict[str, Any]] = []
        if bucket:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{OBJECT_PREFIX}{task_id}/"
            )
            stored = [item for page in pages for item in page.get("Contents", [])]
        return {
            "s3_stored_bytes": sum(int(item["Size"]) for item in stored),
            "s3_objects": len(stored),
            "retention_days": int(self.stack.parameters.get("RetentionDays", 30)),
        }

    def price(self, task_id: str, workflow: str) -> dict[str, Any]:
        """The task's $ per service and total: `per_task` and `per_million` (1M such tasks);
        `workflow` the flow's state machine type (the delegations' timer is STANDARD)."""
        units = self.units(task_id)
        per_million = price(units, workflow)
        timer = units.get("timer") or {}
        if timer.get("state_transitions"):
            usd = timer["state_transitions"] * PRICES["sfn_standard_transition"] * 1e6
            per_million["stepfunctions_timer"] = round(usd, 2)
            per_million["total"] = round(per_million["total"] + usd, 2)
        per_task = {name: usd / 1e6 for name, usd in per_million.items()}
        return {"per_task": per_task, "per_million": per_million}


def as_read(value: dict[str, Any]) -> dict[str, Any]:
    """A value of moto's item JSON as a client reads it (binary values as bytes)."""
    ((kind, data),) = value.items()
    if kind == "B" and isinstance(data, str):
        return {kind: base64.b64decode(data)}
    if kind == "BS":
        return {kind: [base64.b64decode(b) if isinstance(b, str) else b for b in data]}
    if kind == "M":
        return {kind: {k: as_read(v) for k, v in data.items()}}
    if kind == "L":
        return {kind: [as_read(v) for v in data]}
    return value


def _whole(value: float) -> Any:
    """An int when the value is one (a unit split between tasks is a fraction)."""
    return round(value) if abs(value - round(value)) < 1e-9 else value


def platform_log_bytes(invocations: float, api_requests: float, *, access_log: bool) -> float:
    """CloudWatch Logs bytes outside the functions' own output: Lambda's lines per invocation,
    API Gateway's access log line per request when the stack writes it."""
    log_bytes = (LAMBDA_PLATFORM_LOG_BYTES + 3 * LOG_EVENT_OVERHEAD_BYTES) * invocations
    if access_log:
        log_bytes += (ACCESS_LOG_LINE_BYTES + LOG_EVENT_OVERHEAD_BYTES) * api_requests
    return log_bytes


class _MeteredApp:
    """A function's ASGI app: each HTTP request one invocation and one API request."""

    def __init__(self, app: Any, logical_id: str, meter: TaskMeter) -> None:
        self.app, self.logical_id, self.meter = app, logical_id, meter

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with self.meter.scope(set(_PATH_TASK.findall(scope.get("path", ""))[:1])):
            self.meter.api_request()
            start = time.perf_counter()
            try:
                await self.app(scope, receive, send)
            finally:
                self.meter.invoked(self.logical_id, time.perf_counter() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


class _MeteredGateway:
    """The gateway: a request's authorizer and function run in one scope, named after the
    task of its path when it has one."""

    def __init__(self, gateway: Any, meter: TaskMeter) -> None:
        self.gateway, self.meter = gateway, meter

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path or path.startswith(_SKIPPED_PATHS):
            await self.gateway(scope, receive, send)
            return
        with self.meter.scope(set(_PATH_TASK.findall(path)[:1])):
            await self.gateway(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gateway, name)
