"""The relay flow: every turn is delegated to the one remote agent that RELAY_AGENT_URL names
(template parameter RelayAgentUrl), and its questions, artifacts and outcome are relayed back.
A durable A2A front door (auth, push, streaming, task history) for an existing agent, and the
reference delegating flow.

    FLOW=a2a_serverless.flows.relay:flow   RELAY_AGENT_URL=https://agent.example.com

The remote's artifacts reach this task as they arrive; its question (input-required,
auth-required) becomes this task's, and the client's answer goes to the same remote task.
"""

from __future__ import annotations

from a2a_serverless.core.delegation import Delegate, DelegationOutcome, DelegationResult
from a2a_serverless.flows.base import Flow, Outcome, StepContext
from a2a_serverless.settings import get_settings

_ASKING = (DelegationOutcome.INPUT_REQUIRED, DelegationOutcome.AUTH_REQUIRED)


class Relay(Flow):
    name = "relay"
    description = "Relays every task to another A2A agent and its answers back."

    def step(self, ctx: StepContext) -> Outcome:
        if ctx.woken:
            return relayed(ctx.delegations[0])
        settings = get_settings()
        message = ctx.linked(ctx.message).parts  # stored files as URLs the remote can read
        seconds = settings.relay_timeout_seconds
        asked = ctx.delegations[0] if ctx.delegations else None
        if asked is not None and asked.outcome in _ASKING and asked.task_id:
            answer = asked.reply(message, forward_artifacts=True, timeout_seconds=seconds)
            return Outcome.delegate(answer)
        if not settings.relay_agent_url:
            return Outcome.failed("This relay has no agent to relay to (RELAY_AGENT_URL is unset).")
        agent = settings.relay_agent_url
        return Outcome.delegate(
            Delegate(agent, message, forward_artifacts=True, timeout_seconds=seconds)
        )


def relayed(result: DelegationResult) -> Outcome:
    """The remote's outcome as this task's: its question, its answer, or why there is none."""
    content = result.message.parts if result.message is not None else None
    match result.outcome:
        case DelegationOutcome.COMPLETED | DelegationOutcome.ANSWERED:
            return Outcome.completed(content)
        case DelegationOutcome.INPUT_REQUIRED:
            return Outcome.input_required(content or "The agent needs more input.")
        case DelegationOutcome.AUTH_REQUIRED:
            return Outcome.auth_required(content or "The agent needs authorization.")
        case DelegationOutcome.REJECTED:
            return Outcome.rejected(content or "The agent rejected the task.")
        case DelegationOutcome.FAILED:
            return Outcome.failed(content or "The agent failed the task.")
        case DelegationOutcome.CANCELED:
            return Outcome.failed("The agent canceled the task.")
    return Outcome.failed(f"The agent gave no answer ({result.outcome.value}): {result.error}")


flow = Relay()
