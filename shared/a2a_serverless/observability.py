"""Logs, metrics and traces of every function (Powertools Logger, EMF metrics, Tracer).

- Logs: Powertools JSON lines. Per-request keys live in a scope held by a context variable,
  never in the Logger's process-wide keys (one process serves concurrent requests).
- Metrics: CloudWatch EMF blobs on stdout, buffered per scope and printed when it ends.
- Traces: Powertools Tracer inside Lambda only; only botocore is patched, so webhook URLs
  never reach X-Ray. Requests are logged by method, route, status and time; events never.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache, wraps
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from a2a_serverless.settings import get_settings

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

PACKAGE_LOGGER = "a2a_serverless"
request_logger = logging.getLogger("a2a_serverless.requests")

# -- metric and dimension names (the one place) --------------------------------------------


class Metric(Enum):
    """Every metric the functions emit: (name, unit)."""

    TASKS = ("Tasks", "Count")  # a turn ended; dimension `state` (see task_ended)
    STEP_DURATION = ("StepDuration", "Milliseconds")  # one flow step (FlowWorker)
    WEBHOOK_DELIVERIES = ("WebhookDeliveries", "Count")  # POSTs a webhook accepted (2xx)
    WEBHOOK_FAILURES = ("WebhookFailures", "Count")  # failed or refused POST attempts
    WEBHOOK_DEAD_LETTERS = ("WebhookDeadLetters", "Count")  # events given up on
    STREAMS_OPENED = ("StreamsOpened", "Count")  # SSE responses started
    STREAMS_CLOSED = ("StreamsClosed", "Count")  # ... and ended (settled, timed out, hung up)

    @property
    def metric_name(self) -> str:
        return self.value[0]

    @property
    def unit(self) -> str:
        return self.value[1]


STATE_DIMENSION = "state"

_Point = tuple[Metric, float, tuple[tuple[str, str], ...]]


# -- scopes: per-request log keys and metrics ----------------------------------------------


class _MetricsBuffer:
    """One request's or invocation's metrics, printed as EMF when it ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a request's threads add to it concurrently
        self._points: list[_Point] = []
        self._flushed = False
        self.scope: _Scope | None = None  # whose correlation keys the blobs carry

    def add(self, point: _Point) -> None:
        with self._lock:
            if not self._flushed:
                self._points.append(point)
                return
        # Added after the end (e.g. a stream generator finalised after its response):
        # printed on its own rather than lost.
        _print_emf([point], self._keys())

    def flush(self) -> None:
        with self._lock:
            points, self._points, self._flushed = self._points, [], True
        if points:
            _print_emf(points, self._keys())

    def _keys(self) -> Mapping[str, Any]:
        return self.scope.keys if self.scope else {}


@dataclass
class _Scope:
    # Replaced, never mutated (copy on write): a log line being formatted in one thread
    # iterates a dict no other thread changes.
    keys: Mapping[str, Any]
    metrics: _MetricsBuffer | None


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "a2a_observability_scope", default=None
)


@contextlib.contextmanager
def invocation(**keys: Any) -> Iterator[None]:
    """One request or Lambda invocation: its own log keys (added to those of an enclosing
    scope: a Mangum request inside its Lambda invocation), and its own metrics, printed (EMF)
    when it ends, however it ends."""
    parent = _SCOPE.get()
    metrics = _MetricsBuffer()
    metrics.scope = _Scope({**(parent.keys if parent else {}), **_clean(keys)}, metrics)
    token = _SCOPE.set(metrics.scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        metrics.flush()


@contextlib.contextmanager
def log_context(**keys: Any) -> Iterator[None]:
    """Extra log keys for a block (e.g. one record of a batch); metrics still go to the
    enclosing invocation."""
    parent = _SCOPE.get()
    base = parent.keys if parent else {}
    token = _SCOPE.set(_Scope({**base, **_clean(keys)}, parent.metrics if parent else None))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def annotate(**keys: Any) -> None:
    """Add keys (e.g. a task id once known) to the current scope's later log lines, in every
    thread and task of the request. Outside any scope this does nothing."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.keys = {**scope.keys, **_clean(keys)}


def current_log_keys() -> Mapping[str, Any]:
    scope = _SCOPE.get()
    return scope.keys if scope else {}


def _clean(keys: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in keys.items() if v is not None and v != ""}


class _ScopeKeys(logging.Filter):
    """Adds the current scope's keys to every record the function's handler writes (the
    Powertools formatter puts record attributes into the JSON line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in current_log_keys().items():
            setattr(record, key, value)
        return True


# -- metrics -------------------------------------------------------------------------------


def emit(metric: Metric, value: float = 1, *, now: bool = False, **dimensions: str) -> None:
    """Record a metric in the current invocation (printed when it ends); `now`, or outside
    any invocation, prints it at once, so nothing is ever dropped."""
    point: _Point = (metric, float(value), tuple(sorted(dimensions.items())))
    scope = _SCOPE.get()
    if scope is None or scope.metrics is None or now:
        _print_emf([point], current_log_keys())
    else:
        scope.metrics.add(point)


def task_ended(state: str) -> None:
    """A turn ended in `state` (a TaskState): terminal, or interrupted (input/auth
    required). Dimension value without the prefix: COMPLETED, INPUT_REQUIRED, ..."""
    emit(Metric.TASKS, state=str(state).removeprefix("TASK_STATE_"))  # STATE_DIMENSION


_emf_lock = threading.Lock()


# Scope keys a blob carries as (non-dimension) properties: which request or task it is from,
# searchable in CloudWatch Logs Insights at no metric cost.
_EMF_PROPERTIES = ("correlation_id", "function_request_id", "task_id")


def _print_emf(points: list[_Point], keys: Mapping[str, Any]) -> None:
    """One EMF blob per dimension set (EMF dimensions apply to every metric of a blob)."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
        AmazonCloudWatchEMFProvider,
    )

    if is_metrics_disabled():  # POWERTOOLS_METRICS_DISABLED (or POWERTOOLS_DEV)
        return
    groups: dict[tuple[tuple[str, str], ...], list[tuple[Metric, float]]] = {}
    for metric, value, dimensions in points:
        groups.setdefault(dimensions, []).append((metric, value))
    lines = []
    for dimensions, metrics in groups.items():
        # A fresh provider per blob: its state is its own (unlike `Metrics`' class state).
        provider = AmazonCloudWatchEMFProvider(
            namespace=get_settings().powertools_metrics_namespace
        )
        for name, dimension in dimensions:
            provider.add_dimension(name=name, value=dimension)
        for metric, value in metrics:
            provider.add_metric(name=metric.metric_name, unit=metric.unit, value=value)
        for key in _EMF_PROPERTIES:
            if keys.get(key):
                provider.add_metadata(key=key, value=str(keys[key]))
        lines.append(json.dumps(provider.serialize_metric_set(), separators=(",", ":")))
    # One write per blob under a lock: concurrent prints would interleave their lines.
    with _emf_lock:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()


# -- the logger ----------------------------------------------------------------------------


@lru_cache(maxsize=1)
def function_logger() -> Logger:
    """The function's Powertools logger (one per process); `a2a_serverless.*` loggers write
    through it, with the current scope's keys."""
    logger = Logger()  # service name and level from POWERTOOLS_SERVICE_NAME / LOG_LEVEL
    logging.getLogger(PACKAGE_LOGGER)  # exists before its config is copied
    copy_config_to_registered_loggers(source_logger=logger, include={PACKAGE_LOGGER})
    handler = logger.registered_handler
    if not any(isinstance(f, _ScopeKeys) for f in handler.filters):
        handler.addFilter(_ScopeKeys())
    return logger


# -- tracing -------------------------------------------------------------------------------


def tracing_enabled() -> bool:
    settings = get_settings()
    return bool(settings.lambda_task_root) and not settings.powertools_trace_disabled


@lru_cache(maxsize=1)
def function_tracer() -> Tracer | None:
    """The Powertools Tracer inside Lambda (None elsewhere), patching nothing by itself."""
    if not tracing_enabled():
        return None
    from aws_lambda_powertools import Tracer  # imports the X-Ray SDK: only when tracing

    # Powertools also turns itself off under `sam local` (AWS_SAM_LOCAL).
    return Tracer(auto_patch=False)


def trace_aws_calls() -> None:
    """Inside Lambda, make AWS calls (botocore only) subsegments. Imports botocore, so a
    function that never calls AWS (the card) does not call this."""
    tracer = function_tracer()
    if tracer is not None:
        tracer.patch(["botocore"])  # idempotent


def lambda_context_keys(context: Any) -> dict[str, Any]:
    """The keys Powertools' `inject_lambda_context` logs, as scope keys: its own way sets
    them process-wide, where the local stack's concurrent functions would mix them."""
    return {
        "function_name": getattr(context, "function_name", None),
        "function_memory_size": getattr(context, "memory_limit_in_mb", None),
        "function_arn": getattr(context, "invoked_function_arn", None),
        "function_request_id": getattr(context, "aws_request_id", None),
    }


def instrumented_handler(
    *,
    correlation_id: Callable[[dict[str, Any]], Any] | None = None,
    capture_response: bool = True,
    trace_aws: bool = True,
) -> Callable[[Callable[[dict[str, Any], Any], Any]], Callable[[dict[str, Any], Any], Any]]:
    """A plain Lambda handler with JSON logs keyed by its invocation (Lambda context, cold
    start, `correlation_id(event)`), a Tracer segment inside Lambda (and its AWS calls as
    subsegments unless `trace_aws` is false), and its metrics printed as EMF when it returns
    or raises. The event itself is never logged: HTTP events carry Authorization headers."""

    def decorate(
        handler: Callable[[dict[str, Any], Any], Any],
    ) -> Callable[[dict[str, Any], Any], Any]:
        function_logger()
        cold = [True]

        @wraps(handler)
        def scoped(event: dict[str, Any], context: Any) -> Any:
            cold_start, cold[0] = cold[0], False
            with invocation(
                **lambda_context_keys(context),
                cold_start=cold_start,
                correlation_id=correlation_id(event) if correlation_id else None,
            ):
                return handler(event, context)

        tracer = function_tracer()
        if tracer is None:
            return scoped
        if trace_aws:
            trace_aws_calls()
        return tracer.capture_lambda_handler(scoped, capture_response=capture_response)

    return decorate


# -- HTTP requests (every function's app: Web Adapter, Mangum and the local gateway) -------

# Set by Web Adapter processes whose requests carry the X-Ray trace header (see below).
_propagate_trace_header = False


def enable_web_adapter_tracing() -> None:
    """Web Adapter functions: copy each request's trace header into `_X_AMZN_TRACE_ID`
    (RequestScope), as Lambda's runtime would, so AWS calls attach to the invocation's segment.
    Safe process-wide: Lambda runs one invocation at a time per environment."""
    global _propagate_trace_header
    _propagate_trace_header = function_tracer() is not None
    trace_aws_calls()


def _json_header(headers: Mapping[bytes, bytes], name: bytes) -> dict[str, Any]:
    raw = headers.get(name)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _task_id_from_path(path: str) -> str | None:
    """`[/{tenant}]/tasks/{id}[:cancel|:subscribe|/pushNotificationConfigs/...]`."""
    parts = path.split("/")
    for index in (1, 2):
        if len(parts) > index + 1 and parts[index] == "tasks":
            task_id = parts[index + 1].removesuffix(":cancel").removesuffix(":subscribe")
            return task_id or None
    return None


class RequestScope:
    """ASGI middleware: each request runs in its own invocation scope (correlation id = API
    Gateway's request id, task id once known, metrics printed when the response ends,
    streams included) and ends with one log line (method, route path, status, duration)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._cold = True  # one app per function process

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        # Web Adapter: API Gateway's requestContext and Lambda's context arrive as headers;
        # Mangum: in the scope.
        request_context = _json_header(headers, b"x-amzn-request-context") or (
            (scope.get("aws.event") or {}).get("requestContext") or {}
        )
        # Lambda's context (Web Adapter only; Mangum's invocation scope has it already).
        lambda_context = _json_header(headers, b"x-amzn-lambda-context")
        env_config = lambda_context.get("env_config")
        if _propagate_trace_header:
            trace = headers.get(b"x-amzn-trace-id", b"").decode("latin-1") or str(
                lambda_context.get("xray_trace_id") or ""
            )
            if trace:
                os.environ["_X_AMZN_TRACE_ID"] = trace
        cold_start, self._cold = self._cold, False
        status: list[int] = []

        async def send_status(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        started = time.perf_counter()
        with invocation(
            function_name=env_config.get("function_name") if isinstance(env_config, dict) else None,
            function_arn=lambda_context.get("invoked_function_arn"),
            function_request_id=lambda_context.get("request_id"),
            cold_start=cold_start,
            correlation_id=request_context.get("requestId"),
            task_id=_task_id_from_path(scope.get("path", "")),
        ):
            try:
                await self.app(scope, receive, send_status)
            except Exception:
                status.append(500)  # what the server answers to an unhandled error
                raise
            finally:
                request_logger.info(
                    "request handled",
                    extra={
                        "http_method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status[0] if status else None,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                    },
                )
