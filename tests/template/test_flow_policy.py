"""The flow's AWS permissions as deployed (docs/deploy.md "Your flow's AWS permissions"):
FlowPolicy (a managed policy the user edits in template.yaml) reaches exactly the roles of the
functions that run the flow's code, and its default grants nothing. That a statement there
allows a flow's call is proven from the call itself: tests/integration/test_flow_permissions.py."""

from __future__ import annotations

from typing import Any

from tests.integration.test_cold_start_imports import NOT_SERVING_THE_FLOW, SERVES_THE_FLOW
from tests.template.sam import FUNCTIONS, as_list, role_of


def logical_id(function_dir: str) -> str:
    """functions/<dir> -> its logical id (flow_worker -> FlowWorkerFunction)."""
    return "".join(word.capitalize() for word in function_dir.split("_")) + "Function"


# The functions that import the user's flow (the cold-start test proves which do).
RUN_THE_FLOW = {logical_id(f) for f in SERVES_THE_FLOW}
NEVER_THE_FLOW = {logical_id(f) for f in NOT_SERVING_THE_FLOW}


def test_the_function_lists_agree() -> None:
    assert set(FUNCTIONS) == RUN_THE_FLOW | NEVER_THE_FLOW
    assert {
        "FlowWorkerFunction",
        "SendMessageFunction",
        "StreamFunction",
        "AgentCardFunction",
    } == RUN_THE_FLOW


def test_flow_policy_is_attached_to_the_roles_that_run_the_flow(cfn: dict[str, Any]) -> None:
    policy = cfn["Resources"]["FlowPolicy"]
    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    assert "Condition" not in policy  # always there: the place to add statements
    roles = {r["Ref"] for r in policy["Properties"]["Roles"]}
    assert roles == {role_of(cfn, f)[0] for f in RUN_THE_FLOW}


def test_flow_policys_default_grants_nothing(cfn: dict[str, Any]) -> None:
    """One statement (a policy must have one): GetCallerIdentity, which AWS answers whatever
    the caller's policies say, so it grants no access."""
    document = cfn["Resources"]["FlowPolicy"]["Properties"]["PolicyDocument"]
    assert document["Version"] == "2012-10-17"
    (statement,) = as_list(document["Statement"])
    assert statement == {
        "Sid": "NothingYet",
        "Effect": "Allow",
        "Action": "sts:GetCallerIdentity",
        "Resource": "*",
    }
