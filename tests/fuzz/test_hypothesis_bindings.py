"""Property-based fuzzing of every operation of every binding against the local stack:
HTTP+JSON 1.0, JSON-RPC 1.0 (`POST /` with `A2A-Version: 1.0`) and JSON-RPC 0.3 (`POST /`
without it). Requests start from valid ones (so they reach the operations, not only the
parser) and are mutated: wrong types, huge, deep and odd strings, lone surrogates, `NaN` and
out-of-range numbers as JSON text, JSON nested thousands deep, long ids, unknown methods and
fields, bad `A2A-Version` values, odd query strings for ListTasks, wrong media types and
bytes that are not JSON at all. Ids are drawn from the fuzzer's own tasks, from another
owner's (the bystanders), and from odd strings.

Oracles and budget: see tests/fuzz/conftest.py.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.e2e.conftest import DevServer
from tests.fuzz.conftest import (
    A2A_JSON_TYPE,
    JSON_TYPE,
    Bystanders,
    assert_after_the_run,
    client_for,
    exchange,
    fuzz_settings,
    outbound_safe,
    own_tasks,
)

pytestmark = [
    pytest.mark.e2e,
    # A failing case may hold a 256 KiB body: hypothesis warns that its repr is large.
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]
T = TypeVar("T")

# -- JSON text that Python's encoder cannot write --------------------------------------------

_RAW_OPEN, _RAW_CLOSE = "\ue000", "\ue001"
_RAW_TOKEN = re.compile(
    r'"(?:\\ue000|\ue000)((?:(?!\\ue001|\ue001).)*)(?:\\ue001|\ue001)"', re.DOTALL
)


def _nested(depth: int, opener: str = "a") -> str:
    if opener == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "{}" + "}" * depth


# Values a JSON text can hold that `json.dumps` never writes: non-finite numbers, numbers out
# of double range, integers past Python's digit limit, nesting past the parser's recursion.
RAW_TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "0.1e1",
    "9" * 4301,
    "-" + "9" * 5000,
    _nested(17),
    _nested(33),
    _nested(200),
    _nested(1001),
    _nested(3000),
    _nested(20000, "["),
]


def raw(token: str) -> str:
    """A placeholder `dumps` replaces by `token`, unquoted."""
    return _RAW_OPEN + token + _RAW_CLOSE


def dumps(value: Any, *, ascii_only: bool = True) -> bytes:
    """JSON bytes of `value` with raw tokens spliced in; with `ascii_only=False` a lone
    surrogate is written as its (invalid) UTF-8 bytes instead of a `\\ud800` escape."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    text = _RAW_TOKEN.sub(lambda m: m.group(1).encode().decode("unicode_escape"), text)
    return text.encode("utf-8", "surrogatepass")


# -- strategies ------------------------------------------------------------------------------

ODD_TEXT = [
    "",
    " ",
    "\u0000",
    "\ud800",
    "a\udfffb",
    "\ufeff",
    "\u202eevil",
    "../../etc/passwd",
    "%2F%2e%2e",
    "a/b",
    "a:cancel",
    "?x=1#y",
    "null",
    "NaN",
    "<script>",
    "' OR 1=1 --",
    "TASK#x",
    "OWNER#anonymous",
    "[input]",
    "[crash]",
    "[fail]",
    "[auth]",
    "[reject]",
    "[whoami]",
]
odd_strings = st.one_of(
    st.text(max_size=30),
    st.sampled_from(ODD_TEXT),
    st.builds(
        lambda char, count: char * count,
        st.sampled_from(["a", "é", "€", "😀", "\u0000", "\ud800", " ", "\n"]),
        st.sampled_from([63, 64, 65, 255, 256, 257, 1024, 1025, 10_000, 70_000]),
    ),
)
# Ids travel in URL paths too: long, but not body-sized.
odd_ids = st.one_of(
    st.text(max_size=30),
    st.sampled_from(ODD_TEXT),
    st.builds(
        lambda char, count: char * count,
        st.sampled_from(["a", "é", "😀", "\ud800", " "]),
        st.sampled_from([64, 255, 256, 257, 1024, 2048]),
    ),
)
raw_values = st.sampled_from(RAW_TOKENS).map(raw)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    odd_strings,
    raw_values,
)
json_values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.sampled_from(ODD_TEXT)), children, max_size=4
        ),
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _parent(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        value = value[key]
    return value


# The helpers below take the `draw` of the one composite strategy per test and draw from
# strategies built once: building strategies per example (a `sampled_from` of a fresh list, a
# composite per call) costs hypothesis more than the request itself.


@functools.cache
def _below(count: int) -> st.SearchStrategy[int]:
    return st.integers(0, count - 1)


def pick(draw: st.DrawFn, options: Sequence[T]) -> T:
    return options[draw(_below(len(options)))]


def one_in(draw: st.DrawFn, count: int) -> bool:
    return draw(_below(count)) == 0


MUTATIONS = ("replace", "replace", "odd", "delete", "add", "wrap")
odd_or_raw = st.one_of(odd_strings, raw_values)
keys = st.text(max_size=12)


def mutate(draw: st.DrawFn, template: Any, most: int = 3) -> Any:
    """`template` with a few of its values replaced, removed, wrapped or joined by others."""
    value = copy.deepcopy(template)
    for _ in range(1 + draw(_below(most))):
        path = pick(draw, _paths(value))
        kind = pick(draw, MUTATIONS)
        if not path:  # the root
            if kind in ("replace", "odd"):
                value = draw(json_values)
            elif kind == "wrap":
                value = [value]
            continue
        parent, key = _parent(value, path), path[-1]
        if kind == "replace":
            parent[key] = draw(json_values)
        elif kind == "odd":
            parent[key] = draw(odd_or_raw)
        elif kind == "delete":
            del parent[key]
        elif kind == "add" and isinstance(parent[key], dict):
            parent[key][draw(keys)] = draw(json_values)
        elif kind == "add" and isinstance(parent[key], list):
            parent[key].append(draw(json_values))
        else:
            parent[key] = [parent[key]] if kind == "wrap" else draw(json_values)
    return value


def maybe_mutate(draw: st.DrawFn, template: Any) -> Any:
    """Mostly mutated (errors are cheap), often valid (so the operations run)."""
    return template if one_in(draw, 3) else mutate(draw, template)


PREFIXES = (b"\xef\xbb\xbf", b"\xff\xfe", b" \n\t", b"\x00")
SUFFIXES = (b"}", b"]", b",", b"{}", b"\x00", b"garbage")
short_binary = st.binary(max_size=64)


def body_bytes(draw: st.DrawFn, value: Any) -> bytes:
    """`value` as JSON bytes, now and then corrupted (truncated, prefixed, not UTF-8)."""
    encoded = dumps(value, ascii_only=not one_in(draw, 6))
    corruption = draw(_below(20))
    if corruption == 0:
        return encoded[: draw(st.integers(0, max(0, len(encoded) - 1)))]
    if corruption == 1:
        return pick(draw, PREFIXES) + encoded
    if corruption == 2:
        return encoded + pick(draw, SUFFIXES)
    if corruption == 3:
        return draw(short_binary)
    if corruption == 4:
        return encoded.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass")
    return encoded


TEXTS = ("hello", "hello", "hello", "hi [input]", "[fail]", "[reject]", "[auth]", "[crash]")
RAWS = ("aGVsbG8=", "aGVsbG8", "not base64!", "-_-_")
part_strategy = st.one_of(
    st.sampled_from(TEXTS).map(lambda text: {"text": text}),
    json_values.map(lambda data: {"data": data}),
    st.sampled_from(RAWS).map(
        lambda b: {"raw": b, "mediaType": "application/octet-stream", "filename": "f.bin"}
    ),
    st.just({"url": "https://files.example.com/f.pdf", "mediaType": "application/pdf"}),
)
parts_strategy = st.lists(part_strategy, min_size=1, max_size=3)
uuids = st.uuids().map(str)


@dataclass
class Ids:
    """Ids the fuzz draws: the fuzzer's own, the bystanders' (another owner), odd ones."""

    own_tasks: list[str]
    own_configs: list[str]
    other_tasks: list[str]
    other_configs: list[str]

    def __post_init__(self) -> None:
        self.tasks = st.one_of(
            st.sampled_from(self.own_tasks), st.sampled_from(self.other_tasks), odd_ids, uuids
        )
        self.configs = st.one_of(
            st.sampled_from(self.own_configs), st.sampled_from(self.other_configs), odd_ids
        )


ROLES = ("user", "ROLE_AGENT", "ROLE_UNSPECIFIED")
OUTPUT_MODES = st.lists(st.sampled_from(("text/plain", "application/json", "image/png", "")))
history_lengths = st.integers(-5, 20) | st.integers()


def send_request_v10(draw: st.DrawFn, ids: Ids) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": draw(odd_strings) if one_in(draw, 6) else draw(uuids),
        "role": pick(draw, ROLES) if one_in(draw, 4) else "ROLE_USER",
        "parts": draw(parts_strategy),
    }
    if one_in(draw, 2):
        message["taskId"] = draw(ids.tasks)
    if one_in(draw, 2):
        message["contextId"] = draw(odd_strings) if one_in(draw, 2) else draw(uuids)
    body: dict[str, Any] = {"message": message}
    if not one_in(draw, 4):
        configuration: dict[str, Any] = {"returnImmediately": one_in(draw, 2)}
        if one_in(draw, 2):
            configuration["historyLength"] = draw(history_lengths)
        if one_in(draw, 5):
            configuration["taskPushNotificationConfig"] = {"url": "http://127.0.0.1:9/own"}
        if one_in(draw, 5):
            configuration["acceptedOutputModes"] = draw(OUTPUT_MODES)
        body["configuration"] = configuration
    if one_in(draw, 5):
        body["metadata"] = draw(json_values)
    return body


def push_config_template(task_id: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "url": "http://127.0.0.1:9/hook",
        "token": "t-1",
        "authentication": {"scheme": "Bearer", "credentials": "c-1"},
    }
    if task_id is not None:
        config["taskId"] = task_id
    return config


a2a_versions = st.one_of(
    st.just("1.0"),
    st.sampled_from(("", "0.3", "1", "1.0.7", "1.1", "2.0", "1. 0", "1.0,0.3", "v1.0", "0")),
    # No leading or trailing blanks: the client library refuses to send those.
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12).map(str.strip),
)
content_types = st.sampled_from(
    (
        JSON_TYPE,
        A2A_JSON_TYPE,
        "application/json; charset=utf-8",
        "APPLICATION/JSON",
        "text/plain",
        "",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json-patch+json",
    )
)
ACCEPTS = (None, None, "*/*", JSON_TYPE, A2A_JSON_TYPE, "text/event-stream", "x;q=0", "x")


def content_type(draw: st.DrawFn) -> str:
    return draw(content_types) if one_in(draw, 4) else JSON_TYPE


def rest_headers(draw: st.DrawFn, with_body: bool) -> dict[str, str]:
    headers: dict[str, str] = {}
    if not one_in(draw, 20):
        headers["A2A-Version"] = draw(a2a_versions) if one_in(draw, 5) else "1.0"
    if with_body:
        headers["Content-Type"] = content_type(draw)
    accept = pick(draw, ACCEPTS)
    if accept is not None:
        headers["Accept"] = accept
    return headers


# -- HTTP+JSON ---------------------------------------------------------------------------------


def _segment(value: str) -> str:
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


list_keys = st.sampled_from(
    (
        "contextId",
        "status",
        "pageSize",
        "pageToken",
        "historyLength",
        "statusTimestampAfter",
        "includeArtifacts",
        "A2A-Version",
        "pagesize",
        "tenant",
        "x",
    )
)
list_values = st.one_of(
    st.sampled_from(
        (
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00 01:00",
            "2026-13-45T99:99:99Z",
            "1e400",
            "NaN",
            "-1",
            "0",
            "101",
            "9" * 5000,
            "true",
            "false",
            "yes",
            "TASK_STATE_WORKING",
            "input-required",
            "CANCELLED",
            "3",
            "99",
            "eyJ4IjoxfQ",
            "a" * 5000,
        )
    ),
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
    st.integers().map(str),
    odd_strings,
)
list_pairs = st.lists(
    st.tuples(st.one_of(list_keys, st.text(max_size=10)), list_values), max_size=5
)


QUERY_CHARS = 30_000  # the client refuses a query of more than 64 KiB


def list_query(draw: st.DrawFn) -> list[tuple[str, str]]:
    pairs, size = [], 0
    for key, value in draw(list_pairs):
        pair = (key.encode("utf-8", "replace").decode(), value.encode("utf-8", "replace").decode())
        size += len(quote(pair[0])) + len(quote(pair[1]))
        if size > QUERY_CHARS:
            break
        pairs.append(pair)
    return pairs


Request = tuple[str, str, dict[str, str], bytes | None, Any]

REST_OPERATIONS = (
    "card",
    "extended",
    "send",
    "stream",
    "get",
    "list",
    "cancel",
    "subscribe",
    "create-config",
    "list-configs",
    "get-config",
    "delete-config",
    "other",
)
CARD_VALIDATORS = (None, "If-None-Match", "If-Modified-Since")
VALIDATOR_VALUES = ('"x"', "*", 'W/"a", "b"', "Thu, 01 Jan 1970 00:00:00 GMT", "x")
OTHER_METHODS = ("GET", "PUT", "PATCH", "DELETE", "POST", "OPTIONS")


@st.composite
def rest_requests(draw: st.DrawFn, ids: Ids) -> Request:
    """One HTTP+JSON request: (method, path, headers, body, query)."""
    op = pick(draw, REST_OPERATIONS)
    body: bytes | None = None
    if op == "card":
        headers = rest_headers(draw, False)
        validator = pick(draw, CARD_VALIDATORS)
        if validator:
            headers[validator] = pick(draw, VALIDATOR_VALUES)
        return "GET", "/.well-known/agent-card.json", headers, None, None
    if op == "extended":
        return "GET", "/extendedAgentCard", rest_headers(draw, False), None, None
    if op in ("send", "stream"):
        path = "/message:send" if op == "send" else "/message:stream"
        body = body_bytes(draw, maybe_mutate(draw, send_request_v10(draw, ids)))
        return "POST", path, rest_headers(draw, True), body, None
    if op == "list":
        return "GET", "/tasks", rest_headers(draw, False), None, list_query(draw)
    task = _segment(draw(ids.tasks))
    configs = f"/tasks/{task}/pushNotificationConfigs"
    if op == "get":
        query = list_query(draw) if one_in(draw, 2) else [("historyLength", "1")]
        return "GET", f"/tasks/{task}", rest_headers(draw, False), None, query
    if op in ("cancel", "subscribe"):
        if one_in(draw, 4):
            body = body_bytes(draw, draw(json_values))
        return "POST", f"/tasks/{task}:{op}", rest_headers(draw, body is not None), body, None
    if op == "create-config":
        body = body_bytes(draw, maybe_mutate(draw, push_config_template()))
        return "POST", configs, rest_headers(draw, True), body, None
    if op == "list-configs":
        return "GET", configs, rest_headers(draw, False), None, None
    config = _segment(draw(ids.configs))
    if op in ("get-config", "delete-config"):
        method = "GET" if op == "get-config" else "DELETE"
        return method, f"{configs}/{config}", rest_headers(draw, False), None, None
    # Routes and methods the binding does not have.
    method = pick(draw, OTHER_METHODS)
    path = pick(
        draw,
        (
            f"/tasks/{task}:archive",
            f"/tasks/{task}:",
            f"/tasks/{task}/",
            "/tasks/",
            "/message:send/",
            "/message",
            "/message:stream",
            f"{configs}/{config}/x",
            "/v1/tasks",
            "/%00",
            "//tasks",
        ),
    )
    if method == "POST" and one_in(draw, 2):
        body = body_bytes(draw, draw(json_values))
    return method, path, rest_headers(draw, body is not None), body, None


# -- JSON-RPC --------------------------------------------------------------------------------

V03_PARTS = (
    {"kind": "text", "text": "hello"},
    {"kind": "text", "text": "hello"},
    {"kind": "text", "text": "hi [input]"},
    {"kind": "data", "data": {"a": [1, 2]}},
    {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain"}},
    {"kind": "file", "file": {"uri": "https://files.example.com/x"}},
)
v03_history = st.integers(-3, 100)


def v03_send_params(draw: st.DrawFn, ids: Ids) -> dict[str, Any]:
    message: dict[str, Any] = {
        "kind": "message",
        "messageId": draw(uuids),
        "role": "user",
        "parts": [copy.deepcopy(pick(draw, V03_PARTS))],
    }
    if one_in(draw, 2):
        message["taskId"] = draw(ids.tasks)
    params: dict[str, Any] = {"message": message}
    if one_in(draw, 2):
        params["configuration"] = {
            "blocking": one_in(draw, 2),
            "acceptedOutputModes": ["text/plain"],
            "historyLength": draw(v03_history),
        }
        if one_in(draw, 4):
            params["configuration"]["pushNotificationConfig"] = {
                "url": "http://127.0.0.1:9/own03",
                "authentication": {"schemes": ["Bearer"], "credentials": "c"},
            }
    return params


small_history = st.integers(-2, 10)


def rpc_call(draw: st.DrawFn, ids: Ids, version: str) -> tuple[str, Any]:
    """(method, params) of a call of `version`'s method set, params valid or mutated."""
    task = draw(ids.tasks)
    config = draw(ids.configs)
    if version == "1.0":
        templates: dict[str, Callable[[], Any]] = {
            "SendMessage": lambda: send_request_v10(draw, ids),
            "SendStreamingMessage": lambda: send_request_v10(draw, ids),
            "GetTask": lambda: {"id": task, "historyLength": draw(small_history)},
            "ListTasks": lambda: dict(list_query(draw)),
            "CancelTask": lambda: {"id": task},
            "SubscribeToTask": lambda: {"id": task},
            "CreateTaskPushNotificationConfig": lambda: push_config_template(task),
            "GetTaskPushNotificationConfig": lambda: {"taskId": task, "id": config},
            "ListTaskPushNotificationConfigs": lambda: {"taskId": task},
            "DeleteTaskPushNotificationConfig": lambda: {"taskId": task, "id": config},
            "GetExtendedAgentCard": lambda: {},
        }
        others = ("message/send", "tasks/get", "")
    else:
        templates = {
            "message/send": lambda: v03_send_params(draw, ids),
            "message/stream": lambda: v03_send_params(draw, ids),
            "tasks/get": lambda: {"id": task, "historyLength": draw(small_history)},
            "tasks/cancel": lambda: {"id": task},
            "tasks/resubscribe": lambda: {"id": task},
            "tasks/pushNotificationConfig/set": lambda: {
                "taskId": task,
                "pushNotificationConfig": {
                    "url": "http://127.0.0.1:9/hook03",
                    "token": "t",
                    "authentication": {"schemes": ["Bearer"], "credentials": "c"},
                },
            },
            "tasks/pushNotificationConfig/get": lambda: {
                "id": task,
                "pushNotificationConfigId": config,
            },
            "tasks/pushNotificationConfig/list": lambda: {"id": task},
            "tasks/pushNotificationConfig/delete": lambda: {
                "id": task,
                "pushNotificationConfigId": config,
            },
            "agent/getAuthenticatedExtendedCard": lambda: {},
        }
        others = ("SendMessage", "GetTask", "ListTasks")
    if one_in(draw, 8):
        method = pick(draw, others) if one_in(draw, 2) else draw(odd_strings)
    else:
        method = pick(draw, sorted(templates))
    template = templates[method]() if method in templates else draw(json_values)
    return method, maybe_mutate(draw, template)


rpc_ids = st.one_of(
    uuids,
    st.text(max_size=20),
    st.integers(),
    st.integers(min_value=2**63, max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.sampled_from(("\ud800", "x" * 10_000, raw("NaN"), raw("1e400"), True, (), "")),
)
RPC_PATHS = ("/", "/", "/", "//")


@st.composite
def rpc_requests(draw: st.DrawFn, ids: Ids, version: str) -> Request:
    """One `POST /` request of JSON-RPC `version` ("1.0" or "0.3"), envelope and all."""
    method, params = rpc_call(draw, ids, version)
    envelope: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not one_in(draw, 10):  # else a notification
        envelope["id"] = draw(uuids) if one_in(draw, 2) else draw(rpc_ids)
    if one_in(draw, 6):
        envelope = mutate(draw, envelope, most=2)
    body = body_bytes(draw, envelope)
    headers: dict[str, str] = {"Content-Type": content_type(draw)}
    query: Any = None
    odd_version = one_in(draw, 10)
    spelled = draw(a2a_versions) if odd_version else version
    if version == "1.0" or odd_version:
        if one_in(draw, 6):
            query = [("A2A-Version", spelled)]
        else:
            headers["A2A-Version"] = spelled
    elif one_in(draw, 8):
        headers["A2A-Version"] = "0.3"
    accept = pick(draw, ACCEPTS)
    if accept is not None:
        headers["Accept"] = accept
    return "POST", pick(draw, RPC_PATHS), headers, body, query


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzzer(fuzz_server: DevServer, bystanders: Bystanders) -> Iterator[tuple[httpx.Client, Ids]]:
    """The fuzzing owner's client, and the ids to draw: its own tasks (completed,
    input-required, one with a push config) and the bystanders'."""
    with client_for(fuzz_server, f"fuzzer-{uuid.uuid4().hex}") as client:
        task_ids, config_ids = own_tasks(client)
        yield client, Ids(task_ids, config_ids, bystanders.task_ids, bystanders.config_ids)


def _send(client: httpx.Client, binding: str, request: Request) -> None:
    method, path, headers, body, query = request
    exchange(client, binding, method, path, content=body, headers=headers, params=query)


# -- the properties ----------------------------------------------------------------------------


# A send that reaches the core whatever the budget: the after-run check needs a task the fuzz made.
A_VALID_SEND: Request = (
    "POST",
    "/message:send",
    {"A2A-Version": "1.0", "Content-Type": JSON_TYPE},
    json.dumps(
        {"message": {"messageId": "m-explicit", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    ).encode(),
    None,
)


def test_rest_operations(fuzzer: tuple[httpx.Client, Ids]) -> None:
    client, ids = fuzzer

    @fuzz_settings(0.32)
    @given(request=rest_requests(ids))
    @example(request=A_VALID_SEND)
    def prop(request: Request) -> None:
        _send(client, "rest", request)

    prop()


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_jsonrpc_operations(fuzzer: tuple[httpx.Client, Ids], version: str) -> None:
    client, ids = fuzzer

    @fuzz_settings(0.20)
    @given(request=rpc_requests(ids, version))
    def prop(request: Request) -> None:
        _send(client, f"jsonrpc-{version}", request)

    prop()


JUNK_PATHS = (
    "/",
    "/message:send",
    "/message:stream",
    "/tasks/x:cancel",
    "/tasks/x/pushNotificationConfigs",
)
junk = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(RAW_TOKENS).map(str.encode),
    json_values.map(dumps),
    st.integers(0, 300_000).map(lambda n: b"[" + b"0," * (n // 2) + b"0]"),
)


@st.composite
def junk_requests(draw: st.DrawFn) -> Request:
    """Bytes that are not a request of any operation, to every POST route."""
    headers = {"Content-Type": draw(content_types)}
    if one_in(draw, 2):
        headers["A2A-Version"] = pick(draw, ("1.0", "0.3"))
    return "POST", pick(draw, JUNK_PATHS), headers, draw(junk), None


def test_junk_bodies(fuzzer: tuple[httpx.Client, Ids]) -> None:
    client, _ = fuzzer

    @fuzz_settings(0.08)
    @given(request=junk_requests())
    def prop(request: Request) -> None:
        binding = "jsonrpc-junk" if request[1] == "/" else "rest-junk"
        _send(client, binding, request)

    prop()


def test_after_the_run(
    fuzz_server: DevServer, bystanders: Bystanders, fuzzer: tuple[httpx.Client, Ids]
) -> None:
    """Runs after the properties above (module order): every task the fuzz made has settled,
    the other owner's tasks read back byte for byte as before, and a new owner's send, read
    and list still work."""
    made = assert_after_the_run(fuzz_server, bystanders, fuzzer[0])
    assert made > len(fuzzer[1].own_tasks), "the fuzz made no task: it never reached the core"


def test_outbound_safe_points_every_url_at_the_loopback_sink() -> None:
    """Generated bodies may name any host; the fuzz sends none of them a webhook."""
    body = (
        b'{"url":"https://93.184.216.34:443/x","u":"http:\\/\\/10.0.0.1\\/a",'
        b'"t":"[slow=5] ftp://evil.example/ https://[::1]:80/ https://u:p@h/"}'
    )
    assert outbound_safe(body) == (
        b'{"url":"https://127.0.0.1:9/x","u":"http:\\/\\/127.0.0.1:9\\/a",'
        b'"t":"[slow:5] ftp://127.0.0.1:9/ https://127.0.0.1:9/ https://127.0.0.1:9/"}'
    )


def test_raw_placeholders_splice() -> None:
    """The encoder the strategies use writes the raw tokens unquoted (else the NaN and depth
    cases would be plain strings)."""
    assert dumps({"a": raw("NaN"), "b": [raw(_nested(2))]}) == b'{"a": NaN, "b": [{"a":{"a":{}}}]}'
    assert dumps({"x": "\ud800"}, ascii_only=False) == b'{"x": "\xed\xa0\x80"}'
