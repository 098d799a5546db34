"""The receiver of remote agents' push notifications about delegated tasks:
POST /delegations/{taskId}/{key}. The route is open at the gateway; the delegation's token
(`X-A2A-Notification-Token`, or `Authorization: Bearer`) is the request's only credential."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from a2a_serverless.bindings.http import read_json_body
from a2a_serverless.core.delegation import DelegationInbox, Receipt
from a2a_serverless.core.errors import (
    AuthenticationRequiredError,
    InvalidParamsError,
    PermissionDeniedError,
)

TOKEN_HEADER = "x-a2a-notification-token"


def token_of(request: Request) -> str | None:
    """The notification token: A2A's header, else a Bearer credential."""
    token = request.headers.get(TOKEN_HEADER)
    if token:
        return token
    scheme, _, credentials = (request.headers.get("authorization") or "").partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


def delegation_router(inbox: DelegationInbox) -> APIRouter:
    router = APIRouter()

    # Path values read from the request: a typed parameter would make FastAPI build a
    # validation model (and import pydantic.v1) at cold start.
    @router.post("/delegations/{task_id}/{key}")
    async def notify(request: Request) -> Response:
        task_id, key = request.path_params["task_id"], request.path_params["key"]
        token = token_of(request)
        if not token:
            raise AuthenticationRequiredError("A delegation's notification token is required")
        payload = await read_json_body(request)
        receipt = await run_in_threadpool(inbox.receive, task_id, key, token, payload)
        if receipt is Receipt.UNAUTHORIZED:
            raise AuthenticationRequiredError("The notification token is not valid here")
        if receipt is Receipt.FORBIDDEN:
            raise PermissionDeniedError("The notification is about another task")
        if receipt is Receipt.INVALID:
            raise InvalidParamsError("The body is not an A2A StreamResponse or Task")
        return JSONResponse({}, status_code=200)

    return router
