"""The flow API: how a user writes an agent that a2a-serverless runs."""

from a2a_serverless.flows.base import (
    Flow,
    FlowCanceled,
    Outcome,
    OutcomeKind,
    StepContext,
    load_flow,
)

__all__ = ["Flow", "FlowCanceled", "Outcome", "OutcomeKind", "StepContext", "load_flow"]
