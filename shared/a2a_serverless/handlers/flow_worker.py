"""FlowWorkerFunction: one flow step, invoked by the state machine (plain handler)."""

from __future__ import annotations

from typing import IO, Any

from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.handlers import flow_at_init, init_done
from a2a_serverless.observability import instrumented_handler
from a2a_serverless.wiring import (
    egress_policy,
    get_content_store,
    get_delegator,
    get_executor,
    get_flow,
    get_settings,
    get_store,
)


@instrumented_handler(correlation_id=lambda event: event.get("taskId"))
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    worker = FlowWorker(
        get_store(),
        get_flow(),
        get_executor,
        get_content_store(),
        _open_url,
        get_settings().fetch_max_bytes,
        get_delegator,
    )
    return worker.handle(event)


def _open_url(url: str) -> tuple[IO[bytes], int | None]:
    """A flow's `url` part, fetched under the webhooks' egress policy (PUSH_ALLOW_HTTP,
    PUSH_ALLOW_HOSTS)."""
    from a2a_serverless.push.delivery import open_url  # loaded by the first fetch

    return open_url(url, egress_policy(get_settings()))


def create() -> Any:
    """The handler, once the flow has loaded (a flow that cannot load fails the init)."""
    flow_at_init()
    return init_done(handler)
