"""Hostile input against the local stack, raw HTTP: bodies nested
thousands deep, lone surrogates, `NaN`/`Infinity`, out-of-range timestamps, 0.3 shapes of the
wrong type and over-deep `metadata` are each a precise 4xx / JSON-RPC error naming the field,
over HTTP+JSON, JSON-RPC 1.0 and JSON-RPC 0.3 — never a 500, and nothing is stored that would
later break a read.

Requests the wire hook's own parser cannot read (it would recurse or accept `NaN`) go through
`plain`, an unchecked client; their answers are checked here, envelope and all.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.e2e import rpc
from tests.e2e.conftest import LOCAL_PRINCIPAL_HEADER, new_principal
from tests.e2e.test_wire import error_of, message_body, reason_of, violations_of

pytestmark = pytest.mark.e2e

JSON = {"Content-Type": "application/json"}
# Past Python 3.11's JSON parser (it gives up near 1,000 levels: the body is refused whole), not
# 3.13's (Lambda's runtime: near 10,000-20,000; it reads the document and the depth checks name
# the field). UNPARSABLE is past any parser's limit and still under the 256 KiB body limit.
DEEP = 3000
UNPARSABLE = 120_000
MAX_DEPTH = 32
MAX_VALUE_DEPTH = 16


def nested(depth: int) -> str:
    """JSON text of `depth` nested objects: {"a":{"a":...{}}}."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def nested_value(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def send_text(metadata_json: str = "{}", *, message_id: str | None = None) -> str:
    """A 1.0 SendMessageRequest as JSON text with raw `message.metadata` text."""
    mid = message_id if message_id is not None else json.dumps(f"msg-{uuid.uuid4().hex}")
    return (
        '{"message":{"messageId":' + mid + ',"role":"ROLE_USER","parts":[{"text":"hi"}],'
        '"metadata":' + metadata_json + "}}"
    )


def rpc_text(method: str, params_json: str, id_json: str = '"r-1"') -> str:
    return (
        '{"jsonrpc":"2.0","id":'
        + id_json
        + ',"method":"'
        + method
        + '","params":'
        + params_json
        + "}"
    )


def total(http: httpx.Client) -> int:
    response = http.get("/tasks")
    assert response.status_code == 200, response.text
    return int(response.json().get("totalSize", 0))


@pytest.fixture
def plain(base_url: str) -> Iterator[Callable[..., httpx.Client]]:
    """Unchecked clients (see the module docstring) for a fresh principal and a version."""
    clients: list[httpx.Client] = []
    principal = new_principal("hostile")

    def make(version: str | None = "1.0") -> httpx.Client:
        headers = {LOCAL_PRINCIPAL_HEADER: principal, **JSON}
        if version is not None:
            headers["A2A-Version"] = version
        client = httpx.Client(base_url=base_url, headers=headers, timeout=30.0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def rpc_envelope(response: httpx.Response, id_: Any, code: int) -> dict[str, Any]:
    """The JSON-RPC error of a spec-shaped answer: HTTP 200, JSON, our id, `code`."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    envelope = response.json()
    assert set(envelope) == {"jsonrpc", "id", "error"}, envelope
    assert envelope["jsonrpc"] == "2.0" and envelope["id"] == id_, envelope
    assert envelope["error"]["code"] == code, envelope
    assert rpc.error_info(envelope["error"])["reason"], envelope
    return envelope["error"]


# -- HTTP+JSON -----------------------------------------------------------------------------------


def test_rest_body_nested_past_any_parser_is_a_400_on_the_body(
    plain: Callable[..., httpx.Client],
) -> None:
    http = plain()
    deep = "[" * UNPARSABLE + "]" * UNPARSABLE
    for path in ("/message:send", "/message:stream"):
        response = http.post(path, content=send_text(deep))
        error = error_of(response, 400)
        assert reason_of(error) == "INVALID_PARAMS"
        assert violations_of(error) == ["(body)"], error
        assert f"deeper than {MAX_DEPTH} levels" in error["message"]
    assert total(http) == 0


def test_rest_body_nested_thousands_deep_is_a_400(plain: Callable[..., httpx.Client]) -> None:
    http = plain()
    for path in ("/message:send", "/message:stream"):
        response = http.post(path, content=send_text(nested(DEEP)))
        error = error_of(response, 400)
        assert reason_of(error) == "INVALID_PARAMS"
        # The parser gave up (the body), or read it and the metadata's own limit names it.
        refused = (violations_of(error), error["message"])
        assert refused in (
            (["(body)"], f"(body): is nested deeper than {MAX_DEPTH} levels"),
            (
                ["message.metadata"],
                f"message.metadata: is nested deeper than {MAX_VALUE_DEPTH} levels",
            ),
        ), error
    assert total(http) == 0


@pytest.mark.parametrize(
    ("metadata", "field", "limit"),
    [
        (nested(MAX_VALUE_DEPTH + 1), "message.metadata", MAX_VALUE_DEPTH),
        (nested(200), "message.metadata", MAX_VALUE_DEPTH),
        (nested(300), "message.metadata", MAX_VALUE_DEPTH),
    ],
    ids=["just-over", "200", "300"],
)
def test_rest_over_deep_metadata_is_refused_and_stores_nothing(
    http: httpx.Client, metadata: str, field: str, limit: int
) -> None:
    response = http.post("/message:send", content=send_text(metadata), headers=JSON)
    error = error_of(response, 400)
    assert reason_of(error) == "INVALID_PARAMS"
    assert violations_of(error) == [field], error
    assert f"deeper than {limit} levels" in error["message"]
    assert total(http) == 0


def test_rest_over_deep_data_part_names_the_part(http: httpx.Client) -> None:
    body = message_body()
    body["message"]["parts"] = [{"data": nested_value(MAX_VALUE_DEPTH + 1)}]
    error = error_of(http.post("/message:send", json=body), 400)
    assert violations_of(error) == ["message.parts[0].data"], error


def test_rest_metadata_bound_is_inclusive_and_reads_back(http: httpx.Client) -> None:
    over = message_body()
    over["message"]["metadata"] = nested_value(MAX_VALUE_DEPTH + 1)
    assert error_of(http.post("/message:send", json=over), 400)
    metadata = nested_value(MAX_VALUE_DEPTH)
    body = message_body()
    body["message"]["metadata"] = metadata
    body["metadata"] = metadata
    response = http.post("/message:send", json=body)
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    read = http.get(f"/tasks/{task['id']}")
    assert read.status_code == 200, read.text
    assert read.json()["history"][0]["metadata"] == metadata


def test_rest_lone_surrogate_in_an_id_is_a_400(http: httpx.Client) -> None:
    response = http.post("/message:send", content=send_text(message_id='"\\ud800"'), headers=JSON)
    error = error_of(response, 400)
    assert reason_of(error) == "INVALID_PARAMS"
    assert violations_of(error) == ["message.messageId"], error
    assert "not valid Unicode" in error["message"]
    assert total(http) == 0


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_rest_non_finite_numbers_are_not_json(http: httpx.Client, constant: str) -> None:
    response = http.post("/message:send", content=send_text('{"x":' + constant + "}"), headers=JSON)
    error = error_of(response, 400)
    assert reason_of(error) == "INVALID_REQUEST"
    assert "not valid JSON" in error["message"]
    assert total(http) == 0


def test_rest_timestamp_out_of_range_in_utc_is_a_400(http: httpx.Client) -> None:
    response = http.get("/tasks?statusTimestampAfter=0001-01-01T00:00:00%2B14:00")
    error = error_of(response, 400)
    assert violations_of(error) == ["statusTimestampAfter"], error
    assert "out of range" in error["message"]


# -- JSON-RPC 1.0 and 0.3 --------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0", None])
def test_rpc_body_nested_past_any_parser_is_invalid_request(
    plain: Callable[..., httpx.Client], version: str | None
) -> None:
    method = "SendMessage" if version else "message/send"
    deep = "[" * UNPARSABLE + "]" * UNPARSABLE
    response = plain(version).post("/", content=rpc_text(method, deep))
    error = rpc_envelope(response, None, -32600)  # unparsed: no id to echo
    assert f"deeper than {MAX_DEPTH} levels" in error["message"]


@pytest.mark.parametrize("version", ["1.0", None])
def test_rpc_body_nested_thousands_deep_is_refused(
    plain: Callable[..., httpx.Client], version: str | None
) -> None:
    method = "SendMessage" if version else "message/send"
    response = plain(version).post("/", content=rpc_text(method, nested(DEEP)))
    if response.json().get("id") is None:  # the parser gave up: the request, no id
        error = rpc_envelope(response, None, -32600)
    else:  # read: the id is echoed and the params' first value too deep is named
        error = rpc_envelope(response, "r-1", -32602)
        # The path is relative to params, itself the envelope's first level.
        assert error["message"].startswith(".".join(["a"] * (MAX_DEPTH - 1)) + ": "), error
    assert error["message"].endswith(f"is nested deeper than {MAX_DEPTH} levels"), error


@pytest.mark.parametrize("version", ["1.0", None])
@pytest.mark.parametrize("id_json", ["NaN", "Infinity", "-Infinity"])
def test_rpc_non_finite_id_is_a_parse_error(
    plain: Callable[..., httpx.Client], version: str | None, id_json: str
) -> None:
    response = plain(version).post("/", content=rpc_text("GetTask", '{"id":"x"}', id_json))
    rpc_envelope(response, None, -32700)


@pytest.mark.parametrize("version", ["1.0", None])
def test_rpc_lone_surrogate_id_is_invalid_request(
    plain: Callable[..., httpx.Client], version: str | None
) -> None:
    response = plain(version).post("/", content=rpc_text("GetTask", '{"id":"x"}', '"\\udc00"'))
    error = rpc_envelope(response, None, -32600)
    assert "valid Unicode" in error["message"]


def _msg_text(version: str | None, message_id: str, metadata: str) -> str:
    if version:
        return (
            '{"message":{"messageId":' + message_id + ',"role":"ROLE_USER",'
            '"parts":[{"text":"hi"}],"metadata":' + metadata + "}}"
        )
    return (
        '{"message":{"kind":"message","messageId":' + message_id + ',"role":"user",'
        '"parts":[{"kind":"text","text":"hi"}],"metadata":' + metadata + "}}"
    )


@pytest.mark.parametrize("version", ["1.0", None])
@pytest.mark.parametrize(
    ("metadata", "field"),
    [('{"k":"\\ud800"}', "message.metadata.k"), ('{"\\udfff":1}', "message.metadata")],
    ids=["value", "key"],
)
def test_rpc_lone_surrogate_in_metadata_names_the_field(
    plain: Callable[..., httpx.Client], version: str | None, metadata: str, field: str
) -> None:
    client = plain(version)
    method = "SendMessage" if version else "message/send"
    params = _msg_text(version, '"m-1"', metadata)
    error = rpc_envelope(client.post("/", content=rpc_text(method, params)), "r-1", -32602)
    assert rpc.violated_fields(error) == [field], error
    assert "valid Unicode" in error["message"]
    listed = plain("1.0").get("/tasks")
    assert listed.status_code == 200 and listed.json().get("totalSize", 0) == 0, listed.text


@pytest.mark.parametrize("version", ["1.0", None])
@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH + 1, 200, 300])
def test_rpc_over_deep_metadata_names_the_field(
    plain: Callable[..., httpx.Client], version: str | None, depth: int
) -> None:
    client = plain(version)
    method = "SendMessage" if version else "message/send"
    params = _msg_text(version, '"m-1"', nested(depth))
    error = rpc_envelope(client.post("/", content=rpc_text(method, params)), "r-1", -32602)
    assert rpc.violated_fields(error) == ["message.metadata"], error
    listed = plain("1.0").get("/tasks")
    assert listed.status_code == 200 and listed.json().get("totalSize", 0) == 0, listed.text


@pytest.mark.parametrize("version", ["1.0", None])
def test_rpc_nan_in_metadata_is_a_parse_error(
    plain: Callable[..., httpx.Client], version: str | None
) -> None:
    client = plain(version)
    method = "SendMessage" if version else "message/send"
    params = _msg_text(version, '"m-1"', '{"x":NaN}')
    error = rpc_envelope(client.post("/", content=rpc_text(method, params)), None, -32700)
    assert "NaN" in error["message"]


def test_rpc_timestamp_out_of_range_in_utc_names_the_field(
    raw: Callable[..., httpx.Client],
) -> None:
    client = raw(principal=new_principal("hostile"), version="1.0")
    params = {"statusTimestampAfter": "0001-01-01T00:00:00+14:00"}
    error = rpc.error(client, "ListTasks", params, code=-32602)
    assert rpc.violated_fields(error) == ["statusTimestampAfter"], error


def test_v03_role_of_the_wrong_type_names_the_field(plain: Callable[..., httpx.Client]) -> None:
    params = {
        "message": {
            "kind": "message",
            "messageId": "m-1",
            "role": ["user"],
            "parts": [{"kind": "text", "text": "hi"}],
        }
    }
    body = rpc.request_body("message/send", params, id="r-1")
    error = rpc_envelope(plain(None).post("/", json=body), "r-1", -32602)
    assert rpc.violated_fields(error) == ["message.role"], error


@pytest.mark.parametrize("schemes", [{"a": 1}, "Bearer", [], None])
def test_v03_push_authentication_of_the_wrong_shape_names_the_field(
    plain: Callable[..., httpx.Client], schemes: Any
) -> None:
    client = plain(None)
    task = rpc.result(client, "message/send", {"message": rpc.msg03("push target")})
    config = {"url": "https://example.com/hook", "authentication": {"schemes": schemes}}
    params = {"taskId": task["id"], "pushNotificationConfig": config}
    body = rpc.request_body("tasks/pushNotificationConfig/set", params, id="r-2")
    error = rpc_envelope(client.post("/", json=body), "r-2", -32602)
    assert rpc.violated_fields(error) == ["pushNotificationConfig.authentication.schemes"], error
