"""The flow API: how a user writes an agent that a2a-serverless runs."""

from a2a_serverless.flows.base import (
    Flow,
    FlowCanceled,
    Outcome,
    OutcomeKind,
    ReplyContext,
    StepContext,
    load_flow,
)
from a2a_serverless.models import AgentExtension, AgentSkill, Caller, Part

__all__ = [
    "AgentExtension",
    "AgentSkill",
    "Caller",
    "Flow",
    "FlowCanceled",
    "Outcome",
    "OutcomeKind",
    "Part",
    "ReplyContext",
    "StepContext",
    "load_flow",
]
