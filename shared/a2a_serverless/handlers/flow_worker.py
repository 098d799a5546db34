"""FlowWorkerFunction: one flow step, invoked by the state machine (plain handler)."""

from __future__ import annotations

from typing import Any

from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.handlers import flow_at_init, init_done
from a2a_serverless.observability import instrumented_handler
from a2a_serverless.wiring import get_executor, get_flow, get_store


@instrumented_handler(correlation_id=lambda event: event.get("taskId"))
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return FlowWorker(get_store(), get_flow(), get_executor).handle(event)


def create() -> Any:
    """The handler, once the flow has loaded (a flow that cannot load fails the init)."""
    flow_at_init()
    return init_done(handler)
