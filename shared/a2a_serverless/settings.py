"""The one place configuration is read from the environment."""

# No `from __future__ import annotations`: pydantic reads the fields' types at class creation.
from functools import lru_cache
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# What each kind of pydantic error says about the value, in the words of SettingsError.
_MUST_BE = {
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "int_type": "must be an integer",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
}
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
}


class SettingsError(ValueError):
    """A setting that does not parse or is out of range: names every such variable, what it
    must be and what it was (a function's init fails with it)."""


class Settings(BaseSettings):
    """Runtime configuration of every function (environment variables, upper-case names).

    Each field is a `str`, `int`, `float`, `bool`, a `Literal` of strings or an optional
    number; numbers may be bounded. Keyword arguments override the environment; names match
    case-insensitively; other variables are ignored. A bad value raises SettingsError naming
    every bad field."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore", allow_inf_nan=False)

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(type(self).model_fields))
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(unknown)}")
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(_explain(exc)) from None

    @field_validator("*", mode="before")
    @classmethod
    def _strip_booleans_refuse_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """A boolean's text is stripped (as a number's is); True is not a number."""
        kind = cls.model_fields[info.field_name or ""].annotation
        if kind is bool and isinstance(value, str):
            return value.strip()
        if isinstance(value, bool) and kind in (int, float, float | None):
            raise ValueError("must be an integer" if kind is int else "must be a number")
        return value

    table_name: str = Field("a2a-tasks", description="DynamoDB table holding every task item.")
    state_machine_arn: str = Field("", description="ARN of the flow state machine.")
    timer_state_machine_arn: str = Field(
        "",
        description="ARN of the delegations' timer state machine (template.yaml "
        "DelegationTimerStateMachine): a delegating step starts one wait per round.",
    )
    agent_secrets_prefix: str = Field(
        "",
        description="Prefix of the Secrets Manager secrets holding the headers for remote agents "
        "a flow delegates to: `{prefix}{host[:port]}`, a JSON object of header to value (no "
        "secret = no headers). The template's default is `{stack name}/agents/`.",
    )
    relay_agent_url: str = Field(
        "",
        description="The remote agent the relay flow (a2a_serverless.flows.relay:flow) "
        "delegates every turn to; empty = none.",
    )
    relay_timeout_seconds: int = Field(
        3600,
        ge=1,
        le=30 * 86400,
        description="How long the relay flow waits for its remote agent's answer to a turn.",
    )
    workflow_type: Literal["EXPRESS", "STANDARD"] = Field(
        "EXPRESS",
        description="The state machine's type (the template's WorkflowType): how long a flow "
        "step may run (EXPRESS 150 s, STANDARD 900 s), checked against the flow's "
        "max_step_seconds at init.",
    )
    flow: str = Field(
        "a2a_serverless.flows.echo:flow",
        description="The agent's flow, as `module:attribute`.",
    )
    # Empty: the flow's own (its `title` or `name`, `description`, `version`).
    agent_name: str = Field("", description="The card's name; empty = the flow's.")
    agent_description: str = Field("", description="The card's description; empty = the flow's.")
    agent_version: str = Field("", description="The card's version; empty = the flow's.")
    agent_provider_org: str = ""
    agent_provider_url: str = ""
    agent_documentation_url: str = ""
    agent_icon_url: str = Field("", description="The card's iconUrl; empty = none.")
    card_signing_key: str = Field(
        "",
        description="Signs the Agent Card (spec §8.4, ES256): a KMS key (ECC_NIST_P256, "
        "SIGN_VERIFY) as key id, ARN or alias; `local` = a key generated in process (the local "
        "stack only); empty = unsigned. The public key is served at /.well-known/jwks.json.",
    )
    public_base_url: str = Field(
        "", description="Base URL written into the Agent Card; derived from the request if empty."
    )
    agent_card_v03_fields: bool = Field(
        False,
        description="Add the deprecated 0.3 top-level card fields (url, preferredTransport, "
        "protocolVersion) for 0.3-only clients; off keeps the card strictly 1.0.",
    )
    agent_card_max_age: int = Field(300, ge=0, description="Cache-Control max-age of the card.")
    retention_days: int = Field(30, ge=1, description="Days before task items expire (TTL).")
    blocking_max_wait_seconds: float = Field(
        840.0, gt=0, description="Longest a blocking SendMessage waits before returning the task."
    )
    blocking_keepalive_seconds: float = Field(
        15.0,
        gt=0,
        description="While a blocking SendMessage waits, a whitespace byte is written this often "
        "(API Gateway drops responses idle for 5 minutes); quicker answers are unchanged.",
    )
    max_body_bytes: int = Field(
        6_000_000,
        ge=1024,
        le=6_000_000,
        description="Largest accepted request body. Lambda takes at most 6,291,456 bytes of "
        "invocation payload, and that payload is the body JSON-escaped inside API Gateway's "
        "event: 6,000,000 leaves room for the event and the escaping (docs/deploy.md, "
        '"Request and response sizes").',
    )
    content_bucket: str = Field(
        "",
        description="S3 bucket holding part content and flow state too large for the table "
        "(template.yaml ContentBucket); empty = none, and a part too large to store inline "
        "fails its write.",
    )
    inline_part_bytes: int = Field(
        32_768,
        ge=256,
        le=262_144,
        description="A part (text, raw or data) whose JSON is larger than this is stored in "
        "the content bucket, and reads return it as a short-lived URL.",
    )
    inline_state_bytes: int = Field(
        32_768,
        ge=256,
        le=65_536,
        description="A flow state (ctx.state) whose JSON is larger than this is stored in the "
        "content bucket; the task header keeps a reference.",
    )
    content_url_seconds: int = Field(
        900,
        ge=1,
        le=604_800,
        description="How long a URL to stored content stays valid (at most 7 days, and never "
        "longer than the signing function's credentials).",
    )
    content_url_endpoint: str = Field(
        "",
        description="Where URLs to stored content point (empty: S3's regional endpoint); the "
        "local stack serves them itself.",
    )
    fetch_max_bytes: int = Field(
        104_857_600,
        ge=1,
        description="The most a flow reads from a client's `url` part (ctx.open) before it "
        "stops with an error.",
    )
    max_json_depth: int = Field(
        32, ge=4, le=64, description="Deepest nesting of objects/arrays in a request body."
    )
    max_value_depth: int = Field(
        16,
        ge=1,
        le=32,
        description="Deepest nesting inside a free-form `metadata` or `data` value (each "
        "level of it is stored, rendered and revalidated at every step).",
    )
    list_max_response_bytes: int = Field(
        5_000_000,
        ge=1,
        description="Largest ListTasks page, counted as the function's response payload (a "
        "buffered Lambda response may be 6 MB); a fuller page ends early with nextPageToken.",
    )
    poll_min_ms: int = Field(25, ge=1, description="Event-log poll interval while events flow.")
    poll_max_ms: int = Field(1000, ge=1, description="Event-log poll interval when idle.")
    stream_max_seconds: float = Field(
        840.0,
        gt=0,
        description="Streams close cleanly after this long (below the function timeout); "
        "clients resubscribe.",
    )
    stream_heartbeat_seconds: float = Field(
        15.0, gt=0, description="SSE comment sent when a stream has been quiet this long."
    )
    max_connections_per_principal: int = Field(
        10,
        ge=0,
        description="Long-lived connections (SSE streams, subscriptions, blocking sends) one "
        "principal may hold at once, across every function instance and tenant (template: "
        "MaxConnectionsPerPrincipal); more are refused with HTTP 429. 0: no bound.",
    )
    get_task_reserved_concurrency: int = Field(
        -1,
        ge=-1,
        description="GetTaskFunction's reserved concurrency (template: GetTaskReservedConcurrency; "
        "-1 or 0: none). Set, GET subscriptions may hold at most half of it, all principals "
        "together, so GetTask reads always find executions.",
    )
    auth_mode: Literal["ApiKey", "Jwt", "Iam", "None"] = Field(
        "None",
        description="How callers authenticate (the template's Auth parameter): ApiKey (X-API-Key "
        "checked by the authorizer), Jwt (OIDC bearer token), Iam (SigV4), None (open).",
    )
    jwt_issuer: str = Field("", description="Auth=Jwt: the OIDC issuer (its `iss`).")
    jwt_audience: str = Field("", description="Auth=Jwt: the audience tokens must name (`aud`).")
    jwt_jwks_url: str = Field(
        "", description="Auth=Jwt: JWKS URL; empty = the issuer's OIDC discovery document's."
    )
    anonymous_principal: str = Field(
        "anonymous", description="Owner of tasks when no authenticated principal is present."
    )
    dedupe_window_seconds: float = Field(
        0.0,
        ge=0,
        le=86_400,
        description="A send repeating an earlier one (same messageId, identical request) "
        "within this many seconds is answered with the original task; 0: no deduplication.",
    )
    streaming: bool = Field(
        True,
        description="Offer streaming (SendStreamingMessage, SubscribeToTask); false: the card "
        "says streaming: false and those methods answer UnsupportedOperationError.",
    )
    push_notifications: bool = Field(
        True, description="Offer push notifications (webhooks); false: capability errors."
    )
    # -- tenants --
    tenant: str = Field(
        "",
        description="The tenant the card's A2A 1.0 interfaces declare (clients then send it in "
        "every request: `/{tenant}/...`, the `tenant` field); empty = none. Requests under any "
        "tenant, or none, are served; each (principal, tenant) sees only its own tasks.",
    )
    push_allow_http: bool = Field(False, description="Allow http:// webhooks (development).")
    push_allow_hosts: str = Field(
        "", description="Comma-separated hosts, IPs or CIDRs exempt from the SSRF address checks."
    )
    push_retry_queue_url: str = Field("", description="FIFO queue of parked webhook deliveries.")
    push_retry_base_seconds: float = Field(
        5.0, ge=0, description="First backoff of a parked webhook; doubles per attempt."
    )
    push_retry_cap_seconds: float = Field(900.0, ge=0, le=43_200)
    push_max_attempts: int = Field(
        12, ge=1, description="Failed attempts of a parked webhook event before dead-lettering."
    )
    push_dead_letter_queue_url: str = Field("", description="Where undeliverable events go.")
    push_connect_timeout: float = Field(3.0, gt=0)
    push_read_timeout: float = Field(10.0, gt=0)
    # Slow webhooks hold the shard (everyone's next delivery) about this long per batch, so it stays
    # below a quiet first delivery on AWS; a webhook answering within it is never parked.
    push_slow_seconds: float = Field(
        0.5,
        gt=0,
        description="Connect and read timeout of a stream batch's inline webhook attempts "
        "(template: PushSlowSeconds): a slower webhook is parked like a failing one (its queued "
        "retries get PUSH_CONNECT_TIMEOUT / PUSH_READ_TIMEOUT).",
    )
    push_penalty_seconds: float = Field(
        300.0,
        ge=0,
        description="How long an owner whose webhook was parked (failing or slower than "
        "PUSH_SLOW_SECONDS) has all its webhooks parked at once, with no direct attempt on the "
        "stream's time (0: never).",
    )
    push_batch_deadline_seconds: float = Field(
        30.0,
        gt=0,
        description="No inline webhook attempt of a stream batch ends later than this after "
        "the batch began (its timeouts are cut to fit); the rest is parked (queued, in order).",
    )
    push_max_configs_per_task: int = Field(
        10, ge=1, description="Push notification configs one task may have (inline ones count)."
    )
    cors_allow_origins: str = Field(
        "",
        description="Comma-separated origins (scheme://host[:port]) whose browser clients may "
        "call the API (CORS); empty = none.",
    )
    # The Bedrock flow (FLOW=a2a_serverless.flows.bedrock:flow); other flows ignore these.
    bedrock_model_id: str = Field(
        "us.amazon.nova-lite-v1:0",
        description="The Bedrock flow's model: a foundation model id or an inference profile id "
        "(the default is the US cross-Region profile of Amazon Nova Lite).",
    )
    bedrock_system_prompt: str = Field(
        "You are a helpful assistant. Answer concisely.",
        description="The Bedrock flow's system prompt; empty = none.",
    )
    bedrock_max_tokens: int = Field(
        1024, ge=1, description="The Bedrock flow's largest answer, in tokens (maxTokens)."
    )
    bedrock_temperature: float = Field(
        0.5, ge=0, le=1, description="The Bedrock flow's sampling temperature."
    )
    bedrock_top_p: float | None = Field(
        None, ge=0, le=1, description="The Bedrock flow's topP; unset = the model's default."
    )
    bedrock_region: str = Field(
        "", description="Region of the Bedrock flow's calls; empty = the function's own."
    )
    aws_endpoint_url: str = Field("", description="Override AWS endpoint (local tools only).")
    powertools_metrics_namespace: str = Field(
        "A2AServerless", description="CloudWatch namespace of the functions' EMF metrics."
    )
    powertools_trace_disabled: bool = Field(
        False, description="Turn X-Ray tracing off (it is always off outside Lambda)."
    )
    lambda_task_root: str = Field(
        "",
        description="Set by the Lambda runtime. Tracing starts only where it is set: elsewhere "
        "no X-Ray daemon listens (and the X-Ray SDK is not even imported).",
    )


def _explain(exc: ValidationError) -> str:
    """Every bad field as `NAME must be ... (got value)`, in declaration order."""
    errors = []
    for error in exc.errors():
        name = str(error["loc"][0])
        kind, ctx = error["type"], error.get("ctx") or {}
        if kind in _BOUNDS:
            symbol, bound = _BOUNDS[kind]
            rule = f"must be {symbol} {ctx[bound]:g}"
        elif kind == "literal_error":
            choices = get_args(Settings.model_fields[name].annotation)
            rule = "must be one of " + ", ".join(map(repr, choices))
        elif kind == "value_error":
            rule = str(ctx["error"])
        else:
            rule = _MUST_BE.get(kind, error["msg"])
        errors.append(f"{name.upper()} {rule} (got {error['input']!r})")
    return "invalid settings: " + "; ".join(errors)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
