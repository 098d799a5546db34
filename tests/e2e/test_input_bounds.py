"""A push config's url and credentials go out with every delivery: over the wire (the shared
local stack, raw HTTP+JSON, JSON-RPC 1.0 and 0.3), one past its bound (README "Input
bounds") is a 400 / -32602 naming the field, and nothing is stored (the configs read back
empty); at the bound it is stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from a2a_serverless.models import limits
from tests.e2e import rpc
from tests.e2e.conftest import new_principal
from tests.e2e.test_wire import error_of, message_body, reason_of, violations_of

pytestmark = pytest.mark.e2e

HOOK = "http://127.0.0.1:9/hook"  # the local stack allows http to loopback; never called


def url_of(size: int) -> str:
    return HOOK + "?" + "q" * (size - len(HOOK) - 1)


def with_credentials(size: int) -> dict[str, Any]:
    return {"url": HOOK, "authentication": {"scheme": "Bearer", "credentials": "c" * size}}


OVER = [
    ("url", {"url": url_of(limits.MAX_PUSH_URL_BYTES + 1)}),
    ("url", {"url": url_of(200_000)}),
    ("authentication.credentials", with_credentials(limits.MAX_AUTH_CREDENTIALS_BYTES + 1)),
    ("authentication.credentials", with_credentials(200_000)),
]
IDS = ["url-1-over", "url-200KB", "credentials-1-over", "credentials-200KB"]
AT_BOUND = {
    "url": url_of(limits.MAX_PUSH_URL_BYTES),
    "authentication": {"scheme": "Bearer", "credentials": "c" * limits.MAX_AUTH_CREDENTIALS_BYTES},
}


@pytest.fixture
def client(raw: Callable[..., httpx.Client]) -> Callable[[str | None], httpx.Client]:
    """A checked client of one fresh principal, for a version (None: 0.3)."""
    principal = new_principal("bounds")
    return lambda version: raw(principal=principal, version=version)


def new_task(http: httpx.Client) -> str:
    response = http.post("/message:send", json=message_body("push target"))
    assert response.status_code == 200, response.text
    return str(response.json()["task"]["id"])


@pytest.mark.parametrize(("field", "config"), OVER, ids=IDS)
def test_rest_refuses_an_over_long_push_config_and_stores_nothing(
    client: Callable[[str | None], httpx.Client], field: str, config: dict[str, Any]
) -> None:
    http = client("1.0")
    task_id = new_task(http)
    configs = f"/tasks/{task_id}/pushNotificationConfigs"
    error = error_of(http.post(configs, json=config), 400)
    assert reason_of(error) == "INVALID_PARAMS"
    assert violations_of(error) == [field], error
    listed = http.get(configs)
    assert listed.status_code == 200 and not listed.json().get("configs"), listed.text

    inline = message_body("inline")
    inline["configuration"] = {"taskPushNotificationConfig": config, "returnImmediately": True}
    error = error_of(http.post("/message:send", json=inline), 400)
    assert violations_of(error) == [f"configuration.taskPushNotificationConfig.{field}"], error
    assert http.get("/tasks").json()["totalSize"] == 1  # only the task made above


def test_rest_stores_a_push_config_at_the_bounds(
    client: Callable[[str | None], httpx.Client],
) -> None:
    http = client("1.0")
    task_id = new_task(http)
    configs = f"/tasks/{task_id}/pushNotificationConfigs"
    created = http.post(configs, json=AT_BOUND)
    assert created.status_code == 200, created.text
    assert [c["url"] for c in http.get(configs).json()["configs"]] == [AT_BOUND["url"]]


@pytest.mark.parametrize(("field", "config"), OVER, ids=IDS)
def test_jsonrpc_refuses_an_over_long_push_config_and_stores_nothing(
    client: Callable[[str | None], httpx.Client], field: str, config: dict[str, Any]
) -> None:
    v10, v03 = client("1.0"), client(None)
    task_id = new_task(v10)
    error = rpc.error(
        v10, "CreateTaskPushNotificationConfig", {"taskId": task_id, **config}, code=-32602
    )
    assert rpc.violated_fields(error) == [field], error
    listed = rpc.result(v10, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert not listed.get("configs"), listed

    v03_config = {"url": config["url"]}
    if "authentication" in config:
        auth = config["authentication"]
        v03_config["authentication"] = {
            "schemes": [auth["scheme"]],
            "credentials": auth["credentials"],
        }
    params = {"taskId": task_id, "pushNotificationConfig": v03_config}
    error = rpc.error(v03, "tasks/pushNotificationConfig/set", params, code=-32602)
    assert rpc.violated_fields(error) == [f"pushNotificationConfig.{field}"], error
    assert rpc.result(v03, "tasks/pushNotificationConfig/list", {"id": task_id}) == []

    at_bound = rpc.result(v10, "CreateTaskPushNotificationConfig", {"taskId": task_id, **AT_BOUND})
    assert at_bound["url"] == AT_BOUND["url"]


def test_a_file_part_url_over_its_bound_is_named_in_each_version(
    client: Callable[[str | None], httpx.Client],
) -> None:
    """Message fields are bounded in core too: each binding names the field its own way."""
    http, v03 = client("1.0"), client(None)
    long_url = "https://files.example.com/" + "f" * limits.MAX_PART_URL_BYTES
    body = message_body("file", referenceTaskIds=["r" * (limits.MAX_ID_BYTES + 1)])
    body["message"]["parts"].append({"url": long_url})
    error = error_of(http.post("/message:send", json=body), 400)
    assert violations_of(error) == ["message.referenceTaskIds[0]", "message.parts[1].url"], error
    message = rpc.msg03("file")
    message["parts"].append({"kind": "file", "file": {"uri": long_url}})
    error = rpc.error(v03, "message/send", {"message": message}, code=-32602)
    assert rpc.violated_fields(error) == ["message.parts[1].file.uri"], error
    assert http.get("/tasks").json().get("totalSize", 0) == 0
