"""The one error table (core/errors.py): every A2A error has a row, and both bindings render
an error from its row (the wire tests pin the actual values)."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from fastapi import APIRouter, Depends
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from a2a_serverless.bindings.jsonrpc import error_object
from a2a_serverless.bindings.rest import create_app
from a2a_serverless.core import errors


def _all_subclasses(cls: type[errors.A2AError]) -> list[type[errors.A2AError]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_all_subclasses(sub)]
    return found


A2A_ERRORS = _all_subclasses(errors.A2AError)


def _rest_answer(exc: errors.A2AError) -> httpx.Response:
    """What the HTTP+JSON binding answers when a route raises `exc`."""
    router = APIRouter()

    @router.get("/boom")
    def boom() -> None:
        raise exc

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(router))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/boom")

    return asyncio.run(call())


def _reason(details: list[dict[str, str]]) -> str:
    infos = [d for d in details if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert len(infos) == 1, details
    return infos[0]["reason"]


def test_every_error_class_has_its_own_row() -> None:
    assert len(A2A_ERRORS) >= 12
    missing = [cls.__name__ for cls in A2A_ERRORS if cls not in errors.ERRORS]
    assert not missing, f"no row in core/errors.ERRORS for {missing}"
    rows = list(errors.ERRORS.values())
    assert len({row.jsonrpc_code for row in rows}) == len(rows), "JSON-RPC codes must differ"
    assert len({row.reason for row in rows}) == len(rows), "ErrorInfo reasons must differ"


@pytest.mark.parametrize("cls", A2A_ERRORS, ids=lambda cls: cls.__name__)
def test_rest_renders_the_row(cls: type[errors.A2AError]) -> None:
    row = errors.ERRORS[cls]
    response = _rest_answer(cls(job="j1"))
    assert response.status_code == row.http_status
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (row.http_status, row.grpc_status)
    assert error["message"] == row.default_message
    assert _reason(error["details"]) == row.reason
    assert error["details"][0]["metadata"] == {"job": "j1"}


@pytest.mark.parametrize("cls", A2A_ERRORS, ids=lambda cls: cls.__name__)
def test_jsonrpc_renders_the_row(cls: type[errors.A2AError]) -> None:
    row = errors.ERRORS[cls]
    error = error_object(cls("told"))
    assert (error["code"], error["message"]) == (row.jsonrpc_code, "told")
    assert _reason(error["data"]) == row.reason


def test_a_subclass_without_a_row_answers_as_its_parent() -> None:
    class StaleTaskError(errors.TaskNotFoundError):
        pass

    exc = StaleTaskError()
    assert exc.reason == "TASK_NOT_FOUND"
    assert error_object(exc)["code"] == errors.ERRORS[errors.TaskNotFoundError].jsonrpc_code
    assert _rest_answer(exc).status_code == 404
    assert errors.error_row(errors.A2AError) == errors.ERRORS[errors.InternalError]


def test_field_violations_travel_with_invalid_params_on_both_bindings() -> None:
    exc = errors.invalid_field("pageSize", "must be between 1 and 100")
    rest = _rest_answer(exc).json()["error"]
    rpc = error_object(exc)
    for details in (rest["details"], rpc["data"]):
        bad = [d for d in details if d["@type"].endswith("google.rpc.BadRequest")]
        assert bad[0]["fieldViolations"] == [
            {"field": "pageSize", "description": "must be between 1 and 100"}
        ]
    assert rest["message"] == rpc["message"] == "pageSize: must be between 1 and 100"


# -- routing (FastAPI, as create_app sets it up): the answers the wire tests pin ------------


def _routing_app() -> Starlette:
    seen: list[str] = []

    def dependency(request: Request) -> None:
        seen.append("dependency")

    router = APIRouter(dependencies=[Depends(dependency)])

    @router.get("/tasks/{task_id}")
    def get_task(request: Request, task_id: str) -> JSONResponse:
        # A sync handler runs in the thread pool, after the router's dependencies.
        loop_thread = threading.current_thread() is threading.main_thread()
        return JSONResponse({"task": task_id, "seen": seen, "inLoopThread": loop_thread})

    return create_app(router)


def _call(app: Starlette, method: str, path: str) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path)

    return asyncio.run(call())


def test_routes_take_path_parameters_by_name_after_the_dependencies() -> None:
    response = _call(_routing_app(), "GET", "/tasks/t-1")
    assert response.json() == {"task": "t-1", "seen": ["dependency"], "inLoopThread": False}


def test_head_on_a_get_route_stays_a_405_and_a_trailing_slash_a_404() -> None:
    # Starlette alone would answer HEAD on a GET route; FastAPI did not (neither does the API).
    head = _call(_routing_app(), "HEAD", "/tasks/t-1")
    assert head.status_code == 405 and "allow" not in head.headers
    post = _call(_routing_app(), "POST", "/tasks/t-1").json()["error"]
    assert (post["code"], post["status"]) == (405, "UNIMPLEMENTED")
    # No redirect: behind API Gateway its Location would drop the stage.
    slash = _call(_routing_app(), "GET", "/tasks/t-1/")
    assert slash.status_code == 404 and "location" not in slash.headers
    assert _reason(slash.json()["error"]["details"]) == "METHOD_NOT_FOUND"


def test_a_handler_parameter_missing_from_the_path_is_an_internal_error_not_a_422() -> None:
    # FastAPI would read it from the query string and answer its own 422 shape; no route
    # takes parameters that way, so one that does is a bug, answered from the error table.
    router = APIRouter()

    @router.get("/tasks")
    def get_task(request: Request, task_id: str) -> JSONResponse:
        raise AssertionError("never called")

    response = _call(create_app(router), "GET", "/tasks")
    assert response.status_code == 500
    error = response.json()["error"]
    assert (error["status"], _reason(error["details"])) == ("INTERNAL", "INTERNAL_ERROR")


def test_a_field_is_named_once_by_the_first_check_that_found_it() -> None:
    from a2a_serverless.bindings.errors import merged

    translation = [("message", "is required and must be an object")]
    schema = [("message.messageId", "is required"), ("messageX", "other field")]
    semantic = [("message", "again"), ("metadata", "too big")]
    assert merged(translation, schema, semantic) == [
        ("message", "is required and must be an object"),
        ("messageX", "other field"),
        ("metadata", "too big"),
    ]
    parts = [("message.parts", "must be an array")]
    assert merged(parts, [("message.parts[0]", "x"), ("message.role", "y")]) == [
        ("message.parts", "must be an array"),
        ("message.role", "y"),
    ]


def test_validated_merges_the_send_checks_into_the_schemas_refusal() -> None:
    from a2a_serverless.bindings.errors import validated
    from a2a_serverless.models import Message, SendMessageRequest

    body = {"message": {"messageId": "v3", "role": "ROLE_AGENT", "contextId": "c" * 300}}
    with pytest.raises(errors.InvalidParamsError) as refused:
        validated(SendMessageRequest, body)
    assert [f for f, _ in refused.value.violations] == [
        "message.parts",
        "message.role",
        "message.contextId",
    ]
    # Other models have no such checks: the schema's violations alone.
    with pytest.raises(errors.InvalidParamsError) as refused:
        validated(Message, {"role": "ROLE_AGENT", "contextId": "c" * 300})
    assert [f for f, _ in refused.value.violations] == ["messageId", "parts"]
