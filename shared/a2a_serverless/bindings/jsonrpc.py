"""The JSON-RPC bindings on `POST /`: A2A 1.0 (spec §9) and 0.3 compatibility.

`A2A-Version` picks the method set (empty means 0.3, spec §3.6); both call the same core
operations. Every answer is HTTP 200 with a JSON-RPC response, or an SSE stream whose every
`data:` is a JSON-RPC response wrapping one event. This module is the binding's one error
mapping.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from starlette.concurrency import run_in_threadpool

from a2a_serverless.bindings import jsonrpc_v03 as v03
from a2a_serverless.bindings.http import (
    PayloadTooLarge,
    UnsupportedMediaType,
    principal,
    read_body,
)
from a2a_serverless.bindings.keepalive import send_response, wait_settled
from a2a_serverless.bindings.rest import error_details, invalid_params_from
from a2a_serverless.bindings.sse import event_frames, sse_response
from a2a_serverless.core import errors
from a2a_serverless.core.service import A2AService, AcceptedSend, StreamStart
from a2a_serverless.models import (
    ListTasksRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    TaskPushNotificationConfig,
)
from a2a_serverless.wiring import get_push, get_service

logger = logging.getLogger(__name__)

SUPPORTED_VERSIONS = ("1.0", "0.3")
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601

_CODES: dict[type[errors.A2AError], int] = {
    errors.TaskNotFoundError: -32001,
    errors.TaskNotCancelableError: -32002,
    errors.PushNotificationNotSupportedError: -32003,
    errors.UnsupportedOperationError: -32004,
    errors.ContentTypeNotSupportedError: -32005,
    errors.InvalidAgentResponseError: -32006,
    errors.ExtendedAgentCardNotConfiguredError: -32007,
    errors.ExtensionSupportRequiredError: -32008,
    errors.VersionNotSupportedError: -32009,
    errors.InvalidParamsError: -32602,
    errors.InvalidRequestError: INVALID_REQUEST,
    errors.InternalError: -32603,
}


class RpcError(Exception):
    """A JSON-RPC error that is not an A2A error (parse, request shape, unknown method)."""

    def __init__(self, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason


def _classify(exc: Exception) -> tuple[int, str, str, dict[str, str], list[tuple[str, str]]]:
    """(code, message, ErrorInfo reason, metadata, field violations) of any failure."""
    if isinstance(exc, RpcError):
        return exc.code, exc.message, exc.reason, {}, []
    if isinstance(exc, errors.A2AError):
        violations = exc.violations if isinstance(exc, errors.InvalidParamsError) else []
        return _CODES.get(type(exc), -32603), exc.message, exc.reason, exc.metadata, violations
    if isinstance(exc, UnsupportedMediaType):
        error = errors.ContentTypeNotSupportedError
        message = str(exc).replace("send application/a2a+json or ", "send ")
        return _CODES[error], message, error.reason, {}, []
    if isinstance(exc, PayloadTooLarge):
        return INVALID_REQUEST, str(exc), "INVALID_REQUEST", {}, []
    logger.exception("unhandled error in a JSON-RPC call")
    return -32603, "Internal error", "INTERNAL_ERROR", {}, []


def error_object(exc: Exception) -> dict[str, Any]:
    """The JSON-RPC error object: code, message, and `google.rpc` details in `data`."""
    code, message, reason, metadata, violations = _classify(exc)
    data = error_details(reason, metadata, violations)
    return {"code": code, "message": message, "data": data}


# -- parameters --------------------------------------------------------------------------------


class _Params(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class _TaskIdParams(_Params):
    id: str = Field(min_length=1)
    history_length: int | None = Field(None, ge=0)


def _parse(model: type[BaseModel], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise invalid_params_from(exc) from None


@dataclass
class Call:
    id: Any
    method: str
    params: dict[str, Any]
    owner: str
    version: str


@dataclass
class Streamed:
    start: StreamStart


@dataclass
class Waiting:
    """A SendMessage accepted by core: its result comes after the wait (bindings/keepalive),
    shaped by `convert` for the call's version."""

    accepted: AcceptedSend
    convert: Callable[[SendMessageResponse], Any]


Handler = Callable[[A2AService, Call], Any]


def _send(service: A2AService, call: Call) -> Any:
    request = _parse(SendMessageRequest, call.params)
    return Waiting(service.accept_message(call.owner, request), SendMessageResponse.wire)


def _send_streaming(service: A2AService, call: Call) -> Any:
    request = _parse(SendMessageRequest, call.params)
    return Streamed(service.open_message_stream(call.owner, request))


def _get_task(service: A2AService, call: Call) -> Any:
    params = _parse(_TaskIdParams, call.params)
    return service.get_task(call.owner, params.id, params.history_length).wire()


def _list_tasks(service: A2AService, call: Call) -> Any:
    return service.list_tasks(call.owner, _parse(ListTasksRequest, call.params)).wire()


def _cancel(service: A2AService, call: Call) -> Any:
    return service.cancel_task(call.owner, _parse(_TaskIdParams, call.params).id).wire()


def _subscribe(service: A2AService, call: Call) -> Any:
    return Streamed(service.subscribe(call.owner, _parse(_TaskIdParams, call.params).id))


class _ConfigParams(_Params):
    task_id: str = Field(min_length=1)
    id: str = Field(min_length=1)


class _TaskConfigsParams(_Params):
    task_id: str = Field(min_length=1)


def _create_config(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    config = _parse(TaskPushNotificationConfig, call.params)
    if not config.task_id:
        raise errors.invalid_field("taskId", "is required")
    return get_push().create(call.owner, config.task_id, config).wire()


def _get_config(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    params = _parse(_ConfigParams, call.params)
    return get_push().get(call.owner, params.task_id, params.id).wire()


def _list_configs(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    params = _parse(_TaskConfigsParams, call.params)
    return get_push().list(call.owner, params.task_id).wire()


def _delete_config(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    params = _parse(_ConfigParams, call.params)
    get_push().delete(call.owner, params.task_id, params.id)
    return {}  # google.protobuf.Empty


# 0.3: {taskId, pushNotificationConfig: {id, url, token, authentication: {schemes, credentials}}}


def _v03_set_config(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    task_id = call.params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise errors.invalid_field("taskId", "is required")
    try:
        config = _parse(TaskPushNotificationConfig, v03.push_config_from_v03(call.params))
        created = get_push().create(call.owner, task_id, config.for_payload_version("0.3"))
        return v03.push_config_to_v03(created)
    except errors.InvalidParamsError as exc:  # name the fields as the 0.3 client sent them
        violations = [
            (field if field == "taskId" else f"pushNotificationConfig.{field}", why)
            for field, why in exc.violations
        ]
        raise errors.InvalidParamsError(violations=violations, **exc.metadata) from None


def _v03_get_config(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    task_id, config_id = v03.config_ids(call.params)
    if config_id is None:  # 0.3 allowed one config per task: the first one
        configs = get_push().list(call.owner, task_id).configs or []
        if not configs:
            raise errors.TaskNotFoundError(
                f"Task {task_id} has no push notification config", taskId=task_id
            )
        return v03.push_config_to_v03(configs[0])
    return v03.push_config_to_v03(get_push().get(call.owner, task_id, config_id))


def _v03_list_configs(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    task_id, _ = v03.config_ids(call.params)
    configs = get_push().list(call.owner, task_id).configs or []
    return [v03.push_config_to_v03(c) for c in configs]


def _v03_delete_config(service: A2AService, call: Call) -> Any:
    get_push().require_enabled()
    task_id, config_id = v03.config_ids(call.params)
    if config_id is None:
        raise errors.invalid_field("pushNotificationConfigId", "is required")
    get_push().delete(call.owner, task_id, config_id)
    return None


def _no_extended_card(service: A2AService, call: Call) -> Any:
    raise errors.UnsupportedOperationError(
        "This agent has no extended agent card (capabilities.extendedAgentCard is false)"
    )


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
    "GetExtendedAgentCard": _no_extended_card,
}


# 0.3 methods: translate params in, results out.


def _v03_send_request(call: Call) -> SendMessageRequest:
    request = _parse(SendMessageRequest, v03.send_params_from_v03(call.params))
    inline = request.configuration.task_push_notification_config if request.configuration else None
    if request.configuration is not None and inline is not None:  # a 0.3 receiver's webhook
        request.configuration.task_push_notification_config = inline.for_payload_version("0.3")
    return request


def _v03_send_result(result: SendMessageResponse) -> Any:
    return v03.task_to_v03(result.task) if result.task else v03.message_to_v03(result.message)


def _v03_send(service: A2AService, call: Call) -> Any:
    request = _v03_send_request(call)
    return Waiting(service.accept_message(call.owner, request), _v03_send_result)


def _v03_stream(service: A2AService, call: Call) -> Any:
    request = _v03_send_request(call)
    return Streamed(service.open_message_stream(call.owner, request))


def _v03_get(service: A2AService, call: Call) -> Any:
    params = _parse(_TaskIdParams, call.params)
    return v03.task_to_v03(service.get_task(call.owner, params.id, params.history_length))


def _v03_cancel(service: A2AService, call: Call) -> Any:
    return v03.task_to_v03(service.cancel_task(call.owner, _parse(_TaskIdParams, call.params).id))


V03_METHODS: dict[str, Handler] = {
    "message/send": _v03_send,
    "message/stream": _v03_stream,
    "tasks/get": _v03_get,
    "tasks/cancel": _v03_cancel,
    "tasks/resubscribe": _subscribe,
    "tasks/pushNotificationConfig/set": _v03_set_config,
    "tasks/pushNotificationConfig/get": _v03_get_config,
    "tasks/pushNotificationConfig/list": _v03_list_configs,
    "tasks/pushNotificationConfig/delete": _v03_delete_config,
    "agent/getAuthenticatedExtendedCard": _no_extended_card,
}

METHODS = {"1.0": V10_METHODS, "0.3": V03_METHODS}
# Where a method of one version lives in the other, to tell the client what to send.
_COUNTERPART = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/resubscribe": "SubscribeToTask",
    "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
}
_COUNTERPART.update({v: k for k, v in list(_COUNTERPART.items())})


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
    raw = request.headers.get("a2a-version")
    if raw is None:
        raw = next((v for k, v in request.query_params.items() if k.lower() == "a2a-version"), None)
    raw = (raw or "").strip()
    version = "0.3" if not raw else ".".join(raw.split(".")[:2])
    if version not in SUPPORTED_VERSIONS:
        raise errors.VersionNotSupportedError(
            f"A2A-Version {raw} is not supported by the JSON-RPC interface; send the header "
            "'A2A-Version: 1.0' (or 'A2A-Version: 0.3' for the 0.3 methods)",
            requested=raw,
            supported=",".join(SUPPORTED_VERSIONS),
        )
    return version


def _reply(id_: Any, *, result: Any = None, error: Exception | None = None) -> JSONResponse:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": id_}
    if error is not None:
        body["error"] = error_object(error)
    else:
        body["result"] = result
    return JSONResponse(body, media_type="application/json")


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
    id_ = payload.get("id")
    if "id" in payload and (isinstance(id_, bool) or not isinstance(id_, str | int | float | None)):
        raise RpcError(INVALID_REQUEST, "id must be a string, a number or null", "INVALID_REQUEST")
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
    if isinstance(id_, bool) or not isinstance(id_, str | int | float | None):
        return None, True
    return id_, True


jsonrpc_router = APIRouter()


@jsonrpc_router.post("/")
async def jsonrpc_endpoint(request: Request) -> Response:
    id_: Any = None
    has_id = True  # until the request is known to be a notification, errors are answered
    try:
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() not in (
            "application/json",
            "application/a2a+json",
        ):
            raise UnsupportedMediaType(content_type)
        try:
            payload = json.loads(await read_body(request))
        except (ValueError, UnicodeDecodeError) as exc:
            raise RpcError(PARSE_ERROR, f"Invalid JSON payload: {exc}", "JSON_PARSE") from None
        id_, has_id = _detect_id(payload)
        method, params = _request_object(payload)
        # The version is checked once the id is known, so its error echoes the request's id.
        version = _version(request)
        handler = METHODS[version].get(method)
        if handler is None:
            raise _method_not_found(method, version)
        call = Call(id_, method, params, principal(request), version)
        service = get_service()
        result = await run_in_threadpool(handler, service, call)
        if not has_id and isinstance(result, Waiting):
            # Nothing to keep alive (204 has no body): a blocking notification answers once
            # its task settles, as a blocking call does.
            await wait_settled(service, result.accepted)
    except Exception as exc:  # every failure is a JSON-RPC error object
        if not has_id:
            _classify(exc)  # logs what must be logged; a notification gets no reply (§4.1)
            return Response(status_code=204)
        return _reply(id_, error=exc)
    if not has_id:
        return Response(status_code=204)  # a notification: no response (JSON-RPC 2.0 §4.1)
    if isinstance(result, Streamed):
        convert = v03.event_to_v03 if version == "0.3" else StreamResponse.wire

        def render(event: StreamResponse) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": id_, "result": convert(event)}

        return sse_response(event_frames(service, result.start, render))
    if isinstance(result, Waiting):
        convert = result.convert
        # A failure during the wait is still an error object with the request's id (after
        # keep-alive bytes as before them: JSON-RPC answers are HTTP 200 either way).
        return await send_response(
            service,
            result.accepted,
            lambda answer: _reply(id_, result=convert(answer)),
            lambda exc: _reply(id_, error=exc),
            media_type="application/json",
        )
    return _reply(id_, result=result)
