"""Delegation as deployed (docs/deploy.md "Delegation"): the remote agents' notification route,
open at the gateway; the round's timer, a STANDARD state machine that waits and invokes the
worker's check; the worker's timer and secrets settings, each with the grant that matches it.
The exact grants of every role are in test_iam.py; the route's security in every Auth mode in
test_auth.py; the timer running in moto in tests/integration/test_delegation_timer.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.template.sam import (
    resolve_if,
    resolve_ifs,
    rest_api_body,
    role_of,
    routes,
    state_machine_definition,
    statements,
    target_function,
)

ROUTE = ("POST", "/delegations/{taskId}/{key}")
TIMER = "DelegationTimerStateMachine"
TIMER_ARN = {
    "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
    "stateMachine:${AWS::StackName}-delegations"
}
LAMBDA_ERRORS = {
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
}


@pytest.mark.parametrize("auth", ["ApiKey", "Jwt", "Iam", "None"])
def test_the_route_reaches_the_receiver_with_no_credential_of_the_gateway(
    cfn: dict[str, Any], auth: str
) -> None:
    params = {"Auth": auth}
    found = routes(cfn, params)
    assert target_function(found[ROUTE]) == "DelegationReceiverFunction"
    method = resolve_ifs(cfn, rest_api_body(cfn)["paths"][ROUTE[1]]["post"], params)
    assert "security" not in method
    assert "security" not in rest_api_body(cfn)  # no API-wide default either
    assert not [path for _, path in found if path.endswith("/delegations/{taskId}/{key}")][1:]


def test_the_timer_is_standard_whatever_the_flows_workflow(cfn: dict[str, Any]) -> None:
    props = cfn["Resources"][TIMER]["Properties"]
    assert props["StateMachineType"] == "STANDARD"  # a wait may be far past EXPRESS's 5 min
    assert props["StateMachineName"] == {"Fn::Sub": "${AWS::StackName}-delegations"}
    logging = props["LoggingConfiguration"]
    assert (logging["Level"], logging["IncludeExecutionData"]) == ("ERROR", False)
    (destination,) = logging["Destinations"]
    group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]
    assert group == {"Fn::GetAtt": ["DelegationTimerStateMachineLogGroup", "Arn"]}
    assert props["DefinitionSubstitutions"] == {
        "FlowWorkerArn": {"Fn::GetAtt": ["FlowWorkerFunction", "Arn"]}
    }


def test_the_timer_waits_then_asks_the_worker_to_check_the_round(cfn: dict[str, Any]) -> None:
    definition = state_machine_definition(cfn, TIMER)
    states = definition["States"]
    assert definition["StartAt"] == "Wait"
    assert states["Wait"] == {
        "Type": "Wait",
        "SecondsPath": "$.next.waitSeconds",
        "Next": "Check",
    }
    check = states["Check"]
    assert check["Resource"] == "arn:aws:states:::lambda:invoke"
    assert check["Parameters"] == {
        "FunctionName": "${FlowWorkerArn}",
        "Payload": {"action": "check_delegations", "taskId.$": "$.taskId", "round.$": "$.round"},
    }
    # Only the service's own failures are retried: a check that ran and failed is not.
    retried = {error for retry in check["Retry"] for error in retry["ErrorEquals"]}
    assert retried == LAMBDA_ERRORS
    ((caught,),) = [c["ErrorEquals"] for c in check["Catch"]]
    assert caught == "States.ALL"
    assert states[check["Catch"][0]["Next"]]["Type"] == "Fail"  # never the task's failure
    # The answer's waitSeconds only: wait again, the task and round kept from the input; a
    # visit is three transitions (no Pass state between the check and the next wait).
    assert check["ResultSelector"] == {"waitSeconds.$": "$.Payload.waitSeconds"}
    assert check["ResultPath"] == "$.next" and check["Next"] == "Again"
    again = states["Again"]
    (choice,) = again["Choices"]
    assert choice == {"Variable": "$.next.waitSeconds", "NumericGreaterThan": 0, "Next": "Wait"}
    assert set(states) == {"Wait", "Check", "Again", "Done", "CheckFailed"}
    assert states[again["Default"]] == {"Type": "Succeed"}


def test_the_worker_starts_the_timer_it_is_told_of(cfn: dict[str, Any]) -> None:
    worker = cfn["Resources"]["FlowWorkerFunction"]["Properties"]
    assert worker["Environment"]["Variables"]["TIMER_STATE_MACHINE_ARN"] == TIMER_ARN
    granted = [
        s["Resource"]
        for s in statements(role_of(cfn, "FlowWorkerFunction")[1])
        if "states:StartExecution" in s["Action"]
    ]
    assert TIMER_ARN in granted
    # The timer's own role invokes the worker, and nothing else of Lambda.
    timer_role = statements(role_of(cfn, TIMER)[1])
    assert {a for s in timer_role for a in s["Action"] if a.startswith("lambda:")} == {
        "lambda:InvokeFunction"
    }


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("", "${AWS::StackName}/agents/"), ("shared/remote-agents/", "shared/remote-agents/")],
)
def test_the_worker_reads_only_the_secrets_under_its_prefix(
    cfn: dict[str, Any], prefix: str, expected: str
) -> None:
    params = {"AgentSecretsPrefix": prefix}
    env = cfn["Resources"]["FlowWorkerFunction"]["Properties"]["Environment"]["Variables"]
    told = resolve_if(cfn, env["AGENT_SECRETS_PREFIX"], params)
    # As a Sub string: `${AgentSecretsPrefix}` where the parameter itself is the prefix.
    told = "${AgentSecretsPrefix}" if told == {"Ref": "AgentSecretsPrefix"} else told["Fn::Sub"]
    (grant,) = [
        s
        for s in statements(role_of(cfn, "FlowWorkerFunction")[1])
        if "secretsmanager:GetSecretValue" in s["Action"]
    ]
    assert grant["Action"] == ["secretsmanager:GetSecretValue"]
    resource = resolve_if(cfn, grant["Resource"], params)["Fn::Sub"]
    arn = "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:"
    assert resource == f"{arn}{told}*"  # the secret's random suffix after the name
    written = told.replace("${AgentSecretsPrefix}", prefix)
    assert written == expected


def test_the_delegation_parameters(cfn: dict[str, Any]) -> None:
    params = cfn["Parameters"]
    assert params["AgentSecretsPrefix"]["Default"] == ""
    relay = params["RelayAgentUrl"]
    assert relay["Default"] == ""
    for value, accepted in [
        ("", True),
        ("https://agent.example/.well-known/agent-card.json", True),
        ("http://127.0.0.1:8001", True),
        ("agent.example", False),
        ("https://agent.example/ x", False),
    ]:
        assert bool(re.fullmatch(relay["AllowedPattern"], value)) is accepted, value


def test_the_functions_that_load_the_flow_know_the_relay_agent(cfn: dict[str, Any]) -> None:
    loading = {"FlowWorkerFunction", "SendMessageFunction", "StreamFunction", "AgentCardFunction"}
    for name, resource in cfn["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        env = resource["Properties"]["Environment"]["Variables"]
        assert (env.get("RELAY_AGENT_URL") == {"Ref": "RelayAgentUrl"}) is (name in loading), name


def test_the_receiver_starts_the_flows_next_step_and_stops_the_rounds_wait(
    cfn: dict[str, Any],
) -> None:
    env = cfn["Resources"]["DelegationReceiverFunction"]["Properties"]["Environment"]["Variables"]
    assert env["STATE_MACHINE_ARN"] == {"Ref": "FlowStateMachine"}
    assert env["TIMER_STATE_MACHINE_ARN"] == TIMER_ARN
    executions = {
        "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
        "execution:${AWS::StackName}-delegations:*"
    }
    for name in ("DelegationReceiverFunction", "FlowWorkerFunction"):
        stops = [
            s["Resource"]
            for s in statements(role_of(cfn, name)[1])
            if "states:StopExecution" in s["Action"]
        ]
        assert stops == [executions], name  # the timer's executions, never a flow step's
