"""FlowWorkerFunction: one flow step, invoked by the state machine (plain handler)."""

from typing import Any

from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.observability import instrumented_handler
from a2a_serverless.wiring import get_flow, get_store


@instrumented_handler(correlation_id=lambda event: event.get("taskId"))
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return FlowWorker(get_store(), get_flow()).handle(event)
