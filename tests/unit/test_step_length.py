"""A flow's declared step length (`max_step_seconds`) against the workflow that runs its steps:
a flow whose steps outlast the workflow's limit is refused at init, with the workflow that fits."""

from __future__ import annotations

import math
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor

from a2a_serverless import wiring
from a2a_serverless.flows import Flow, Outcome, StepContext
from a2a_serverless.flows.a2a_sdk import ExecutorFlow
from a2a_serverless.flows.base import STEP_LIMIT_SECONDS, step_length_problem
from a2a_serverless.handlers import FlowLoadError, flow_at_init
from a2a_serverless.settings import get_settings


class Research(Flow):
    name = "research"
    max_step_seconds: Any = 600

    def step(self, ctx: StepContext) -> Outcome:
        return Outcome.completed()


research = Research()


def _declaring(seconds: Any) -> Flow:
    flow = Research()
    flow.max_step_seconds = seconds
    return flow


@pytest.mark.parametrize("workflow", sorted(STEP_LIMIT_SECONDS))
def test_a_flow_that_says_nothing_runs_on_either_workflow(workflow: str) -> None:
    assert Flow.max_step_seconds is None
    assert step_length_problem(_declaring(None), workflow) is None


@pytest.mark.parametrize(
    ("seconds", "workflow"),
    [(1, "EXPRESS"), (150, "EXPRESS"), (0.5, "EXPRESS"), (150.5, "STANDARD"), (900, "STANDARD")],
)
def test_steps_within_the_workflows_limit_run(seconds: float, workflow: str) -> None:
    assert step_length_problem(_declaring(seconds), workflow) is None


def test_steps_longer_than_express_allows_name_the_workflow_that_fits() -> None:
    problem = step_length_problem(_declaring(150.5), "EXPRESS")
    assert problem == (
        "the flow's steps may run 150.5 s (max_step_seconds) and WorkflowType=EXPRESS runs a "
        "step for at most 150 s: deploy with WorkflowType=STANDARD (locally: --param "
        "WorkflowType=STANDARD)"
    )


@pytest.mark.parametrize("workflow", sorted(STEP_LIMIT_SECONDS))
@pytest.mark.parametrize("seconds", [901, 3600, math.inf])
def test_no_workflow_runs_a_step_past_lambdas_limit(seconds: float, workflow: str) -> None:
    problem = step_length_problem(_declaring(seconds), workflow)
    assert problem is not None
    assert "no workflow runs a step for more than 900 s" in problem
    assert "Outcome.next_step()" in problem


@pytest.mark.parametrize("seconds", [0, -5, math.nan, True, "600", [600]])
def test_a_declaration_that_is_no_number_of_seconds_is_refused(seconds: Any) -> None:
    problem = step_length_problem(_declaring(seconds), "STANDARD")
    assert problem == f"max_step_seconds must be a positive number of seconds, got {seconds!r}"


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> Any:
    def configure(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        wiring.reset()

    yield configure
    monkeypatch.delenv("FLOW", raising=False)
    monkeypatch.delenv("WORKFLOW_TYPE", raising=False)
    get_settings.cache_clear()
    wiring.reset()


def test_the_functions_init_refuses_a_flow_whose_steps_outlast_the_workflow(
    configured: Any,
) -> None:
    spec = f"{__name__}:research"
    configured(FLOW=spec, WORKFLOW_TYPE="EXPRESS")
    with pytest.raises(FlowLoadError) as raised:
        flow_at_init()
    assert str(raised.value) == (
        f"cannot serve the flow FLOW={spec!r}: the flow's steps may run 600 s "
        "(max_step_seconds) and WorkflowType=EXPRESS runs a step for at most 150 s: deploy "
        "with WorkflowType=STANDARD (locally: --param WorkflowType=STANDARD)"
    )
    configured(WORKFLOW_TYPE="STANDARD")
    assert flow_at_init() is research


def test_the_functions_init_says_which_flow_did_not_load_and_why(configured: Any) -> None:
    configured(FLOW="no_such_module_here:flow")
    with pytest.raises(FlowLoadError) as raised:
        flow_at_init()
    assert str(raised.value) == (
        "cannot load the flow FLOW='no_such_module_here:flow': ModuleNotFoundError: No module "
        "named 'no_such_module_here' (its module must be in the layer or the function's code)"
    )
    configured(FLOW=f"{__name__}:no_such_attribute")
    with pytest.raises(FlowLoadError) as raised:
        flow_at_init()
    assert str(raised.value).endswith("has no attribute 'no_such_attribute'")


def test_an_sdk_executor_flow_declares_its_step_length_too() -> None:
    class Slow(AgentExecutor):
        async def execute(self, context: Any, event_queue: Any) -> None:
            return None

        async def cancel(self, context: Any, event_queue: Any) -> None:
            return None

    flow = ExecutorFlow(Slow(), max_step_seconds=300)
    assert step_length_problem(flow, "EXPRESS") is not None
    assert step_length_problem(flow, "STANDARD") is None
    assert ExecutorFlow(Slow()).max_step_seconds is None
