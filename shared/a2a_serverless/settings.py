"""The one place configuration is read from the environment."""

# No `from __future__ import annotations`: Settings reads its fields' types from its
# annotations at import.
import math
import os
import types
from functools import lru_cache
from typing import Any, Literal, Union, get_args, get_origin

_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


class SettingsError(ValueError):
    """A setting that does not parse or is out of range: names every such variable, what it
    must be and what it was (a function's init fails with it)."""


class Setting:
    """One field of Settings: its default, what it is for, and its bounds (numbers)."""

    __slots__ = ("default", "description", "ge", "gt", "kind", "le")

    def __init__(
        self,
        default: Any,
        description: str = "",
        *,
        ge: float | None = None,
        gt: float | None = None,
        le: float | None = None,
    ) -> None:
        self.default, self.description = default, description
        self.ge, self.gt, self.le = ge, gt, le
        self.kind: Any = str  # the annotation, set by Settings

    def parse(self, value: Any) -> Any:
        """The value as the field's type (from the environment's string or a keyword
        argument), within its bounds; ValueError saying what it must be."""
        kind, optional = self.kind, False
        if get_origin(kind) in (Union, types.UnionType):
            (kind,) = [a for a in get_args(kind) if a is not type(None)]
            optional = True
        if value is None and optional:
            return None
        if get_origin(kind) is Literal:
            if value not in get_args(kind):
                raise ValueError("must be one of " + ", ".join(map(repr, get_args(kind))))
            return value
        if kind is bool:
            return _boolean(value)
        if kind is str:
            if not isinstance(value, str):
                raise ValueError("must be a string")
            return value
        wanted = "an integer" if kind is int else "a number"
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"must be {wanted}")
        try:
            number = kind(value.strip() if isinstance(value, str) else value)
        except ValueError:
            raise ValueError(f"must be {wanted}") from None
        if number != value and not isinstance(value, str):  # 1.5 as an int
            raise ValueError(f"must be {wanted}")
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError("must be a finite number")
        if self.ge is not None and not number >= self.ge:
            raise ValueError(f"must be >= {self.ge:g}")
        if self.gt is not None and not number > self.gt:
            raise ValueError(f"must be > {self.gt:g}")
        if self.le is not None and not number <= self.le:
            raise ValueError(f"must be <= {self.le:g}")
        return number


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError("must be true or false")


def setting(default: Any, description: str = "", **bounds: float) -> Any:
    """Declares a field of Settings: `Setting(...)` typed `Any`, so that `name: int =
    setting(...)` type-checks."""
    return Setting(default, description, **bounds)


class Settings:
    """Runtime configuration of every function (environment variables, upper-case names).

    A plain class, not a pydantic model: building a model's validator for these ~60 fields
    cost every function's init ~9 ms of CPU, for values parsed once. Each field is a `str`,
    `int`, `float`, `bool`, a `Literal` of strings or an optional number; numbers may be
    bounded. Keyword arguments override the environment; names match case-insensitively;
    other variables are ignored. A bad value raises SettingsError naming every bad field."""

    fields: dict[str, Setting]  # name -> its declaration, in declaration order

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(self.fields))
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(unknown)}")
        env = {k.lower(): v for k, v in os.environ.items() if k.lower() in self.fields}
        env.update(values)
        errors = []
        for name, field in self.fields.items():
            if name not in env:
                setattr(self, name, field.default)
                continue
            try:
                setattr(self, name, field.parse(env[name]))
            except ValueError as exc:
                errors.append(f"{name.upper()} {exc} (got {env[name]!r})")
        if errors:
            raise SettingsError("invalid settings: " + "; ".join(errors))

    table_name: str = setting("a2a-tasks", description="DynamoDB table holding every task item.")
    state_machine_arn: str = setting("", description="ARN of the flow state machine.")
    workflow_type: Literal["EXPRESS", "STANDARD"] = setting(
        "EXPRESS",
        description="The state machine's type (the template's WorkflowType): how long a flow "
        "step may run (EXPRESS 150 s, STANDARD 900 s), checked against the flow's "
        "max_step_seconds at init.",
    )
    flow: str = setting(
        "a2a_serverless.flows.echo:flow",
        description="The agent's flow, as `module:attribute`.",
    )
    # Empty: the flow's own (its `title` or `name`, `description`, `version`).
    agent_name: str = setting("", description="The card's name; empty = the flow's.")
    agent_description: str = setting("", description="The card's description; empty = the flow's.")
    agent_version: str = setting("", description="The card's version; empty = the flow's.")
    agent_provider_org: str = ""
    agent_provider_url: str = ""
    agent_documentation_url: str = ""
    agent_icon_url: str = setting("", description="The card's iconUrl; empty = none.")
    card_signing_key: str = setting(
        "",
        description="Signs the Agent Card (spec §8.4, ES256): a KMS key (ECC_NIST_P256, "
        "SIGN_VERIFY) as key id, ARN or alias; `local` = a key generated in process (the local "
        "stack only); empty = unsigned. The public key is served at /.well-known/jwks.json.",
    )
    public_base_url: str = setting(
        "", description="Base URL written into the Agent Card; derived from the request if empty."
    )
    agent_card_v03_fields: bool = setting(
        False,
        description="Add the deprecated 0.3 top-level card fields (url, preferredTransport, "
        "protocolVersion) for 0.3-only clients; off keeps the card strictly 1.0.",
    )
    agent_card_max_age: int = setting(300, ge=0, description="Cache-Control max-age of the card.")
    retention_days: int = setting(30, ge=1, description="Days before task items expire (TTL).")
    blocking_max_wait_seconds: float = setting(
        840.0, gt=0, description="Longest a blocking SendMessage waits before returning the task."
    )
    blocking_keepalive_seconds: float = setting(
        15.0,
        gt=0,
        description="While a blocking SendMessage waits, a whitespace byte is written this often "
        "(API Gateway drops responses idle for 5 minutes); quicker answers are unchanged.",
    )
    max_body_bytes: int = setting(
        262_144,
        ge=1024,
        le=262_144,
        description="Largest accepted request body (at most 256 KiB: a message is stored in one "
        "DynamoDB item).",
    )
    max_json_depth: int = setting(
        32, ge=4, le=64, description="Deepest nesting of objects/arrays in a request body."
    )
    max_value_depth: int = setting(
        16,
        ge=1,
        le=32,
        description="Deepest nesting inside a free-form `metadata` or `data` value (each "
        "level of it is stored, rendered and revalidated at every step).",
    )
    list_max_response_bytes: int = setting(
        5_000_000,
        ge=1,
        description="Largest ListTasks page, counted as the function's response payload (a "
        "buffered Lambda response may be 6 MB); a fuller page ends early with nextPageToken.",
    )
    poll_min_ms: int = setting(25, ge=1, description="Event-log poll interval while events flow.")
    poll_max_ms: int = setting(1000, ge=1, description="Event-log poll interval when idle.")
    stream_max_seconds: float = setting(
        840.0,
        gt=0,
        description="Streams close cleanly after this long (below the function timeout); "
        "clients resubscribe.",
    )
    stream_heartbeat_seconds: float = setting(
        15.0, gt=0, description="SSE comment sent when a stream has been quiet this long."
    )
    max_connections_per_principal: int = setting(
        10,
        ge=0,
        description="Long-lived connections (SSE streams, subscriptions, blocking sends) one "
        "principal may hold at once, across every function instance and tenant (template: "
        "MaxConnectionsPerPrincipal); more are refused with HTTP 429. 0: no bound.",
    )
    get_task_reserved_concurrency: int = setting(
        -1,
        ge=-1,
        description="GetTaskFunction's reserved concurrency (template: GetTaskReservedConcurrency; "
        "-1 or 0: none). Set, GET subscriptions may hold at most half of it, all principals "
        "together, so GetTask reads always find executions.",
    )
    auth_mode: Literal["ApiKey", "Jwt", "Iam", "None"] = setting(
        "None",
        description="How callers authenticate (the template's Auth parameter): ApiKey (X-API-Key "
        "checked by the authorizer), Jwt (OIDC bearer token), Iam (SigV4), None (open).",
    )
    jwt_issuer: str = setting("", description="Auth=Jwt: the OIDC issuer (its `iss`).")
    jwt_audience: str = setting("", description="Auth=Jwt: the audience tokens must name (`aud`).")
    jwt_jwks_url: str = setting(
        "", description="Auth=Jwt: JWKS URL; empty = the issuer's OIDC discovery document's."
    )
    anonymous_principal: str = setting(
        "anonymous", description="Owner of tasks when no authenticated principal is present."
    )
    dedupe_window_seconds: float = setting(
        0.0,
        ge=0,
        le=86_400,
        description="A send repeating an earlier one (same messageId, identical request) "
        "within this many seconds is answered with the original task; 0: no deduplication.",
    )
    streaming: bool = setting(
        True,
        description="Offer streaming (SendStreamingMessage, SubscribeToTask); false: the card "
        "says streaming: false and those methods answer UnsupportedOperationError.",
    )
    push_notifications: bool = setting(
        True, description="Offer push notifications (webhooks); false: capability errors."
    )
    # -- tenants (H5) --
    tenant: str = setting(
        "",
        description="The tenant the card's A2A 1.0 interfaces declare (clients then send it in "
        "every request: `/{tenant}/...`, the `tenant` field); empty = none. Requests under any "
        "tenant, or none, are served; each (principal, tenant) sees only its own tasks.",
    )
    push_allow_http: bool = setting(False, description="Allow http:// webhooks (development).")
    push_allow_hosts: str = setting(
        "", description="Comma-separated hosts, IPs or CIDRs exempt from the SSRF address checks."
    )
    push_retry_queue_url: str = setting("", description="FIFO queue of parked webhook deliveries.")
    push_retry_base_seconds: float = setting(
        5.0, ge=0, description="First backoff of a parked webhook; doubles per attempt."
    )
    push_retry_cap_seconds: float = setting(900.0, ge=0, le=43_200)
    push_max_attempts: int = setting(
        12, ge=1, description="Failed attempts of a parked webhook event before dead-lettering."
    )
    push_dead_letter_queue_url: str = setting("", description="Where undeliverable events go.")
    push_connect_timeout: float = setting(3.0, gt=0)
    push_read_timeout: float = setting(10.0, gt=0)
    # 0.5 s: slow webhooks, however many owners have them, hold the shard (everyone's next
    # delivery) for about this long per batch (twice if slow to connect too: push/sender.py), so
    # the threshold must not exceed a quiet first delivery on AWS (Lambda polls a stream shard 4
    # times a second: ~0.3-0.7 s with the POST) for the hostile-owner figure (at most 2x the
    # quiet case) to hold; a webhook that answers within it is never parked.
    push_slow_seconds: float = setting(
        0.5,
        gt=0,
        description="Connect and read timeout of a stream batch's inline webhook attempts "
        "(template: PushSlowSeconds): a slower webhook is parked like a failing one (its queued "
        "retries get PUSH_CONNECT_TIMEOUT / PUSH_READ_TIMEOUT).",
    )
    push_penalty_seconds: float = setting(
        300.0,
        ge=0,
        description="How long an owner whose webhook was parked (failing or slower than "
        "PUSH_SLOW_SECONDS) has all its webhooks parked at once, with no direct attempt on the "
        "stream's time (0: never).",
    )
    push_batch_deadline_seconds: float = setting(
        30.0,
        gt=0,
        description="No inline webhook attempt of a stream batch ends later than this after "
        "the batch began (its timeouts are cut to fit); the rest is parked (queued, in order).",
    )
    push_max_configs_per_task: int = setting(
        10, ge=1, description="Push notification configs one task may have (inline ones count)."
    )
    cors_allow_origins: str = setting(
        "",
        description="Comma-separated origins (scheme://host[:port]) whose browser clients may "
        "call the API (CORS); empty = none.",
    )
    # The Bedrock flow (FLOW=a2a_serverless.flows.bedrock:flow); other flows ignore these.
    bedrock_model_id: str = setting(
        "us.amazon.nova-lite-v1:0",
        description="The Bedrock flow's model: a foundation model id or an inference profile id "
        "(the default is the US cross-Region profile of Amazon Nova Lite).",
    )
    bedrock_system_prompt: str = setting(
        "You are a helpful assistant. Answer concisely.",
        description="The Bedrock flow's system prompt; empty = none.",
    )
    bedrock_max_tokens: int = setting(
        1024, ge=1, description="The Bedrock flow's largest answer, in tokens (maxTokens)."
    )
    bedrock_temperature: float = setting(
        0.5, ge=0, le=1, description="The Bedrock flow's sampling temperature."
    )
    bedrock_top_p: float | None = setting(
        None, ge=0, le=1, description="The Bedrock flow's topP; unset = the model's default."
    )
    bedrock_region: str = setting(
        "", description="Region of the Bedrock flow's calls; empty = the function's own."
    )
    aws_endpoint_url: str = setting("", description="Override AWS endpoint (local tools only).")
    powertools_metrics_namespace: str = setting(
        "A2AServerless", description="CloudWatch namespace of the functions' EMF metrics."
    )
    powertools_trace_disabled: bool = setting(
        False, description="Turn X-Ray tracing off (it is always off outside Lambda)."
    )
    lambda_task_root: str = setting(
        "",
        description="Set by the Lambda runtime. Tracing starts only where it is set: elsewhere "
        "no X-Ray daemon listens (and the X-Ray SDK is not even imported).",
    )


def _declare_fields() -> None:
    fields: dict[str, Setting] = {}
    for name, kind in Settings.__annotations__.items():
        if name == "fields":
            continue
        declared = Settings.__dict__[name]
        if not isinstance(declared, Setting):  # a bare default
            declared = Setting(declared)
        declared.kind = kind
        fields[name] = declared
    Settings.fields = fields


_declare_fields()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
