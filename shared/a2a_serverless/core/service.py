"""The A2A operations as one object for the bindings: the SEND path (`sender`, core/send.py),
the QUERY path (core/query.py) and the bounds on long-lived connections. The SEND path is
imported at the first send, so read-only functions never load it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from a2a_serverless.core.connections import (
    Connection,
    ConnectionKind,
    ConnectionLimiter,
    unbounded,
)
from a2a_serverless.core.content import ContentLinks
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.errors import (
    InvalidRequestError,
    invalid_field,
    streaming_unsupported,
)
from a2a_serverless.core.executor import Executor
from a2a_serverless.core.query import StreamStart, TaskQueries
from a2a_serverless.core.tail import LogTail, SettleWait, WaitPolicy
from a2a_serverless.models import (
    Caller,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    Task,
)
from a2a_serverless.models.caller import TENANT_MARK
from a2a_serverless.models.limits import MAX_TENANT_CHARS
from a2a_serverless.store import MAX_OWNER_BYTES, TaskStore, utf8_size

if TYPE_CHECKING:
    from a2a_serverless.core.push import PushService
    from a2a_serverless.core.send import MessageSender, ModePolicy, Replier

# The names bindings and wiring import from here, wherever they are defined (the SEND path's
# own, Accepted and ModePolicy, from core/send.py: importing them loads that path).
__all__ = [
    "A2AService",
    "Connection",
    "ConnectionKind",
    "SettleWait",
    "StreamStart",
    "WaitPolicy",
    "scoped",
]

# A tenant is one URL path segment (`/{tenant}/tasks`): RFC 3986 unreserved characters only,
# so it reads the same encoded or not, never holds TENANT_MARK, and no proxy rewrites it.
TENANT_PATTERN = re.compile(rf"[A-Za-z0-9._~-]{{1,{MAX_TENANT_CHARS}}}")
# Segments that would make a tenant route read as a route without one (`/tasks/tasks` is
# GetTask of the task "tasks"; `/tasks/extendedAgentCard` too), or that URL libraries rewrite.
RESERVED_TENANTS = frozenset({"tasks", "extendedAgentCard", ".well-known", ".", ".."})


def scoped(caller: Caller, tenant: str | None) -> Caller:
    """`caller` under `tenant` (None or "" = no tenant), checked. A tenant that cannot be a path
    segment or makes the owner too long is InvalidParams naming `tenant`; a principal holding
    TENANT_MARK, or too long, is InvalidRequest."""
    if TENANT_MARK in caller.principal:
        raise InvalidRequestError(
            "The authenticated principal contains a control character (U+001F): tasks "
            "cannot be scoped to it"
        )
    tenant = tenant or ""
    if not tenant:
        return caller if not caller.tenant else replace(caller, tenant="")
    if not TENANT_PATTERN.fullmatch(tenant):
        raise invalid_field(
            "tenant",
            f"must be 1 to {MAX_TENANT_CHARS} of the characters A-Z a-z 0-9 . _ ~ - "
            "(it is a URL path segment)",
        )
    if tenant in RESERVED_TENANTS:
        raise invalid_field("tenant", f"{tenant!r} is reserved (it names a route)")
    scoped_caller = replace(caller, tenant=tenant)
    if utf8_size(scoped_caller.owner) > MAX_OWNER_BYTES:
        raise invalid_field(
            "tenant",
            f"is too long for this principal: principal and tenant together must be at most "
            f"{MAX_OWNER_BYTES - 1} bytes in UTF-8",
        )
    return scoped_caller


@dataclass(eq=False)
class A2AService:
    """Send, get, list and cancel, scoped to the calling owner. `modes`, `push`,
    `dedupe_window_seconds` and `replier` are what the SEND path (`sender`) is built with."""

    store: TaskStore
    executor: Executor
    modes: ModePolicy | None = None
    wait: WaitPolicy = field(default_factory=WaitPolicy)
    push: PushService | None = None
    # Off (the Streaming parameter): the card says so and the stream methods refuse.
    streaming: bool = True
    dedupe_window_seconds: float = 0.0
    replier: Replier | None = None
    # Bounds on long-lived connections (None: none).
    connections: ConnectionLimiter | None = None
    # Makes the URLs of stored content (the content bucket; None: none).
    links: ContentLinks | None = None

    def __post_init__(self) -> None:
        self.queries = TaskQueries(self.store, self.executor, self.wait.poll, links=self.links)

    # -- SEND --------------------------------------------------------------------------------

    @cached_property
    def sender(self) -> MessageSender:
        """The SEND path, imported and built at its first use."""
        from a2a_serverless.core.send import MessageSender, ModePolicy

        return MessageSender(
            self.store,
            self.executor,
            self.queries,
            self.modes or ModePolicy(),
            self.wait,
            self.push,
            self.dedupe_window_seconds,
            self.replier,
            self.streaming,
        )

    def context(
        self, caller: Caller, requested: Sequence[str] = (), base_url: str = ""
    ) -> RequestContext:
        """A send's context: the caller, the extensions it activates of those requested
        (raises when a required one was not requested), the base URL it came in at."""
        return RequestContext(caller, tuple(self.sender.modes.activate(requested)), base_url)

    # -- long-lived connections ---------------------------------------------------------------

    def connect(self, caller: Caller, kind: ConnectionKind) -> Connection:
        """Admit a long-lived connection of the caller's principal (every tenant of it shares
        one bound): its leases, to release when it ends; TooManyConnectionsError past a
        bound. Called before the operation writes anything."""
        if self.connections is None:
            return unbounded()
        return self.connections.open(caller.principal, kind)

    @staticmethod
    def blocks(request: SendMessageRequest) -> bool:
        """Whether SendMessage waits for the task to settle (a long-lived connection)."""
        configuration = request.configuration
        return configuration is None or not configuration.return_immediately

    # -- QUERY -------------------------------------------------------------------------------

    def get_task(self, owner: str, task_id: str, history_length: int | None = None) -> Task:
        return self.queries.get_task(owner, task_id, history_length)

    def list_tasks(self, owner: str, params: ListTasksRequest) -> ListTasksResponse:
        return self.queries.list_tasks(owner, params)

    def cancel_task(self, owner: str, task_id: str) -> Task:
        return self.queries.cancel_task(owner, task_id)

    def subscribe(self, owner: str, task_id: str) -> StreamStart:
        if not self.streaming:
            raise streaming_unsupported("SubscribeToTask")
        return self.queries.subscribe(owner, task_id)

    def tail(self, start: StreamStart) -> LogTail:
        return self.queries.tail(start)
