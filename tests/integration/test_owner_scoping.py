"""Every read and write is scoped by the authenticated principal; and the sample events."""

from __future__ import annotations

from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import (
    A2A,
    executions,
    invoke_mangum,
    load_event,
    wait_idle,
)


def test_another_owners_task_does_not_exist(local_stack: LocalStack, alice: A2A) -> None:
    bob = alice.as_("bob")
    anonymous = alice.as_(None)  # no authorizer: the anonymous principal
    task = alice.send("secret [input]", context_id="alice-ctx").task
    task_id = task["id"]
    alice.send("public thing")
    bob.send("bob's own")

    for other in (bob, anonymous):
        got = other.get(task_id)
        assert got.status == 404 and got.reason == "TASK_NOT_FOUND", got.body
        assert "secret" not in got.body.decode()

        listed, total = other.list_all()
        assert task_id not in {t["id"] for t in listed}
        assert total == len(listed)
        by_context = other.list(contextId="alice-ctx")
        assert by_context.json.get("tasks", []) == [] and by_context.json.get("totalSize", 0) == 0

        canceled = other.cancel(task_id)
        assert canceled.status == 404 and canceled.reason == "TASK_NOT_FOUND", canceled.body

        follow = other.send("let me in", task_id=task_id)
        assert follow.status == 404 and follow.reason == "TASK_NOT_FOUND", follow.body

    assert [t["id"] for t in bob.list_all()[0]] != [] and bob.list().json["totalSize"] == 1
    mine = alice.get(task_id).json
    assert mine["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert len(mine["history"]) == 2  # no foreign message got in
    assert alice.list().json["totalSize"] == 2
    wait_idle(local_stack)
    assert not any(e["name"] == f"{task_id}-2" for e in executions(local_stack))


def test_card_push_and_extended_card_events(local_stack: LocalStack) -> None:
    card = invoke_mangum(
        local_stack.handler_for("AgentCardFunction"), load_event("agent_card.json")
    )
    assert card.status == 200
    urls = [i["url"] for i in card.json["supportedInterfaces"]]
    assert urls and all(
        u.startswith("https://abc123.execute-api.us-east-1.amazonaws.com/prod") for u in urls
    ), urls

    extended = invoke_mangum(
        local_stack.handler_for("AgentCardFunction"), load_event("extended_agent_card.json")
    )
    assert extended.status == 400 and extended.reason == "UNSUPPORTED_OPERATION"

    push = invoke_mangum(
        local_stack.handler_for("PushConfigFunction"),
        load_event("push_config_list.json", task_id="0f1e2d3c-aaaa-bbbb-cccc-000000000000"),
    )
    assert push.status == 404 and push.reason == "TASK_NOT_FOUND"


def test_buffered_responses_reach_the_client_as_json(local_stack: LocalStack, alice: A2A) -> None:
    task_id = alice.send("hi").task["id"]
    result = local_stack.handler_for("GetTaskFunction")
    response = invoke_mangum(result, load_event("get_task.json", task_id=task_id))
    assert response.raw is not None
    assert response.raw["headers"]["content-type"].startswith("application/a2a+json")
    if response.raw["isBase64Encoded"]:
        # Only acceptable if the REST API converts it back: BinaryMediaTypes must cover it.
        api = local_stack.template["Resources"]["Api"]["Properties"]
        binary = [t.replace("~1", "/") for t in api.get("BinaryMediaTypes", [])]
        assert {"*/*", "application/a2a+json"} & set(binary), "client would get base64 text"
