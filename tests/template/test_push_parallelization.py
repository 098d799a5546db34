"""The webhook sender's stream mapping runs one batch per shard at a time.

Why not more (noisy neighbours would like it): Lambda's `ParallelizationFactor`
(1-10 concurrent batches per shard) keeps order, for DynamoDB streams, only "at the item
(partition and sort key) level" (Lambda developer guide, "Using AWS Lambda with Amazon
DynamoDB", concurrent batches per shard) — not per partition key as for Kinesis. Each task
event is its own item (`T#<task>` / `E#<seq>`), so with a factor above 1 one task's events
land in different concurrent batches and reach its webhooks in any order, while the sender
promises per-task, per-webhook order (ARCHITECTURE.md §5, Push). The local stack emulates a
factor above 1 as AWS documents it (tests/integration/test_stream_parallelization.py shows
one task's events split across lanes)."""

from __future__ import annotations

import json
from typing import Any

from tests.template.sam import resources_of_type


def _stream_event(sam: dict[str, Any]) -> dict[str, Any]:
    """The sender's stream mapping as template.yaml writes it (an explicit
    AWS::Lambda::EventSourceMapping: tests/template/test_iam.py says why)."""
    return sam["Resources"]["WebhookSenderFunctionTaskEvents"]["Properties"]


def test_the_sam_stream_event_asks_for_one_batch_per_shard(sam: dict[str, Any]) -> None:
    assert _stream_event(sam)["ParallelizationFactor"] == 1


def test_cloudformation_gets_one_batch_per_shard(cfn: dict[str, Any]) -> None:
    """Said explicitly (1 is also Lambda's default), so that raising it is a visible change
    that fails here, with the reason above."""
    mappings = resources_of_type(cfn, "AWS::Lambda::EventSourceMapping").values()
    (stream,) = [m["Properties"] for m in mappings if "StreamArn" in json.dumps(m)]
    assert stream["ParallelizationFactor"] == 1
