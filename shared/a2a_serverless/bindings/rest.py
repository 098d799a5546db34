"""The HTTP+JSON binding (spec §11): routers per function, and its one error mapping."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from a2a_serverless.bindings.http import (
    PayloadTooLarge,
    UnsupportedMediaType,
    base_url,
    negotiated_version,
    principal,
    read_json_body,
    response_media_type,
)
from a2a_serverless.bindings.keepalive import send_response
from a2a_serverless.bindings.sse import event_frames, sse_response
from a2a_serverless.core import errors
from a2a_serverless.models import (
    A2AModel,
    ListTasksRequest,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    parse_task_state,
)
from a2a_serverless.wiring import get_card_factory, get_push, get_service

logger = logging.getLogger(__name__)

INTERFACE = "HTTP+JSON"
SUPPORTED_VERSIONS = ("1.0",)
ERROR_DOMAIN = "a2a-protocol.org"

# Spec §5.4: A2A error -> (HTTP status, google.rpc status name).
_STATUS: dict[type[errors.A2AError], tuple[int, str]] = {
    errors.TaskNotFoundError: (404, "NOT_FOUND"),
    errors.TaskNotCancelableError: (400, "FAILED_PRECONDITION"),
    errors.PushNotificationNotSupportedError: (400, "FAILED_PRECONDITION"),
    errors.UnsupportedOperationError: (400, "FAILED_PRECONDITION"),
    errors.ContentTypeNotSupportedError: (400, "INVALID_ARGUMENT"),
    errors.InvalidAgentResponseError: (500, "INTERNAL"),
    errors.ExtendedAgentCardNotConfiguredError: (400, "FAILED_PRECONDITION"),
    errors.ExtensionSupportRequiredError: (400, "FAILED_PRECONDITION"),
    errors.VersionNotSupportedError: (400, "FAILED_PRECONDITION"),
    errors.InvalidParamsError: (400, "INVALID_ARGUMENT"),
    errors.InvalidRequestError: (400, "INVALID_ARGUMENT"),
    errors.InternalError: (500, "INTERNAL"),
}


def error_details(
    reason: str | None,
    metadata: dict[str, str] | None = None,
    violations: list[tuple[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The `google.rpc` details of an A2A error: ErrorInfo (and BadRequest), as every binding
    carries them (HTTP+JSON in `error.details`, JSON-RPC in `error.data`)."""
    details: list[dict[str, Any]] = []
    if reason:
        info: dict[str, Any] = {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": ERROR_DOMAIN,
        }
        if metadata:
            info["metadata"] = metadata
        details.append(info)
    if violations:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [
                    {"field": field, "description": description}
                    for field, description in violations
                ],
            }
        )
    return details


def status_body(
    code: int,
    status: str,
    message: str,
    reason: str | None = None,
    metadata: dict[str, str] | None = None,
    violations: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """A google.rpc.Status JSON body with ErrorInfo (and BadRequest) details."""
    details = error_details(reason, metadata, violations)
    error: dict[str, Any] = {"code": code, "status": status, "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def error_response(request: Request, exc: Exception) -> JSONResponse:
    media_type = response_media_type(request)
    if isinstance(exc, errors.A2AError):
        code, status = _STATUS.get(type(exc), (500, "INTERNAL"))
        violations = exc.violations if isinstance(exc, errors.InvalidParamsError) else None
        body = status_body(code, status, exc.message, exc.reason, exc.metadata, violations)
    elif isinstance(exc, UnsupportedMediaType):
        code = 415
        body = status_body(code, "INVALID_ARGUMENT", str(exc), "INVALID_REQUEST")
    elif isinstance(exc, PayloadTooLarge):
        code = 413
        body = status_body(code, "INVALID_ARGUMENT", str(exc), "INVALID_REQUEST")
    elif isinstance(exc, StarletteHTTPException):
        code = exc.status_code
        if code == 404:
            body = status_body(
                404, "NOT_FOUND", f"No operation at {request.url.path}", "METHOD_NOT_FOUND"
            )
        elif code == 405:
            body = status_body(
                405, "UNIMPLEMENTED", f"{request.method} is not allowed on {request.url.path}"
            )
        else:
            body = status_body(code, "UNKNOWN", str(exc.detail))
    else:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        code = 500
        body = status_body(500, "INTERNAL", "Internal error", "INTERNAL_ERROR")
    return JSONResponse(body, status_code=code, media_type=media_type)


def render(request: Request, payload: A2AModel, status_code: int = 200) -> JSONResponse:
    return JSONResponse(
        payload.wire(), status_code=status_code, media_type=response_media_type(request)
    )


def invalid_params_from(exc: ValidationError, prefix: str = "") -> errors.InvalidParamsError:
    """Pydantic errors as (field path, reason) pairs, e.g. `message.parts[0]`."""
    violations = []
    for error in exc.errors():
        path = prefix
        for part in error["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif part not in ("function-after[_exactly_one_content()]",):
                path += ("." if path else "") + str(part)
        description = "is required" if error["type"] == "missing" else error["msg"]
        description = description.removeprefix("Value error, ")
        violations.append((path or "(body)", description))
    return errors.InvalidParamsError(violations=violations)


def create_app(*routers: APIRouter, title: str = "a2a-serverless") -> FastAPI:
    """A function's app: its routers plus the binding's error mapping, each request in its
    own observability scope (correlation ids, metrics, one log line)."""
    from a2a_serverless.observability import RequestScope

    app = FastAPI(title=title, openapi_url=None, docs_url=None, redoc_url=None)
    app.add_middleware(RequestScope)
    for router in routers:
        app.include_router(router)

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, exc)

    for exc_type in (
        errors.A2AError,
        UnsupportedMediaType,
        PayloadTooLarge,
        StarletteHTTPException,
        Exception,
    ):
        app.add_exception_handler(exc_type, handle)
    app.add_exception_handler(
        RequestValidationError,
        lambda request, exc: error_response(request, errors.InvalidRequestError(str(exc))),
    )
    return app


def _version(request: Request) -> None:
    negotiated_version(request, SUPPORTED_VERSIONS, INTERFACE)


# -- Agent Card ----------------------------------------------------------------------------

card_router = APIRouter()


@card_router.get("/.well-known/agent-card.json")
def get_agent_card(request: Request) -> Response:
    factory = get_card_factory()
    card = factory.card_json(base_url(request))
    etag = factory.etag(card)
    max_age = factory.settings.agent_card_max_age
    headers = {
        "Cache-Control": f"public, max-age={max_age}",
        "ETag": etag,
        "Last-Modified": factory.last_modified(),
    }
    if _not_modified(request, etag, factory.modified_at):
        return Response(status_code=304, headers=headers)
    return JSONResponse(card, headers=headers, media_type="application/json")


def _not_modified(request: Request, etag: str, modified_at: datetime) -> bool:
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None:
        tags = [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
        return "*" in tags or etag in tags
    if_modified_since = request.headers.get("if-modified-since")
    if if_modified_since:
        try:
            since = parsedate_to_datetime(if_modified_since)
        except (TypeError, ValueError):
            return False
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        return modified_at <= since
    return False


@card_router.get("/extendedAgentCard")
def get_extended_agent_card(request: Request) -> Response:
    _version(request)
    raise errors.UnsupportedOperationError(
        "This agent has no extended agent card (capabilities.extendedAgentCard is false)"
    )


# -- SendMessage ---------------------------------------------------------------------------

send_router = APIRouter()


async def _send_request(request: Request) -> SendMessageRequest:
    body = await read_json_body(request)
    try:
        return SendMessageRequest.model_validate(body)
    except ValidationError as exc:
        raise invalid_params_from(exc) from None


@send_router.post("/message:send")
async def send_message(request: Request) -> Response:
    _version(request)
    send_request = await _send_request(request)
    service = get_service()
    # Refusals raise here, before any wait: their status and body are the usual ones.
    accepted = await run_in_threadpool(service.accept_message, principal(request), send_request)
    # A failure during a wait that already sent keep-alive bytes can no longer change the
    # status: the google.rpc.Status body then comes with HTTP 200 (see bindings/keepalive.py).
    return await send_response(
        service,
        accepted,
        lambda result: render(request, result),
        lambda exc: error_response(request, exc),
        media_type=response_media_type(request),
    )


# -- GetTask / ListTasks -------------------------------------------------------------------

get_task_router = APIRouter()


def _int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.invalid_field(name, f"must be an integer, got {value!r}") from None


def _bool_param(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    if value is None or value == "":
        return False
    lowered = value.lower()
    if lowered not in ("true", "false", "1", "0"):
        raise errors.invalid_field(name, f"must be true or false, got {value!r}")
    return lowered in ("true", "1")


def _timestamp_param(request: Request, name: str) -> datetime | None:
    value = request.query_params.get(name)
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "+"))
    except ValueError:
        raise errors.invalid_field(
            name, f"must be an ISO 8601 timestamp such as 2025-11-09T10:30:00Z, got {value!r}"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@get_task_router.get("/tasks/{task_id}")
async def get_task(request: Request, task_id: str) -> Response:
    _version(request)
    history_length = _int_param(request, "historyLength")
    task = await run_in_threadpool(
        get_service().get_task, principal(request), task_id, history_length
    )
    return render(request, task)


list_tasks_router = APIRouter()


@list_tasks_router.get("/tasks")
async def list_tasks(request: Request) -> Response:
    _version(request)
    status = request.query_params.get("status")
    try:
        state = parse_task_state(status) if status else None
    except ValueError as exc:
        raise errors.invalid_field("status", str(exc)) from None
    params = ListTasksRequest(
        context_id=request.query_params.get("contextId") or None,
        status=state,
        page_size=_int_param(request, "pageSize"),
        page_token=request.query_params.get("pageToken") or None,
        history_length=_int_param(request, "historyLength"),
        status_timestamp_after=_timestamp_param(request, "statusTimestampAfter"),
        include_artifacts=_bool_param(request, "includeArtifacts"),
    )
    result = await run_in_threadpool(get_service().list_tasks, principal(request), params)
    return render(request, result)


# -- POST /tasks/{id}:cancel | :subscribe (one gateway route, see ARCHITECTURE §2) --------

task_action_router = APIRouter()


@task_action_router.post("/tasks/{task_ref}")
async def task_action(request: Request, task_ref: str) -> Response:
    task_id, _, action = task_ref.rpartition(":")
    if action not in ("cancel", "subscribe") or not task_id:
        raise StarletteHTTPException(404)
    _version(request)
    await read_json_body(request, required=False)
    service = get_service()
    if action == "subscribe":
        # Errors (unknown task, terminal task) surface here, before any stream bytes.
        start = await run_in_threadpool(service.subscribe, principal(request), task_id)
        return sse_response(event_frames(service, start, _stream_payload))
    task = await run_in_threadpool(service.cancel_task, principal(request), task_id)
    return render(request, task)


stream_router = APIRouter()


def _stream_payload(event: StreamResponse) -> dict[str, Any]:
    return event.wire()


@stream_router.post("/message:stream")
async def send_streaming_message(request: Request) -> Response:
    _version(request)
    send_request = await _send_request(request)
    service = get_service()
    start = await run_in_threadpool(service.open_message_stream, principal(request), send_request)
    return sse_response(event_frames(service, start, _stream_payload))


# -- Push notification configs -------------------------------------------------------------

push_router = APIRouter()


@push_router.post("/tasks/{task_id}/pushNotificationConfigs")
async def create_push_config(request: Request, task_id: str) -> Response:
    _version(request)
    get_push().require_enabled()
    body = await read_json_body(request)
    try:
        config = TaskPushNotificationConfig.model_validate(body)
    except ValidationError as exc:
        raise invalid_params_from(exc) from None
    created = await run_in_threadpool(get_push().create, principal(request), task_id, config)
    return render(request, created)


@push_router.get("/tasks/{task_id}/pushNotificationConfigs")
async def list_push_configs(request: Request, task_id: str) -> Response:
    _version(request)
    result = await run_in_threadpool(get_push().list, principal(request), task_id)
    return render(request, result)


@push_router.get("/tasks/{task_id}/pushNotificationConfigs/{config_id}")
async def get_push_config(request: Request, task_id: str, config_id: str) -> Response:
    _version(request)
    config = await run_in_threadpool(get_push().get, principal(request), task_id, config_id)
    return render(request, config)


@push_router.delete("/tasks/{task_id}/pushNotificationConfigs/{config_id}")
async def delete_push_config(request: Request, task_id: str, config_id: str) -> Response:
    _version(request)
    await run_in_threadpool(get_push().delete, principal(request), task_id, config_id)
    return JSONResponse({}, media_type=response_media_type(request))  # google.protobuf.Empty
