"""The JSON-RPC bindings on `POST /`: A2A 1.0 (spec §9) and 0.3 compatibility.

`A2A-Version` picks the method set (empty means 0.3, spec §3.6). Each operation has one
handler; a `Codec` says how the call's version spells params and results (1.0: the models'
proto-JSON; 0.3: models/v03.py). Every answer is HTTP 200 with a JSON-RPC response, or an SSE
stream whose every `data:` is a JSON-RPC response wrapping one event. Error codes come from
core/errors.py's table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from a2a_serverless.bindings.connections import held, holding, release
from a2a_serverless.bindings.errors import (
    a2a_error_details,
    error_details,
    retry_headers,
    validated,
)
from a2a_serverless.bindings.http import (
    NotJsonError,
    PayloadTooLarge,
    SafeJSONResponse,
    UnsupportedMediaType,
    base_url,
    caller,
    challenge_headers,
    check_json,
    echo_extensions,
    json_safe,
    loads,
    negotiated_version,
    read_body,
    requested_extensions,
    require_json_content_type,
)
from a2a_serverless.bindings.keepalive import send_response, wait_settled
from a2a_serverless.bindings.sse import event_frames, sse_response
from a2a_serverless.core import errors
from a2a_serverless.core.card import CardFactory
from a2a_serverless.core.connections import Connection, ConnectionKind, unbounded
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.push import PushService
from a2a_serverless.core.send import Accepted
from a2a_serverless.core.service import A2AService, StreamStart, scoped
from a2a_serverless.models import (
    A2AModel,
    AgentCard,
    Caller,
    ListTasksRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    v03,
)

logger = logging.getLogger(__name__)

INTERFACE = "JSON-RPC"
SUPPORTED_VERSIONS = ("1.0", "0.3")
PARSE_ERROR = -32700
INVALID_REQUEST = errors.ERRORS[errors.InvalidRequestError].jsonrpc_code
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = errors.ERRORS[errors.InternalError].jsonrpc_code


class RpcError(Exception):
    """A JSON-RPC error that is not an A2A error (parse, request shape, unknown method)."""

    def __init__(self, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason


def error_object(exc: Exception) -> dict[str, Any]:
    """The JSON-RPC error object: code, message, and `google.rpc` details in `data`."""
    if isinstance(exc, RpcError):
        code, message, data = exc.code, exc.message, error_details(exc.reason)
    elif isinstance(exc, errors.A2AError):
        code, message = errors.error_row(type(exc)).jsonrpc_code, exc.message
        data = a2a_error_details(exc)
    elif isinstance(exc, UnsupportedMediaType):
        row = errors.ERRORS[errors.ContentTypeNotSupportedError]
        code, data = row.jsonrpc_code, error_details(row.reason)
        message = str(exc).replace("send application/a2a+json or ", "send ")
    elif isinstance(exc, PayloadTooLarge):
        code, message, data = INVALID_REQUEST, str(exc), error_details("INVALID_REQUEST")
    else:
        logger.exception("unhandled error in a JSON-RPC call")
        code, message, data = INTERNAL_ERROR, "Internal error", error_details("INTERNAL_ERROR")
    return {"code": code, "message": message, "data": data}


# -- parameters and codecs ---------------------------------------------------------------------


class _TaskIdParams(A2AModel):
    id: str = Field(min_length=1)
    history_length: int | None = Field(None, ge=0)


def _v03_params(params: dict[str, Any], decode: Callable[[dict[str, Any]], Any]) -> Any:
    """0.3 params translated by the codec; untranslatable ones are InvalidParamsError."""
    try:
        return decode(params)
    except v03.InvalidParamsError as exc:
        raise errors.InvalidParamsError(violations=exc.violations) from None


def _v03_send_request(params: dict[str, Any]) -> SendMessageRequest:
    try:
        body, known = v03.send_params_from_v03(params), []
    except v03.InvalidParamsError as exc:
        # Validated all the same: one answer names the 1.0 checks' violations too.
        body, known = exc.partial or {}, exc.violations
    request = validated(SendMessageRequest, body, known)
    inline = request.configuration.task_push_notification_config if request.configuration else None
    if request.configuration is not None and inline is not None:  # a 0.3 receiver's webhook
        request.configuration.task_push_notification_config = inline.for_payload_version("0.3")
    return request


def _v03_send_result(result: SendMessageResponse) -> Any:
    if result.task is not None:
        return v03.task_to_v03(result.task)
    assert result.message is not None  # a SendMessageResponse holds one or the other
    return v03.message_to_v03(result.message)


@dataclass(frozen=True)
class Codec:
    """How one protocol version spells an operation's params and results."""

    send_request: Callable[[dict[str, Any]], SendMessageRequest]
    send_result: Callable[[SendMessageResponse], Any]
    task: Callable[[Task], Any]
    event: Callable[[StreamResponse], Any]
    card: Callable[[AgentCard], Any]
    # A JSON-RPC error object as the version spells it (states, roles, methods, fields).
    error: Callable[[dict[str, Any]], dict[str, Any]] = lambda error: error


V10 = Codec(
    send_request=lambda params: validated(SendMessageRequest, params),
    send_result=SendMessageResponse.wire,
    task=Task.wire,
    event=StreamResponse.wire,
    card=AgentCard.wire,
)
V03 = Codec(
    send_request=_v03_send_request,
    send_result=_v03_send_result,
    task=v03.task_to_v03,
    event=v03.event_to_v03,
    card=v03.card_to_v03,
    error=v03.error_to_v03,
)
CODECS = {"1.0": V10, "0.3": V03}


@dataclass
class Call:
    id: Any
    method: str
    params: dict[str, Any]
    caller: Caller
    codec: Codec
    base_url: str = ""
    extensions: list[str] = field(default_factory=list)  # requested (A2A-Extensions)

    @property
    def owner(self) -> str:
        """The owner (principal, under the call's tenant) whose tasks the call may read and
        write."""
        return self.caller.owner


@dataclass
class Streamed:
    start: StreamStart
    extensions: Sequence[str] = ()  # activated: echoed in the header
    connection: Connection = field(default_factory=unbounded)  # held until the stream ends


@dataclass
class Waiting:
    """A SendMessage accepted by core: its result comes after the wait (bindings/keepalive)."""

    accepted: Accepted
    extensions: Sequence[str]  # activated: echoed in the response's header
    connection: Connection = field(default_factory=unbounded)  # held until the answer


@dataclass(frozen=True)
class Services:
    """What the handlers call."""

    service: A2AService
    push: PushService
    cards: CardFactory | None = None


Handler = Callable[[Services, Call], Any]


def _connected(
    s: Services, call: Call, kind: ConnectionKind, opens: Callable[[], Any], long_lived: bool = True
) -> tuple[Any, Connection]:
    """`opens()` within the caller's connection bounds (core/connections.py), admitted before
    it writes anything: its result and the connection to release when the answer ends."""
    connection = s.service.connect(call.caller, kind) if long_lived else unbounded()
    try:
        return opens(), connection
    except BaseException:
        connection.release()
        raise


def _send_request(s: Services, call: Call) -> tuple[SendMessageRequest, RequestContext]:
    """The call's send request (in its version's spelling) and the send's context."""
    context = s.service.context(call.caller, call.extensions, call.base_url)
    return call.codec.send_request(call.params), context


def _send(s: Services, call: Call) -> Any:
    request, context = _send_request(s, call)
    blocks = s.service.blocks(request)
    accepted, connection = _connected(
        s, call, ConnectionKind.BLOCKING, lambda: s.service.sender.accept(context, request), blocks
    )
    return Waiting(accepted, context.extensions, connection)


def _send_streaming(s: Services, call: Call) -> Any:
    request, context = _send_request(s, call)
    start, connection = _connected(
        s, call, ConnectionKind.STREAM, lambda: s.service.sender.open_stream(context, request)
    )
    return Streamed(start, context.extensions, connection)


def _get_task(s: Services, call: Call) -> Any:
    params = validated(_TaskIdParams, call.params)
    return call.codec.task(s.service.get_task(call.owner, params.id, params.history_length))


def _list_tasks(s: Services, call: Call) -> Any:
    return s.service.list_tasks(call.owner, validated(ListTasksRequest, call.params)).wire()


def _cancel(s: Services, call: Call) -> Any:
    task_id = validated(_TaskIdParams, call.params).id
    return call.codec.task(s.service.cancel_task(call.owner, task_id))


def _subscribe(s: Services, call: Call) -> Any:
    task_id = validated(_TaskIdParams, call.params).id
    start, connection = _connected(
        s, call, ConnectionKind.STREAM, lambda: s.service.subscribe(call.owner, task_id)
    )
    return Streamed(start, connection=connection)


class _ConfigParams(A2AModel):
    task_id: str = Field(min_length=1)
    id: str = Field(min_length=1)


class _TaskConfigsParams(A2AModel):
    task_id: str = Field(min_length=1)


def _create_config(s: Services, call: Call) -> Any:
    config = validated(TaskPushNotificationConfig, call.params)
    if not config.task_id:
        raise errors.invalid_field("taskId", "is required")
    return s.push.create(call.owner, config.task_id, config).wire()


def _get_config(s: Services, call: Call) -> Any:
    params = validated(_ConfigParams, call.params)
    return s.push.get(call.owner, params.task_id, params.id).wire()


def _list_configs(s: Services, call: Call) -> Any:
    params = validated(_TaskConfigsParams, call.params)
    return s.push.list(call.owner, params.task_id).wire()


def _delete_config(s: Services, call: Call) -> Any:
    params = validated(_ConfigParams, call.params)
    s.push.delete(call.owner, params.task_id, params.id)
    return {}  # google.protobuf.Empty


# 0.3 push configs differ in more than spelling (one config per task, a bare list, no result
# on delete): their own handlers.


def _v03_set_config(s: Services, call: Call) -> Any:
    task_id = call.params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise errors.invalid_field("taskId", "is required")
    try:
        body = _v03_params(call.params, v03.push_config_from_v03)
        config = validated(TaskPushNotificationConfig, body)
        created = s.push.create(call.owner, task_id, config.for_payload_version("0.3"))
        return v03.push_config_to_v03(created)
    except errors.InvalidParamsError as exc:  # name the fields as the 0.3 client sent them
        # The 1.0 model's paths get the 0.3 prefix; the 0.3 translation's already have it.
        violations = [
            (
                field
                if field == "taskId" or field.startswith("pushNotificationConfig")
                else f"pushNotificationConfig.{field}",
                why,
            )
            for field, why in exc.violations
        ]
        raise errors.InvalidParamsError(violations=violations, **exc.metadata) from None


def _v03_get_config(s: Services, call: Call) -> Any:
    task_id, config_id = _v03_params(call.params, v03.config_ids)
    if config_id is None:  # 0.3 allowed one config per task: the first one
        configs = s.push.list(call.owner, task_id).configs or []
        if not configs:
            raise errors.TaskNotFoundError(
                f"Task {task_id} has no push notification config", taskId=task_id
            )
        return v03.push_config_to_v03(configs[0])
    return v03.push_config_to_v03(s.push.get(call.owner, task_id, config_id))


def _v03_list_configs(s: Services, call: Call) -> Any:
    task_id, _ = _v03_params(call.params, v03.config_ids)
    configs = s.push.list(call.owner, task_id).configs or []
    return [v03.push_config_to_v03(c) for c in configs]


def _v03_delete_config(s: Services, call: Call) -> Any:
    task_id, config_id = _v03_params(call.params, v03.config_ids)
    if config_id is None:
        raise errors.invalid_field("pushNotificationConfigId", "is required")
    s.push.delete(call.owner, task_id, config_id)
    return None


def _extended_card(s: Services, call: Call) -> Any:
    if s.cards is None or not s.cards.offers_extended_card:
        raise errors.UnsupportedOperationError(
            "This agent has no extended agent card (capabilities.extendedAgentCard is false)"
        )
    return call.codec.card(s.cards.extended_card(call.base_url, call.caller))


V10_METHODS: dict[str, Handler] = {
    "SendMessage": _send,
    "SendStreamingMessage": _send_streaming,
    "GetTask": _get_task,
    "ListTasks": _list_tasks,
    "CancelTask": _cancel,
    "SubscribeToTask": _subscribe,
    "CreateTaskPushNotificationConfig": _create_config,
    "GetTaskPushNotificationConfig": _get_config,
    "ListTaskPushNotificationConfigs": _list_configs,
    "DeleteTaskPushNotificationConfig": _delete_config,
    "GetExtendedAgentCard": _extended_card,
}
V03_METHODS: dict[str, Handler] = {
    "message/send": _send,
    "message/stream": _send_streaming,
    "tasks/get": _get_task,
    "tasks/cancel": _cancel,
    "tasks/resubscribe": _subscribe,
    "tasks/pushNotificationConfig/set": _v03_set_config,
    "tasks/pushNotificationConfig/get": _v03_get_config,
    "tasks/pushNotificationConfig/list": _v03_list_configs,
    "tasks/pushNotificationConfig/delete": _v03_delete_config,
    "agent/getAuthenticatedExtendedCard": _extended_card,
}

METHODS = {"1.0": V10_METHODS, "0.3": V03_METHODS}
# Where a method of one version lives in the other, to tell the client what to send.
_COUNTERPART = {**v03.METHODS_V03, **{v: k for k, v in v03.METHODS_V03.items()}}


def _method_not_found(method: str, version: str) -> RpcError:
    if version == "0.3" and method in V10_METHODS:
        hint = f"{method} is an A2A 1.0 method; send the header 'A2A-Version: 1.0' " + (
            f"(or call {_COUNTERPART[method]} as A2A 0.3)" if method in _COUNTERPART else ""
        )
    elif version == "1.0" and method in V03_METHODS:
        hint = (
            f"{method} is an A2A 0.3 method; with 'A2A-Version: 1.0' call "
            f"{_COUNTERPART[method]}, or send 'A2A-Version: 0.3'"
        )
    else:
        names = ", ".join(METHODS[version])
        hint = f"Method {method!r} does not exist in A2A {version}; methods: {names}"
    return RpcError(METHOD_NOT_FOUND, hint.strip(), "METHOD_NOT_FOUND")


def _version(request: Request) -> str:
    return negotiated_version(
        request,
        SUPPORTED_VERSIONS,
        INTERFACE,
        advice="'A2A-Version: 1.0' (or 'A2A-Version: 0.3' for the 0.3 methods)",
    )


def _reply(
    id_: Any, *, result: Any = None, error: Exception | None = None, codec: Codec = V10
) -> SafeJSONResponse:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": id_}
    if error is not None:
        body["error"] = codec.error(error_object(error))
        if isinstance(error, errors.AuthenticationRequiredError):
            # Refused before any method ran: the transport says so too, as the gateway's
            # authorizer does (HTTP 401 naming the scheme).
            return SafeJSONResponse(
                body,
                status_code=401,
                media_type="application/json",
                headers=challenge_headers(error),
            )
        if isinstance(error, PayloadTooLarge):
            # As HTTP+JSON and API Gateway answer a body past the limit.
            return SafeJSONResponse(body, status_code=413, media_type="application/json")
        if isinstance(error, errors.TooManyConnectionsError):
            # As HTTP's own 429, so that clients and proxies back off (Retry-After).
            return SafeJSONResponse(
                body, status_code=429, media_type="application/json", headers=retry_headers(error)
            )
    else:
        body["result"] = result
    return SafeJSONResponse(body, media_type="application/json")


def stream_frame(id_: Any, codec: Codec, event: StreamResponse) -> dict[str, Any]:
    """One SSE `data:` payload; json_safe because an event stored before the input gate may
    hold NaN (sse.frame would write a bare `NaN`, which is not JSON)."""
    return {"jsonrpc": "2.0", "id": id_, "result": json_safe(codec.event(event))}


def _is_valid_id(id_: Any) -> bool:
    """A string (valid Unicode: it is echoed), a finite number (the parser refuses others),
    or null."""
    if isinstance(id_, bool) or not isinstance(id_, str | int | float | None):
        return False
    return not isinstance(id_, str) or id_ == json_safe(id_)


def _parse(body: bytes) -> Any:
    """The input gate's parse: not JSON (NaN/Infinity included) is -32700, a document too
    deep to parse is -32600 (no id can be detected in either)."""
    try:
        return loads(body)
    except NotJsonError as exc:
        raise RpcError(PARSE_ERROR, f"Invalid JSON payload: {exc}", "JSON_PARSE") from None
    except errors.InvalidParamsError as exc:
        raise RpcError(INVALID_REQUEST, exc.message, "INVALID_REQUEST") from None


def _check_limits(payload: dict[str, Any], params: dict[str, Any]) -> None:
    """The gate's depth and Unicode limits: on the envelope -32600, in params -32602 naming
    the field (paths relative to params, as every other violation)."""
    try:
        check_json({k: v for k, v in payload.items() if k != "params"})
    except errors.InvalidParamsError as exc:
        raise RpcError(INVALID_REQUEST, exc.message, "INVALID_REQUEST") from None
    check_json(params, base_depth=1)


def _request_object(payload: Any) -> tuple[str, dict[str, Any]]:
    """(method, params) of a valid JSON-RPC 2.0 request object, or RpcError."""
    if isinstance(payload, list):
        raise RpcError(
            INVALID_REQUEST,
            "Batch requests are not supported; send one JSON-RPC request per HTTP request",
            "INVALID_REQUEST",
        )
    if not isinstance(payload, dict):
        raise RpcError(INVALID_REQUEST, "The request must be a JSON object", "INVALID_REQUEST")
    if "id" in payload and not _is_valid_id(payload["id"]):
        raise RpcError(
            INVALID_REQUEST,
            "id must be a string of valid Unicode text, a number or null",
            "INVALID_REQUEST",
        )
    if payload.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'jsonrpc must be "2.0"', "INVALID_REQUEST")
    method = payload.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "method must be a non-empty string", "INVALID_REQUEST")
    params = payload.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_REQUEST, "params must be an object", "INVALID_REQUEST")
    return method, params


def _tenant_param(params: dict[str, Any]) -> str | None:
    tenant = params.get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        raise errors.invalid_field("tenant", "must be a string")
    return tenant


def _detect_id(payload: Any) -> tuple[Any, bool]:
    """The id to answer with even when the rest of the request is invalid (JSON-RPC 2.0 §5:
    null only when it cannot be detected); a well-formed object without one is a
    notification."""
    if not isinstance(payload, dict):
        return None, True
    if "id" not in payload:
        well_formed = payload.get("jsonrpc") == "2.0" and isinstance(payload.get("method"), str)
        return None, not well_formed
    id_ = payload["id"]
    if not _is_valid_id(id_):
        return None, True
    return id_, True


def jsonrpc_router(
    service: A2AService, push: PushService, cards: CardFactory | None = None
) -> APIRouter:
    """`POST /`: both JSON-RPC versions, calling `service`, `push` and `cards` (the extended
    Agent Card)."""
    services = Services(service, push, cards)
    router = APIRouter()

    @router.post("/")
    async def jsonrpc_endpoint(request: Request) -> Response:
        return await _endpoint(services, request)

    return router


async def _endpoint(services: Services, request: Request) -> Response:
    id_: Any = None
    has_id = True  # until the request is known to be a notification, errors are answered
    codec, version = V10, "1.0"  # until the version is known
    service = services.service
    connection = unbounded()  # a stream's or a blocking send's, once admitted
    try:
        body = await read_body(request)
        try:
            payload = _parse(body)
        except Exception:
            require_json_content_type(request)  # a body neither declared nor read as JSON
            raise
        id_, has_id = _detect_id(payload)
        # Refused once its id is known, so the error echoes it.
        require_json_content_type(request)
        method, params = _request_object(payload)
        _check_limits(payload, params)
        # The version is checked once the id is known, so its error echoes the request's id.
        version = _version(request)
        handler = METHODS[version].get(method)
        if handler is None:
            raise _method_not_found(method, version)
        codec = CODECS[version]
        call = Call(
            id_,
            method,
            params,
            # 1.0: every request message has `tenant` (spec §8.3.2); 0.3 has none.
            scoped(caller(request), _tenant_param(params) if version == "1.0" else None),
            codec,
            base_url(request),
            requested_extensions(request),
        )
        result = await run_in_threadpool(handler, services, call)
        if isinstance(result, Streamed | Waiting):
            connection = result.connection
        if not has_id and isinstance(result, Waiting):
            # Nothing to keep alive (204 has no body): a blocking notification answers once
            # its task settles, as a blocking call does.
            await wait_settled(service, result.accepted)
    except BaseException as exc:
        await release(connection)
        if not isinstance(exc, Exception):
            raise
        # Every failure is a JSON-RPC error object.
        if not has_id:
            error_object(exc)  # logs what must be logged; a notification gets no reply (§4.1)
            return Response(status_code=204)
        return _reply(id_, error=exc, codec=codec)
    if not has_id:
        await release(connection)
        return Response(status_code=204)  # a notification: no response (JSON-RPC 2.0 §4.1)
    if isinstance(result, Streamed):

        def render(event: StreamResponse) -> dict[str, Any]:
            return stream_frame(id_, codec, event)

        streamed = echo_extensions(
            sse_response(event_frames(service, result.start, render)),
            result.extensions,
            version,
        )
        return holding(streamed, connection)
    if isinstance(result, Waiting):
        # A failure during the wait is still an error object with the request's id (after
        # keep-alive bytes as before them: JSON-RPC answers are HTTP 200 either way).
        waiting = result

        async def respond() -> Response:
            response = await send_response(
                service,
                waiting.accepted,
                lambda answer: _reply(id_, result=codec.send_result(answer)),
                lambda exc: _reply(id_, error=exc, codec=codec),
                media_type="application/json",
            )
            return echo_extensions(response, waiting.extensions, version)

        return await held(connection, respond)
    return _reply(id_, result=result)
