"""Least privilege, read from the translated roles: the exact grants of every function.

Adding a permission to template.yaml must break a test here; update the tables on purpose.
That the grants are enough is proven from the calls the functions make in the integration and
e2e suites (tests/iam_check.py, evaluated at the end of every session: tests/conftest.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.template.sam import (
    as_list,
    grants,
    resolve_ifs,
    resource_key,
    resources_of_type,
    role_of,
    statements,
    translate,
)

TABLE = resource_key({"Fn::GetAtt": ["TasksTable", "Arn"]})
TABLE_INDEXES = resource_key({"Fn::Sub": "${TasksTable.Arn}/index/*"})
FLOW = resource_key({"Ref": "FlowStateMachine"})
# The worker names the state machine by its fixed name (a Ref would be a circular dependency).
FLOW_BY_NAME = resource_key(
    {
        "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
        "stateMachine:${AWS::StackName}-flow-${WorkflowType}"
    }
)
FLOW_WORKER = resource_key(
    {
        "Fn::Sub": [
            "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${functionName}*",
            {"functionName": {"Ref": "FlowWorkerFunction"}},
        ]
    }
)
# The delegations' timer, by its fixed name too; the remote agents' secrets under the prefix.
TIMER_BY_NAME = resource_key(
    {
        "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
        "stateMachine:${AWS::StackName}-delegations"
    }
)
TIMER_EXECUTIONS = resource_key(
    {
        "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
        "execution:${AWS::StackName}-delegations:*"
    }
)
AGENT_SECRETS = resource_key(
    {
        "Fn::If": [
            "UsesDefaultAgentSecretsPrefix",
            {
                "Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:"
                "${AWS::AccountId}:secret:${AWS::StackName}/agents/*"
            },
            {
                "Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:"
                "${AWS::AccountId}:secret:${AgentSecretsPrefix}*"
            },
        ]
    }
)

TABLE_STREAM = resource_key({"Fn::GetAtt": ["TasksTable", "StreamArn"]})
RETRY_QUEUE = resource_key({"Fn::GetAtt": ["PushRetryQueue", "Arn"]})
STREAM_FAILURE_QUEUE = resource_key({"Fn::GetAtt": ["PushStreamFailureQueue", "Arn"]})
DEAD_LETTER_QUEUE = resource_key({"Fn::GetAtt": ["PushDeadLetterQueue", "Arn"]})
READ = {"dynamodb:GetItem": {TABLE}, "dynamodb:Query": {TABLE}}
# Transactions are authorized item by item: Put and Update, and ConditionCheck as
# ConditionCheckItem (a flow step's event at seq 1 or 2 is checked against the task's header:
# store/dynamodb/tasks.py `_append_early_event`, the worker's only).
WRITE = {**READ, "dynamodb:PutItem": {TABLE}, "dynamodb:UpdateItem": {TABLE}}
# The content bucket's objects (tasks/{taskId}/...): a function that hands out URLs to stored
# content reads it (a presigned URL is authorized as its signer); those that accept or emit
# content write it.
CONTENT = resource_key({"Fn::Sub": "${ContentBucket.Arn}/tasks/*"})
CONTENT_READ = {"s3:GetObject": {CONTENT}}
CONTENT_WRITE = {**CONTENT_READ, "s3:PutObject": {CONTENT}}

# A state machine invokes the worker and sets up its own execution-log delivery (Logs API:
# no resource ARNs).
STATE_MACHINE_GRANTS: dict[str, set[str]] = {
    "lambda:InvokeFunction": {FLOW_WORKER},
    **{
        action: {"*"}
        for action in (
            "logs:CreateLogDelivery",
            "logs:GetLogDelivery",
            "logs:UpdateLogDelivery",
            "logs:DeleteLogDelivery",
            "logs:ListLogDeliveries",
            "logs:PutResourcePolicy",
            "logs:DescribeResourcePolicies",
            "logs:DescribeLogGroups",
        )
    },
}

GRANTS: dict[str, dict[str, set[str]]] = {
    # One API key record by the key's hash (only API key items: a LeadingKeys condition,
    # test_the_authorizer_reads_api_key_items_only); JWTs need no AWS call (the JWKS is public).
    "AuthorizerFunction": {"dynamodb:GetItem": {TABLE}},
    "AgentCardFunction": {},
    # A task, and a GET subscription's snapshot and event-log tail, are read as its partition;
    # a GET subscription leases its connection (writes of lease items only: a LeadingKeys
    # condition, test_lease_writes_are_scoped_to_lease_items).
    "GetTaskFunction": {
        "dynamodb:Query": {TABLE},
        "dynamodb:PutItem": {TABLE},
        "dynamodb:DeleteItem": {TABLE},
        **CONTENT_READ,
    },
    # Counters by key, tasks through the indexes (GetItem never addresses an index).
    # A page's contents (artifacts, history) come in BatchGetItem rounds, never a read per task.
    "ListTasksFunction": {
        "dynamodb:GetItem": {TABLE},
        "dynamodb:BatchGetItem": {TABLE},
        "dynamodb:Query": {TABLE, TABLE_INDEXES},
        **CONTENT_READ,
    },
    # A blocking send releases its connection lease (DeleteItem of lease items only).
    "SendMessageFunction": {
        **WRITE,
        "dynamodb:DeleteItem": {TABLE},
        "states:StartExecution": {FLOW},
        **CONTENT_WRITE,
    },
    # Streaming sends start executions (cancel stops none: EXPRESS has no StopExecution).
    # JSON-RPC on `POST /` serves every method here too: ListTasks (the indexes) and the push
    # config methods (DeleteItem).
    "StreamFunction": {
        **WRITE,
        "dynamodb:Query": {TABLE, TABLE_INDEXES},
        "dynamodb:BatchGetItem": {TABLE},
        "dynamodb:DeleteItem": {TABLE},
        "states:StartExecution": {FLOW},
        **CONTENT_WRITE,
    },
    # A step that asks for another starts its execution (one execution per step); a
    # delegating step starts (and, the round complete, stops) its round's timer and reads the
    # remote agents' headers.
    "FlowWorkerFunction": {
        **WRITE,
        "dynamodb:ConditionCheckItem": {TABLE},
        "states:StartExecution": {FLOW_BY_NAME, TIMER_BY_NAME},
        "states:StopExecution": {TIMER_EXECUTIONS},
        "secretsmanager:GetSecretValue": {AGENT_SECRETS},
        **CONTENT_WRITE,
        "s3:AbortMultipartUpload": {CONTENT},
    },
    # A remote agent's notification: the round's records and the task (transactions with
    # condition checks), forwarded artifacts' content, the flow's next step; the completed
    # round's timer stopped.
    "DelegationReceiverFunction": {
        **WRITE,
        "dynamodb:ConditionCheckItem": {TABLE},
        "states:StartExecution": {FLOW},
        "states:StopExecution": {TIMER_EXECUTIONS},
        "s3:PutObject": {CONTENT},
    },
    # Config CRUD: its items only ever live in the task partitions it checks the owner of;
    # a new config marks its task's header (`hooks`) first.
    "PushConfigFunction": {
        **READ,
        "dynamodb:PutItem": {TABLE},
        "dynamodb:UpdateItem": {TABLE},
        "dynamodb:DeleteItem": {TABLE},
    },
    # Reads a batch's headers (one BatchGetItem), configs and events, parks a failing
    # webhook, queues its deliveries. Lambda's pollers (its two event source mappings) read the
    # table's stream and receive from the retry queue with its role; ListStreams takes no
    # resource but "*" (test_the_sender_reads_only_its_own_stream_and_queue).
    "WebhookSenderFunction": {
        **READ,
        "dynamodb:BatchGetItem": {TABLE},
        "dynamodb:UpdateItem": {TABLE},
        "dynamodb:DescribeStream": {TABLE_STREAM},
        "dynamodb:GetShardIterator": {TABLE_STREAM},
        "dynamodb:GetRecords": {TABLE_STREAM},
        "dynamodb:ListStreams": {"*"},
        "sqs:ReceiveMessage": {RETRY_QUEUE},
        "sqs:DeleteMessage": {RETRY_QUEUE},
        "sqs:GetQueueAttributes": {RETRY_QUEUE},
        "sqs:SendMessage": {RETRY_QUEUE, STREAM_FAILURE_QUEUE, DEAD_LETTER_QUEUE},
        "sqs:ChangeMessageVisibility": {RETRY_QUEUE},
        **CONTENT_READ,
    },
    "FlowStateMachine": STATE_MACHINE_GRANTS,
    # A delegation round's timer invokes the worker's check of the round.
    "DelegationTimerStateMachine": STATE_MACHINE_GRANTS,
}

# X-Ray's policy only with Tracing=Active (tests/template/test_first_deploy.py).
LAMBDA_MANAGED = {"arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"}
STATES_MANAGED: set[str] = set()
# What SAM attaches for a function's DynamoDB and SQS events: reading every stream and queue
# of the account ("*"). The sender's mappings are explicit resources, so no role has them.
EVENT_SOURCE_MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole",
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole",
}


def _principal_services(role: dict[str, Any]) -> set[str]:
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert as_list(statement["Action"]) == ["sts:AssumeRole"]
    assert set(statement["Principal"]) == {"Service"}
    return set(as_list(statement["Principal"]["Service"]))


def test_every_function_and_state_machine_is_covered(cfn: dict[str, Any]) -> None:
    principals = set(resources_of_type(cfn, "AWS::Lambda::Function")) | set(
        resources_of_type(cfn, "AWS::StepFunctions::StateMachine")
    )
    assert principals == set(GRANTS)


def test_each_principal_has_its_own_role(cfn: dict[str, Any]) -> None:
    roles = [role_of(cfn, name)[0] for name in GRANTS]
    assert len(set(roles)) == len(roles)
    # The other role is API Gateway's account-wide logging role (tests/template/test_api.py).
    assert set(roles) | {"ApiGatewayLoggingRole"} == set(resources_of_type(cfn, "AWS::IAM::Role"))


@pytest.mark.parametrize("name", sorted(GRANTS))
def test_exact_grants(cfn: dict[str, Any], name: str) -> None:
    _, role = role_of(cfn, name)
    assert grants(role) == GRANTS[name]


@pytest.mark.parametrize("name", sorted(GRANTS))
def test_managed_policies_and_trust(cfn: dict[str, Any], name: str) -> None:
    _, role = role_of(cfn, name)
    is_state_machine = name.endswith("StateMachine")
    expected = STATES_MANAGED if is_state_machine else LAMBDA_MANAGED
    assert set(resolve_ifs(cfn, role["Properties"].get("ManagedPolicyArns", []))) == expected
    assert _principal_services(role) == {
        "states.amazonaws.com" if is_state_machine else "lambda.amazonaws.com"
    }


def test_card_function_touches_no_data(cfn: dict[str, Any]) -> None:
    _, role = role_of(cfn, "AgentCardFunction")
    actions = set(grants(role))
    assert not {a for a in actions if a.startswith(("dynamodb:", "states:", "sqs:"))}


def test_readers_cannot_start_or_stop_work(cfn: dict[str, Any]) -> None:
    for name in ("GetTaskFunction", "ListTasksFunction"):
        # Unconditionally; GetTask's lease writes are scoped (test_lease_writes_are_scoped...).
        # s3:GetObject: stored content, read or handed out as URLs.
        actions = _unconditional_actions(role_of(cfn, name)[1])
        reads = {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem", "s3:GetObject"}
        assert actions <= reads, name
    send = set(grants(role_of(cfn, "SendMessageFunction")[1]))
    assert "states:StartExecution" in send
    assert "states:StopExecution" not in send
    stream = set(grants(role_of(cfn, "StreamFunction")[1]))
    assert "states:StartExecution" in stream  # streams send
    # Nothing stops a flow step's execution: cancel is a state change the running step sees.
    # Only a delegation round's timer is stopped, when the round completes before it ends.
    for name in GRANTS:
        stopped = grants(role_of(cfn, name)[1]).get("states:StopExecution", set())
        assert stopped <= {TIMER_EXECUTIONS}, name
    worker = set(grants(role_of(cfn, "FlowWorkerFunction")[1]))
    assert {a for a in worker if a.startswith("states:")} == {
        "states:StartExecution",
        "states:StopExecution",
    }


# Actions AWS authorizes on "*" only (no resource-level permissions), each with why it is
# granted: the Service Authorization Reference lists no resource type for them.
RESOURCE_STAR_ONLY = {"dynamodb:ListStreams"}  # Lambda's stream poller asks for it


def test_no_broad_grants_anywhere(cfn: dict[str, Any]) -> None:
    for role_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        for statement in statements(role):
            actions = as_list(statement["Action"])
            resources = as_list(statement["Resource"])
            assert not [a for a in actions if "*" in a], (role_id, actions)
            assert "dynamodb:Scan" not in actions, role_id
            if "dynamodb:DeleteItem" in actions and "Condition" not in statement:
                # Only push config deletion deletes anything; others delete lease items only.
                deleters = {role_of(cfn, f)[0] for f in ("PushConfigFunction", "StreamFunction")}
                assert role_id in deleters, role_id
            # Batch reads of a list page are fine; batch writes would bypass the conditions.
            assert not [a for a in actions if a.lower().startswith(("dynamodb:batchw", "iam:"))]
            data = any(a.startswith(("dynamodb:", "states:", "sqs:")) for a in actions)
            if data and "*" in resources:
                assert set(actions) <= RESOURCE_STAR_ONLY, (role_id, statement)
                assert resources == ["*"], (role_id, statement)


def test_no_role_gets_the_event_source_managed_policies(cfn: dict[str, Any]) -> None:
    """SAM attaches AWSLambdaDynamoDBExecutionRole (streams) or AWSLambdaSQSQueueExecutionRole
    (queues) for a function's DynamoDB or SQS event: their actions on every stream and queue
    ("*"). The sender's mappings are AWS::Lambda::EventSourceMapping resources instead, and no
    function has such an event."""
    for role_id, role in resources_of_type(cfn, "AWS::IAM::Role").items():
        managed = role["Properties"].get("ManagedPolicyArns", [])
        assert not EVENT_SOURCE_MANAGED & {a for a in managed if isinstance(a, str)}, role_id
    for name, function in resources_of_type(cfn, "AWS::Serverless::Function").items():
        events = function["Properties"].get("Events") or {}
        assert not [e for e in events.values() if e["Type"] in ("DynamoDB", "SQS")], name


def test_the_sender_reads_only_its_own_stream_and_queue(cfn: dict[str, Any]) -> None:
    """What Lambda's pollers do with the sender's role (stream and queue reads), granted on
    the table's stream and the retry queue only; each mapping reads what it is granted."""
    sender = grants(role_of(cfn, "WebhookSenderFunction")[1])
    for action in ("dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"):
        assert sender[action] == {TABLE_STREAM}, action
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
        assert sender[action] == {RETRY_QUEUE}, action
    mappings = {
        name: m["Properties"]
        for name, m in resources_of_type(cfn, "AWS::Lambda::EventSourceMapping").items()
    }
    assert {resource_key(m["EventSourceArn"]) for m in mappings.values()} == {
        TABLE_STREAM,
        RETRY_QUEUE,
    }
    for mapping in mappings.values():
        assert mapping["FunctionName"] == {"Ref": "WebhookSenderFunction"}
    # The stream's failed batches go to the on-failure queue the role may send to.
    (stream,) = [m for m in mappings.values() if resource_key(m["EventSourceArn"]) == TABLE_STREAM]
    destination = stream["DestinationConfig"]["OnFailure"]["Destination"]
    assert resource_key(destination) in sender["sqs:SendMessage"]


def test_the_authorizer_reads_api_key_items_only(cfn: dict[str, Any]) -> None:
    """One GetItem on the table, only of items whose partition key starts with APIKEY# (an API
    key's record: store/dynamodb/keys.py; no other item's partition key starts so)."""
    from a2a_serverless.store.dynamodb import keys

    (statement,) = statements(role_of(cfn, "AuthorizerFunction")[1])
    assert as_list(statement["Action"]) == ["dynamodb:GetItem"]
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [keys.API_KEY_PREFIX + "*"]}
    }
    key = keys.api_key_key("k1")["pk"]["S"]
    assert key.startswith(keys.API_KEY_PREFIX)
    for other in (keys.TASK_PREFIX, keys.OWNER_PREFIX, keys.DEDUPE_PREFIX, keys.API_KEY_LIST_PK):
        assert not other.startswith(keys.API_KEY_PREFIX), other


def _unconditional_actions(role: dict[str, Any]) -> set[str]:
    return {
        action
        for statement in statements(role)
        if "Condition" not in statement
        for action in as_list(statement["Action"])
    }


# The functions that lease long-lived connections beyond what they may do anyway: their lease
# writes, on lease items only (store/dynamodb/keys.py LEASE_PREFIX; StreamFunction writes and
# deletes anywhere already, for its other methods).
LEASE_WRITES = {
    "GetTaskFunction": ["dynamodb:PutItem", "dynamodb:DeleteItem"],
    "SendMessageFunction": ["dynamodb:DeleteItem"],
}


def test_lease_writes_are_scoped_to_lease_items(cfn: dict[str, Any]) -> None:
    """A lease write is allowed on items whose partition key starts with L# only (a connection
    lease: no other item's partition key starts so)."""
    from a2a_serverless.store.dynamodb import keys

    for name, actions in LEASE_WRITES.items():
        (statement,) = [s for s in statements(role_of(cfn, name)[1]) if "Condition" in s]
        assert as_list(statement["Action"]) == actions, name
        assert statement["Condition"] == {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [keys.LEASE_PREFIX + "*"]}
        }, name
        assert not set(actions) & _unconditional_actions(role_of(cfn, name)[1]), name
    assert keys.lease_pk("P#alice")["S"].startswith(keys.LEASE_PREFIX)
    for other in (
        keys.TASK_PREFIX,
        keys.OWNER_PREFIX,
        keys.DEDUPE_PREFIX,
        keys.API_KEY_PREFIX,
        keys.API_KEY_LIST_PK,
    ):
        assert not other.startswith(keys.LEASE_PREFIX), other


def test_only_the_authorizer_and_lease_writes_have_conditions(cfn: dict[str, Any]) -> None:
    """grants() reads action and resource only: every Condition of a role is checked here."""
    with_conditions = {
        role_id
        for role_id, role in resources_of_type(cfn, "AWS::IAM::Role").items()
        for statement in statements(role)
        if "Condition" in statement
    }
    assert with_conditions == {
        role_of(cfn, name)[0] for name in ("AuthorizerFunction", *LEASE_WRITES)
    }


def test_grant_check_can_fail(sam: dict[str, Any]) -> None:
    widened = copy.deepcopy(sam)
    statement = widened["Resources"]["GetTaskFunction"]["Properties"]["Policies"][0]["Statement"]
    statement[0]["Action"].append("dynamodb:Scan")
    role = role_of(translate(widened), "GetTaskFunction")[1]
    assert grants(role) != GRANTS["GetTaskFunction"]
