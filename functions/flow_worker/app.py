"""FlowWorkerFunction: one flow step, invoked by the state machine (plain handler)."""

from typing import Any

from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.observability import function_logger
from a2a_serverless.wiring import get_flow, get_store

logger = function_logger()


@logger.inject_lambda_context(correlation_id_path="taskId")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return FlowWorker(get_store(), get_flow()).handle(event)
