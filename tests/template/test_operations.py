"""Production operations: log retention, execution logs, alarms, concurrency, table safety."""

from __future__ import annotations

from typing import Any

import pytest
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from tests.template.sam import FUNCTIONS, condition_holds, resources_of_type, rest_api_body

ALARM_ACTIONS = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
# Alarm -> (namespace, metric, dimensions) it watches.
ALARMS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "PushDeadLetterQueueAlarm": (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        {"QueueName": {"Fn::GetAtt": ["PushDeadLetterQueue", "QueueName"]}},
    ),
    "PushStreamFailureQueueAlarm": (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        {"QueueName": {"Fn::GetAtt": ["PushStreamFailureQueue", "QueueName"]}},
    ),
    "WebhookSenderIteratorAgeAlarm": (
        "AWS/Lambda",
        "IteratorAge",
        {"FunctionName": {"Ref": "WebhookSenderFunction"}},
    ),
    "FlowExecutionsFailedAlarm": (
        "AWS/States",
        "ExecutionsFailed",
        {"StateMachineArn": {"Ref": "FlowStateMachine"}},
    ),
    "FlowExecutionsTimedOutAlarm": (
        "AWS/States",
        "ExecutionsTimedOut",
        {"StateMachineArn": {"Ref": "FlowStateMachine"}},
    ),
    "Api5xxAlarm": (
        "AWS/ApiGateway",
        "5XXError",
        {"ApiName": {"Ref": "AWS::StackName"}, "Stage": {"Ref": "StageName"}},
    ),
    **{
        f"{function}{metric}Alarm": ("AWS/Lambda", metric, {"FunctionName": {"Ref": function}})
        for function in FUNCTIONS
        for metric in ("Errors", "Throttles")
        # A refused credential is an authorizer error (the 401's exception): its failures
        # show as API 5xx (AUTHORIZER_FAILURE) instead.
        if (function, metric) != ("AuthorizerFunction", "Errors")
    },
}
# Function -> its reserved-concurrency parameter.
RESERVATIONS = {
    "FlowWorkerFunction": "FlowWorkerReservedConcurrency",
    "SendMessageFunction": "SendMessageReservedConcurrency",
    "StreamFunction": "StreamReservedConcurrency",
    # GetTask polls and GET subscriptions (streams that hold an execution): a cap of their own.
    "GetTaskFunction": "GetTaskReservedConcurrency",
}
# Lambda keeps at least this many of the account's executions unreserved.
UNRESERVED_MINIMUM = 100
DEFAULT_ACCOUNT_CONCURRENCY = 1000


def _log_groups(cfn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in resources_of_type(cfn, "AWS::Logs::LogGroup").items()}


# -- Logs --------------------------------------------------------------------------------------


def test_every_function_logs_to_a_group_with_retention(cfn: dict[str, Any]) -> None:
    groups = _log_groups(cfn)
    names = {str(props["LogGroupName"]) for props in groups.values()}
    for function in FUNCTIONS:
        # Lambda's default group name: the stack's group is the one the function writes to.
        assert str({"Fn::Sub": f"/aws/lambda/${{{function}}}"}) in names, function
    assert set(groups) == {f"{f}LogGroup" for f in FUNCTIONS} | {
        "ApiAccessLogGroup",
        "FlowStateMachineLogGroup",
    }
    for props in groups.values():
        assert props["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_log_retention_accepts_exactly_what_cloudwatch_does(cfn: dict[str, Any]) -> None:
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::Logs::LogGroup")
    accepted = schema.schema["properties"]["RetentionInDays"]["enum"]
    parameter = cfn["Parameters"]["LogRetentionDays"]
    assert parameter["AllowedValues"] == accepted
    assert parameter["Default"] == 30


def test_state_machine_logs_failures_without_execution_data(cfn: dict[str, Any]) -> None:
    logging = cfn["Resources"]["FlowStateMachine"]["Properties"]["LoggingConfiguration"]
    assert logging["Level"] == "ERROR"
    assert logging["IncludeExecutionData"] is False  # inputs carry the users' messages
    assert logging["Destinations"] == [
        {
            "CloudWatchLogsLogGroup": {
                "LogGroupArn": {"Fn::GetAtt": ["FlowStateMachineLogGroup", "Arn"]}
            }
        }
    ]
    name = _log_groups(cfn)["FlowStateMachineLogGroup"]["LogGroupName"]["Fn::Sub"]
    assert name.startswith("/aws/vendedlogs/states/")


# -- Alarms ------------------------------------------------------------------------------------


def test_the_alarm_set(cfn: dict[str, Any]) -> None:
    assert set(resources_of_type(cfn, "AWS::CloudWatch::Alarm")) == set(ALARMS)


@pytest.mark.parametrize("name", sorted(ALARMS))
def test_alarm_watches_its_metric_and_notifies_the_topic(cfn: dict[str, Any], name: str) -> None:
    props = cfn["Resources"][name]["Properties"]
    namespace, metric, dimensions = ALARMS[name]
    assert (props["Namespace"], props["MetricName"]) == (namespace, metric)
    assert {d["Name"]: d["Value"] for d in props["Dimensions"]} == dimensions
    assert props["AlarmActions"] == ALARM_ACTIONS
    assert props["OKActions"] == ALARM_ACTIONS
    assert props["TreatMissingData"] == "notBreaching"  # no traffic is not a problem
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["AlarmDescription"]
    if name != "WebhookSenderIteratorAgeAlarm":  # any one occurrence is worth a look
        assert (props["Threshold"], props["EvaluationPeriods"]) == (0, 1)


def test_iterator_age_alarm_tolerates_short_retries(cfn: dict[str, Any]) -> None:
    props = cfn["Resources"]["WebhookSenderIteratorAgeAlarm"]["Properties"]
    assert props["Statistic"] == "Maximum"
    assert props["Threshold"] == 120_000  # ms: two minutes behind the table
    assert props["EvaluationPeriods"] * props["Period"] == 300  # for five minutes in a row
    assert props["DatapointsToAlarm"] == props["EvaluationPeriods"]


def test_api_alarm_names_the_deployed_api(cfn: dict[str, Any]) -> None:
    # CloudWatch names an API by its name: SAM titles the OpenAPI body with the stack name.
    assert rest_api_body(cfn)["info"]["title"] == {"Ref": "AWS::StackName"}
    assert "Name" not in cfn["Resources"]["Api"]["Properties"]


def test_topic_and_subscription_only_with_an_email(cfn: dict[str, Any]) -> None:
    topic = cfn["Resources"]["AlarmTopic"]
    subscription = cfn["Resources"]["AlarmTopicEmail"]
    assert topic["Type"] == "AWS::SNS::Topic"
    assert subscription["Properties"] == {
        "TopicArn": {"Ref": "AlarmTopic"},
        "Protocol": "email",
        "Endpoint": {"Ref": "AlarmEmail"},
    }
    assert topic["Condition"] == subscription["Condition"] == "HasAlarmEmail"
    assert cfn["Outputs"]["AlarmTopicArn"]["Condition"] == "HasAlarmEmail"
    assert cfn["Parameters"]["AlarmEmail"]["Default"] == ""
    assert not condition_holds(cfn, "HasAlarmEmail", {})
    assert condition_holds(cfn, "HasAlarmEmail", {"AlarmEmail": "ops@example.com"})


# -- Concurrency -------------------------------------------------------------------------------


@pytest.mark.parametrize("function", sorted(RESERVATIONS))
def test_reserved_concurrency_is_optional(cfn: dict[str, Any], function: str) -> None:
    parameter = RESERVATIONS[function]
    reserved = cfn["Resources"][function]["Properties"]["ReservedConcurrentExecutions"]
    condition, value, otherwise = reserved["Fn::If"]
    assert value == {"Ref": parameter}
    assert otherwise == {"Ref": "AWS::NoValue"}
    for unset in ("0", "-1"):
        assert not condition_holds(cfn, condition, {parameter: unset}), unset
    for reserved_value in ("1", "10", "100", "250"):
        assert condition_holds(cfn, condition, {parameter: reserved_value}), reserved_value
    assert cfn["Parameters"][parameter]["MinValue"] == -1


def test_default_reservations_fit_the_default_account_quota(cfn: dict[str, Any]) -> None:
    defaults = {f: int(cfn["Parameters"][p]["Default"]) for f, p in RESERVATIONS.items()}
    assert all(value > 0 for value in defaults.values())
    assert sum(defaults.values()) <= DEFAULT_ACCOUNT_CONCURRENCY - UNRESERVED_MINIMUM
    # Only the functions named here reserve anything.
    others = set(resources_of_type(cfn, "AWS::Lambda::Function")) - set(RESERVATIONS)
    for function in others:
        assert "ReservedConcurrentExecutions" not in cfn["Resources"][function]["Properties"]


# -- Table and outputs -------------------------------------------------------------------------


def test_table_survives_mistakes(cfn: dict[str, Any]) -> None:
    table = cfn["Resources"]["TasksTable"]
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    props = table["Properties"]
    assert props["DeletionProtectionEnabled"] is True
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}


def test_operator_outputs(cfn: dict[str, Any]) -> None:
    outputs = cfn["Outputs"]
    assert outputs["PushDeadLetterQueueUrl"]["Value"] == {"Ref": "PushDeadLetterQueue"}
    assert outputs["PushStreamFailureQueueUrl"]["Value"] == {"Ref": "PushStreamFailureQueue"}
    assert outputs["ApiAccessLogGroupName"]["Value"] == {"Ref": "ApiAccessLogGroup"}
    assert outputs["FlowStateMachineLogGroupName"]["Value"] == {"Ref": "FlowStateMachineLogGroup"}
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": "AlarmTopic"}
