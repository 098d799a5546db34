"""An a2a-sdk agent written the way the a2a-samples write them ("helloworld" and the multi-turn
samples): an `AgentExecutor` that publishes through `TaskUpdater`, knowing nothing of
a2a-serverless. Only the `ExecutorFlow` import and the last statement are ours: they serve it
as a flow (`scripts/dev --flow tests.e2e.sdk_sample_executor:flow`).

- "ping" is answered with a Message ("pong"), as helloworld answers (a direct reply: no task).
- Anything else starts a task that asks for the user's name once (input-required), then
  streams a greeting artifact in 3 chunks, GREETING_PAUSE_SECONDS apart, and completes.
- cancel() logs CANCEL_LOG (the e2e test finds it in the server's log) and publishes the
  canceled state, as the samples that support cancel do.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from a2a.helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, Part, Role, TaskState

from a2a_serverless.flows.a2a_sdk import ExecutorFlow

logger = logging.getLogger(__name__)

GREETING_PAUSE_SECONDS = 1.5
ASK_NAME = "What is your name?"
WORKING = "Writing your greeting..."
CANCEL_LOG = "GreetingAgentExecutor.cancel() called for task"


def greeting_chunks(name: str) -> list[str]:
    return ["Hello, ", name, "! Nice to meet you."]


class GreetingAgentExecutor(AgentExecutor):
    """Asks for the user's name, then greets them (streamed)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        if text == "ping" and context.current_task is None:
            await event_queue.enqueue_event(new_text_message("pong", role=Role.ROLE_AGENT))
            return

        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.requires_input(updater.new_agent_message([Part(text=ASK_NAME)]))
            return

        await updater.start_work(updater.new_agent_message([Part(text=WORKING)]))
        artifact_id = str(uuid.uuid4())
        chunks = greeting_chunks(text)
        for index, chunk in enumerate(chunks):
            if index:
                await asyncio.sleep(GREETING_PAUSE_SECONDS)  # the "model" thinking
            await updater.add_artifact(
                [Part(text=chunk)],
                artifact_id=artifact_id,
                name="greeting",
                append=index > 0,
                last_chunk=index == len(chunks) - 1,
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        logger.warning("%s %s", CANCEL_LOG, context.task_id)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


flow = ExecutorFlow(
    GreetingAgentExecutor(),
    name="greeter",
    title="Greeting Agent (a2a-sdk)",
    description="An a2a-sdk AgentExecutor served by a2a-serverless.",
    # "ping" is answered with a Message, no task (execute does nothing before its first event).
    direct_replies=True,
    skills=[
        AgentSkill(
            id="greet",
            name="Greet",
            description="Asks your name, then greets you.",
            tags=["greeting"],
            examples=["hi", "ping"],
        )
    ],
)
