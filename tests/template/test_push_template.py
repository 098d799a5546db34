"""The webhook path as deployed: stream mapping, retry queue and dead letters."""

from __future__ import annotations

import json
from typing import Any

from tests.template.sam import resources_of_type


def _mappings(cfn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: props["Properties"]
        for name, props in resources_of_type(cfn, "AWS::Lambda::EventSourceMapping").items()
    }


def test_stream_mapping_delivers_event_items_with_partial_failures(cfn: dict[str, Any]) -> None:
    (stream,) = [m for m in _mappings(cfn).values() if "StreamArn" in json.dumps(m)]
    assert stream["FunctionName"] == {"Ref": "WebhookSenderFunction"}
    assert stream["EventSourceArn"] == {"Fn::GetAtt": ["TasksTable", "StreamArn"]}
    assert stream["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert stream["BisectBatchOnFunctionError"] is True
    assert 1 <= stream["MaximumRetryAttempts"] <= 20
    assert stream["StartingPosition"] == "TRIM_HORIZON"
    patterns = [json.loads(f["Pattern"]) for f in stream["FilterCriteria"]["Filters"]]
    events, first_events, working_events, expiries = patterns
    assert events == {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"sk": {"S": [{"prefix": "E#"}]}}},
    }
    # A task's header stands for its first events (keys.header_events): its creation is
    # event 1, the update that adds its first WORKING status event 2.
    assert first_events == {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"sk": {"S": ["H"]}}, "NewImage": {"e1": {"BOOL": [True]}}},
    }
    assert working_events == {
        "eventName": ["MODIFY"],
        "dynamodb": {
            "Keys": {"sk": {"S": ["H"]}},
            "NewImage": {"w1": {"N": [{"exists": True}]}},
            "OldImage": {"w1": {"N": [{"exists": False}]}},
        },
    }
    # DynamoDB TTL's removal of a task header (the sender takes it off the ListTasks counters).
    assert expiries == {
        "eventName": ["REMOVE"],
        "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
        "dynamodb": {"Keys": {"sk": {"S": ["H"]}}},
    }
    destination = stream["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": ["PushStreamFailureQueue", "Arn"]}


def test_retry_queue_is_fifo_with_a_dead_letter_queue(cfn: dict[str, Any]) -> None:
    queues = resources_of_type(cfn, "AWS::SQS::Queue")
    retry = queues["PushRetryQueue"]["Properties"]
    assert retry["FifoQueue"] is True  # one message group per task and webhook: order kept
    assert retry["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["PushDeadLetterQueue", "Arn"]
    }
    # The sender counts its own attempts and dead-letters after PushMaxAttempts; the queue's
    # redrive is only a safety net (skipped messages are received without being attempted).
    assert retry["RedrivePolicy"]["maxReceiveCount"] == 1000
    env = resources_of_type(cfn, "AWS::Lambda::Function")["WebhookSenderFunction"]["Properties"][
        "Environment"
    ]["Variables"]
    assert env["PUSH_MAX_ATTEMPTS"] == {"Ref": "PushMaxAttempts"}
    assert env["PUSH_DEAD_LETTER_QUEUE_URL"] == {"Ref": "PushDeadLetterQueue"}
    assert queues["PushDeadLetterQueue"]["Properties"]["FifoQueue"] is True
    # The sender's timeout must fit in the visibility timeout, or a message is received twice.
    sender = resources_of_type(cfn, "AWS::Lambda::Function")["WebhookSenderFunction"]
    assert retry["VisibilityTimeout"] >= sender["Properties"]["Timeout"]
    (queue_mapping,) = [m for m in _mappings(cfn).values() if "PushRetryQueue" in json.dumps(m)]
    assert queue_mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    for props in queues.values():
        assert props["Properties"]["SqsManagedSseEnabled"] is True


def test_webhooks_are_https_only_unless_configured(sam: dict[str, Any]) -> None:
    params = sam["Parameters"]
    assert params["PushAllowHttp"]["Default"] == "false"
    assert params["PushAllowHosts"]["Default"] == ""
    env = sam["Globals"]["Function"]["Environment"]["Variables"]
    assert env["PUSH_ALLOW_HTTP"] == {"Ref": "PushAllowHttp"}
    assert env["PUSH_ALLOW_HOSTS"] == {"Ref": "PushAllowHosts"}
