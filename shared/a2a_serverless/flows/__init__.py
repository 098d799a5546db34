"""The flow API: how a user writes an agent that a2a-serverless runs."""

from typing import Any

from a2a_serverless.core.delegation import Delegate, DelegationOutcome, DelegationResult
from a2a_serverless.flows.base import (
    ContentTooLarge,
    File,
    Flow,
    FlowCanceled,
    NoContentStore,
    Outcome,
    OutcomeKind,
    ReplyContext,
    StepContext,
    UrlRefused,
    load_flow,
)
from a2a_serverless.models import AgentExtension, AgentSkill, Caller, Part, TaskState

__all__ = [
    "AgentExtension",
    "AgentSkill",
    "Caller",
    "ContentTooLarge",
    "Delegate",
    "DelegationOutcome",
    "DelegationResult",
    "File",
    "Flow",
    "FlowCanceled",
    "NoContentStore",
    "Outcome",
    "OutcomeKind",
    "Part",
    "ReplyContext",
    "StepContext",
    "TaskState",
    "UrlRefused",
    "load_flow",
]


def __getattr__(name: str) -> Any:
    # The a2a-sdk adapter needs the optional a2a-sdk package: imported only when asked for,
    # so this package (and the Lambda layer) imports without it. Not in __all__ for that reason.
    if name == "ExecutorFlow":
        from a2a_serverless.flows.a2a_sdk import ExecutorFlow

        return ExecutorFlow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
