"""The protocol switches reach every function as the settings they drive: Streaming (card and
stream methods), DedupeWindowSeconds (send deduplication, off by default) and WorkflowType
(how long a flow step may run, checked against the flow's max_step_seconds at init)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_serverless.settings import Settings
from tests.template.sam import FUNCTIONS, resources_of_type

SWITCHES = {
    "Streaming": ("STREAMING", "true", "streaming", True),
    "DedupeWindowSeconds": ("DEDUPE_WINDOW_SECONDS", 0, "dedupe_window_seconds", 0.0),
    "WorkflowType": ("WORKFLOW_TYPE", "EXPRESS", "workflow_type", "EXPRESS"),
}


@pytest.mark.parametrize("parameter", sorted(SWITCHES))
def test_each_switch_is_a_parameter_whose_default_is_the_settings_default(
    sam: dict[str, Any], parameter: str
) -> None:
    env_name, default, field, setting_default = SWITCHES[parameter]
    assert sam["Parameters"][parameter]["Default"] == default
    assert Settings.model_fields[field].default == setting_default
    assert sam["Globals"]["Function"]["Environment"]["Variables"][env_name] == {"Ref": parameter}


@pytest.mark.parametrize("parameter", sorted(SWITCHES))
def test_every_function_gets_the_switch(cfn: dict[str, Any], parameter: str) -> None:
    env_name = SWITCHES[parameter][0]
    functions = resources_of_type(cfn, "AWS::Lambda::Function")
    assert set(FUNCTIONS) <= set(functions)
    for name in FUNCTIONS:
        variables = functions[name]["Properties"]["Environment"]["Variables"]
        assert variables[env_name] == {"Ref": parameter}, name


def test_the_step_limits_the_flows_are_checked_against_are_the_workers_timeouts(
    sam: dict[str, Any],
) -> None:
    """`max_step_seconds` is checked against STEP_LIMIT_SECONDS: they must be what the worker
    may actually run for on each workflow, and name every type the parameter allows."""
    from a2a_serverless.flows.base import STEP_LIMIT_SECONDS

    assert sorted(sam["Parameters"]["WorkflowType"]["AllowedValues"]) == sorted(STEP_LIMIT_SECONDS)
    assert sam["Resources"]["FlowWorkerFunction"]["Properties"]["Timeout"] == {
        "Fn::If": ["IsExpress", STEP_LIMIT_SECONDS["EXPRESS"], STEP_LIMIT_SECONDS["STANDARD"]]
    }
