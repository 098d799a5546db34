"""The one error table (core/errors.py): every A2A error has a row, and both bindings render
an error from its row (the wire tests pin the actual values)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import APIRouter

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
