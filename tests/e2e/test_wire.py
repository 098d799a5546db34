"""Raw HTTP+JSON wire behaviour (spec §11), exact shapes, against the real dev server."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.e2e

CARD = "/.well-known/agent-card.json"
A2A_JSON = "application/a2a+json"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
MAX_BODY = 6_000_000  # MAX_BODY_BYTES: what Lambda's 6 MB invocation payload leaves

RawFactory = Callable[..., httpx.Client]


def message_body(text: str = "hello", **message: Any) -> dict[str, Any]:
    return {
        "message": {
            "messageId": f"msg-{uuid.uuid4().hex}",
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **message,
        }
    }


def send(http: httpx.Client, text: str = "hello", **message: Any) -> dict[str, Any]:
    response = http.post("/message:send", json=message_body(text, **message))
    assert response.status_code == 200, response.text
    return response.json()["task"]


def error_of(response: httpx.Response, code: int) -> dict[str, Any]:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert error["code"] == code
    return error


def reason_of(error: dict[str, Any]) -> str | None:
    for detail in error.get("details", []):
        if detail["@type"] == "type.googleapis.com/google.rpc.ErrorInfo":
            return detail["reason"]
    return None


def violations_of(error: dict[str, Any]) -> list[str]:
    for detail in error.get("details", []):
        if detail["@type"] == "type.googleapis.com/google.rpc.BadRequest":
            return [v["field"] for v in detail["fieldViolations"]]
    return []


# -- Agent Card caching ------------------------------------------------------------------------


def test_card_caching_headers_and_conditional_requests(raw: RawFactory) -> None:
    http = raw(version=None)
    response = http.get(CARD)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    cache_control = response.headers["cache-control"]
    max_age = re.search(r"max-age=(\d+)", cache_control)
    assert max_age and int(max_age.group(1)) > 0, cache_control
    etag = response.headers["etag"]
    assert re.fullmatch(r'(W/)?"[^"]+"', etag), etag
    last_modified = response.headers["last-modified"]
    modified_at = parsedate_to_datetime(last_modified)
    assert modified_at.tzinfo is not None

    # The same card twice: same validator.
    assert http.get(CARD).headers["etag"] == etag

    not_modified = http.get(CARD, headers={"If-None-Match": etag})
    assert not_modified.status_code == 304
    assert not_modified.content == b""
    assert not_modified.headers["etag"] == etag
    assert "max-age" in not_modified.headers["cache-control"]
    assert http.get(CARD, headers={"If-None-Match": f'"other", {etag}'}).status_code == 304
    assert http.get(CARD, headers={"If-None-Match": '"stale"'}).status_code == 200

    since = http.get(CARD, headers={"If-Modified-Since": last_modified})
    assert since.status_code == 304
    assert since.content == b""
    earlier = format_datetime(modified_at - timedelta(days=1), usegmt=True)
    assert http.get(CARD, headers={"If-Modified-Since": earlier}).status_code == 200


# -- A2A-Version --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/tasks", None),
        ("POST", "/message:send", message_body()),
        ("GET", "/tasks/some-task", None),
    ],
)
def test_missing_version_is_rejected_with_a_hint(
    raw: RawFactory, method: str, path: str, body: dict[str, Any] | None
) -> None:
    http = raw(version=None)
    response = http.request(method, path, json=body)
    error = error_of(response, 400)
    assert reason_of(error) == "VERSION_NOT_SUPPORTED"
    assert "A2A-Version: 1.0" in error["message"]


def test_version_as_query_parameter(raw: RawFactory) -> None:
    http = raw(version=None)
    assert http.get("/tasks", params={"A2A-Version": "1.0"}).status_code == 200
    task = http.post("/message:send", params={"A2A-Version": "1.0"}, json=message_body("via query"))
    assert task.status_code == 200
    assert task.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_patch_version_is_accepted(raw: RawFactory) -> None:
    http = raw(version="1.0.3")
    assert http.get("/tasks").status_code == 200
    assert http.post("/message:send", json=message_body()).status_code == 200


@pytest.mark.parametrize("version", ["2.0", "0.3", "1.1"])
def test_unsupported_version_is_rejected(raw: RawFactory, version: str) -> None:
    error = error_of(raw(version=version).get("/tasks"), 400)
    assert reason_of(error) == "VERSION_NOT_SUPPORTED"
    assert "A2A-Version: 1.0" in error["message"]


# -- media types --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["application/json", A2A_JSON, "application/json; charset=utf-8"]
)
def test_json_request_bodies_are_accepted(http: httpx.Client, content_type: str) -> None:
    body = json.dumps(message_body("typed")).encode()
    response = http.post("/message:send", content=body, headers={"Content-Type": content_type})
    assert response.status_code == 200, response.text
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_text_plain_body_is_unsupported_media_type(http: httpx.Client) -> None:
    body = json.dumps(message_body()).encode()
    response = http.post("/message:send", content=body, headers={"Content-Type": "text/plain"})
    error = error_of(response, 415)
    # The reason JSON-RPC gives the same refusal (-32005).
    assert reason_of(error) == "CONTENT_TYPE_NOT_SUPPORTED"
    assert http.get("/tasks").json()["totalSize"] == 0


def test_body_without_content_type_is_unsupported_media_type(http: httpx.Client) -> None:
    request = http.build_request("POST", "/message:send", content=json.dumps(message_body()))
    request.headers.pop("Content-Type", None)
    assert "content-type" not in request.headers
    error_of(http.send(request), 415)


def test_response_media_type_follows_accept(http: httpx.Client) -> None:
    task = send(http)
    default = http.get(f"/tasks/{task['id']}")
    assert default.headers["content-type"].split(";")[0] == A2A_JSON
    plain = http.get(f"/tasks/{task['id']}", headers={"Accept": "application/json"})
    assert plain.headers["content-type"].split(";")[0] == "application/json"
    assert plain.json() == default.json()
    both = http.get("/tasks", headers={"Accept": f"{A2A_JSON}, application/json;q=0.5"})
    assert both.headers["content-type"].split(";")[0] == A2A_JSON
    # Errors are negotiated the same way.
    missing = http.get(f"/tasks/{uuid.uuid4()}", headers={"Accept": "application/json"})
    assert missing.status_code == 404
    assert missing.headers["content-type"].split(";")[0] == "application/json"
    sent = http.post("/message:send", json=message_body())
    assert sent.headers["content-type"].split(";")[0] == A2A_JSON


def test_malformed_json_is_a_clean_400(http: httpx.Client) -> None:
    response = http.post(
        "/message:send",
        content=b'{"message": {"messageId": ',
        headers={"Content-Type": "application/json"},
    )
    error = error_of(response, 400)
    assert reason_of(error) in ("INVALID_REQUEST", "PARSE_ERROR", "INVALID_PARAMS")
    for leak in ("Traceback", 'File "', "site-packages"):
        assert leak not in response.text


def test_non_object_json_is_a_clean_400(http: httpx.Client) -> None:
    response = http.post("/message:send", json=["not", "an", "object"])
    error_of(response, 400)
    assert "Traceback" not in response.text


def test_oversized_body_is_413(http: httpx.Client) -> None:
    body = message_body("x" * (MAX_BODY + 1024))
    error_of(http.post("/message:send", json=body), 413)
    assert http.get("/tasks").json()["totalSize"] == 0


def test_oversized_chunked_body_is_413(http: httpx.Client) -> None:
    payload = json.dumps(message_body("y" * (MAX_BODY + 1024))).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(payload), 16 * 1024):
            yield payload[start : start + 16 * 1024]

    response = http.post(
        "/message:send", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    error_of(response, 413)


def test_body_just_under_the_limit_is_accepted(http: httpx.Client) -> None:
    body = message_body("")
    body["message"]["parts"][0]["text"] = "z" * (MAX_BODY - 1024)
    response = http.post("/message:send", json=body)
    assert response.status_code == 200, response.text[:300]


# -- validation ---------------------------------------------------------------------------------


def _bad_send(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = message_body()
    mutate(body)
    return body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_bad_send(lambda b: b["message"].pop("messageId")), "message.messageId"),
        (
            _bad_send(lambda b: b["message"]["parts"][0].update(url="https://example.com/x")),
            "message.parts[0]",
        ),
        (_bad_send(lambda b: b["message"].update(role="ROLE_AGENT")), "message.role"),
        (_bad_send(lambda b: b["message"].update(parts=[])), "message.parts"),
        (_bad_send(lambda b: b.pop("message")), "message"),
        (
            _bad_send(lambda b: b.update(configuration={"historyLength": -1})),
            "configuration.historyLength",
        ),
    ],
    ids=["no-messageId", "text-and-url", "role-agent", "no-parts", "no-message", "history-neg"],
)
def test_send_validation_names_the_field(
    http: httpx.Client, body: dict[str, Any], field: str
) -> None:
    error = error_of(http.post("/message:send", json=body), 400)
    assert error["status"] == "INVALID_ARGUMENT"
    assert reason_of(error) == "INVALID_PARAMS"
    assert field in violations_of(error), error
    assert http.get("/tasks").json()["totalSize"] == 0


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/tasks/{id}", {"historyLength": "-1"}, "historyLength"),
        ("/tasks", {"historyLength": "-1"}, "historyLength"),
        ("/tasks", {"pageSize": "0"}, "pageSize"),
        ("/tasks", {"pageSize": "101"}, "pageSize"),
        ("/tasks", {"pageSize": "ten"}, "pageSize"),
        ("/tasks", {"status": "TASK_STATE_RUNNING"}, "status"),
        ("/tasks", {"status": "TASK_STATE_UNSPECIFIED"}, "status"),
        ("/tasks", {"statusTimestampAfter": "yesterday"}, "statusTimestampAfter"),
        ("/tasks", {"pageToken": "not-a-token"}, "pageToken"),
        ("/tasks", {"includeArtifacts": "maybe"}, "includeArtifacts"),
    ],
)
def test_query_validation_names_the_field(
    http: httpx.Client, path: str, params: dict[str, str], field: str
) -> None:
    if "{id}" in path:
        path = path.replace("{id}", send(http)["id"])
    error = error_of(http.get(path, params=params), 400)
    assert reason_of(error) == "INVALID_PARAMS"
    assert violations_of(error) == [field], error


def test_page_size_bounds_are_inclusive(http: httpx.Client) -> None:
    for size in ("1", "100"):
        response = http.get("/tasks", params={"pageSize": size})
        assert response.status_code == 200
        assert response.json()["pageSize"] == int(size)


def test_follow_up_with_another_context_is_rejected(http: httpx.Client) -> None:
    paused = send(http, "tell me more [input]")
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    response = http.post(
        "/message:send",
        json=message_body("answer", taskId=paused["id"], contextId=f"ctx-{uuid.uuid4()}"),
    )
    error = error_of(response, 400)
    assert reason_of(error) == "INVALID_PARAMS"
    assert violations_of(error) == ["message.contextId"]
    # The task is untouched and still answerable.
    task = http.get(f"/tasks/{paused['id']}").json()
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = send(http, "answer", taskId=paused["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["contextId"] == paused["contextId"]


# -- routes and capabilities -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nope"),
        ("GET", "/v1/v2/tasks"),  # (/v1/tasks: ListTasks under the tenant "v1")
        ("POST", "/tasks/abc:frobnicate"),
        ("DELETE", "/tasks"),
        ("GET", "/message:send"),
    ],
)
def test_unknown_route_is_404(http: httpx.Client, method: str, path: str) -> None:
    error = error_of(http.request(method, path), 404)
    assert error["status"] == "NOT_FOUND"


# Capability errors of push notifications (PUSH_NOTIFICATIONS=false) are checked against a
# server configured that way: tests/e2e/test_push.py::test_disabled_push_answers_capability_errors.


# -- output shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["TASK_STATE_COMPLETED", "completed", "COMPLETED"])
def test_status_filter_accepts_both_enum_spellings(http: httpx.Client, spelling: str) -> None:
    done = send(http, "done")
    failed = send(http, "nope [fail]")
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    listed = http.get("/tasks", params={"status": spelling}).json()
    assert listed["totalSize"] == 1
    assert [t["id"] for t in listed["tasks"]] == [done["id"]]
    assert http.get("/tasks", params={"status": "failed"}).json()["totalSize"] == 1
    assert http.get("/tasks", params={"status": "input-required"}).json()["totalSize"] == 0


def test_timestamps_are_utc_with_milliseconds(http: httpx.Client) -> None:
    task = send(http, "what time is it")
    stamps = [task["status"]["timestamp"]]
    stamps.append(http.get(f"/tasks/{task['id']}").json()["status"]["timestamp"])
    stamps.extend(t["status"]["timestamp"] for t in http.get("/tasks").json()["tasks"])
    failed = send(http, "x [fail]")
    stamps.append(failed["status"]["timestamp"])
    for stamp in stamps:
        assert TIMESTAMP.fullmatch(stamp), stamp


def test_list_shapes_and_last_page_token(http: httpx.Client) -> None:
    empty = http.get("/tasks").json()
    assert empty == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
    first = send(http, "first")
    second = send(http, "second")
    page1 = http.get("/tasks", params={"pageSize": 1}).json()
    assert page1["nextPageToken"]
    assert page1["totalSize"] == 2
    assert [t["id"] for t in page1["tasks"]] == [second["id"]]
    page2 = http.get("/tasks", params={"pageSize": 1, "pageToken": page1["nextPageToken"]}).json()
    assert page2["nextPageToken"] == ""
    assert [t["id"] for t in page2["tasks"]] == [first["id"]]
    assert set(page2["tasks"][0]) == {"id", "contextId", "status"}


def test_send_response_shape(http: httpx.Client) -> None:
    body = message_body("shape check")
    response = http.post("/message:send", json=body)
    payload = response.json()
    assert set(payload) == {"task"}
    task = payload["task"]
    assert set(task) == {"id", "contextId", "status", "artifacts", "history"}
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["history"][0]["messageId"] == body["message"]["messageId"]
    assert task["history"][0]["role"] == "ROLE_USER"
    assert task["artifacts"][0]["artifactId"] == "echo"
    # historyLength in the send configuration limits the returned history.
    limited = http.post(
        "/message:send", json={**message_body("short"), "configuration": {"historyLength": 0}}
    ).json()["task"]
    assert "history" not in limited


# -- error mapping (spec §5.4) -------------------------------------------------------------------


def test_error_code_mapping(http: httpx.Client) -> None:
    done = send(http, "mapped")
    cases = [
        (http.get(f"/tasks/{uuid.uuid4()}"), 404, "NOT_FOUND", "TASK_NOT_FOUND"),
        (http.post(f"/tasks/{uuid.uuid4()}:cancel"), 404, "NOT_FOUND", "TASK_NOT_FOUND"),
        (
            http.post(f"/tasks/{done['id']}:cancel"),
            400,
            "FAILED_PRECONDITION",
            "TASK_NOT_CANCELABLE",
        ),
        (
            http.post("/message:send", json=message_body("again", taskId=done["id"])),
            400,
            "FAILED_PRECONDITION",
            "UNSUPPORTED_OPERATION",
        ),
        (
            http.get("/tasks", headers={"A2A-Version": "9.9"}),
            400,
            "FAILED_PRECONDITION",
            "VERSION_NOT_SUPPORTED",
        ),
    ]
    for response, code, status, reason in cases:
        error = error_of(response, code)
        assert (error["status"], reason_of(error)) == (status, reason), error
    # The not-found error names the task it looked for.
    missing = str(uuid.uuid4())
    error = error_of(http.get(f"/tasks/{missing}"), 404)
    info = next(d for d in error["details"] if d["@type"].endswith("ErrorInfo"))
    assert info.get("metadata", {}).get("taskId") == missing


@pytest.mark.parametrize(
    "body",
    [
        {
            "message": {
                "messageId": "m-png",
                "role": "ROLE_USER",
                "parts": [{"raw": "iVBORw0KGgo=", "mediaType": "image/png"}],
            }
        },
        {**message_body("png please"), "configuration": {"acceptedOutputModes": ["image/png"]}},
    ],
    ids=["input-part", "accepted-output"],
)
def test_unsupported_media_types_in_the_message(http: httpx.Client, body: dict[str, Any]) -> None:
    error = error_of(http.post("/message:send", json=body), 400)
    assert (error["status"], reason_of(error)) == ("INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")
    assert http.get("/tasks").json()["totalSize"] == 0


def test_accepted_output_modes_that_match_are_fine(http: httpx.Client) -> None:
    body = {**message_body("text ok"), "configuration": {"acceptedOutputModes": ["text/*"]}}
    response = http.post("/message:send", json=body)
    assert response.status_code == 200
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- the strict check itself ---------------------------------------------------------------------


def test_the_response_hook_rejects_non_conforming_bodies() -> None:
    """Guards the guard: a body with an unknown field or a 0.3 enum must fail the hook."""
    from tests.e2e import conftest

    bodies = {
        "/tasks/t1": {"id": "t1", "contextId": "c", "status": {"state": "completed"}},
        "/tasks/t2": {
            "id": "t2",
            "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"},
            "kind": "task",
        },
        "/tasks": {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": "x"},
        "/message:send": {"error": {"code": 400, "message": "lower-case status", "status": "bad"}},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        body = bodies[request.url.path]
        return httpx.Response(400 if "error" in body else 200, json=body)

    before_seen, before_failures = len(conftest.SEEN), len(conftest.CHECK_FAILURES)
    try:
        with conftest.checked_client(
            "http://selftest", source="selftest", transport=httpx.MockTransport(answer)
        ) as client:
            for path in bodies:
                method = "POST" if path == "/message:send" else "GET"
                with pytest.raises(Exception):  # noqa: B017 - ParseError or AssertionError
                    client.request(method, path)
        assert len(conftest.CHECK_FAILURES) - before_failures == len(bodies)
    finally:
        del conftest.SEEN[before_seen:]
        del conftest.CHECK_FAILURES[before_failures:]
