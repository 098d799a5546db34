"""The official a2a-sdk client (HTTP+JSON binding, non-streaming) against the real dev server.
(Its streaming mode is exercised in test_streaming.py.)

Every test gets a fresh principal (X-Local-Principal), so counts and listings are exact.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from a2a.client import A2ACardResolver
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils import errors as a2a_errors

from tests.e2e.conftest import Agent, checked_async_client
from tests.e2e.rpc import TERMINAL

pytestmark = pytest.mark.e2e


def user_message(
    text: str, *, task_id: str = "", context_id: str = "", message_id: str | None = None
) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=message_id or f"msg-{uuid.uuid4().hex}",
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def send(
    agent: Agent,
    text: str,
    *,
    task_id: str = "",
    context_id: str = "",
    message_id: str | None = None,
    return_immediately: bool = False,
) -> Task:
    request = SendMessageRequest(
        message=user_message(text, task_id=task_id, context_id=context_id, message_id=message_id),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )
    responses = [response async for response in agent.client.send_message(request)]
    assert len(responses) == 1, responses
    assert responses[0].WhichOneof("payload") == "task", responses[0]
    return responses[0].task


async def get(agent: Agent, task_id: str, history_length: int | None = None) -> Task:
    request = GetTaskRequest(id=task_id)
    if history_length is not None:
        request.history_length = history_length
    return await agent.client.get_task(request)


async def wait_for(
    agent: Agent, task_id: str, until: Callable[[Task], bool], timeout: float = 20.0
) -> Task:
    deadline = time.monotonic() + timeout
    while True:
        task = await get(agent, task_id)
        if until(task):
            return task
        assert time.monotonic() < deadline, f"condition not reached in {timeout} s: {task}"
        await asyncio.sleep(0.1)


async def list_tasks(agent: Agent, **fields: object) -> ListTasksResponse:
    return await agent.client.list_tasks(ListTasksRequest(**fields))


def artifact_text(task: Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


def status_text(task: Task) -> str:
    return "".join(part.text for part in task.status.message.parts)


# -- discovery ---------------------------------------------------------------------------------


async def test_card_is_resolved_client_side(base_url: str) -> None:
    async with checked_async_client(version=None, source="sdk") as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
    assert card.name
    interfaces = [
        (i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces
    ]
    assert interfaces == [
        ("JSONRPC", "1.0", base_url),
        ("HTTP+JSON", "1.0", base_url),
        ("JSONRPC", "0.3", base_url),
    ]
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is True
    assert [skill.id for skill in card.skills] == ["echo"]
    assert "text/plain" in card.default_input_modes
    assert "text/plain" in card.default_output_modes


# -- sending -----------------------------------------------------------------------------------


async def test_blocking_send_completes_with_chunked_echo(agent: Agent) -> None:
    text = "the quick brown fox jumps over the lazy dog"
    task = await send(agent, text)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.id and task.context_id
    assert task.status.HasField("timestamp")
    assert len(task.artifacts) == 1
    artifact = task.artifacts[0]
    assert artifact.artifact_id == "echo"
    assert len(artifact.parts) > 1, "the echo is streamed as several chunks"
    assert artifact_text(task) == f"Echo: {text}"
    assert [m.role for m in task.history] == [Role.ROLE_USER]
    assert task.history[0].parts[0].text == text
    assert task.history[0].task_id == task.id
    assert task.history[0].context_id == task.context_id


async def test_return_immediately_then_poll_until_completed(agent: Agent) -> None:
    text = "poll me [slow=1]"
    started = time.monotonic()
    task = await send(agent, text, return_immediately=True)
    assert time.monotonic() - started < 1.0, "return_immediately must not wait for the flow"
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    done = await wait_for(agent, task.id, lambda t: t.status.state in TERMINAL)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(done) == f"Echo: {text}"


async def _input_required_then_answered(agent: Agent) -> tuple[Task, Message, Message]:
    first = user_message("draft [input]")
    responses = [r async for r in agent.client.send_message(SendMessageRequest(message=first))]
    paused = responses[0].task
    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert paused.status.message.role == Role.ROLE_AGENT
    assert status_text(paused), "input-required carries the agent's question"
    follow_up = user_message("more words", task_id=paused.id, context_id=paused.context_id)
    responses = [r async for r in agent.client.send_message(SendMessageRequest(message=follow_up))]
    done = responses[0].task
    assert done.id == paused.id
    return done, first, follow_up


async def test_multi_turn_input_required_then_completed(agent: Agent) -> None:
    done, first, follow_up = await _input_required_then_answered(agent)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(done) == "Echo: draft [input] + more words"
    assert [m.role for m in done.history] == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER]
    assert done.history[0].message_id == first.message_id
    assert done.history[2].message_id == follow_up.message_id
    assert {m.context_id for m in done.history} == {done.context_id}


async def test_get_task_history_length(agent: Agent) -> None:
    done, _, follow_up = await _input_required_then_answered(agent)
    full = await get(agent, done.id)
    assert len(full.history) == 3
    none = await get(agent, done.id, history_length=0)
    assert len(none.history) == 0
    last = await get(agent, done.id, history_length=1)
    assert [m.message_id for m in last.history] == [follow_up.message_id]
    two = await get(agent, done.id, history_length=2)
    assert [m.message_id for m in two.history] == [
        full.history[1].message_id,
        follow_up.message_id,
    ]
    # On the wire, historyLength=0 omits the field entirely.
    response = await agent.raw.get(f"/tasks/{done.id}", params={"historyLength": 0})
    assert response.status_code == 200
    assert "history" not in response.json()


async def test_second_task_in_the_same_context(agent: Agent) -> None:
    first = await send(agent, "one")
    second = await send(agent, "two", context_id=first.context_id)
    assert second.status.state == TaskState.TASK_STATE_COMPLETED
    assert second.id != first.id
    assert second.context_id == first.context_id
    listed = await list_tasks(agent, context_id=first.context_id)
    assert listed.total_size == 2
    assert {t.id for t in listed.tasks} == {first.id, second.id}


# -- listing -----------------------------------------------------------------------------------


async def test_list_tasks_filters_pagination_and_totals(agent: Agent) -> None:
    context = f"ctx-{uuid.uuid4().hex}"
    completed = [await send(agent, f"item {i}", context_id=context) for i in range(4)]
    failed = await send(agent, "broken [fail]", context_id=context)
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    await asyncio.sleep(0.05)
    other = await send(agent, "elsewhere")
    in_context = {t.id for t in completed} | {failed.id}

    everything = await list_tasks(agent)
    assert everything.total_size == 6
    assert {t.id for t in everything.tasks} == in_context | {other.id}
    assert everything.next_page_token == ""

    by_context = await list_tasks(agent, context_id=context)
    assert by_context.total_size == 5
    assert {t.id for t in by_context.tasks} == in_context

    by_status = await list_tasks(agent, status=TaskState.TASK_STATE_COMPLETED)
    assert by_status.total_size == 5
    assert {t.id for t in by_status.tasks} == {t.id for t in completed} | {other.id}
    both = await list_tasks(agent, context_id=context, status=TaskState.TASK_STATE_FAILED)
    assert both.total_size == 1
    assert [t.id for t in both.tasks] == [failed.id]

    # statusTimestampAfter: a cut between the last task in the context and `other`.
    before = failed.status.timestamp.ToDatetime()
    after = other.status.timestamp.ToDatetime()
    assert after > before
    request = ListTasksRequest()
    request.status_timestamp_after.FromDatetime(before + (after - before) / 2)
    recent = await agent.client.list_tasks(request)
    assert recent.total_size == 1
    assert [t.id for t in recent.tasks] == [other.id]
    request.status_timestamp_after.FromDatetime(before - timedelta(days=1))
    assert (await agent.client.list_tasks(request)).total_size == 6

    # Pagination: pages of 2 over 5 tasks, no duplicates, newest status first.
    seen: list[Task] = []
    token = ""
    pages = 0
    while True:
        page = await list_tasks(agent, context_id=context, page_size=2, page_token=token)
        pages += 1
        assert page.total_size == 5
        assert page.page_size == 2
        assert len(page.tasks) <= 2
        seen.extend(page.tasks)
        token = page.next_page_token
        if not token:
            break
        assert pages < 10, "pagination does not end"
    assert pages == 3
    ids = [t.id for t in seen]
    assert len(ids) == len(set(ids)) == 5
    assert set(ids) == in_context
    stamps = [t.status.timestamp.ToDatetime() for t in seen]
    assert stamps == sorted(stamps, reverse=True)

    # includeArtifacts: omitted by default, present on request.
    plain = await list_tasks(agent, context_id=context)
    assert all(len(t.artifacts) == 0 for t in plain.tasks)
    response = await agent.raw.get("/tasks", params={"contextId": context})
    assert all("artifacts" not in t for t in response.json()["tasks"])
    response = await agent.raw.get(
        "/tasks", params={"contextId": context, "includeArtifacts": "false"}
    )
    assert all("artifacts" not in t for t in response.json()["tasks"])
    rich = await list_tasks(
        agent, context_id=context, status=TaskState.TASK_STATE_COMPLETED, include_artifacts=True
    )
    assert rich.total_size == 4
    assert sorted(artifact_text(t) for t in rich.tasks) == [f"Echo: item {i}" for i in range(4)]

    # historyLength on list.
    short = await list_tasks(agent, context_id=context, history_length=1)
    by_id = {t.id: t for t in short.tasks}
    assert all(len(t.history) == 1 for t in short.tasks)
    assert by_id[failed.id].history[0].role == Role.ROLE_AGENT  # the last message: the reason
    assert by_id[completed[0].id].history[0].parts[0].text == "item 0"
    longer = await list_tasks(agent, context_id=context, history_length=5)
    assert len({t.id: t for t in longer.tasks}[failed.id].history) == 2
    response = await agent.raw.get("/tasks", params={"contextId": context, "historyLength": 0})
    assert all("history" not in t for t in response.json()["tasks"])


# -- cancel ------------------------------------------------------------------------------------


async def test_cancel_running_task_stops_it(agent: Agent) -> None:
    text = "cancel me while I am slowly echoing [slow=20]"
    task = await send(agent, text, return_immediately=True)
    working = await wait_for(agent, task.id, lambda t: len(t.artifacts) > 0, timeout=10)
    assert working.status.state == TaskState.TASK_STATE_WORKING
    canceled = await agent.client.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled.id == task.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    text_at_cancel = artifact_text(canceled)
    assert text_at_cancel and f"Echo: {text}".startswith(text_at_cancel)
    assert text_at_cancel != f"Echo: {text}"
    await asyncio.sleep(1.6)  # the flow would have emitted ~3 more chunks by now
    later = await get(agent, task.id)
    assert later.status.state == TaskState.TASK_STATE_CANCELED
    assert artifact_text(later) == text_at_cancel, "the artifact grew after cancel"
    listed = await list_tasks(agent, status=TaskState.TASK_STATE_CANCELED)
    assert [t.id for t in listed.tasks] == [task.id]


async def test_cancel_completed_task_is_not_cancelable(agent: Agent) -> None:
    task = await send(agent, "already done")
    with pytest.raises(a2a_errors.TaskNotCancelableError):
        await agent.client.cancel_task(CancelTaskRequest(id=task.id))
    assert (await get(agent, task.id)).status.state == TaskState.TASK_STATE_COMPLETED


async def test_get_unknown_task_is_not_found(agent: Agent) -> None:
    with pytest.raises(a2a_errors.TaskNotFoundError):
        await get(agent, str(uuid.uuid4()))


async def test_cancel_unknown_task_is_not_found(agent: Agent) -> None:
    with pytest.raises(a2a_errors.TaskNotFoundError):
        await agent.client.cancel_task(CancelTaskRequest(id=str(uuid.uuid4())))


async def test_send_to_completed_task_is_unsupported(agent: Agent) -> None:
    task = await send(agent, "finished")
    with pytest.raises(a2a_errors.UnsupportedOperationError):
        await send(agent, "one more thing", task_id=task.id, context_id=task.context_id)
    after = await get(agent, task.id)
    assert after.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(after.history) == 1


# -- flow outcomes -----------------------------------------------------------------------------


async def test_fail_directive_ends_failed_with_a_reason(agent: Agent) -> None:
    task = await send(agent, "please [fail]")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.role == Role.ROLE_AGENT
    assert "fail" in status_text(task).lower()


async def test_crash_ends_failed_with_an_explanation_and_no_leak(agent: Agent) -> None:
    task = await send(agent, "boom [crash]")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.role == Role.ROLE_AGENT
    explanation = status_text(task)
    assert len(explanation) > 20, explanation
    for leak in ("Traceback", 'File "', "crashed on request", ".py", "line "):
        assert leak not in explanation, explanation
    stored = await get(agent, task.id)
    assert stored.status.state == TaskState.TASK_STATE_FAILED
    assert status_text(stored) == explanation


async def test_reject_directive_ends_rejected(agent: Agent) -> None:
    task = await send(agent, "no thanks [reject]")
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert len(task.artifacts) == 0


async def test_steps_directive_completes_over_several_steps(agent: Agent) -> None:
    text = "one two three four five six seven [steps=3]"
    task = await send(agent, text)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_text(task) == f"Echo: {text}"
    # One chunk per Step Functions step (a plain echo of this text would be 4 chunks).
    assert [len(a.parts) for a in task.artifacts] == [3]


# -- capabilities this agent does not have -----------------------------------------------------


async def test_push_config_crud_and_inline(agent: Agent) -> None:
    task = await send(agent, "for push")
    config = TaskPushNotificationConfig(task_id=task.id, url="http://127.0.0.1:9/hook")
    created = await agent.client.create_task_push_notification_config(config)
    assert created.id and created.task_id == task.id
    request = SendMessageRequest(
        message=user_message("with push"),
        configuration=SendMessageConfiguration(
            task_push_notification_config=TaskPushNotificationConfig(
                url="http://127.0.0.1:9/inline", token="inline-token"
            )
        ),
    )
    responses = [r async for r in agent.client.send_message(request)]
    inline_task = responses[-1].task if responses[-1].HasField("task") else None
    inline_id = inline_task.id if inline_task else responses[0].task.id
    listed = await agent.client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=inline_id)
    )
    assert [(c.url, c.token) for c in listed.configs] == [
        ("http://127.0.0.1:9/inline", "inline-token")
    ]
    assert (await list_tasks(agent)).total_size == 2
