"""The remote agent client (push/remote.py) against real servers: a `scripts/dev` stack over
both of its bindings (each forced by reordering its card's interfaces), and an a2a-sdk server.

The client's egress policy is the local stack's (http to loopback allowed), as for webhooks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.local.stack import LOCAL_PARAMETERS
from a2a_serverless.models import (
    AgentCard,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a_serverless.push.remote import RemoteA2AError, RemoteAgent
from tests.e2e.conftest import LOCAL_PRINCIPAL_HEADER, DevServer, new_principal
from tests.integration.webhooks import Webhooks, always
from tests.ports import listen_port
from tests.scripts import load_script

pytestmark = pytest.mark.e2e

LOCAL_EGRESS = EgressPolicy(
    allow_http=LOCAL_PARAMETERS["PushAllowHttp"] == "true",
    allow_hosts=frozenset(LOCAL_PARAMETERS["PushAllowHosts"].split(",")),
)
DELIVERY_TIMEOUT = 30.0


@pytest.fixture
def webhooks() -> Iterator[Webhooks]:
    hooks = Webhooks()
    try:
        yield hooks
    finally:
        hooks.close()


def user_message(text: str) -> Message:
    return Message(message_id=f"m-{uuid.uuid4().hex}", role=Role.USER, parts=[Part(text=text)])


def reordered(card: AgentCard, binding: str) -> AgentCard:
    """The card with its `binding` interfaces first."""
    first = [i for i in card.supported_interfaces if i.protocol_binding == binding]
    rest = [i for i in card.supported_interfaces if i.protocol_binding != binding]
    return card.model_copy(update={"supported_interfaces": first + rest})


def wait_for_states(hooks: Webhooks, hook: str, wanted: str) -> list[str]:
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    while True:
        states = [
            (event.get("statusUpdate") or event.get("task") or {}).get("status", {}).get("state")
            for event in hooks.delivered(hook)
        ]
        if wanted in states:
            return [s for s in states if s]
        assert time.monotonic() < deadline, f"no {wanted} delivered to {hook}: {states}"
        time.sleep(0.1)


def test_resolve_chooses_the_first_interface_of_the_card(dev_server: DevServer) -> None:
    agent = RemoteAgent.resolve(dev_server.base_url, egress=LOCAL_EGRESS)
    first = agent.card.supported_interfaces[0]
    assert (agent.interface.protocol_binding, agent.interface.protocol_version) == (
        first.protocol_binding,
        "1.0",
    )


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_send_get_cancel_and_push_over_each_binding(
    dev_server: DevServer, webhooks: Webhooks, binding: str
) -> None:
    principal = {LOCAL_PRINCIPAL_HEADER: new_principal("remote")}
    card = RemoteAgent.resolve(dev_server.base_url, egress=LOCAL_EGRESS, headers=principal).card
    agent = RemoteAgent.from_card(reordered(card, binding), egress=LOCAL_EGRESS, headers=principal)
    assert agent.interface.protocol_binding == binding

    # Non-blocking, the push config inline: the task comes back at once, its events at the hook.
    hook = webhooks.hook(f"done-{binding}", always(200))
    done = agent.send(user_message("hello"), push=TaskPushNotificationConfig(url=hook, token="t"))
    assert isinstance(done, Task)
    assert done.status.state is TaskState.SUBMITTED
    assert "TASK_STATE_COMPLETED" in wait_for_states(
        webhooks, f"done-{binding}", "TASK_STATE_COMPLETED"
    )
    assert webhooks.posts_to(f"done-{binding}")[0].headers["x-a2a-notification-token"] == "t"
    assert agent.get_task(done.id).status.state is TaskState.COMPLETED

    # A slow task: a push config set afterwards, then the task canceled.
    slow = agent.send(user_message("wait [slow=30]"))
    assert isinstance(slow, Task)
    later = webhooks.hook(f"later-{binding}", always(200))
    config = agent.set_push_config(slow.id, TaskPushNotificationConfig(url=later))
    assert config.task_id == slow.id and config.id
    assert agent.cancel_task(slow.id).status.state is TaskState.CANCELED
    wait_for_states(webhooks, f"later-{binding}", "TASK_STATE_CANCELED")

    # The remote's A2A errors, as the binding carries them.
    with pytest.raises(RemoteA2AError) as caught:
        agent.cancel_task(slow.id)
    assert caught.value.reason == "TASK_NOT_CANCELABLE"
    with pytest.raises(RemoteA2AError) as caught:
        agent.get_task(f"no-such-{uuid.uuid4().hex}")
    assert caught.value.reason == "TASK_NOT_FOUND"
    # The caller's headers are its credentials: another principal does not see the task.
    stranger = RemoteAgent.from_card(
        agent.card,
        egress=LOCAL_EGRESS,
        headers={LOCAL_PRINCIPAL_HEADER: new_principal("stranger")},
    )
    with pytest.raises(RemoteA2AError) as caught:
        stranger.get_task(done.id)
    assert caught.value.reason == "TASK_NOT_FOUND"


# -- an a2a-sdk server -------------------------------------------------------------------------


def sdk_app(base: str, executor: Any) -> Any:
    """An a2a-sdk server with push notifications, both bindings on its card (JSON-RPC first),
    running `executor`."""
    import httpx
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

    card = AgentCard(
        name="sdk echo",
        description="a2a-sdk echo with push",
        version="1.0",
        supported_interfaces=[
            AgentInterface(url=f"{base}/rpc", protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(
                url=f"{base}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
        ],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["e"])],
        capabilities=AgentCapabilities(push_notifications=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    configs = InMemoryPushNotificationConfigStore()
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=configs,
        push_sender=BasePushNotificationSender(httpx.AsyncClient(), configs),
    )
    return Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/rpc"),
            *create_rest_routes(handler, path_prefix="/rest"),
        ]
    )


@pytest.fixture(scope="module")
def sdk_server() -> Iterator[str]:
    """The sdk app served by uvicorn in a thread (scripts/bench_local.py's server and echo
    executor)."""
    import sys

    bench = load_script("bench_local.py", "bench_local_for_remote", register=True)
    try:
        port = listen_port()
        app = sdk_app(f"http://127.0.0.1:{port}", bench.sdk_echo_executor())
        with bench._serving(app, port) as url:
            yield url
    finally:
        sys.modules.pop("bench_local_for_remote", None)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_an_a2a_sdk_server(sdk_server: str, webhooks: Webhooks, binding: str) -> None:
    card = RemoteAgent.resolve(sdk_server, egress=LOCAL_EGRESS).card
    assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
    agent = RemoteAgent.from_card(reordered(card, binding), egress=LOCAL_EGRESS)
    assert agent.interface.protocol_binding == binding

    hook = webhooks.hook(f"sdk-{binding}", always(200))
    task = agent.send(user_message("hello"), push=TaskPushNotificationConfig(url=hook, token="t"))
    assert isinstance(task, Task)
    wait_for_states(webhooks, f"sdk-{binding}", "TASK_STATE_COMPLETED")
    current = agent.get_task(task.id)
    assert current.status.state is TaskState.COMPLETED
    assert current.artifacts and current.artifacts[0].parts[0].text == "Echo: hello"
    config = agent.set_push_config(task.id, TaskPushNotificationConfig(url=hook, id="again"))
    assert (config.task_id, config.id) == (task.id, "again")
    errors: dict[str, str] = {}
    for name, call in (
        ("cancel", lambda: agent.cancel_task(task.id)),
        ("get", lambda: agent.get_task(f"no-such-{uuid.uuid4().hex}")),
    ):
        with pytest.raises(RemoteA2AError) as caught:
            call()
        errors[name] = caught.value.reason
    assert errors == {"cancel": "TASK_NOT_CANCELABLE", "get": "TASK_NOT_FOUND"}
