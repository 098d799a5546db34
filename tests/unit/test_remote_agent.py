"""The remote agent client (push/remote.py) against httpx mock transports: card URL forms,
interface choice, both bindings' requests and error mapping, caps, egress refusals."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.models import (
    AgentCard,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
)
from a2a_serverless.push.remote import (
    MAX_ANSWER_BYTES,
    MAX_CARD_BYTES,
    NoSupportedInterface,
    RemoteA2AError,
    RemoteAgent,
    RemoteCallFailed,
    RemoteRefused,
    card_url_of,
    choose_interface,
    parse_card,
)

PUBLIC_IP = "93.184.216.34"
POLICY = EgressPolicy()
SECRET = "Bearer secret-not-for-errors"
TASK = {
    "id": "t-1",
    "contextId": "c-1",
    "status": {"state": "TASK_STATE_SUBMITTED"},
}


def fake_resolve(host: str, port: int, **_: Any) -> list[Any]:
    return [(2, 1, 6, "", (PUBLIC_IP, port))]


def card_json(*interfaces: tuple[str, str, str], tenant: str | None = None) -> dict[str, Any]:
    return {
        "name": "remote",
        "description": "a remote agent",
        "version": "1",
        "supportedInterfaces": [
            {
                "url": url,
                "protocolBinding": binding,
                "protocolVersion": version,
                **({"tenant": tenant} if tenant else {}),
            }
            for binding, version, url in interfaces
        ],
        "capabilities": {"pushNotifications": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }


RPC_URL = "https://agent.example/a2a/jsonrpc"
REST_URL = "https://agent.example/a2a/rest/"


class Remote:
    """A mock remote agent: records requests, answers with `reply(request)`."""

    def __init__(self, card: dict[str, Any], reply: Callable[[httpx.Request], httpx.Response]):
        self.card = card
        self.reply = reply
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path.endswith(".json"):
            return httpx.Response(200, json=self.card)
        return self.reply(request)

    def agent(self, url: str = "https://agent.example", **headers: str) -> RemoteAgent:
        return RemoteAgent.resolve(
            url,
            egress=POLICY,
            headers=headers or {"Authorization": SECRET},
            resolve=fake_resolve,
            transport=httpx.MockTransport(self.handle),
        )


def rpc_result(result: dict[str, Any]) -> Callable[[httpx.Request], httpx.Response]:
    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"jsonrpc": "2.0", "id": body(request)["id"], "result": result}
        )

    return reply


def body(request: httpx.Request) -> Any:
    return json.loads(request.content)


def message() -> Message:
    return Message(message_id="m-1", role=Role.USER, parts=[Part(text="hi")])


PUSH = TaskPushNotificationConfig(url="https://me.example/hook", token="tok")


# -- card URL forms and card parsing ---------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "fetched"),
    [
        ("https://agent.example", "https://agent.example/.well-known/agent-card.json"),
        ("https://agent.example/", "https://agent.example/.well-known/agent-card.json"),
        ("https://agent.example/x/y/", "https://agent.example/x/y/.well-known/agent-card.json"),
        ("https://agent.example/cards/a.json", "https://agent.example/cards/a.json"),
        (
            "https://agent.example/.well-known/agent-card.json",
            "https://agent.example/.well-known/agent-card.json",
        ),
    ],
)
def test_card_url_forms(given: str, fetched: str) -> None:
    assert card_url_of(given) == fetched
    remote = Remote(card_json(("JSONRPC", "1.0", RPC_URL)), rpc_result(TASK))
    remote.agent(given)
    request = remote.requests[0]
    # Connected at the vetted address, the name in Host; no A2A-Version on the card's GET.
    assert request.url.host == PUBLIC_IP
    assert request.headers["host"] == "agent.example"
    assert request.url.raw_path.decode() == fetched.split("agent.example", 1)[1]
    assert "a2a-version" not in request.headers
    assert request.headers["authorization"] == SECRET


def test_a_v03_card_is_read_and_refused_for_its_version() -> None:
    v03 = {
        "name": "old",
        "description": "a 0.3 agent",
        "version": "1",
        "url": "https://old.example/rpc",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": "https://old.example/rest", "transport": "HTTP+JSON"}],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }
    card = parse_card(v03)
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", "0.3.0"),
        ("HTTP+JSON", "0.3.0"),
    ]
    with pytest.raises(NoSupportedInterface, match=r"JSONRPC 0\.3\.0, HTTP\+JSON 0\.3\.0"):
        choose_interface(card)


def test_a_card_that_is_not_a_card_is_a_failed_call() -> None:
    with pytest.raises(RemoteCallFailed, match="agent card is not valid: name"):
        parse_card({"supportedInterfaces": []})
    remote = Remote({}, rpc_result(TASK))
    remote.handle = lambda request: httpx.Response(200, content=b"[1]")  # type: ignore[method-assign]
    with pytest.raises(RemoteCallFailed, match="not a JSON object"):
        remote.agent()


# -- interface choice --------------------------------------------------------------------------


def chosen(*interfaces: tuple[str, str, str]) -> tuple[str, str, str]:
    card = AgentCard.model_validate(card_json(*interfaces))
    i = choose_interface(card)
    return i.protocol_binding, i.protocol_version, i.url


@pytest.mark.parametrize(
    ("interfaces", "expected"),
    [
        ([("JSONRPC", "1.0", "a"), ("HTTP+JSON", "1.0", "b")], ("JSONRPC", "1.0", "a")),
        ([("HTTP+JSON", "1.0", "b"), ("JSONRPC", "1.0", "a")], ("HTTP+JSON", "1.0", "b")),
        # A binding we do not speak, or a version we do not speak, is passed over.
        ([("GRPC", "1.0", "g"), ("JSONRPC", "1.0", "a")], ("JSONRPC", "1.0", "a")),
        ([("JSONRPC", "0.3", "old"), ("HTTP+JSON", "1.0", "b")], ("HTTP+JSON", "1.0", "b")),
        # Within the chosen binding, the 1.0 interface wins over one without a version.
        (
            [("HTTP+JSON", "", "nov"), ("JSONRPC", "1.0", "a"), ("HTTP+JSON", "1.0.0", "b")],
            ("HTTP+JSON", "1.0.0", "b"),
        ),
        ([("HTTP+JSON", "", "nov"), ("JSONRPC", "1.0", "a")], ("HTTP+JSON", "", "nov")),
    ],
)
def test_interface_choice(
    interfaces: list[tuple[str, str, str]], expected: tuple[str, str, str]
) -> None:
    assert chosen(*interfaces) == expected


@pytest.mark.parametrize(
    "interfaces",
    [[], [("GRPC", "1.0", "g")], [("JSONRPC", "0.3", "a"), ("HTTP+JSON", "2.0", "b")]],
)
def test_no_interface_we_speak(interfaces: list[tuple[str, str, str]]) -> None:
    with pytest.raises(NoSupportedInterface, match="no interface this client speaks"):
        chosen(*interfaces)


# -- the operations over both bindings ---------------------------------------------------------


def test_send_over_jsonrpc() -> None:
    remote = Remote(card_json(("JSONRPC", "1.0", RPC_URL)), rpc_result({"task": TASK}))
    task = remote.agent().send(message(), push=PUSH)
    assert isinstance(task, Task) and task.id == "t-1"
    request = remote.requests[-1]
    assert request.method == "POST" and request.url.raw_path == b"/a2a/jsonrpc"
    assert request.headers["a2a-version"] == "1.0"
    assert request.headers["authorization"] == SECRET
    assert request.headers["content-type"] == "application/json"
    sent = body(request)
    assert sent["method"] == "SendMessage"
    assert sent["params"]["message"]["messageId"] == "m-1"
    assert sent["params"]["configuration"] == {
        "taskPushNotificationConfig": {"url": "https://me.example/hook", "token": "tok"},
        "returnImmediately": True,
    }


def test_send_over_http_json() -> None:
    remote = Remote(
        card_json(("HTTP+JSON", "1.0", REST_URL)),
        lambda request: httpx.Response(200, json={"task": TASK}),
    )
    task = remote.agent().send(message(), push=PUSH)
    assert isinstance(task, Task)
    request = remote.requests[-1]
    assert request.method == "POST" and request.url.raw_path == b"/a2a/rest/message:send"
    assert request.headers["a2a-version"] == "1.0"
    assert body(request)["configuration"]["returnImmediately"] is True


def test_send_may_answer_a_message() -> None:
    reply = {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}
    remote = Remote(card_json(("JSONRPC", "1.0", RPC_URL)), rpc_result(reply))
    answer = remote.agent().send(message())
    assert isinstance(answer, Message) and answer.parts[0].text == "ok"
    assert "taskPushNotificationConfig" not in body(remote.requests[-1])["params"]["configuration"]


def test_task_operations_over_jsonrpc() -> None:
    remote = Remote(card_json(("JSONRPC", "1.0", RPC_URL), tenant="t1"), rpc_result(TASK))
    agent = remote.agent()
    agent.get_task("t/1", history_length=2)
    assert body(remote.requests[-1])["method"] == "GetTask"
    assert body(remote.requests[-1])["params"] == {"id": "t/1", "historyLength": 2, "tenant": "t1"}
    agent.cancel_task("t-1")
    assert body(remote.requests[-1])["method"] == "CancelTask"
    remote.reply = rpc_result({"taskId": "t-1", "id": "c", "url": "https://me.example/hook"})
    config = agent.set_push_config("t-1", PUSH)
    assert config.id == "c"
    sent = body(remote.requests[-1])
    assert sent["method"] == "CreateTaskPushNotificationConfig"
    assert sent["params"]["taskId"] == "t-1" and sent["params"]["tenant"] == "t1"


def test_task_operations_over_http_json() -> None:
    remote = Remote(
        card_json(("HTTP+JSON", "1.0", REST_URL), tenant="t1"),
        lambda request: httpx.Response(200, json=TASK),
    )
    agent = remote.agent()
    agent.get_task("t/1", history_length=2)
    request = remote.requests[-1]
    assert (request.method, request.url.raw_path) == (
        "GET",
        b"/a2a/rest/t1/tasks/t%2F1?historyLength=2",
    )
    assert request.content == b""
    agent.cancel_task("t-1")
    request = remote.requests[-1]
    assert (request.method, request.url.raw_path) == ("POST", b"/a2a/rest/t1/tasks/t-1:cancel")
    remote.reply = lambda request: httpx.Response(
        200, json={"taskId": "t-1", "id": "c", "url": "https://me.example/hook"}
    )
    assert agent.set_push_config("t-1", PUSH).id == "c"
    request = remote.requests[-1]
    assert request.url.raw_path == b"/a2a/rest/t1/tasks/t-1/pushNotificationConfigs"
    assert body(request)["taskId"] == "t-1"


def test_caller_headers_cannot_replace_the_protocol_ones() -> None:
    remote = Remote(card_json(("JSONRPC", "1.0", RPC_URL)), rpc_result(TASK))
    agent = remote.agent(**{"a2a-version": "0.3", "content-type": "text/plain", "X-Key": "k"})
    agent.get_task("t-1")
    request = remote.requests[-1]
    assert request.headers["a2a-version"] == "1.0"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-key"] == "k"


# -- error mapping -----------------------------------------------------------------------------


def rest_error(status: int, error: Any) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json={"error": error})


def test_http_json_errors() -> None:
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org",
    }
    remote = Remote(
        card_json(("HTTP+JSON", "1.0", REST_URL)),
        rest_error(404, {"code": 404, "status": "NOT_FOUND", "message": "no", "details": [info]}),
    )
    agent = remote.agent()
    with pytest.raises(RemoteA2AError) as caught:
        agent.get_task("t-1")
    assert (caught.value.reason, caught.value.code, caught.value.message) == (
        "TASK_NOT_FOUND",
        404,
        "no",
    )
    # Without ErrorInfo, the google.rpc status names it.
    remote.reply = rest_error(400, {"code": 400, "status": "FAILED_PRECONDITION", "message": "x"})
    with pytest.raises(RemoteA2AError) as caught:
        agent.cancel_task("t-1")
    assert caught.value.reason == "FAILED_PRECONDITION"
    # No A2A error at all: a failed call, retryable when the status says so.
    remote.reply = lambda request: httpx.Response(502, text="bad gateway")
    with pytest.raises(RemoteCallFailed, match="HTTP 502") as failed:
        agent.get_task("t-1")
    assert failed.value.retryable
    remote.reply = lambda request: httpx.Response(404, text="<html>")
    with pytest.raises(RemoteCallFailed, match="HTTP 404") as failed:
        agent.get_task("t-1")
    assert not failed.value.retryable
    remote.reply = lambda request: httpx.Response(200, json={"id": 1})
    with pytest.raises(RemoteCallFailed, match="not a valid Task"):
        agent.get_task("t-1")


def rpc_error(error: Any) -> Callable[[httpx.Request], httpx.Response]:
    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"jsonrpc": "2.0", "id": body(request)["id"], "error": error}
        )

    return reply


def test_jsonrpc_errors() -> None:
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_CANCELABLE"}
    remote = Remote(
        card_json(("JSONRPC", "1.0", RPC_URL)),
        rpc_error({"code": -32002, "message": "done", "data": [info]}),
    )
    agent = remote.agent()
    with pytest.raises(RemoteA2AError) as caught:
        agent.cancel_task("t-1")
    assert (caught.value.reason, caught.value.code, caught.value.message) == (
        "TASK_NOT_CANCELABLE",
        -32002,
        "done",
    )
    # No details (the a2a-sdk's JSON-RPC errors may carry none): the code names it.
    remote.reply = rpc_error({"code": -32001, "message": "gone"})
    with pytest.raises(RemoteA2AError) as caught:
        agent.get_task("t-1")
    assert caught.value.reason == "TASK_NOT_FOUND"
    remote.reply = rpc_error({"code": -1, "message": "odd"})
    with pytest.raises(RemoteA2AError) as caught:
        agent.get_task("t-1")
    assert caught.value.reason == "UNKNOWN"
    remote.reply = rpc_error("broken")
    with pytest.raises(RemoteCallFailed, match="malformed"):
        agent.get_task("t-1")
    remote.reply = lambda request: httpx.Response(
        200, json={"jsonrpc": "2.0", "id": "other", "result": TASK}
    )
    with pytest.raises(RemoteCallFailed, match="another JSON-RPC request id"):
        agent.get_task("t-1")
    remote.reply = lambda request: httpx.Response(503, text="busy")
    with pytest.raises(RemoteCallFailed, match="HTTP 503") as failed:
        agent.get_task("t-1")
    assert failed.value.retryable


def test_transport_failures() -> None:
    remote = Remote(card_json(("JSONRPC", "1.0", RPC_URL)), rpc_result(TASK))
    agent = remote.agent()

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    for failing, text in ((refuse, "connect failed"), (slow, "timeout \\(read\\)")):
        remote.reply = failing
        with pytest.raises(RemoteCallFailed, match=text) as failed:
            agent.get_task("t-1")
        assert failed.value.retryable


def test_no_error_holds_the_callers_credentials() -> None:
    remote = Remote(
        card_json(("JSONRPC", "1.0", RPC_URL)), rpc_error({"code": -32001, "message": "m"})
    )
    agent = remote.agent()
    for reply in (rpc_error({"code": -32001, "message": "m"}), lambda r: httpx.Response(500)):
        remote.reply = reply
        with pytest.raises(Exception) as caught:
            agent.get_task("t-1")
        assert "secret-not-for-errors" not in str(caught.value) + repr(caught.value)
    assert "secret-not-for-errors" not in repr(agent) + repr(agent._http)


def test_the_card_redirect_is_not_followed() -> None:
    remote = Remote({}, rpc_result(TASK))
    remote.handle = lambda request: httpx.Response(  # type: ignore[method-assign]
        302, headers={"Location": "http://169.254.169.254/"}
    )
    with pytest.raises(RemoteCallFailed, match="not served \\(HTTP 302\\)"):
        remote.agent()


# -- egress --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://agent.example", "scheme"),
        ("https://127.0.0.1:9", "loopback"),
        ("https://169.254.169.254", "metadata"),
        ("https://user:pw@agent.example", "userinfo"),
    ],
)
def test_refused_card_urls(url: str, reason: str) -> None:
    remote = Remote(card_json(("JSONRPC", "1.0", RPC_URL)), rpc_result(TASK))
    with pytest.raises(RemoteRefused) as caught:
        remote.agent(url)
    assert caught.value.reason == reason
    assert remote.requests == []


def test_every_operation_goes_through_the_guard() -> None:
    remote = Remote(card_json(("JSONRPC", "1.0", "https://10.0.0.1/rpc")), rpc_result(TASK))
    agent = remote.agent()
    with pytest.raises(RemoteRefused) as caught:
        agent.send(message())
    assert caught.value.reason == "private"
    assert len(remote.requests) == 1  # the card only


def test_loopback_is_allowed_when_the_policy_allows_it() -> None:
    remote = Remote(card_json(("JSONRPC", "1.0", "http://127.0.0.1:9/rpc")), rpc_result(TASK))
    agent = RemoteAgent.resolve(
        "http://127.0.0.1:9",
        egress=EgressPolicy(allow_http=True, allow_hosts=frozenset({"127.0.0.1"})),
        transport=httpx.MockTransport(remote.handle),
    )
    assert agent.get_task("t-1").id == "t-1"


# -- caps ----------------------------------------------------------------------------------------


def chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b" " * min(size, total - sent)
        sent += size


def test_a_card_over_the_cap_is_refused() -> None:
    remote = Remote({}, rpc_result(TASK))
    padded = json.dumps(card_json(("JSONRPC", "1.0", RPC_URL)))
    remote.handle = lambda request: httpx.Response(  # type: ignore[method-assign]
        200, content=padded + " " * MAX_CARD_BYTES
    )
    with pytest.raises(RemoteCallFailed, match=f"larger than {MAX_CARD_BYTES} bytes"):
        remote.agent()
    # Just under the cap is read.
    remote.handle = lambda request: httpx.Response(  # type: ignore[method-assign]
        200, content=padded + " " * (MAX_CARD_BYTES - len(padded))
    )
    remote.agent()


def test_an_answer_over_the_cap_is_cut_without_a_length() -> None:
    remote = Remote(card_json(("HTTP+JSON", "1.0", REST_URL)), rpc_result(TASK))
    agent = remote.agent()
    pulled: list[int] = []

    def streamed(request: httpx.Request) -> httpx.Response:
        def body() -> Iterator[bytes]:
            for piece in chunks(MAX_ANSWER_BYTES * 4):
                pulled.append(len(piece))
                yield piece

        return httpx.Response(200, content=body())  # no Content-Length: streamed

    remote.reply = streamed
    with pytest.raises(RemoteCallFailed, match=f"larger than {MAX_ANSWER_BYTES} bytes"):
        agent.get_task("t-1")
    assert sum(pulled) <= MAX_ANSWER_BYTES + 64 * 1024  # stopped at the cap


def test_an_answer_declared_over_the_cap_is_not_read() -> None:
    remote = Remote(card_json(("HTTP+JSON", "1.0", REST_URL)), rpc_result(TASK))
    agent = remote.agent()
    pulled: list[int] = []

    def declared(request: httpx.Request) -> httpx.Response:
        def body() -> Iterator[bytes]:
            pulled.append(1)
            yield b"{}"

        headers = {"Content-Length": str(MAX_ANSWER_BYTES + 1)}
        return httpx.Response(200, headers=headers, content=body())

    remote.reply = declared
    with pytest.raises(RemoteCallFailed, match=f"larger than {MAX_ANSWER_BYTES} bytes"):
        agent.get_task("t-1")
    assert pulled == []
