"""The shared stack (tests/conftest.py SharedStack): a test after one that dirtied it sees
what a fresh stack gives. The tests run in file order."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from a2a_serverless import wiring
from a2a_serverless.auth import ApiKeyAdmin
from a2a_serverless.local.stack import LocalStack
from tests.integration.harness import A2A, executions, queue_depth, scan, sqs

DIRTY = "A2A_TEST_DIRTY"
shared: list[LocalStack] = []


def test_a_test_dirties_the_stack(local_stack: LocalStack, alice: A2A) -> None:
    shared.append(local_stack)
    done = alice.send("hello").task
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    hook = {"url": "https://hooks.example.org/a2a", "token": "t"}
    message = {"role": "ROLE_USER", "parts": [{"text": "again"}], "messageId": "m-dirty"}
    alice.send_message(message, blocking=False, push_config=hook)
    alice.send("still running", blocking=False)  # its execution may outlive the test
    ApiKeyAdmin(wiring.get_store()).create("alice", "a key")
    for url in local_stack.queues.values():
        sqs().send_message(QueueUrl=url, MessageBody="{}", **_group(url))
    os.environ[DIRTY] = "1"  # no monkeypatch: the reset must undo it
    os.environ["DEDUPE_WINDOW_SECONDS"] = "600"
    wiring.reset()
    assert wiring.get_settings().dedupe_window_seconds == 600
    assert scan(local_stack) and executions(local_stack)


def test_the_next_test_sees_a_fresh_stack(local_stack: LocalStack, alice: A2A) -> None:
    assert shared == [local_stack], "the stack is shared"
    assert scan(local_stack) == []
    assert executions(local_stack) == []
    assert all(queue_depth(url) == 0 for url in local_stack.queues.values())
    assert DIRTY not in os.environ
    assert wiring.get_settings().dedupe_window_seconds == 0
    assert ApiKeyAdmin(wiring.get_store()).list() == []
    assert alice.list().json.get("totalSize", 0) == 0
    done = alice.send("hello").task
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.fixture
def dedupe_set_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEDUPE_WINDOW_SECONDS", "600")


def test_a_setting_a_fixture_sets_before_the_stack_applies(
    dedupe_set_first: None, local_stack: LocalStack
) -> None:
    assert shared == [local_stack]
    assert wiring.get_settings().dedupe_window_seconds == 600


VARIANT = "tests.integration.flows_for_tests:metadata_echo"


def test_a_flow_variant_runs_on_the_shared_stack(make_stack: Callable[..., LocalStack]) -> None:
    stack = make_stack(Flow=VARIANT)
    assert shared == [stack]
    assert wiring.get_settings().flow == VARIANT


def test_after_a_variant_the_template_s_flow_is_back(local_stack: LocalStack) -> None:
    assert shared == [local_stack]
    assert wiring.get_settings().flow != VARIANT
    assert os.environ["FLOW"] == local_stack.env["FLOW"]


def test_a_variable_a_fresh_start_reads_gets_a_stack_of_its_own(
    monkeypatch: pytest.MonkeyPatch, make_stack: Callable[..., LocalStack]
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADEVELOPERSOWN")
    stack = make_stack(Flow=VARIANT)
    assert stack not in shared


def _group(url: str) -> dict[str, str]:
    return {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if url.endswith(".fifo") else {}
