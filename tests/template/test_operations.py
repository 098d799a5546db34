"""Production operations: log retention, execution logs, alarms, concurrency, table safety."""

from __future__ import annotations

import re
from typing import Any

import botocore.session
import pytest
from botocore import xform_name
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from tests.template.sam import (
    FUNCTIONS,
    ROOT,
    condition_holds,
    resolve_if,
    resources_of_type,
    rest_api_body,
)

ALARM_ACTIONS = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
FLOW_STATE_MACHINE = {"StateMachineArn": {"Ref": "FlowStateMachine"}}
TABLE = {"TableName": {"Ref": "TasksTable"}}
INDEX = {**TABLE, "GlobalSecondaryIndexName": "byOwner"}


def _function(name: str) -> dict[str, Any]:
    return {"FunctionName": {"Ref": name}}


# Alarm on one metric -> (namespace, metric, dimensions, statistic, period, evaluation periods,
# datapoints to alarm, threshold). None: the threshold depends on the function's timeout.
ALARMS: dict[str, tuple[str, str, dict[str, Any], str, int, int, int, float | None]] = {
    "PushDeadLetterQueueAlarm": (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        {"QueueName": {"Fn::GetAtt": ["PushDeadLetterQueue", "QueueName"]}},
        "Maximum",
        300,
        1,
        1,
        0,
    ),
    "PushStreamFailureQueueAlarm": (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        {"QueueName": {"Fn::GetAtt": ["PushStreamFailureQueue", "QueueName"]}},
        "Maximum",
        300,
        1,
        1,
        0,
    ),
    # Two minutes behind the table's stream, for five minutes in a row.
    "WebhookSenderIteratorAgeAlarm": (
        "AWS/Lambda",
        "IteratorAge",
        _function("WebhookSenderFunction"),
        "Maximum",
        60,
        5,
        5,
        120_000,
    ),
    "WebhookSenderFunctionDurationAlarm": (
        "AWS/Lambda",
        "Duration",
        _function("WebhookSenderFunction"),
        "p99",
        300,
        1,
        1,
        None,
    ),
    "FlowExecutionsFailedAlarm": (
        "AWS/States",
        "ExecutionsFailed",
        FLOW_STATE_MACHINE,
        "Sum",
        300,
        1,
        1,
        0,
    ),
    "FlowExecutionsTimedOutAlarm": (
        "AWS/States",
        "ExecutionsTimedOut",
        FLOW_STATE_MACHINE,
        "Sum",
        300,
        1,
        1,
        0,
    ),
    "FlowExecutionsThrottledAlarm": (
        "AWS/States",
        "ExecutionThrottled",
        FLOW_STATE_MACHINE,
        "Sum",
        300,
        1,
        1,
        0,
    ),
    "FlowWorkerFunctionErrorsAlarm": (
        "AWS/Lambda",
        "Errors",
        _function("FlowWorkerFunction"),
        "Sum",
        300,
        1,
        1,
        0,
    ),
    "FlowWorkerFunctionThrottlesAlarm": (
        "AWS/Lambda",
        "Throttles",
        _function("FlowWorkerFunction"),
        "Sum",
        300,
        1,
        1,
        0,
    ),
    "FlowWorkerFunctionDurationAlarm": (
        "AWS/Lambda",
        "Duration",
        _function("FlowWorkerFunction"),
        "p99",
        300,
        1,
        1,
        None,
    ),
    # 5XXError is 0 or 1 per request: its average is the share of 5xx answers.
    "Api5xxAlarm": (
        "AWS/ApiGateway",
        "5XXError",
        {"ApiName": {"Ref": "AWS::StackName"}, "Stage": {"Ref": "StageName"}},
        "Average",
        60,
        5,
        3,
        0.01,
    ),
}
# Alarm on a sum of metrics -> (metrics as (namespace, metric, dimensions), statistic, period,
# evaluation periods, datapoints to alarm). Each fires when the sum is over 0.
SUM_ALARMS: dict[str, tuple[list[tuple[str, str, dict[str, Any]]], str, int, int, int]] = {
    # What the 5xx rate cannot see: a streamed response failing after its status went out, and
    # the webhook sender (no API).
    "StreamAndWebhookFunctionErrorsAlarm": (
        [
            ("AWS/Lambda", "Errors", _function(name))
            for name in (
                "SendMessageFunction",
                "StreamFunction",
                "GetTaskFunction",
                "WebhookSenderFunction",
            )
        ],
        "Sum",
        300,
        1,
        1,
    ),
    "TableThrottlesAlarm": (
        [
            ("AWS/DynamoDB", metric, dimensions)
            for dimensions in (TABLE, INDEX)
            for metric in ("ReadThrottleEvents", "WriteThrottleEvents")
        ],
        "Sum",
        60,
        5,
        3,
    ),
    # SystemErrors has no table-wide series: one per operation (see the test below).
    "TableSystemErrorsAlarm": (
        [
            ("AWS/DynamoDB", "SystemErrors", {**TABLE, "Operation": operation})
            for operation in (
                "GetItem",
                "BatchGetItem",
                "Query",
                "PutItem",
                "UpdateItem",
                "DeleteItem",
                "TransactWriteItems",
            )
        ],
        "Sum",
        60,
        5,
        3,
    ),
}
# The one alarm that exists on STANDARD only (EXPRESS has no StateTransition quota).
STANDARD_ONLY = {"FlowExecutionsThrottledAlarm"}
# A function's Duration alarm fires at this share of its timeout.
NEAR_TIMEOUT = 0.8
# Function -> its reserved-concurrency parameter.
RESERVATIONS = {
    "FlowWorkerFunction": "FlowWorkerReservedConcurrency",
    "SendMessageFunction": "SendMessageReservedConcurrency",
    "StreamFunction": "StreamReservedConcurrency",
    # GetTask polls and GET subscriptions (streams that hold an execution): a cap of their own.
    "GetTaskFunction": "GetTaskReservedConcurrency",
}
STORE = ROOT / "shared" / "a2a_serverless" / "store" / "dynamodb"


def _log_groups(cfn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in resources_of_type(cfn, "AWS::Logs::LogGroup").items()}


def _dimensions(dimensions: list[dict[str, Any]]) -> dict[str, Any]:
    return {d["Name"]: d["Value"] for d in dimensions}


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
        "DelegationTimerStateMachineLogGroup",
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


def _alarms(cfn: dict[str, Any], parameters: dict[str, str]) -> set[str]:
    """The alarms CloudFormation creates for these parameters."""
    return {
        name
        for name, alarm in resources_of_type(cfn, "AWS::CloudWatch::Alarm").items()
        if condition_holds(cfn, alarm["Condition"], parameters)
    }


def test_the_alarm_set(cfn: dict[str, Any]) -> None:
    every = set(ALARMS) | set(SUM_ALARMS)
    assert set(resources_of_type(cfn, "AWS::CloudWatch::Alarm")) == every
    assert _alarms(cfn, {}) == every - STANDARD_ONLY  # EXPRESS by default
    assert _alarms(cfn, {"WorkflowType": "STANDARD"}) == every
    assert _alarms(cfn, {"Alarms": "false", "WorkflowType": "STANDARD"}) == set()
    assert cfn["Parameters"]["Alarms"]["Default"] == "true"


def test_per_function_alarms_only_where_nothing_else_sees_the_failure(
    cfn: dict[str, Any],
) -> None:
    """An API function's crash, throttle or timeout is a 5xx (Api5xxAlarm's rate); the flow
    worker's failures end tasks FAILED behind a 200, so only it keeps alarms of its own."""
    per_function = {
        f"{function}{metric}Alarm"
        for function in FUNCTIONS
        for metric in ("Errors", "Throttles", "Duration")
    } & _alarms(cfn, {})
    assert per_function == {
        "FlowWorkerFunctionErrorsAlarm",
        "FlowWorkerFunctionThrottlesAlarm",
        "FlowWorkerFunctionDurationAlarm",
        "WebhookSenderFunctionDurationAlarm",
    }


@pytest.mark.parametrize("name", sorted(ALARMS))
def test_alarm_watches_its_metric(cfn: dict[str, Any], name: str) -> None:
    props = cfn["Resources"][name]["Properties"]
    namespace, metric, dimensions, statistic, period, periods, datapoints, threshold = ALARMS[name]
    assert (props["Namespace"], props["MetricName"]) == (namespace, metric)
    assert _dimensions(props["Dimensions"]) == dimensions
    if statistic.startswith("p"):
        assert props["ExtendedStatistic"] == statistic
        assert "Statistic" not in props
    else:
        assert props["Statistic"] == statistic
    assert props["Period"] == period
    assert props["EvaluationPeriods"] == periods
    assert props.get("DatapointsToAlarm", props["EvaluationPeriods"]) == datapoints
    if threshold is not None:
        assert props["Threshold"] == threshold


@pytest.mark.parametrize("name", sorted(SUM_ALARMS))
def test_sum_alarm_adds_up_its_metrics(cfn: dict[str, Any], name: str) -> None:
    props = cfn["Resources"][name]["Properties"]
    expected, statistic, period, periods, datapoints = SUM_ALARMS[name]
    assert not {"Namespace", "MetricName", "Dimensions", "Statistic"} & set(props)
    (total,) = [m for m in props["Metrics"] if "Expression" in m]
    # Missing data is 0: a metric without data points does not hide the others'.
    assert total["Expression"] == "SUM(FILL(METRICS(), 0))"
    assert total.get("ReturnData", True) is True
    summed = [m for m in props["Metrics"] if m is not total]
    assert all(m["ReturnData"] is False for m in summed)
    assert len({m["Id"] for m in props["Metrics"]}) == len(props["Metrics"])
    watched = []
    for m in summed:
        stat = m["MetricStat"]
        assert (stat["Stat"], stat["Period"]) == (statistic, period), m["Id"]
        metric = stat["Metric"]
        watched.append(
            (metric["Namespace"], metric["MetricName"], _dimensions(metric["Dimensions"]))
        )
    assert sorted(map(str, watched)) == sorted(map(str, expected))
    assert props["EvaluationPeriods"] == periods
    assert props.get("DatapointsToAlarm", props["EvaluationPeriods"]) == datapoints
    assert props["Threshold"] == 0


@pytest.mark.parametrize("name", sorted(set(ALARMS) | set(SUM_ALARMS)))
def test_alarm_notifies_the_topic_and_ignores_silence(cfn: dict[str, Any], name: str) -> None:
    alarm = cfn["Resources"][name]
    assert alarm["Condition"] == (
        "CreatesStandardAlarms" if name in STANDARD_ONLY else "CreatesAlarms"
    )
    props = alarm["Properties"]
    assert props["AlarmActions"] == ALARM_ACTIONS
    assert props["OKActions"] == ALARM_ACTIONS
    assert props["TreatMissingData"] == "notBreaching"  # no traffic is not a problem
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["AlarmDescription"]


@pytest.mark.parametrize(
    ("alarm", "function"),
    [
        ("FlowWorkerFunctionDurationAlarm", "FlowWorkerFunction"),
        ("WebhookSenderFunctionDurationAlarm", "WebhookSenderFunction"),
    ],
)
@pytest.mark.parametrize("workflow_type", ["EXPRESS", "STANDARD"])
def test_duration_alarms_fire_near_the_timeout(
    cfn: dict[str, Any], alarm: str, function: str, workflow_type: str
) -> None:
    parameters = {"WorkflowType": workflow_type}
    timeout = resolve_if(cfn, cfn["Resources"][function]["Properties"]["Timeout"], parameters)
    threshold = resolve_if(cfn, cfn["Resources"][alarm]["Properties"]["Threshold"], parameters)
    assert threshold == NEAR_TIMEOUT * timeout * 1000  # ms


def test_the_5xx_alarm_is_a_rate_over_several_minutes(cfn: dict[str, Any]) -> None:
    # One 5xx among many requests, or in one minute, is not an outage.
    props = cfn["Resources"]["Api5xxAlarm"]["Properties"]
    assert props["Statistic"] == "Average"
    assert props["DatapointsToAlarm"] > 1
    assert props["EvaluationPeriods"] > props["DatapointsToAlarm"]
    assert 0 < props["Threshold"] < 1


def test_api_alarm_names_the_deployed_api(cfn: dict[str, Any]) -> None:
    # CloudWatch names an API by its name: SAM titles the OpenAPI body with the stack name.
    assert rest_api_body(cfn)["info"]["title"] == {"Ref": "AWS::StackName"}
    assert "Name" not in cfn["Resources"]["Api"]["Properties"]


def test_the_throttle_alarm_watches_the_tables_index(cfn: dict[str, Any]) -> None:
    indexes = cfn["Resources"]["TasksTable"]["Properties"]["GlobalSecondaryIndexes"]
    assert [index["IndexName"] for index in indexes] == [INDEX["GlobalSecondaryIndexName"]]


def test_system_errors_cover_every_operation_the_store_calls() -> None:
    """The functions reach DynamoDB through the store only: each client operation it calls
    (a method, or a paginator) has its SystemErrors series in the alarm."""
    model = botocore.session.get_session().get_service_model("dynamodb")
    by_method = {xform_name(name): name for name in model.operation_names}
    called = set()
    for path in STORE.glob("*.py"):
        source = path.read_text()
        called |= {by_method[m] for m in re.findall(r"\._db\.(\w+)\(", source) if m in by_method}
        called |= {by_method[m] for m in re.findall(r"get_paginator\(\"(\w+)\"\)", source)}
    metrics, *_ = SUM_ALARMS["TableSystemErrorsAlarm"]
    assert called == {dimensions["Operation"] for _, _, dimensions in metrics}


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
    # No alarms, nothing to notify.
    assert not condition_holds(
        cfn, "HasAlarmEmail", {"AlarmEmail": "ops@example.com", "Alarms": "false"}
    )


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


def test_nothing_is_reserved_by_default(cfn: dict[str, Any]) -> None:
    """A new account's quota can be far below any reservation (Lambda keeps 100 executions
    unreserved): with the defaults no function reserves any, so no quota fails the create."""
    for function in resources_of_type(cfn, "AWS::Lambda::Function"):
        props = cfn["Resources"][function]["Properties"]
        assert resolve_if(cfn, props.get("ReservedConcurrentExecutions")) is None, function
    for parameter in RESERVATIONS.values():
        assert cfn["Parameters"][parameter]["Default"] == -1


def test_a_set_reservation_is_deployed(cfn: dict[str, Any]) -> None:
    chosen = {parameter: str(10 * (n + 1)) for n, parameter in enumerate(RESERVATIONS.values())}
    for function, parameter in RESERVATIONS.items():
        reserved = cfn["Resources"][function]["Properties"]["ReservedConcurrentExecutions"]
        assert resolve_if(cfn, reserved, chosen) == {"Ref": parameter}
        # Each parameter sets its own function only.
        alone = {parameter: chosen[parameter]}
        for other, other_parameter in RESERVATIONS.items():
            value = cfn["Resources"][other]["Properties"]["ReservedConcurrentExecutions"]
            expected = {"Ref": other_parameter} if other == function else None
            assert resolve_if(cfn, value, alone) == expected, (parameter, other)
    # Only the functions named here can reserve anything.
    others = set(resources_of_type(cfn, "AWS::Lambda::Function")) - set(RESERVATIONS)
    for function in others:
        assert "ReservedConcurrentExecutions" not in cfn["Resources"][function]["Properties"]


# -- Table and outputs -------------------------------------------------------------------------


def test_operator_outputs(cfn: dict[str, Any]) -> None:
    outputs = cfn["Outputs"]
    assert outputs["PushDeadLetterQueueUrl"]["Value"] == {"Ref": "PushDeadLetterQueue"}
    assert outputs["PushStreamFailureQueueUrl"]["Value"] == {"Ref": "PushStreamFailureQueue"}
    assert outputs["ApiAccessLogGroupName"]["Value"] == {"Ref": "ApiAccessLogGroup"}
    assert outputs["ApiAccessLogGroupName"]["Condition"] == "LogsApiAccess"
    assert outputs["FlowStateMachineLogGroupName"]["Value"] == {"Ref": "FlowStateMachineLogGroup"}
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": "AlarmTopic"}
