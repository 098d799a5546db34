"""Builds the service objects from settings: the one place that knows the concrete parts."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from a2a_serverless.settings import Settings, get_settings

# Each concrete part is imported by the getter that builds it, so a function imports only what
# it uses (docs/deploy.md, "Cold starts and SnapStart").
if TYPE_CHECKING:
    from a2a_serverless.auth import Authenticator
    from a2a_serverless.aws.secrets import AgentCredentials
    from a2a_serverless.aws.step_functions import StepFunctionsExecutor, StepFunctionsTimer
    from a2a_serverless.core.card import CardFactory
    from a2a_serverless.core.card_signing import CardSigner
    from a2a_serverless.core.connections import ConnectionLimiter
    from a2a_serverless.core.delegation import DelegationInbox, Delegator, RemoteClient
    from a2a_serverless.core.egress import EgressPolicy
    from a2a_serverless.core.executor import TurnContext
    from a2a_serverless.core.push import PushService
    from a2a_serverless.core.service import A2AService
    from a2a_serverless.flows.base import Flow
    from a2a_serverless.push.sender import WebhookSender
    from a2a_serverless.store import ApiKeyStore
    from a2a_serverless.store.dynamodb import DynamoDBTaskStore
    from a2a_serverless.store.s3 import S3ContentStore


# Every AWS client made here, so that a SnapStart restore can drop their pooled connections.
_clients: list[Any] = []


def aws_client(service: str, settings: Settings, **kwargs: Any) -> Any:
    """A client from boto3's default session, as `boto3.client` makes it: one session for
    every client, so they share its loader's cache and its event hooks (the local stack's call
    recorder, moto) see their calls. `kwargs` go to `boto3.client`."""
    import boto3  # imported here: the unsigned card function makes no client

    if settings.aws_endpoint_url:
        kwargs.setdefault("endpoint_url", settings.aws_endpoint_url)
    client = boto3.client(service, **kwargs)  # type: ignore[call-overload]  # typed per name
    _clients.append(client)
    return client


def close_aws_connections() -> None:
    """Close the clients' pooled connections (a restored snapshot's sockets are dead): the
    clients stay usable and open fresh connections on their next call."""
    for client in _clients:
        client.close()


@lru_cache(maxsize=1)
def get_flow() -> Flow:
    from a2a_serverless.flows.base import load_flow

    return load_flow(get_settings().flow)


@lru_cache(maxsize=1)
def get_store() -> DynamoDBTaskStore:
    from a2a_serverless.store.content import ContentRule
    from a2a_serverless.store.dynamodb import DynamoDBTaskStore

    settings = get_settings()
    return DynamoDBTaskStore(
        aws_client("dynamodb", settings),
        settings.table_name,
        settings.retention_days,
        ContentRule(get_content_store(), settings.inline_part_bytes),
        settings.inline_state_bytes,
    )


@lru_cache(maxsize=1)
def get_content_store() -> S3ContentStore | None:
    """The content bucket (None when CONTENT_BUCKET is unset); its S3 clients are made at
    first use. Its URLs are signed for CONTENT_URL_ENDPOINT when set (the local stack serves
    them), else for S3's regional endpoint."""
    settings = get_settings()
    if not settings.content_bucket:
        return None
    from botocore.config import Config

    from a2a_serverless.store.s3 import S3ContentStore

    # Signature V4 on the regional endpoint: the URLs work in every region, new ones too.
    def client() -> Any:
        config = Config(signature_version="s3v4", s3={"addressing_style": "virtual"})
        return aws_client("s3", settings, config=config)

    def signer() -> Any:
        path_style = Config(signature_version="s3v4", s3={"addressing_style": "path"})
        endpoint = settings.content_url_endpoint
        return aws_client("s3", settings, config=path_style, endpoint_url=endpoint)

    return S3ContentStore(
        client,
        settings.content_bucket,
        settings.content_url_seconds,
        signer if settings.content_url_endpoint else None,
    )


@lru_cache(maxsize=1)
def get_executor() -> StepFunctionsExecutor:
    """Starts flow steps' executions: the send path (a turn's first step) and the flow worker
    (the step after one that asks for another)."""
    from a2a_serverless.aws.step_functions import StepFunctionsExecutor

    settings = get_settings()
    return StepFunctionsExecutor(aws_client("stepfunctions", settings), settings.state_machine_arn)


class _ExecutorOnFirstStart:
    """The service's executor: the Step Functions client is made by the first `start`
    (get_executor), not when the service is built. GetTask and ListTasks never start an
    execution."""

    def start(
        self, task_id: str, turn: int, context: TurnContext | None = None, step: int = 0
    ) -> str:
        return get_executor().start(task_id, turn, context, step)

    def start_action(self, task_id: str, turn: int, action: str) -> str:
        return get_executor().start_action(task_id, turn, action)


@lru_cache(maxsize=1)
def get_timer() -> StepFunctionsTimer:
    """Starts the delegations' timer: one wait per delegation round (the flow worker)."""
    from a2a_serverless.aws.step_functions import StepFunctionsTimer

    settings = get_settings()
    return StepFunctionsTimer(
        aws_client("stepfunctions", settings), settings.timer_state_machine_arn
    )


@lru_cache(maxsize=1)
def get_agent_credentials() -> AgentCredentials:
    """The headers for remote agents a flow delegates to (Secrets Manager, AGENT_SECRETS_PREFIX);
    the client is made at the first read."""
    from a2a_serverless.aws.secrets import AgentCredentials

    settings = get_settings()
    return AgentCredentials(
        lambda: aws_client("secretsmanager", settings), settings.agent_secrets_prefix
    )


@lru_cache(maxsize=1)
def get_push() -> PushService:
    from a2a_serverless.core.push import PushService

    settings = get_settings()
    return PushService(
        get_store(),
        settings.push_notifications,
        egress_policy(settings),
        max_configs_per_task=settings.push_max_configs_per_task,
    )


def get_delegator() -> Delegator:
    """The flow worker's side of delegation: remote agents reached through the egress guard
    with their credentials (Secrets Manager), the timer, the next step's executor."""
    from a2a_serverless.core.delegation import Delegator

    settings = get_settings()
    return Delegator(
        get_store(),
        get_executor,
        _connect_remote,
        get_timer,
        settings.public_base_url,
    )


def _connect_remote(agent_url: str, credentials: str | None) -> RemoteClient:
    """A remote agent's client: its card read through the egress guard, its headers from
    its secret."""
    from a2a_serverless.core.delegation import RemoteFailure
    from a2a_serverless.push.remote import RemoteAgent

    settings = get_settings()
    try:
        headers = get_agent_credentials().headers(agent_url, credentials)
    except ValueError as error:
        raise RemoteFailure(str(error)) from None
    return RemoteAgent.resolve(agent_url, egress=egress_policy(settings), headers=headers)


@lru_cache(maxsize=1)
def get_inbox() -> DelegationInbox:
    """The receiver of remote agents' push notifications about delegated tasks."""
    from a2a_serverless.core.delegation import DelegationInbox

    return DelegationInbox(get_store(), get_executor, get_timer)


def egress_policy(settings: Settings) -> EgressPolicy:
    from a2a_serverless.core.egress import EgressPolicy

    hosts = frozenset(h.strip() for h in settings.push_allow_hosts.split(",") if h.strip())
    return EgressPolicy(allow_http=settings.push_allow_http, allow_hosts=hosts)


@lru_cache(maxsize=1)
def get_service() -> A2AService:
    """The operations as the send functions (SendMessage, Stream) serve them: with the
    flow's input and output modes, extensions and replies."""
    return _service(get_flow())


@lru_cache(maxsize=1)
def get_read_service() -> A2AService:
    """The operations for the functions that only read tasks (GetTask with its subscriptions,
    ListTasks): they never send, so their init never imports the flow or the user's agent."""
    return _service(None)


def _service(flow: Flow | None) -> A2AService:
    """The operations; without a flow, for reading tasks only (no modes, replies or webhooks
    to configure: the SEND path and the push service are never loaded)."""
    from a2a_serverless.core.service import A2AService, WaitPolicy
    from a2a_serverless.core.tail import PollPolicy

    settings = get_settings()
    modes, push = None, None
    if flow is not None:
        from a2a_serverless.core.send import ModePolicy

        modes = ModePolicy(
            input_modes=list(flow.input_modes),
            output_modes=list(flow.output_modes),
            extensions=list(flow.extensions),
        )
        push = get_push()
    return A2AService(
        store=get_store(),
        executor=_ExecutorOnFirstStart(),
        modes=modes,
        wait=WaitPolicy(
            max_wait_seconds=settings.blocking_max_wait_seconds,
            poll=PollPolicy(
                min_seconds=settings.poll_min_ms / 1000, max_seconds=settings.poll_max_ms / 1000
            ),
            stream_max_seconds=settings.stream_max_seconds,
            heartbeat_seconds=settings.stream_heartbeat_seconds,
        ),
        push=push,
        streaming=settings.streaming,
        dedupe_window_seconds=settings.dedupe_window_seconds,
        replier=flow,
        connections=connection_limiter(settings),
        links=get_content_store(),
    )


def connection_limiter(settings: Settings) -> ConnectionLimiter:
    """The bounds on long-lived connections, leased in the task table."""
    from a2a_serverless.core.connections import ConnectionLimiter, ConnectionLimits

    reserved = settings.get_task_reserved_concurrency
    return ConnectionLimiter(
        get_store(),
        ConnectionLimits(
            per_principal=settings.max_connections_per_principal,
            # Half of GetTaskFunction's reserved pool (docs/architecture.md); unreserved, its
            # pool is the account's and the per-principal bound is what limits each share.
            get_subscriptions=reserved // 2 if reserved > 0 else None,
            stream_seconds=settings.stream_max_seconds,
            blocking_seconds=settings.blocking_max_wait_seconds,
        ),
    )


@lru_cache(maxsize=1)
def get_webhook_sender() -> WebhookSender:
    # Imported here: only WebhookSenderFunction needs the HTTP client (cold start).
    from a2a_serverless.push.sender import SenderConfig, WebhookSender

    settings = get_settings()
    return WebhookSender(
        get_store(),
        aws_client("sqs", settings),
        SenderConfig(
            egress=egress_policy(settings),
            retry_queue_url=settings.push_retry_queue_url,
            connect_timeout=settings.push_connect_timeout,
            read_timeout=settings.push_read_timeout,
            retry_base_seconds=settings.push_retry_base_seconds,
            retry_cap_seconds=settings.push_retry_cap_seconds,
            max_attempts=settings.push_max_attempts,
            dead_letter_queue_url=settings.push_dead_letter_queue_url,
            slow_seconds=settings.push_slow_seconds,
            batch_deadline_seconds=settings.push_batch_deadline_seconds,
            penalty_seconds=settings.push_penalty_seconds,
        ),
        links=get_content_store(),
    )


def card_signer(settings: Settings) -> CardSigner | None:
    """The Agent Card's signer for CARD_SIGNING_KEY (None: the card is unsigned)."""
    key = settings.card_signing_key.strip()
    if not key:
        return None
    from a2a_serverless.aws.kms import KmsCardSigner
    from a2a_serverless.core.card_signing import LocalCardSigner

    if key == "local":
        if settings.lambda_task_root:
            # Each instance would make its own key: a JWKS fetched from one would not verify
            # a card served by another.
            raise ValueError("CARD_SIGNING_KEY=local is for the local stack; use a KMS key")
        return LocalCardSigner()
    # The KMS client (and boto3 with it) only when a key is configured: the card function
    # keeps its cold start otherwise.
    return KmsCardSigner(aws_client("kms", settings), key)


@lru_cache(maxsize=1)
def get_card_factory() -> CardFactory:
    from a2a_serverless.core.card import CardFactory

    settings = get_settings()
    return CardFactory(settings, get_flow(), signer=card_signer(settings))


def get_api_key_store() -> ApiKeyStore:
    """The API keys live in the task table (store/dynamodb/api_keys.py)."""
    return get_store()


@lru_cache(maxsize=1)
def get_authenticator() -> Authenticator | None:
    """The authorizer's authenticator for AUTH_MODE (None: Iam or None, no authorizer).
    Cached: the JWKS cache lives as long as the function's environment."""
    # Imported here: only the authorizer needs httpx and joserfc (cold start of the others).
    from a2a_serverless.auth import authenticator_for

    return authenticator_for(get_settings(), get_api_key_store())


def reset() -> None:
    """Forget cached objects (tests and the local stack change settings between runs)."""
    get_settings.cache_clear()
    _clients.clear()
    for cached in (
        get_flow,
        get_store,
        get_content_store,
        get_executor,
        get_timer,
        get_agent_credentials,
        get_push,
        get_service,
        get_read_service,
        get_card_factory,
        get_webhook_sender,
        get_authenticator,
        get_inbox,
    ):
        cached.cache_clear()
