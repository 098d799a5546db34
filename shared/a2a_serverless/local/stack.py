"""Build the stack of template.yaml inside moto, in this process, and route HTTP like API Gateway.

`LocalStack` orchestrates: moto_fidelity / moto_speedups (moto patches), resources (what the
template creates), events (event source mappings), gateway (the routes), calls (the IAM call
log, with A2A_LOCAL_CALL_LOG). moto has no Bedrock: A2A_LOCAL_REAL_BEDROCK=1 sends the Bedrock
flow's calls to the real service with the developer's own credentials.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from a2a_serverless.local import moto_fidelity, moto_speedups, resources
from a2a_serverless.local.admin import LocalAdmin
from a2a_serverless.local.authorizers import GatewayResponses, Guard, LocalUsagePlan
from a2a_serverless.local.calls import CALL_LOG_ENV, CallRecorder, acting_as
from a2a_serverless.local.content_urls import PREFIX as OBJECTS_PREFIX
from a2a_serverless.local.content_urls import ObjectUrls
from a2a_serverless.local.events import EventSources
from a2a_serverless.local.gateway import (
    LOCAL_PRINCIPAL_HEADER,
    FunctionApp,
    Gateway,
    LambdaConcurrency,
)
from a2a_serverless.local.issuer import ISSUER_PATH, LOCAL_AUDIENCE, LocalIssuer
from a2a_serverless.local.patching import Patches
from a2a_serverless.local.resources import (
    ACCOUNT,
    REGION,
    RESOURCE_ENV,
    STACK,
    FunctionSpec,
    Handler,
    LambdaContext,
    project_root,
)
from a2a_serverless.local.sigv4 import IamUsers
from a2a_serverless.local.template import (
    Resolver,
    load_template,
    parameter_defaults,
    template_settings,
    with_settings,
)
from a2a_serverless.local.ttl import (
    Sweeper,
    drop_finished_executions,
    forget_finished_threads,
    local_ttl_shift,
)

if TYPE_CHECKING:
    from a2a_serverless.local.inspector.records import InspectorRecords
    from a2a_serverless.local.meter import TaskMeter

# Names other modules import from here.
__all__ = [
    "ACCOUNT",
    "LOCAL_PARAMETERS",
    "LOCAL_PRINCIPAL_HEADER",
    "REGION",
    "STACK",
    "FunctionSpec",
    "Gateway",
    "LocalStack",
    "project_root",
]

logger = logging.getLogger(__name__)

# Parameter values of the local stack where the template's defaults are for deployment: the
# developer's webhook receiver runs on this machine, over http.
# Auth: open (X-Local-Principal names the caller); `scripts/dev --param Auth=ApiKey|Jwt|Iam`
# runs the template's authentication as deployed.
LOCAL_PARAMETERS = {
    "PushAllowHttp": "true",
    "PushAllowHosts": "127.0.0.1,localhost,::1",
    "Auth": "None",
}
# The credentials and region every boto3 client of the stack picks up.
_BASE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "MOTO_ALLOW_NONEXISTENT_REGION": "true",
}


def endpoint_env(endpoint: str) -> dict[str, str]:
    """The environment of a process whose AWS calls go to a moto server at `endpoint`: the
    stack's credentials and region."""
    return {**_BASE_ENV, "AWS_ENDPOINT_URL": endpoint}


# GIL switch interval while a stack runs: its many threads share one GIL, and the default's
# forced hand-overs cost CPU under load. A2A_LOCAL_SWITCH_INTERVAL overrides (0: keep default).
SWITCH_INTERVAL_ENV = "A2A_LOCAL_SWITCH_INTERVAL"
SWITCH_INTERVAL_SECONDS = 0.02


def _switch_interval() -> float | None:
    """The GIL switch interval the stack runs with (None: the interpreter's own)."""
    value = float(os.environ.get(SWITCH_INTERVAL_ENV) or SWITCH_INTERVAL_SECONDS)
    return value if value > 0 else None


# GC first threshold while a stack runs: moto holds every item as objects, and the default's
# frequent full collections pause every thread. A2A_LOCAL_GC_THRESHOLD overrides (0: keep default).
GC_THRESHOLD_ENV = "A2A_LOCAL_GC_THRESHOLD"
GC_THRESHOLD = 10_000


def _gc_threshold() -> int | None:
    """The collector's first threshold the stack runs with (None: the interpreter's own)."""
    value = int(os.environ.get(GC_THRESHOLD_ENV) or GC_THRESHOLD)
    return value if value > 0 else None


# The account's Lambda concurrency quota as the local API meets it (local/gateway.py
# LambdaConcurrency): unset, no limit; a new account's quota may be as low as 10.
ACCOUNT_CONCURRENCY_ENV = "A2A_LOCAL_ACCOUNT_CONCURRENCY"


def _account_concurrency() -> int | None:
    value = os.environ.get(ACCOUNT_CONCURRENCY_ENV)
    return int(value) if value else None


# A directory: the stack traces allocations (tracemalloc) and dumps a snapshot there every
# MEMORY_SNAPSHOT_SECONDS, to diff with `tracemalloc.Snapshot.load` (finding a slow leak of a
# long-running stack, scripts/soak). Costs time: for diagnosis only.
MEMORY_SNAPSHOTS_ENV = "A2A_LOCAL_TRACEMALLOC_DIR"
MEMORY_SNAPSHOT_SECONDS = 30.0


def _memory_snapshots(directory: str | None, stopped: threading.Event) -> None:
    if not directory:
        return
    import time
    import tracemalloc

    Path(directory).mkdir(parents=True, exist_ok=True)
    if not tracemalloc.is_tracing():
        tracemalloc.start(8)
    started = time.monotonic()

    def dump() -> None:
        while not stopped.wait(MEMORY_SNAPSHOT_SECONDS):
            elapsed = int(time.monotonic() - started)
            tracemalloc.take_snapshot().dump(str(Path(directory) / f"{elapsed:06d}.snapshot"))

    threading.Thread(target=dump, name="memory-snapshots", daemon=True).start()


# 1: the Bedrock flow calls the real Amazon Bedrock (the developer's credentials, region and
# bill); unset, the local stack says it does not emulate Bedrock.
REAL_BEDROCK_ENV = "A2A_LOCAL_REAL_BEDROCK"
BEDROCK_NOT_EMULATED = (
    "Amazon Bedrock is not emulated by the local stack. To call the real Bedrock with your "
    "own AWS credentials (billed to your account), start the stack with "
    f"{REAL_BEDROCK_ENV}=1, e.g. `{REAL_BEDROCK_ENV}=1 a2a-serverless dev`."
)


def _bedrock_client_factory() -> tuple[Callable[..., Any], bool]:
    """How the Bedrock flow makes its client in this stack, and whether its calls go to the
    real Bedrock. Read before the stack puts its credentials in place of the developer's."""
    from a2a_serverless.flows import bedrock

    if os.environ.get(REAL_BEDROCK_ENV, "").lower() not in ("1", "true", "yes"):

        def not_emulated(config: Any) -> Any:
            raise bedrock.BedrockFailure(BEDROCK_NOT_EMULATED, "NotEmulatedLocally")

        return not_emulated, False
    import boto3

    session = boto3.Session()
    if session.get_credentials() is None:  # resolved now (refreshed by botocore if temporary)
        message = f"{REAL_BEDROCK_ENV} is set but no AWS credentials were found for Bedrock."

        def no_credentials(config: Any) -> Any:
            raise bedrock.BedrockFailure(message, "NoCredentials")

        return no_credentials, True
    region = session.region_name
    new_client = bedrock.new_client

    def real(config: Any) -> Any:
        return new_client(config, session=session, default_region=region)

    return real, True


def _inspector(stack: LocalStack, auth_mode: str) -> Any:
    from a2a_serverless.local.inspector.app import create_app  # Jinja2: at first use

    return create_app(stack, auth_mode)


def _signing_credentials() -> tuple[str, str, str | None]:
    """The credentials the functions' clients sign with: boto3's default session's (moto's
    mock puts its own in the environment)."""
    import boto3

    credentials = boto3._get_default_session().get_credentials()
    if credentials is None:
        raise RuntimeError("the local stack's boto3 session has no credentials")
    frozen = credentials.get_frozen_credentials()
    return frozen.access_key or "", frozen.secret_key or "", frozen.token


def _attributed_handler(handler: Handler, logical_id: str, stack_id: str) -> Handler:
    """A Lambda handler whose AWS calls are attributed to its function (local/calls.py)."""

    def invoke(event: dict[str, Any], context: Any) -> Any:
        with acting_as(logical_id, stack_id):
            return handler(event, context)

    return invoke


class _AttributedApp:
    """A function's ASGI app whose AWS calls are attributed to the function (the context
    variable reaches the request's tasks and Starlette's worker threads)."""

    def __init__(self, app: Any, logical_id: str, stack_id: str) -> None:
        self.app = app
        self.logical_id = logical_id
        self.stack_id = stack_id

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        with acting_as(self.logical_id, self.stack_id):
            await self.app(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


class LocalStack:
    """moto + the real handlers, created from template.yaml.

    Stacks of one process nest: each saves the environment and moto patches it replaces and
    restores them when it stops, so they must stop in the reverse order of their starts (an
    older stack stopping first would pull the environment from under a newer one).
    """

    _live: ClassVar[list[LocalStack]] = []

    def __init__(
        self,
        root: Path | None = None,
        parameters: dict[str, str] | None = None,
        env_overrides: dict[str, str] | None = None,
        event_sources: bool | str = True,
        secrets: dict[str, str] | None = None,
        meter: bool = False,
    ) -> None:
        self.root = root or project_root()
        # Secrets Manager secrets (name -> SecretString) the stack holds from its start, e.g. the
        # headers for a remote agent a flow delegates to (aws/secrets.py).
        self.secrets = dict(secrets or {})
        self.template = load_template(self.root / "template.yaml")
        # A template's settings (its Mappings) are set like its parameters: with_settings.
        self.parameters = {
            **parameter_defaults(self.template),
            **template_settings(self.template),
            **LOCAL_PARAMETERS,
            **(parameters or {}),
        }
        # True: pollers run in threads (as deployed); "manual": mappings built, polled by the
        # caller (deterministic tests); False: none.
        modes: dict[bool | str, str] = {True: "threads", False: "off"}
        self.event_source_mode = modes.get(event_sources, str(event_sources))
        if self.event_source_mode not in ("threads", "manual", "off"):
            raise ValueError(f"event_sources must be True, False or 'manual': {event_sources!r}")
        self.event_sources: EventSources | None = None
        self.queues: dict[str, str] = {}  # logical id -> queue URL
        self.buckets: list[str] = []  # bucket names
        self.env_overrides = env_overrides or {}
        self.functions: dict[str, FunctionSpec] = {}
        self.env: dict[str, str] = {}
        self._mock: Any = None
        self._patches = Patches()
        self._earlier_threads: frozenset[threading.Thread] = frozenset()
        self._ready = False  # set once start() has put every resource and setting in place
        self._handlers: dict[str, Handler] = {}
        self._apps: dict[str, Any] = {}
        self._saved_env: dict[str, str | None] = {}
        self.recorder: CallRecorder | None = None
        self.stack_id = uuid.uuid4().hex  # names this stack's calls (local/calls.py)
        # Execution role ARN -> logical id of the state machine that runs with it.
        self._state_machine_roles: dict[str, str] = {}
        # The template's values for this stack (set by start(); the gateway reads the Api).
        self.resolver: Resolver | None = None
        # What AWS forgets over time (TTL deletes, stream trim, old executions): local/ttl.py.
        # Runs in a thread with the event sources; `sweeper.sweep()` runs it by hand.
        self.sweeper: Sweeper | None = None
        self._stopped = threading.Event()  # ends the stack's own diagnostic threads
        self._saved_switch_interval: float | None = None
        self._saved_gc_threshold: tuple[int, int, int] | None = None
        # What the inspector shows that the stack records as it runs (set by start()).
        self.records: InspectorRecords | None = None
        # The units each task consumed (local/meter.py), when `meter` (set by start()).
        self.metered = meter
        self.meter: TaskMeter | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> LocalStack:
        moto_fidelity.check()  # raises before anything is set up
        speedups = moto_speedups.chosen(os.environ.get(moto_speedups.ENV))  # unknown: raises
        LocalStack._live.append(self)
        interval = _switch_interval()
        if interval is not None:
            self._saved_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(interval)
        threshold = _gc_threshold()
        if threshold is not None:
            self._saved_gc_threshold = gc.get_threshold()
            gc.set_threshold(threshold, *self._saved_gc_threshold[1:])
        # Executions of earlier stacks may still run in these (moto_fidelity.lambda_invoke).
        self._earlier_threads = frozenset(threading.enumerate()) - {threading.main_thread()}
        bedrock_client, real_bedrock = _bedrock_client_factory()
        self._set_env(_BASE_ENV)
        from moto import mock_aws
        from moto.core.config import DefaultConfig, default_user_config

        config: DefaultConfig = {"stepfunctions": {"execute_state_machine": True}}
        if real_bedrock:  # moto lets these requests go out
            config["core"] = default_user_config["core"].copy()
            config["core"]["passthrough"] = {"urls": [], "services": ["bedrockruntime"]}
        self._mock = mock_aws(config=config)
        self._mock.start()
        from a2a_serverless.flows import bedrock

        self._patches.replace(bedrock, "new_client", bedrock_client)
        self._record_calls()
        moto_fidelity.untracked_models(self._patches)
        moto_fidelity.empty_partitions_dropped(self._patches)
        moto_fidelity.serialize_calls(self._patches)
        moto_fidelity.fifo_groups_in_order(self._patches)
        moto_fidelity.transaction_placeholders_checked(self._patches)
        moto_speedups.apply(self._patches, speedups)
        from a2a_serverless.local.inspector import records

        records.install(self, self._patches)
        template_resources = self.template["Resources"]
        resolver = self.resolver = Resolver(
            {**self.parameters, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT},
            {},
            {},
            conditions=self.template.get("Conditions") or {},
            mappings=with_settings(self.template.get("Mappings") or {}, self.parameters),
        )
        resources.create_tables(template_resources, resolver)
        self.buckets = resources.create_buckets(template_resources, resolver)
        self.queues = resources.create_queues(template_resources, resolver)
        self.functions = resources.create_functions(template_resources, resolver, self.root)
        # Looked up per call: scripts/bench wraps `_invoke` of a started stack to count them.
        moto_fidelity.lambda_invoke(
            self._patches,
            lambda name, body, headers: self._invoke(name, body, headers),
            self._earlier_threads,
        )
        resources.create_state_machines(template_resources, resolver, self._state_machine_roles)
        resources.create_secrets(self.secrets)
        self.env = resources.function_env(self.template, resolver, self.functions)
        # A setting the developer exported wins over the template's value (resources do not:
        # they name what this stack just created).
        exported = {
            key: os.environ[key]
            for key in self.env
            if key in os.environ and key not in RESOURCE_ENV and key not in _BASE_ENV
        }
        self._set_env({**self.env, **exported, **self.env_overrides})
        from a2a_serverless import wiring

        wiring.reset()
        if self.metered:  # before the functions make their clients (lazily)
            import boto3

            from a2a_serverless.local.meter import TaskMeter

            self.meter = TaskMeter(self)
            self.meter.install(boto3._get_default_session().events, self._patches)
        if self.recorder is not None:
            self.recorder.write_stack(
                {
                    "parameters": resolver.parameters,
                    "refs": resolver.refs,
                    "attributes": resolver.attributes,
                    # Resources named away from the template's (a test's deliberate
                    # misconfiguration): calls outside the roles are expected there.
                    "overrides": sorted(set(self.env_overrides) & RESOURCE_ENV),
                }
            )
        if self.event_source_mode != "off":
            self.event_sources = EventSources(
                resources.event_source_mappings(
                    template_resources, resolver, self.functions, self.queues, self._event_invoker
                )
            )
        retention_days = int(self.parameters.get("RetentionDays", 30))
        self.sweeper = Sweeper(
            self._tables,
            self._stream_read_up_to,
            shift=local_ttl_shift(retention_days),
            retention_seconds=retention_days * 86400,
            buckets=self._buckets,
        )
        self._ready = True
        _memory_snapshots(os.environ.get(MEMORY_SNAPSHOTS_ENV), self._stopped)
        if self.recorder is not None:
            self.recorder.armed = True  # every resource and setting of the stack is in place
        if self.event_sources is not None and self.event_source_mode == "threads":
            self.event_sources.start()
            self.sweeper.start()
        return self

    def stop(self) -> None:
        if self._mock is not None and self._ready:
            self._stop_waiting_executions()  # a Wait of hours must not wake into a stopped stack
        self._ready = False
        self._stopped.set()
        if self.sweeper is not None:
            self.sweeper.stop()
            self.sweeper = None
        if self in LocalStack._live:
            if LocalStack._live[-1] is not self:
                raise RuntimeError(
                    "a newer local stack is still running: stop stacks in the reverse order "
                    "of their starts"
                )
            LocalStack._live.remove(self)
        if self.event_sources is not None:
            self.event_sources.stop()
            self.event_sources = None
        if self.meter is not None:
            self.meter.uninstall()
        self._patches.undo()
        if self.recorder is not None:
            self.recorder.detach()
            self.recorder = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        if self._saved_switch_interval is not None:
            sys.setswitchinterval(self._saved_switch_interval)
            self._saved_switch_interval = None
        if self._saved_gc_threshold is not None:
            gc.set_threshold(*self._saved_gc_threshold)
            self._saved_gc_threshold = None
        from a2a_serverless import wiring

        wiring.reset()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self, timeout: float = 30.0) -> None:
        """Back to what `start()` gives, without restarting moto: running executions waited
        for (those of state machines that wait, stopped), then empty tables, buckets, queues
        and execution lists, the start's secrets, fresh settings, wiring and handler modules.
        Only for a stack without event sources; the environment is the caller's."""
        if not self._ready or self.resolver is None or self.sweeper is None:
            raise RuntimeError("the local stack is not started")
        if self.event_source_mode != "off":
            raise RuntimeError("reset() needs a stack started with event_sources=False")
        sfn = self._client("stepfunctions")
        deadline = time.monotonic() + timeout
        self._stop_waiting_executions()
        for machine in sfn.list_state_machines()["stateMachines"]:
            arn = machine["stateMachineArn"]
            while sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"executions of {arn} still running after {timeout} s")
                time.sleep(0.02)
        if self.recorder is not None:
            self.recorder.armed = False  # the stack's own calls, as in start()
        db, sqs = self._client("dynamodb"), self._client("sqs")
        for table in self._tables():
            db.delete_table(TableName=table.name)
        for logical_id, url in self.queues.items():
            sqs.delete_queue(QueueUrl=url)
            self.resolver.refs.pop(logical_id, None)  # its dead-letter target is created first
            for attribute in ("Arn", "QueueName", "QueueUrl"):
                self.resolver.attributes.pop(f"{logical_id}.{attribute}", None)
        template_resources = self.template["Resources"]
        # Recreated, not emptied: new stream, TTL clocks and speed-up indexes, as at start.
        resources.create_tables(template_resources, self.resolver)
        resources.empty_buckets(self.buckets)
        self.queues = resources.create_queues(template_resources, self.resolver)
        resources.create_secrets(self.secrets, replace=True)
        drop_finished_executions(keep=0)
        forget_finished_threads()
        self.sweeper = Sweeper(
            self._tables,
            self._stream_read_up_to,
            shift=self.sweeper.shift,
            retention_seconds=self.sweeper.retention_seconds,
            buckets=self._buckets,
        )
        self._handlers.clear()
        self._apps.clear()
        if self.records is not None:
            self.records.clear()
        if self.meter is not None:
            self.meter.clear()
        from a2a_serverless import wiring

        wiring.reset()
        if self.recorder is not None:
            self.recorder.armed = True

    def _stop_waiting_executions(self) -> None:
        """Stop the running executions of the state machines that wait (a Wait state: the
        delegations' timer), which may be hours from ending; others are left to finish."""
        if self.resolver is None:
            return
        sfn = self._client("stepfunctions")
        for logical_id in resources.waiting_state_machines(self.template["Resources"]):
            arn = self.resolver.refs.get(logical_id)
            if arn is None:
                continue
            pages = sfn.get_paginator("list_executions").paginate(
                stateMachineArn=arn, statusFilter="RUNNING"
            )
            for page in pages:
                for execution in page["executions"]:
                    try:
                        sfn.stop_execution(executionArn=execution["executionArn"])
                    except sfn.exceptions.ExecutionDoesNotExist:
                        pass

    def _set_env(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    def _record_calls(self) -> None:
        """With A2A_LOCAL_CALL_LOG set: record every AWS call of the stack's boto3 clients
        that a principal makes (functions: see `handler_for`/`app_for`; event source
        mappings: the function's role; the state machine's interpreter: its role)."""
        path = os.environ.get(CALL_LOG_ENV)
        if not path:
            return
        import boto3

        recorder = self.recorder = CallRecorder(path, ACCOUNT, self.stack_id)
        # mock_aws has just reset boto3's default session: every client made from now on
        # (the functions', the pollers', moto's interpreter's) inherits this hook.
        recorder.attach(boto3._get_default_session().events)
        moto_fidelity.state_machine_calls(self._patches, recorder, self._state_machine_roles)

    def _client(self, service: str) -> Any:
        return resources.client(service)

    def _buckets(self) -> list[Any]:
        """The stack's buckets in moto (the sweeper expires their objects)."""
        from moto.s3.models import s3_backends

        backend = s3_backends[ACCOUNT]["aws"]
        return [backend.buckets[name] for name in self.buckets if name in backend.buckets]

    def _tables(self) -> list[Any]:
        """moto's tables of this stack (the sweeper works on them directly)."""
        from moto.dynamodb.models import dynamodb_backends

        return list(dynamodb_backends[ACCOUNT][REGION].tables.values())

    def table_request(self) -> dict[str, Any]:
        """create_table's arguments for the stack's table as the template declares it (keys,
        indexes, on demand): to make it where functions run against another endpoint."""
        table = next(
            r["Properties"]
            for r in self.template["Resources"].values()
            if r["Type"] == "AWS::DynamoDB::Table"
        )
        return resources.table_request(table, self.env["TABLE_NAME"])

    def _stream_read_up_to(self) -> int | None:
        """The lowest sequence number a stream mapping has yet to read (records below it
        every mapping is done with); None while any mapping has read nothing, or none reads."""
        from a2a_serverless.local.events import StreamMapping

        mappings = self.event_sources.mappings if self.event_sources is not None else []
        positions = [m.position for m in mappings if isinstance(m, StreamMapping)]
        if not positions or any(p is None for p in positions):
            return None
        return min(p for p in positions if p is not None)

    # -- Lambda emulation ------------------------------------------------------------------

    def handler_for(self, logical_id: str) -> Handler:
        if logical_id not in self._handlers:
            spec = self.functions[logical_id]
            module_name, _, attribute = spec.handler.partition(".")
            module = resources.load_module(
                f"_a2a_local_{logical_id}", spec.code_dir / f"{module_name}.py"
            )
            self._handlers[logical_id] = _attributed_handler(
                getattr(module, attribute), logical_id, self.stack_id
            )
        return self._handlers[logical_id]

    def app_for(self, logical_id: str) -> Any:
        """The Starlette app a function serves (both Mangum and Web Adapter functions)."""
        if logical_id not in self._apps:
            spec = self.functions[logical_id]
            module = resources.load_module(f"_a2a_local_app_{logical_id}", spec.code_dir / "app.py")
            self._apps[logical_id] = _AttributedApp(module.app, logical_id, self.stack_id)
        return self._apps[logical_id]

    def _event_invoker(self, logical_id: str) -> Callable[[dict[str, Any]], Any]:
        name = f"{STACK}-{logical_id}"

        def invoke(event: dict[str, Any]) -> Any:
            return self.handler_for(logical_id)(event, LambdaContext(name))

        return invoke

    def _invoke(self, function_name: str, body: Any, response_headers: Any) -> str:
        """A Lambda Invoke (from the state machine) of the function, run in-process."""
        if not self._ready:
            # Only an earlier stack's execution can call in while this one starts; running
            # the handler now would cache half-set settings (wiring) for this stack's lifetime.
            raise RuntimeError(f"{function_name}: the local stack is not started")
        logical_id = function_name.removeprefix(f"{STACK}-")
        event = json.loads(body) if isinstance(body, str | bytes) and body else (body or {})
        try:
            result = self.handler_for(logical_id)(event, LambdaContext(function_name))
        except Exception as exc:  # the Lambda runtime reports it as an unhandled error
            logger.exception("%s raised", logical_id)
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)})
        return json.dumps(result)

    # -- API Gateway emulation -------------------------------------------------------------

    def gateway(self, public_url: str | None = None, trust_loopback_host: bool = False) -> Gateway:
        """The API of the template: its routes, the checks its security puts on each
        method, its gateway responses, and the local admin endpoints of the Auth mode
        (`public_url`, `trust_loopback_host`: see local/gateway.py). With a `public_url`, the
        functions sign URLs to stored content for this gateway (CONTENT_URL_ENDPOINT), which
        serves them under /_s3/ as S3 would."""
        self._sign_urls_for(public_url)
        concurrency = LambdaConcurrency(
            {
                logical_id: spec.reserved_concurrency
                for logical_id, spec in self.functions.items()
                if spec.reserved_concurrency is not None
            },
            account=_account_concurrency(),
        )
        routes = []
        for logical_id, spec in self.functions.items():
            if not spec.events:
                continue
            app = FunctionApp(self.app_for(logical_id), logical_id, concurrency)
            for method, path in spec.events:
                routes.append((method, path, app))
        auth_mode = self.parameters.get("Auth", "None")
        api = self._api_properties()
        usage_plan = LocalUsagePlan() if auth_mode == "ApiKey" else None
        iam_users = IamUsers(ACCOUNT) if auth_mode == "Iam" else None
        issuer = self._local_issuer() if auth_mode == "Jwt" else None
        guard = Guard(
            api.get("DefinitionBody") or {},
            region=REGION,
            account=ACCOUNT,
            api_id="local",
            handler_for_uri=self._authorizer_for_uri,
            usage_plan=usage_plan,
            iam_users=iam_users,
        )

        def key_admin() -> Any:
            from a2a_serverless import wiring
            from a2a_serverless.auth import ApiKeyAdmin

            return ApiKeyAdmin(wiring.get_store(), usage_plan)

        admin = LocalAdmin(
            auth_mode,
            usage_plan=usage_plan,
            key_admin=key_admin if usage_plan is not None else None,
            issuer=issuer,
            iam_users=iam_users,
            functions=self,  # /_local/invoke runs them (`a2a-serverless invoke --url`)
            inspector=lambda: _inspector(self, auth_mode),
        )
        return Gateway(
            routes,
            stage=self.parameters.get("StageName", "prod"),
            cors_allow_origins=self.parameters.get("CorsAllowOrigins", ""),
            auth_mode=auth_mode,
            guard=guard,
            responses=GatewayResponses(
                api.get("GatewayResponses"),
                (api.get("DefinitionBody") or {}).get("x-amazon-apigateway-gateway-responses"),
            ),
            admin=admin,
            objects=ObjectUrls(_signing_credentials, account=ACCOUNT, region=REGION),
            public_url=public_url,
            trust_loopback_host=trust_loopback_host,
        )

    def _sign_urls_for(self, public_url: str | None) -> None:
        """CONTENT_URL_ENDPOINT set to this stack's `{public_url}/_s3` (unless the stack was
        given one), and what was built from the settings rebuilt."""
        if not public_url or "CONTENT_URL_ENDPOINT" in self.env_overrides:
            return
        endpoint = public_url.rstrip("/") + OBJECTS_PREFIX.rstrip("/")
        if os.environ.get("CONTENT_URL_ENDPOINT") == endpoint:
            return
        self._set_env({"CONTENT_URL_ENDPOINT": endpoint})
        self._handlers.clear()
        self._apps.clear()
        from a2a_serverless import wiring

        wiring.reset()

    def _api_properties(self) -> dict[str, Any]:
        """The template's REST API (AWS::Serverless::Api) properties, resolved for this
        stack's parameters (its conditions decide the security and gateway responses)."""
        if self.resolver is None:
            raise RuntimeError("the local stack is not started")
        apis = [
            resource
            for resource in self.template["Resources"].values()
            if resource["Type"] == "AWS::Serverless::Api"
        ]
        if len(apis) != 1:
            raise ValueError(f"the local gateway serves one AWS::Serverless::Api, not {len(apis)}")
        props = apis[0].get("Properties") or {}
        return {
            key: self.resolver.resolve(props[key])
            for key in ("DefinitionBody", "GatewayResponses")
            if key in props
        }

    def _authorizer_for_uri(self, uri: str) -> tuple[Handler, Any]:
        """The handler of the function an `authorizerUri` invokes, and its Lambda context."""
        match = re.search(r"/functions/(?P<arn>[^/]+)/invocations$", uri)
        arn = match["arn"] if match else ""
        for logical_id in self.functions:
            if (
                self.resolver is not None
                and self.resolver.attributes.get(f"{logical_id}.Arn") == arn
            ):
                return self.handler_for(logical_id), LambdaContext(f"{STACK}-{logical_id}")
        raise KeyError(f"authorizerUri names no function of the stack: {uri}")

    def _local_issuer(self) -> LocalIssuer | None:
        """The local OIDC issuer when the stack's JwtIssuer is this server's `/_local/oidc`
        (scripts/dev sets it when no issuer is given); None for an issuer of your own."""
        issuer = self.parameters.get("JwtIssuer", "")
        if not issuer.rstrip("/").endswith(ISSUER_PATH):
            return None
        return LocalIssuer(issuer, self.parameters.get("JwtAudience") or LOCAL_AUDIENCE)
