"""The HTTP+JSON binding (spec §11): one router factory per function, given the service
objects it calls, and the binding's error responses (codes from core/errors.py's table)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_serverless.bindings.connections import held
from a2a_serverless.bindings.cors import CorsHeaders
from a2a_serverless.bindings.errors import (
    a2a_error_details,
    error_details,
    retry_headers,
    validated,
)
from a2a_serverless.bindings.http import (
    PayloadTooLarge,
    SafeJSONResponse,
    UnsupportedMediaType,
    base_url,
    caller,
    challenge_headers,
    echo_extensions,
    negotiated_version,
    read_json_body,
    requested_extensions,
    response_media_type,
)
from a2a_serverless.bindings.keepalive import send_response
from a2a_serverless.bindings.sse import event_frames, sse_response
from a2a_serverless.core import errors
from a2a_serverless.core.connections import Connection, unbounded
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.service import A2AService, ConnectionKind, StreamStart, scoped
from a2a_serverless.models import (
    A2AModel,
    Caller,
    ListTasksRequest,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
)
from a2a_serverless.observability import RequestScope

if TYPE_CHECKING:  # only the card function loads the card (and its signing) module
    from a2a_serverless.core.card import CardFactory
    from a2a_serverless.core.push import PushService

logger = logging.getLogger(__name__)

INTERFACE = "HTTP+JSON"
SUPPORTED_VERSIONS = ("1.0",)


def status_body(
    code: int, status: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A google.rpc.Status JSON body."""
    error: dict[str, Any] = {"code": code, "status": status, "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def _status_and_body(request: Request, exc: Exception) -> tuple[int, dict[str, Any]]:
    if isinstance(exc, errors.A2AError):
        row = errors.error_row(type(exc))
        return row.http_status, status_body(
            row.http_status, row.grpc_status, exc.message, a2a_error_details(exc)
        )
    if isinstance(exc, UnsupportedMediaType):
        # HTTP's own 415, with the reason JSON-RPC gives the same refusal (one error table).
        row = errors.ERRORS[errors.ContentTypeNotSupportedError]
        return 415, status_body(415, row.grpc_status, str(exc), error_details(row.reason))
    if isinstance(exc, PayloadTooLarge):
        return 413, status_body(413, "INVALID_ARGUMENT", str(exc), error_details("INVALID_REQUEST"))
    if isinstance(exc, StarletteHTTPException):
        code = exc.status_code
        if code == 404:
            message = f"No operation at {request.url.path}"
            return 404, status_body(404, "NOT_FOUND", message, error_details("METHOD_NOT_FOUND"))
        if code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
            return 405, status_body(405, "UNIMPLEMENTED", message)
        return code, status_body(code, "UNKNOWN", str(exc.detail))
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return 500, status_body(500, "INTERNAL", "Internal error", error_details("INTERNAL_ERROR"))


def error_response(request: Request, exc: Exception) -> JSONResponse:
    code, body = _status_and_body(request, exc)
    return SafeJSONResponse(
        body,
        status_code=code,
        media_type=response_media_type(request),
        headers={**challenge_headers(exc), **retry_headers(exc)},
    )


def render(request: Request, payload: A2AModel, status_code: int = 200) -> JSONResponse:
    # Safe: wire() already writes NaN as null; anything else strict JSON cannot carry
    # (stored before the input gate) renders sanitized rather than as a 500.
    return SafeJSONResponse(
        payload.wire(), status_code=status_code, media_type=response_media_type(request)
    )


def create_app(*routers: APIRouter) -> FastAPI:
    """A function's app: its routers in order plus the binding's error mapping, each request in its
    own observability scope. No slash redirects (behind API Gateway the Location drops the stage)
    and no served docs (/docs, /redoc, /openapi.json answer 404)."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, redirect_slashes=False)
    for router in routers:
        app.include_router(router)
    app.add_middleware(RequestScope)
    app.add_middleware(CorsHeaders)

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, exc)

    for exc_type in (
        errors.A2AError,
        UnsupportedMediaType,
        PayloadTooLarge,
        StarletteHTTPException,
        # No route reads query or body parameters through FastAPI: one that did is a bug (500).
        RequestValidationError,
        Exception,
    ):
        app.add_exception_handler(exc_type, handle)
    return app


async def _version(request: Request) -> None:
    negotiated_version(request, SUPPORTED_VERSIONS, INTERFACE)


def _versioned_router() -> APIRouter:
    """A router whose every route first checks A2A-Version (spec §3.6), before the body."""
    return APIRouter(dependencies=[Depends(_version)])


# -- tenants -------------------------------------------------------------------------------

TENANT_PREFIX = "/{tenant}"


def _route(router: APIRouter, method: str, path: str) -> Callable[[Any], Any]:
    """Register the handler at `path` and at `/{tenant}` + `path` (the proto's additional_bindings).
    Handlers read path parameters from `request.path_params`: a declared parameter would make
    FastAPI import pydantic.v1 at every cold start."""

    def register(handler: Any) -> Any:
        for each in (path, TENANT_PREFIX + path):  # without the tenant first: it wins ties
            router.add_api_route(each, handler, methods=[method])
        return handler

    return register


def scoped_caller(request: Request, body_tenant: str | None = None) -> Caller:
    """Who calls, under the request's tenant: the path's, else the body's `tenant` field;
    both given, they must agree (InvalidParams naming `tenant`)."""
    path_tenant = request.path_params.get("tenant")
    if path_tenant is not None and body_tenant and body_tenant != path_tenant:
        raise errors.invalid_field("tenant", "does not match the tenant in the request path")
    return scoped(caller(request), path_tenant if path_tenant is not None else body_tenant)


# -- Agent Card ----------------------------------------------------------------------------


def card_router(factory: CardFactory) -> APIRouter:
    router = APIRouter()  # the card is fetched before any version is known

    @router.get("/.well-known/agent-card.json")
    def get_agent_card(request: Request) -> Response:
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

    @router.get("/.well-known/jwks.json")
    def get_card_jwks() -> Response:
        # Public, like the card: verifiers follow the signatures' `jku` here (spec §8.4).
        jwks = factory.public_jwks()
        if jwks is None:
            message = "This agent does not sign its Agent Card (no CARD_SIGNING_KEY)"
            return JSONResponse(status_body(404, "NOT_FOUND", message), status_code=404)
        max_age = factory.settings.agent_card_max_age
        return JSONResponse(
            jwks,
            headers={"Cache-Control": f"public, max-age={max_age}"},
            media_type="application/jwk-set+json",
        )

    extended = _versioned_router()

    @_route(extended, "GET", "/extendedAgentCard")
    def get_extended_agent_card(request: Request) -> Response:
        if not factory.offers_extended_card:
            # Answered before asking who calls: an open stack has no extended card at all.
            raise errors.UnsupportedOperationError(
                "This agent has no extended agent card (capabilities.extendedAgentCard is false)"
            )
        card = factory.extended_card(base_url(request), scoped_caller(request))
        # Per caller: never cached by a shared cache.
        response = render(request, card)
        response.headers["Cache-Control"] = "private, no-store"
        return response

    router.include_router(extended)
    return router


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


# -- SendMessage / SendStreamingMessage ------------------------------------------------------


async def _send_request(
    service: A2AService, request: Request
) -> tuple[SendMessageRequest, RequestContext]:
    """The send's body and its context: the caller, scoped to the body's tenant, and the
    extensions it activates."""
    send_request = validated(SendMessageRequest, await read_json_body(request))
    who = scoped_caller(request, send_request.tenant)
    return send_request, service.context(who, requested_extensions(request), base_url(request))


def send_router(service: A2AService) -> APIRouter:
    router = _versioned_router()

    @_route(router, "POST", "/message:send")
    async def send_message(request: Request) -> Response:
        # Refusals raise here, before any wait: their status and body are the usual ones.
        send_request, context = await _send_request(service, request)
        connection = await _connect(
            service, context.caller, ConnectionKind.BLOCKING, service.blocks(send_request)
        )

        async def respond() -> Response:
            accepted = await run_in_threadpool(service.sender.accept, context, send_request)
            # After keep-alive bytes the status is sent: a failure's google.rpc.Status comes
            # with HTTP 200.
            response = await send_response(
                service,
                accepted,
                lambda result: render(request, result),
                lambda exc: error_response(request, exc),
                media_type=response_media_type(request),
            )
            return echo_extensions(response, context.extensions)

        return await held(connection, respond)

    return router


def _stream_payload(event: StreamResponse) -> dict[str, Any]:
    return event.wire()


async def _connect(
    service: A2AService, who: Caller, kind: ConnectionKind, long_lived: bool = True
) -> Connection:
    """The connection's place in the caller's bounds (core/connections.py), taken before the
    operation writes anything: a refusal (429) leaves nothing behind."""
    if not long_lived:
        return unbounded()
    return await run_in_threadpool(service.connect, who, kind)


async def _streamed(
    service: A2AService,
    who: Caller,
    kind: ConnectionKind,
    open_stream: Callable[[], StreamStart],
    activated: Sequence[str] | None = None,
) -> Response:
    """An SSE response holding its connection until the stream ends."""
    connection = await _connect(service, who, kind)

    async def respond() -> Response:
        start = await run_in_threadpool(open_stream)
        response: Response = sse_response(event_frames(service, start, _stream_payload))
        return response if activated is None else echo_extensions(response, activated)

    return await held(connection, respond)


def stream_router(service: A2AService) -> APIRouter:
    router = _versioned_router()

    @_route(router, "POST", "/message:stream")
    async def send_streaming_message(request: Request) -> Response:
        send_request, context = await _send_request(service, request)
        return await _streamed(
            service,
            context.caller,
            ConnectionKind.STREAM,
            lambda: service.sender.open_stream(context, send_request),
            context.extensions,
        )

    return router


# -- GetTask / ListTasks -------------------------------------------------------------------


def get_task_router(service: A2AService) -> APIRouter:
    """GetTask, and SubscribeToTask by the proto's GET rule: API Gateway has one
    `GET /tasks/{id}` resource, so `GET /tasks/x:subscribe` arrives here (a streaming
    function) and is answered exactly as `POST /tasks/x:subscribe` is."""
    router = _versioned_router()

    # Registered first: `/tasks/{task_id}` would match `x:subscribe` too.
    @_route(router, "GET", "/tasks/{task_id}:subscribe")
    async def subscribe_by_get(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        # A GET has no body: the tenant can only come from the path.
        who = scoped_caller(request)
        # Errors (unknown task, terminal task) surface here, before any stream bytes.
        return await _streamed(
            service,
            who,
            ConnectionKind.GET_SUBSCRIPTION,
            lambda: service.subscribe(who.owner, task_id),
        )

    @_route(router, "GET", "/tasks/{task_id}")
    async def get_task(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        params = _query(request, TaskQuery)
        task = await run_in_threadpool(
            service.get_task, scoped_caller(request).owner, task_id, params.history_length
        )
        return render(request, task)

    return router


class TaskQuery(A2AModel):
    """GetTask's query parameters."""

    history_length: int | None = None


def _query(request: Request, model: type[A2AModel]) -> Any:
    """Query parameters validated by the model the JSON-RPC binding uses for the same call
    (empty values are absent; a `+` in an unencoded timestamp arrives as a space)."""
    values = {k: v for k, v in request.query_params.items() if v != ""}
    if "statusTimestampAfter" in values:
        values["statusTimestampAfter"] = values["statusTimestampAfter"].replace(" ", "+")
    return validated(model, values)


def list_tasks_router(service: A2AService) -> APIRouter:
    router = _versioned_router()

    @_route(router, "GET", "/tasks")
    @_route(router, "GET", "/tasks/")  # API Gateway routes `/tasks/` to the `/tasks` resource
    async def list_tasks(request: Request) -> Response:
        params = _query(request, ListTasksRequest)
        owner = scoped_caller(request).owner
        result = await run_in_threadpool(service.list_tasks, owner, params)
        return render(request, result)

    return router


# -- POST /tasks/{id}:cancel | :subscribe (one gateway route, see ARCHITECTURE §2) --------


def task_action_router(service: A2AService) -> APIRouter:
    # Other actions on the gateway's /tasks/{id} route match nothing here: 404.
    router = _versioned_router()

    @_route(router, "POST", "/tasks/{task_id}:cancel")
    async def cancel_task(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        body = await read_json_body(request, required=False)
        owner = scoped_caller(request, _body_tenant(body)).owner
        task = await run_in_threadpool(service.cancel_task, owner, task_id)
        return render(request, task)

    @_route(router, "POST", "/tasks/{task_id}:subscribe")
    async def subscribe(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        body = await read_json_body(request, required=False)
        who = scoped_caller(request, _body_tenant(body))
        # Errors (unknown task, terminal task) surface here, before any stream bytes.
        return await _streamed(
            service, who, ConnectionKind.STREAM, lambda: service.subscribe(who.owner, task_id)
        )

    return router


def _body_tenant(body: dict[str, Any] | None) -> str | None:
    """The `tenant` field of an optional body (CancelTaskRequest, SubscribeToTaskRequest)."""
    tenant = (body or {}).get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        raise errors.invalid_field("tenant", "must be a string")
    return tenant


# -- Push notification configs -------------------------------------------------------------


def _config_path(request: Request) -> tuple[str, str, str]:
    """The caller's owner, then the task and config ids of a push config's path."""
    params = request.path_params
    return scoped_caller(request).owner, params["task_id"], params["config_id"]


def push_router(push: PushService) -> APIRouter:
    router = _versioned_router()
    configs = "/tasks/{task_id}/pushNotificationConfigs"

    @_route(router, "POST", configs)
    async def create_push_config(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        config = validated(TaskPushNotificationConfig, await read_json_body(request))
        who = scoped_caller(request, config.tenant)
        # Stored with the tenant it was created under (returned with it, as the proto's field).
        config = config.model_copy(update={"tenant": who.tenant or None})
        created = await run_in_threadpool(push.create, who.owner, task_id, config)
        return render(request, created)

    @_route(router, "GET", configs)
    async def list_push_configs(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        result = await run_in_threadpool(push.list, scoped_caller(request).owner, task_id)
        return render(request, result)

    @_route(router, "GET", configs + "/{config_id}")
    async def get_push_config(request: Request) -> Response:
        config = await run_in_threadpool(push.get, *_config_path(request))
        return render(request, config)

    @_route(router, "DELETE", configs + "/{config_id}")
    async def delete_push_config(request: Request) -> Response:
        await run_in_threadpool(push.delete, *_config_path(request))
        return JSONResponse({}, media_type=response_media_type(request))  # protobuf Empty

    return router
