"""Delegation end to end: stack A serves the relay flow (a2a_serverless.flows.relay:flow) in
front of stack B (`scripts/dev --flow tests.e2e.flows_for_tests:remote_agent`), and in front
of agents served by the official a2a-sdk server, with and without push notifications.

A's public URL (PUBLIC_BASE_URL, named in its card and in the push configs it gives B) is a
recording forwarder (tests/e2e/forwarder.py), so B's notifications can be replayed. B is
killed (SIGKILL) by the module's last test. A and B serve the module; each a2a-sdk test
starts a relay stack of its own, for its length only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from tests.e2e.conftest import (
    CARD_PATH,
    DEV_SCRIPT,
    ROOT,
    STARTUP_TIMEOUT_SECONDS,
    DevServer,
    checked_client,
    dev_server_running,
    new_principal,
    sdk_agent,
)
from tests.e2e.flows_for_tests import CITY_QUESTION, forecast_chunks
from tests.e2e.forwarder import Forwarder, Recorded, forwarding
from tests.helpers import user_message
from tests.ports import listen_port
from tests.scripts import load_script

pytestmark = pytest.mark.e2e

RELAY_FLOW = "a2a_serverless.flows.relay:flow"
REMOTE_FLOW = "tests.e2e.flows_for_tests:remote_agent"
# How long A's relay waits for B's answer to a turn: past it, the turn fails (the kill test).
RELAY_TIMEOUT_SECONDS = 8
SETTLE_SECONDS = 30.0
POLL_SECONDS = 30.0  # an agent without push is polled 2, 4, 8... s after the send
_NAMED_TASK = re.compile(r"\(task ([^)\s]+)\)")


@dataclass
class Relay:
    """Stack A: `url` is its public URL (the forwarder), `direct` the stack itself."""

    url: str
    direct: str
    forwarder: Forwarder
    server: DevServer


# -- the stacks ------------------------------------------------------------------------------------


@contextlib.contextmanager
def killable_dev_server(log_dir: Path, *, args: tuple[str, ...]) -> Iterator[DevServer]:
    """`scripts/dev --port N [args]`, which a test may SIGKILL; one still running at the end
    is stopped with SIGINT and must exit 0."""
    port = listen_port()
    log_path = log_dir / "dev.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(DEV_SCRIPT), "--port", str(port), *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    server = DevServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        with httpx.Client(base_url=server.base_url) as probe:
            while True:
                assert process.poll() is None, f"scripts/dev exited:\n{server.output()}"
                try:
                    if probe.get(CARD_PATH, timeout=2.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, f"scripts/dev did not start:\n{server.output()}"
                time.sleep(0.2)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                code = process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise
            assert code == 0, server.output()


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """Stack B."""
    with killable_dev_server(
        tmp_path_factory.mktemp("delegation-b"), args=("--flow", REMOTE_FLOW)
    ) as server:
        yield server


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory, remote: DevServer) -> Iterator[Relay]:
    """Stack A, relaying to B, its public URL the recording forwarder's."""
    port = listen_port()
    with forwarding(port) as forwarder:
        public = f"http://127.0.0.1:{port}"
        env = {
            "RELAY_AGENT_URL": remote.base_url,
            "RELAY_TIMEOUT_SECONDS": str(RELAY_TIMEOUT_SECONDS),
            "PUBLIC_BASE_URL": public,
        }
        with dev_server_running(
            tmp_path_factory.mktemp("delegation-a"), args=("--flow", RELAY_FLOW), env=env
        ) as server:
            forwarder.upstream = server.base_url
            yield Relay(public, server.base_url, forwarder, server)


@pytest.fixture
def on_a(relay: Relay) -> Iterator[httpx.Client]:
    """A checked client of A (through its public URL) for a principal of its own."""
    with checked_client(relay.url, principal=new_principal("relay")) as client:
        yield client


@pytest.fixture(scope="module")
def on_b(remote: DevServer) -> Iterator[httpx.Client]:
    """A checked client of B as A calls it (no principal header: B's anonymous caller)."""
    with checked_client(remote.base_url) as client:
        yield client


# -- helpers ---------------------------------------------------------------------------------------


def start(client: httpx.Client, text: str, **message: Any) -> dict[str, Any]:
    body = {"message": user_message(text, **message), "configuration": {"returnImmediately": True}}
    response = client.post("/message:send", json=body)
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def get_task(client: httpx.Client, task_id: str) -> dict[str, Any]:
    response = client.get(f"/tasks/{task_id}")
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task


def wait_task(
    client: httpx.Client,
    task_id: str,
    until: Callable[[dict[str, Any]], bool],
    timeout: float = SETTLE_SECONDS,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task = get_task(client, task_id)
        if until(task):
            return task
        assert time.monotonic() < deadline, f"not reached within {timeout} s: {task}"
        time.sleep(0.1)


def state_is(*states: str) -> Callable[[dict[str, Any]], bool]:
    return lambda task: task["status"]["state"] in states


def text_of(message: dict[str, Any] | None) -> str:
    return "".join(p.get("text", "") for p in (message or {}).get("parts", []))


def named_remote_task(text: str) -> str | None:
    """The remote task id a waiting status names ("... (task ID)")."""
    found = _NAMED_TASK.search(text)
    return found.group(1) if found else None


def wait_delegated(client: httpx.Client, task_id: str) -> str:
    """A's task waiting on B: WORKING with a status naming B's task; that task's id."""
    task = wait_task(
        client,
        task_id,
        lambda t: (
            t["status"]["state"] == "TASK_STATE_WORKING"
            and named_remote_task(text_of(t["status"].get("message"))) is not None
        ),
    )
    remote_id = named_remote_task(text_of(task["status"]["message"]))
    assert remote_id is not None
    return remote_id


def sdk_message(text: str, *, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=f"msg-{uuid.uuid4().hex}",
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def assembled(updates: list[Any]) -> dict[str, str]:
    """Each artifact's text as a client rebuilds it from its updates (append or replace)."""
    texts: dict[str, str] = {}
    for update in updates:
        text = "".join(part.text for part in update.artifact.parts)
        artifact_id = update.artifact.artifact_id
        texts[artifact_id] = texts.get(artifact_id, "") + text if update.append else text
    return texts


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(text_of(artifact) for artifact in task.get("artifacts", []))


def converse(client: httpx.Client, city: str) -> tuple[str, str]:
    """The question-and-answer conversation through A, to its end: (A's task, B's task)."""
    task = start(client, "What is the weather like?")
    asked = wait_task(client, task["id"], state_is("TASK_STATE_INPUT_REQUIRED"))
    assert text_of(asked["status"]["message"]) == CITY_QUESTION
    start(client, city, task_id=task["id"], context_id=task["contextId"])
    remote_id = wait_delegated(client, task["id"])
    done = wait_task(client, task["id"], state_is("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert artifact_text(done) == "".join(forecast_chunks(city))
    return task["id"], remote_id


def recorded_settled(forwarder: Forwarder, task_id: str, quiet: float = 1.0) -> list[Recorded]:
    """The notifications kept for `task_id`, once none came for `quiet` seconds."""
    seen = -1
    while True:
        kept = forwarder.recorded_for(task_id)
        if len(kept) == seen:
            return kept
        seen = len(kept)
        time.sleep(quiet)


def post_notification(
    relay: Relay, path: str, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    """A notification straight to A (not through the forwarder: it is not recorded)."""
    sent = {k: v for k, v in headers.items() if k in ("content-type", "x-a2a-notification-token")}
    return httpx.post(relay.direct + path, content=body, headers=sent, timeout=30)


def replay_twice(relay: Relay, kept: list[Recorded]) -> None:
    """Every notification again, in order, then in reverse order (an artifact's first chunk
    last: were it taken again, it would replace the whole artifact); each answered 200."""
    for notification in [*kept, *reversed(kept)]:
        replayed = post_notification(
            relay, notification.path, notification.body, notification.headers
        )
        assert replayed.status_code == 200, replayed.text


# -- an a2a-sdk server, with push notifications and without ----------------------------------------


def sdk_echo_app(
    base: str, executor: Any, *, push: bool, pushed: list[str], served: list[str]
) -> Any:
    """The a2a-sdk server running `executor`. `push`: the card
    says so and the server sends them (their URLs go to `pushed`); the requests it serves go
    to `served` ("METHOD path"). Push: JSON-RPC first on the card; else HTTP+JSON first."""
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import (
        create_agent_card_routes,
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.server.tasks import (
        BasePushNotificationSender,
        InMemoryPushNotificationConfigStore,
        InMemoryTaskStore,
    )
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from starlette.applications import Starlette

    interfaces = [
        AgentInterface(url=f"{base}/rpc", protocol_binding="JSONRPC", protocol_version="1.0"),
        AgentInterface(url=f"{base}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
    ]
    card = AgentCard(
        name="sdk echo",
        description="a2a-sdk echo",
        version="1.0",
        supported_interfaces=interfaces if push else interfaces[::-1],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["e"])],
        capabilities=AgentCapabilities(push_notifications=push),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    options: dict[str, Any] = {}
    if push:

        async def record(request: httpx.Request) -> None:
            pushed.append(str(request.url))

        configs = InMemoryPushNotificationConfigStore()
        options = {
            "push_config_store": configs,
            "push_sender": BasePushNotificationSender(
                httpx.AsyncClient(event_hooks={"request": [record]}), configs
            ),
        }
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card, **options
    )
    app = Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/rpc"),
            *create_rest_routes(handler, path_prefix="/rest"),
        ]
    )

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            served.append(f"{scope['method']} {scope['path']}")
        await app(scope, receive, send)

    return recording


@contextlib.contextmanager
def relay_to_sdk_agent(
    log_dir: Path, *, push: bool
) -> Iterator[tuple[DevServer, list[str], list[str]]]:
    """An a2a-sdk server with the echo executor of scripts/bench_local.py, and a relay stack
    in front of it: (relay, pushed, served)."""
    bench = load_script("bench_local.py", "bench_local_for_delegation", register=True)
    pushed: list[str] = []
    served: list[str] = []
    port = listen_port()
    base = f"http://127.0.0.1:{port}"
    executor = bench.sdk_echo_executor()
    app = sdk_echo_app(base, executor, push=push, pushed=pushed, served=served)
    try:
        with (
            bench._serving(app, port) as url,
            dev_server_running(
                log_dir, args=("--flow", RELAY_FLOW), env={"RELAY_AGENT_URL": url}
            ) as server,
        ):
            yield server, pushed, served
    finally:
        sys.modules.pop("bench_local_for_delegation", None)


@pytest.mark.parametrize("push", [True, False], ids=["push", "poll"])
def test_a_relays_to_an_a2a_sdk_server(tmp_path: Path, push: bool) -> None:
    with (
        relay_to_sdk_agent(tmp_path, push=push) as (server, pushed, served),
        checked_client(server.base_url, principal=new_principal("sdk")) as client,
    ):
        started = time.monotonic()
        task = start(client, "relay me")
        done = wait_task(
            client,
            task["id"],
            state_is("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"),
            timeout=POLL_SECONDS,
        )
        elapsed = time.monotonic() - started
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert artifact_text(done) == "Echo: relay me"
    receiver = f"{server.base_url}/delegations/{task['id']}/"
    if push:
        assert pushed and all(url.startswith(receiver) for url in pushed), pushed
    else:
        assert not pushed
        assert any(s.startswith("GET /rest/tasks/") for s in served), served  # polled
    print(f"\nrelay to the a2a-sdk server ({'push' if push else 'poll'}): {elapsed:.1f} s")


# -- A delegates to B, B asks, the user answers through A ------------------------------------------


async def test_b_asks_through_a_and_its_artifact_streams_to_the_client_of_a(
    relay: Relay, on_b: httpx.Client
) -> None:
    async with sdk_agent(relay.url, streaming=True) as agent:
        first = [
            e
            async for e in agent.client.send_message(
                SendMessageRequest(message=sdk_message("What is the weather like?"))
            )
        ]
        assert first[0].WhichOneof("payload") == "task"
        task_id, context_id = first[0].task.id, first[0].task.context_id
        statuses = [e.status_update.status for e in first if e.HasField("status_update")]
        named = [
            named_remote_task("".join(p.text for p in s.message.parts))
            for s in statuses
            if s.state == TaskState.TASK_STATE_WORKING
        ]
        remote_ids = {n for n in named if n}
        assert len(remote_ids) == 1, statuses  # A's WORKING status names B's task
        (remote_id,) = remote_ids
        assert statuses[-1].state == TaskState.TASK_STATE_INPUT_REQUIRED, statuses
        assert "".join(p.text for p in statuses[-1].message.parts) == CITY_QUESTION
        asked = get_task(on_b, remote_id)
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        answer = sdk_message("Paris", task_id=task_id, context_id=context_id)
        second = [e async for e in agent.client.send_message(SendMessageRequest(message=answer))]
        chunks = [e.artifact_update for e in second if e.HasField("artifact_update")]
        assert len(chunks) >= 3, second  # B's chunks, forwarded as they came
        assert [c.append for c in chunks[:3]] == [False, True, True], chunks
        assert assembled(chunks) == {"forecast": "".join(forecast_chunks("Paris"))}
        assert {c.task_id for c in chunks} == {task_id}
        assert second[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

    done = get_task(on_b, remote_id)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "Paris" in [text_of(m) for m in done["history"] if m["role"] == "ROLE_USER"]


# -- cancel in the middle --------------------------------------------------------------------------


def test_canceling_the_task_on_a_cancels_the_one_on_b(
    on_a: httpx.Client, on_b: httpx.Client
) -> None:
    task = start(on_a, "[slow] take your time")
    remote_id = wait_delegated(on_a, task["id"])
    assert get_task(on_b, remote_id)["status"]["state"] == "TASK_STATE_WORKING"

    response = on_a.post(f"/tasks/{task['id']}:cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"]["state"] == "TASK_STATE_CANCELED"
    canceled_at = time.monotonic()
    wait_task(on_b, remote_id, state_is("TASK_STATE_CANCELED"), timeout=15)
    print(f"\nB's task canceled {time.monotonic() - canceled_at:.1f} s after A's cancel")


# -- B's notifications replayed --------------------------------------------------------------------


def test_notifications_of_b_replayed_change_nothing(relay: Relay, on_a: httpx.Client) -> None:
    task_id, _ = converse(on_a, "Oslo")
    kept = recorded_settled(relay.forwarder, task_id)
    keys = {r.path.rsplit("/", 1)[1] for r in kept}
    assert len(keys) == 2, keys  # one delegation a turn: the question, then the answer
    assert any(b"artifactUpdate" in r.body for r in kept), kept
    before = get_task(on_a, task_id)

    replay_twice(relay, kept)
    assert get_task(on_a, task_id) == before

    forged = {**kept[0].headers, "x-a2a-notification-token": "not-the-token"}
    refused = post_notification(relay, kept[0].path, kept[0].body, forged)
    assert refused.status_code == 401, refused.text
    assert get_task(on_a, task_id) == before


def test_notifications_of_b_replayed_while_a_waits_change_nothing(
    relay: Relay, on_a: httpx.Client
) -> None:
    """B's artifact reached A's task while A still waits on B: replayed, it is not added again."""
    task = start(on_a, "[partial] Lima")
    expected = "".join(forecast_chunks("Lima"))
    wait_task(on_a, task["id"], lambda t: artifact_text(t) == expected)
    kept = recorded_settled(relay.forwarder, task["id"])
    assert sum(b"artifactUpdate" in r.body for r in kept) == 3, kept
    before = get_task(on_a, task["id"])
    assert before["status"]["state"] == "TASK_STATE_WORKING"

    replay_twice(relay, kept)
    assert get_task(on_a, task["id"]) == before
    response = on_a.post(f"/tasks/{task['id']}:cancel")
    assert response.status_code == 200, response.text


# -- the receiver's credential ---------------------------------------------------------------------


def about_another_task(text: str) -> bytes:
    """A notification that another remote task completed with `text`."""
    other = f"other-{uuid.uuid4().hex}"
    message = {"messageId": other, "role": "ROLE_AGENT", "parts": [{"text": text}]}
    status = {"state": "TASK_STATE_COMPLETED", "message": message}
    event = {"statusUpdate": {"taskId": other, "contextId": other, "status": status}}
    return json.dumps(event).encode()


def test_the_receiver_takes_only_the_delegations_token_about_its_task(
    relay: Relay, on_a: httpx.Client
) -> None:
    task = start(on_a, "[slow] while I knock")
    wait_delegated(on_a, task["id"])
    deadline = time.monotonic() + SETTLE_SECONDS
    while not (kept := relay.forwarder.recorded_for(task["id"])):
        assert time.monotonic() < deadline, "B sent no notification"
        time.sleep(0.1)
    real = kept[0]
    token = real.headers["x-a2a-notification-token"]
    forged = about_another_task("FORGED")
    before = get_task(on_a, task["id"])

    answers = [
        post_notification(relay, real.path, real.body, {"content-type": "application/json"}),
        post_notification(
            relay,
            real.path,
            real.body,
            {"content-type": "application/json", "x-a2a-notification-token": token + "x"},
        ),
        post_notification(relay, real.path, forged, real.headers),
    ]
    assert [a.status_code for a in answers] == [401, 401, 403], [a.text for a in answers]
    assert [a.json()["error"]["status"] for a in answers] == [
        "UNAUTHENTICATED",
        "UNAUTHENTICATED",
        "PERMISSION_DENIED",
    ]
    assert get_task(on_a, task["id"]) == before
    # The delegation still takes its own remote task's news.
    again = post_notification(relay, real.path, real.body, real.headers)
    assert again.status_code == 200, again.text
    response = on_a.post(f"/tasks/{task['id']}:cancel")
    assert response.status_code == 200, response.text


# -- B killed while A waits (last: B does not come back) -------------------------------------------


def test_killing_b_while_a_waits_fails_the_task_on_a(
    remote: DevServer, on_a: httpx.Client, on_b: httpx.Client
) -> None:
    task = start(on_a, "[slow] until killed")
    remote_id = wait_delegated(on_a, task["id"])
    assert get_task(on_b, remote_id)["status"]["state"] == "TASK_STATE_WORKING"

    os.killpg(remote.process.pid, signal.SIGKILL)
    remote.process.wait()
    killed_at = time.monotonic()
    failed = wait_task(
        on_a,
        task["id"],
        state_is("TASK_STATE_FAILED", "TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"),
        timeout=RELAY_TIMEOUT_SECONDS + 15,
    )
    assert failed["status"]["state"] == "TASK_STATE_FAILED", failed
    assert "gave no answer" in text_of(failed["status"]["message"]), failed
    print(f"\nA's task failed {time.monotonic() - killed_at:.1f} s after B was killed")
