"""Every read and write is scoped by the authenticated principal; and the sample events."""

from __future__ import annotations

import uuid

from a2a_serverless.local.stack import LocalStack
from a2a_serverless.store import MAX_OWNER_BYTES
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


def test_separators_in_principals_and_ids_never_cross_owners(
    local_stack: LocalStack, alice: A2A, dedupe_window: None
) -> None:
    """Once, `{owner}#{contextId}` unescaped gave principal `alice2#proj` listing context
    `1` the tasks of `alice2` in context `proj#1` (and shared their retry records)."""
    base = f"alice2-{uuid.uuid4().hex[:8]}"
    proj, plain = alice.as_(f"{base}#proj"), alice.as_(base)
    theirs = proj.send("proj secret", context_id="1", message_id="m").task
    mine = plain.send("mine", context_id="proj#1", message_id="proj#m").task
    assert theirs["id"] != mine["id"]

    for client, context_id, expected in [
        (proj, "1", theirs),
        (plain, "proj#1", mine),
    ]:
        for query in ({}, {"status": expected["status"]["state"]}):
            listed = client.list(contextId=context_id, **query)
            assert listed.status == 200, listed.body
            assert [t["id"] for t in listed.json.get("tasks", [])] == [expected["id"]], query
            assert listed.json["totalSize"] == 1, listed.body
        assert client.list().json["totalSize"] == 1
    for client, context_id in [(plain, "1"), (proj, "proj#1"), (plain, "proj"), (proj, "")]:
        listed = client.list(contextId=context_id or None)
        other = mine if client is proj else theirs
        assert other["id"] not in {t["id"] for t in listed.json.get("tasks", [])}, context_id
    assert "secret" not in plain.get(theirs["id"]).body.decode()
    # The retry record of (`alice2`, `proj#m`) is not (`alice2#proj`, `m`)'s: a retry is one.
    retried = plain.send("mine", context_id="proj#1", message_id="proj#m")
    assert retried.status == 200 and retried.task["id"] == mine["id"], retried.body


def test_an_over_long_principal_is_refused_not_a_server_error(
    local_stack: LocalStack, alice: A2A
) -> None:
    """The principal is part of its tasks' keys: one DynamoDB cannot key is a 400."""
    task_id = alice.send("hi").task["id"]
    long = alice.as_("p" * (MAX_OWNER_BYTES + 1))
    sent = long.send("hello")
    assert sent.status == 400 and sent.reason == "INVALID_REQUEST", sent.body
    listed = long.list()
    assert listed.status == 400 and listed.reason == "INVALID_REQUEST", listed.body
    got = long.get(task_id)  # builds no key from the principal: just not theirs
    assert got.status == 404 and got.reason == "TASK_NOT_FOUND", got.body
    at_bound = alice.as_("p" * MAX_OWNER_BYTES)
    assert at_bound.send("hello").status == 200
    assert at_bound.list().json["totalSize"] == 1


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


def test_buffered_responses_reach_the_client_as_json(local_stack: LocalStack) -> None:
    # A Mangum function's proxy result (GetTask streams under the Web Adapter: not one).
    result = local_stack.handler_for("ListTasksFunction")
    response = invoke_mangum(result, load_event("list_tasks.json"))
    assert response.status == 200 and "tasks" in response.json
    assert response.raw is not None
    assert response.raw["headers"]["content-type"].startswith("application/a2a+json")
    if response.raw["isBase64Encoded"]:
        # Only acceptable if the REST API converts it back: BinaryMediaTypes must cover it.
        api = local_stack.template["Resources"]["Api"]["Properties"]
        binary = [t.replace("~1", "/") for t in api.get("BinaryMediaTypes", [])]
        assert {"*/*", "application/a2a+json"} & set(binary), "client would get base64 text"


def test_the_flow_sees_the_caller_the_authorizer_named(local_stack: LocalStack) -> None:
    """Principal, scheme and scopes travel from the authorizer's context through SendMessage,
    the execution's input and every step to the flow's StepContext (Echo's [whoami])."""
    body = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "[whoami]"}],
        }
    }
    event = load_event("send_message.json", principal="https://issuer.example|u-1", body=body)
    event["requestContext"]["authorizer"].update(
        {"scheme": "jwt", "claims": '{"sub": "u-1"}', "scopes": "tasks.read tasks.write"}
    )
    from tests.integration.harness import invoke_web_adapter

    task = invoke_web_adapter(local_stack.app_for("SendMessageFunction"), event).task
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    reply = "".join(p["text"] for p in task["artifacts"][0]["parts"])
    assert reply == "Echo: You are https://issuer.example|u-1 (jwt, scopes: tasks.read tasks.write)"
    started = executions(local_stack)
    assert started, "no execution"
