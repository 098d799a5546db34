"""An unmodified a2a-sdk AgentExecutor (tests/e2e/sdk_sample_executor.py, written as the
a2a-samples write them) served through the local stack by `ExecutorFlow`, and driven by the
official a2a-sdk client over JSON-RPC and HTTP+JSON, streaming and not: multi-turn
(input-required, then completed), its artifact streamed in chunks as they are made, a Message
answer as a direct reply (no task), and CancelTask reaching the executor's cancel().

Server: `scripts/dev --flow tests.e2e.sdk_sample_executor:flow` (one for the module)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from tests.e2e.conftest import CARD_PATH, DevServer, checked_async_client, server_fixture
from tests.e2e.rpc import SdkAgent, sdk_client
from tests.e2e.sdk_sample_executor import (
    ASK_NAME,
    CANCEL_LOG,
    GREETING_PAUSE_SECONDS,
    WORKING,
    greeting_chunks,
)
from tests.helpers import sdk_user_message

pytestmark = pytest.mark.e2e

sdk_server = server_fixture("sdk-executor", args=("--flow", "tests.e2e.sdk_sample_executor:flow"))

INTERFACES = ["JSONRPC 1.0", "HTTP+JSON 1.0"]


async def sent(agent: SdkAgent, message: Message) -> list[StreamResponse]:
    """Every response of one send_message (a non-streaming client gives one)."""
    return [r async for r in agent.client.send_message(SendMessageRequest(message=message))]


def text_of(parts: object) -> str:
    return "".join(p.text for p in parts)  # type: ignore[attr-defined]


def states(events: list[StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


@pytest.fixture(params=INTERFACES)
async def streaming_agent(
    sdk_server: DevServer, request: pytest.FixtureRequest
) -> AsyncIterator[SdkAgent]:
    """A streaming a2a-sdk client over each interface."""
    async with sdk_client(sdk_server.base_url, request.param, streaming=True) as agent:
        yield agent


async def test_the_card_comes_from_the_flow(sdk_server: DevServer) -> None:
    async with checked_async_client(sdk_server.base_url, version=None) as http:
        card = (await http.get(CARD_PATH)).json()
    assert card["name"] == "Greeting Agent (a2a-sdk)"
    assert card["description"] == "An a2a-sdk AgentExecutor served by a2a-serverless."
    assert [skill["id"] for skill in card["skills"]] == ["greet"]


@pytest.mark.parametrize("interface", INTERFACES)
async def test_multi_turn_non_streaming(sdk_server: DevServer, interface: str) -> None:
    async with sdk_client(sdk_server.base_url, interface, streaming=False) as agent:
        [first] = await sent(agent, sdk_user_message("hi"))
        assert first.WhichOneof("payload") == "task"
        task = first.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert text_of(task.status.message.parts) == ASK_NAME
        assert task.status.message.role == Role.ROLE_AGENT

        answer = sdk_user_message("Ada", task_id=task.id, context_id=task.context_id)
        [second] = await sent(agent, answer)
        done = second.task
        assert done.id == task.id
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        [artifact] = done.artifacts
        assert artifact.name == "greeting"
        assert text_of(artifact.parts) == "".join(greeting_chunks("Ada"))
        stored = await agent.client.get_task(GetTaskRequest(id=task.id))
        roles = [m.role for m in stored.history]
        assert roles[:3] == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER]
        assert text_of(stored.history[1].parts) == ASK_NAME


async def test_multi_turn_streaming_artifact_in_chunks(streaming_agent: SdkAgent) -> None:
    first = await sent(streaming_agent, sdk_user_message("hi"))
    assert first[0].WhichOneof("payload") == "task"
    task = first[0].task
    assert states(first)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
    assert text_of(first[-1].status_update.status.message.parts) == ASK_NAME

    answer = sdk_user_message("Grace", task_id=task.id, context_id=task.context_id)
    events: list[StreamResponse] = []
    arrivals: list[float] = []
    async for event in streaming_agent.client.send_message(SendMessageRequest(message=answer)):
        events.append(event)
        arrivals.append(time.monotonic())
    # The stream opens on the task as the answer left it, before its turn started (however
    # quick the executor): every event of the turn follows as an update.
    assert events[0].WhichOneof("payload") == "task" and events[0].task.id == task.id
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert not events[0].task.artifacts
    assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED
    working = [
        e.status_update.status.message
        for e in events
        if e.HasField("status_update") and e.status_update.status.HasField("message")
    ]
    assert WORKING in [text_of(m.parts) for m in working]
    updates = [
        (t, e.artifact_update)
        for t, e in zip(arrivals, events, strict=True)
        if e.HasField("artifact_update")
    ]
    assert [text_of(u.artifact.parts) for _, u in updates] == greeting_chunks("Grace")
    assert [(u.append, u.last_chunk) for _, u in updates] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    assert len({u.artifact.artifact_id for _, u in updates}) == 1
    # Streamed as the executor made them (GREETING_PAUSE_SECONDS apart), not at the end.
    spread = updates[-1][0] - updates[0][0]
    assert spread > GREETING_PAUSE_SECONDS, f"chunks arrived within {spread:.2f} s"


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("interface", INTERFACES)
async def test_a_message_answer_is_a_direct_reply(
    sdk_server: DevServer, interface: str, streaming: bool
) -> None:
    async with sdk_client(sdk_server.base_url, interface, streaming=streaming) as agent:
        responses = await sent(agent, sdk_user_message("ping"))
    assert [r.WhichOneof("payload") for r in responses] == ["message"]
    reply = responses[0].message
    assert reply.role == Role.ROLE_AGENT and text_of(reply.parts) == "pong"
    assert reply.task_id == ""


async def wait_for_log(server: DevServer, line: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in server.output():
        assert time.monotonic() < deadline, f"{line!r} not logged:\n{server.output()[-3000:]}"
        await asyncio.sleep(0.2)


async def test_cancel_of_a_running_task_reaches_the_executors_cancel(
    sdk_server: DevServer, streaming_agent: SdkAgent
) -> None:
    first = await sent(streaming_agent, sdk_user_message("hi"))
    task = first[0].task
    answer = sdk_user_message("Linus", task_id=task.id, context_id=task.context_id)
    events: list[StreamResponse] = []
    canceled: Task | None = None
    async for event in streaming_agent.client.send_message(SendMessageRequest(message=answer)):
        events.append(event)
        if event.HasField("artifact_update") and canceled is None:
            # The first chunk is out; the executor is "thinking" before the next one.
            canceled = await streaming_agent.client.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled is not None
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert states(events)[-1] == TaskState.TASK_STATE_CANCELED
    # The step finds the cancel at its next write and calls the executor's cancel().
    await wait_for_log(sdk_server, f"{CANCEL_LOG} {task.id}")
    stored = await streaming_agent.client.get_task(GetTaskRequest(id=task.id))
    assert stored.status.state == TaskState.TASK_STATE_CANCELED
    greeting = "".join(text_of(a.parts) for a in stored.artifacts)
    assert greeting.startswith("Hello, ") and greeting != "".join(greeting_chunks("Linus"))
