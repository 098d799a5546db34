"""local/calls.py: API calls mapped to the IAM actions and resource ARNs AWS authorizes them
as, and the principal acting (recording over moto: tests/integration/test_call_recording.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from a2a_serverless.local.calls import (
    UnknownOperation,
    acting_as,
    authorizations,
    authorize,
    current_principal,
)

REGION = "us-east-1"
ACCOUNT = "123456789012"
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/tasks"
STREAM = f"{TABLE}/stream/2025-01-01T00:00:00.000"
QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/retries.fifo"
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:retries.fifo"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:flow"
EXECUTION = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:flow:t-1"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:worker"


def auth(service: str, operation: str, **params: Any) -> list[tuple[str, str]]:
    return authorizations(service, operation, params, region=REGION, account=ACCOUNT)


# -- mapping ------------------------------------------------------------------------------------


def test_dynamodb_item_operations_name_the_table() -> None:
    assert auth("dynamodb", "GetItem", TableName="tasks", Key={}) == [("dynamodb:GetItem", TABLE)]
    assert auth("dynamodb", "DeleteItem", TableName=TABLE, Key={}) == [
        ("dynamodb:DeleteItem", TABLE)
    ]


def test_dynamodb_index_queries_name_the_index() -> None:
    assert auth("dynamodb", "Query", TableName="tasks") == [("dynamodb:Query", TABLE)]
    assert auth("dynamodb", "Query", TableName="tasks", IndexName="byOwner") == [
        ("dynamodb:Query", f"{TABLE}/index/byOwner")
    ]


def test_transactions_are_authorized_item_by_item() -> None:
    items = [
        {"Put": {"TableName": "tasks", "Item": {}}},
        {"Update": {"TableName": "tasks", "Key": {}}},
        {"Delete": {"TableName": "other", "Key": {}}},
        {"ConditionCheck": {"TableName": "tasks", "Key": {}}},
    ]
    assert auth("dynamodb", "TransactWriteItems", TransactItems=items) == [
        ("dynamodb:PutItem", TABLE),
        ("dynamodb:UpdateItem", TABLE),
        ("dynamodb:DeleteItem", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/other"),
        ("dynamodb:ConditionCheckItem", TABLE),
    ]
    gets = [{"Get": {"TableName": "tasks", "Key": {}}}]
    assert auth("dynamodb", "TransactGetItems", TransactItems=gets) == [("dynamodb:GetItem", TABLE)]


def test_keyed_dynamodb_operations_carry_their_leading_keys() -> None:
    def context(operation: str, **params: Any) -> list[dict[str, list[str]]]:
        found = authorize(
            "dynamodb",
            operation,
            params,
            region=REGION,
            account=ACCOUNT,
            partition_key=lambda table: "pk" if table == "tasks" else None,
        )
        return [c for _, _, c in found]

    key = {"pk": {"S": "APIKEY#k"}, "sk": {"S": "APIKEY"}}
    leading = {"dynamodb:LeadingKeys": ["APIKEY#k"]}
    assert context("GetItem", TableName="tasks", Key=key) == [leading]
    assert context("PutItem", TableName="tasks", Item={**key, "x": {"N": "1"}}) == [leading]
    assert context("GetItem", TableName=TABLE, Key=key) == [leading]  # by ARN
    assert context("GetItem", TableName="other", Key=key) == [{}]  # key attribute unknown
    assert context("Query", TableName="tasks") == [{}]  # not by key
    items = [{"ConditionCheck": {"TableName": "tasks", "Key": key}}]
    assert context("TransactWriteItems", TransactItems=items) == [leading]
    batch = {"tasks": {"Keys": [key, {"pk": {"S": "T#t"}, "sk": {"S": "H"}}]}}
    assert context("BatchGetItem", RequestItems=batch) == [
        {"dynamodb:LeadingKeys": ["APIKEY#k", "T#t"]}
    ]


def test_what_flows_call_names_its_resources() -> None:
    assert auth("s3", "GetObject", Bucket="docs", Key="a/b.txt") == [
        ("s3:GetObject", "arn:aws:s3:::docs/a/b.txt")
    ]
    assert auth("s3", "HeadObject", Bucket="docs", Key="k") == [
        ("s3:GetObject", "arn:aws:s3:::docs/k")
    ]
    assert auth("s3", "ListObjectsV2", Bucket="docs") == [("s3:ListBucket", "arn:aws:s3:::docs")]
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:api-key-AbCdEf"
    assert auth("secretsmanager", "GetSecretValue", SecretId=secret) == [
        ("secretsmanager:GetSecretValue", secret)
    ]
    assert auth("bedrock-runtime", "ConverseStream", modelId="us.amazon.nova-lite-v1:0") == [
        (
            "bedrock:InvokeModelWithResponseStream",
            f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/us.amazon.nova-lite-v1:0",
        )
    ]
    assert auth("bedrock-runtime", "Converse", modelId="anthropic.claude-v2") == [
        ("bedrock:InvokeModel", f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-v2")
    ]


def test_a_secret_read_by_name_is_authorized_on_the_arn_the_stack_knows() -> None:
    # A delegating flow reads a remote agent's secret by its name ({prefix}{host}).
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:agents/b.example-Ab12Cd"
    arns = {"agents/b.example": secret}
    found = authorize(
        "secretsmanager",
        "GetSecretValue",
        {"SecretId": "agents/b.example"},
        region=REGION,
        account=ACCOUNT,
        secret_arn=arns.get,
    )
    assert found == [("secretsmanager:GetSecretValue", arns["agents/b.example"], {})]
    with pytest.raises(UnknownOperation):  # a name whose ARN is not known
        authorize(
            "secretsmanager",
            "GetSecretValue",
            {"SecretId": "agents/c.example"},
            region=REGION,
            account=ACCOUNT,
            secret_arn=arns.get,
        )


def test_batches_are_their_own_actions_per_table() -> None:
    assert auth("dynamodb", "BatchGetItem", RequestItems={"tasks": {}}) == [
        ("dynamodb:BatchGetItem", TABLE)
    ]
    assert auth("dynamodb", "BatchWriteItem", RequestItems={"tasks": []}) == [
        ("dynamodb:BatchWriteItem", TABLE)
    ]


def test_stream_reads_name_the_stream() -> None:
    assert auth("dynamodbstreams", "DescribeStream", StreamArn=STREAM) == [
        ("dynamodb:DescribeStream", STREAM)
    ]
    assert auth("dynamodbstreams", "GetShardIterator", StreamArn=STREAM, ShardId="s") == [
        ("dynamodb:GetShardIterator", STREAM)
    ]
    assert auth("dynamodbstreams", "GetRecords", ShardIterator=f"{STREAM}|1|AAAA") == [
        ("dynamodb:GetRecords", STREAM)
    ]
    with pytest.raises(UnknownOperation):
        auth("dynamodbstreams", "GetRecords", ShardIterator="opaque")


def test_sqs_calls_name_the_queue_and_batches_their_single_action() -> None:
    assert auth("sqs", "SendMessage", QueueUrl=QUEUE_URL, MessageBody="x") == [
        ("sqs:SendMessage", QUEUE)
    ]
    assert auth("sqs", "SendMessageBatch", QueueUrl=QUEUE_URL, Entries=[]) == [
        ("sqs:SendMessage", QUEUE)
    ]
    assert auth("sqs", "DeleteMessageBatch", QueueUrl=QUEUE_URL, Entries=[]) == [
        ("sqs:DeleteMessage", QUEUE)
    ]
    other_region = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/q"
    assert auth("sqs", "ReceiveMessage", QueueUrl=other_region) == [
        ("sqs:ReceiveMessage", f"arn:aws:sqs:eu-west-1:{ACCOUNT}:q")
    ]
    assert auth("sqs", "GetQueueUrl", QueueName="q") == [
        ("sqs:GetQueueUrl", f"arn:aws:sqs:{REGION}:{ACCOUNT}:q")
    ]


def test_step_functions_calls_name_the_machine_or_the_execution() -> None:
    assert auth("stepfunctions", "StartExecution", stateMachineArn=MACHINE, name="t-1") == [
        ("states:StartExecution", MACHINE)
    ]
    assert auth("stepfunctions", "StopExecution", executionArn=EXECUTION) == [
        ("states:StopExecution", EXECUTION)
    ]
    assert auth("stepfunctions", "DescribeExecution", executionArn=EXECUTION) == [
        ("states:DescribeExecution", EXECUTION)
    ]


def test_lambda_invoke_names_the_function_however_it_is_given() -> None:
    assert auth("lambda", "Invoke", FunctionName="worker") == [("lambda:InvokeFunction", FUNCTION)]
    assert auth("lambda", "Invoke", FunctionName=FUNCTION, Qualifier="live") == [
        ("lambda:InvokeFunction", f"{FUNCTION}:live")
    ]
    assert auth("lambda", "Invoke", FunctionName=f"{ACCOUNT}:function:worker") == [
        ("lambda:InvokeFunction", FUNCTION)
    ]


@pytest.mark.parametrize(
    ("service", "operation", "params"),
    [
        ("dynamodb", "CreateTable", {"TableName": "tasks"}),
        ("dynamodb", "ExecuteStatement", {"Statement": "SELECT * FROM tasks"}),
        ("dynamodb", "TransactWriteItems", {"TransactItems": [{"Upsert": {"TableName": "t"}}]}),
        ("sqs", "CreateQueue", {"QueueName": "q"}),
        ("stepfunctions", "CreateStateMachine", {"name": "m"}),
        ("lambda", "CreateFunction", {"FunctionName": "f"}),
        ("s3", "CreateBucket", {"Bucket": "b"}),
        ("secretsmanager", "GetSecretValue", {"SecretId": "by-name"}),  # its ARN is unknown
        ("bedrock-runtime", "ApplyGuardrail", {"guardrailIdentifier": "g"}),
        ("kms", "Decrypt", {"CiphertextBlob": b"x"}),
    ],
)
def test_unknown_operations_raise(service: str, operation: str, params: dict[str, Any]) -> None:
    with pytest.raises(UnknownOperation):
        authorizations(service, operation, params, region=REGION, account=ACCOUNT)


# -- attribution and recording ----------------------------------------------------------------


def test_acting_as_reaches_threads_that_copy_the_context() -> None:
    import contextvars

    seen: list[str | None] = []
    with acting_as("StreamFunction"):
        context = contextvars.copy_context()
        plain = threading.Thread(target=lambda: seen.append(current_principal()))
        plain.start()
        plain.join()
        copied = threading.Thread(
            target=context.run, args=(lambda: seen.append(current_principal()),)
        )
        copied.start()
        copied.join()
    # A thread started without the context (moto's interpreter) acts for nobody.
    assert seen == [None, "StreamFunction"]
    assert current_principal() is None
