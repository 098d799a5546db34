"""The A2A operations as one object for the bindings: a thin facade over the SEND path
(core/send.py) and the QUERY path (core/query.py). Bindings translate requests into these
calls and errors back out."""

from __future__ import annotations

from collections.abc import Sequence

from a2a_serverless.core.errors import UnsupportedOperationError
from a2a_serverless.core.executor import Executor
from a2a_serverless.core.push import PushService
from a2a_serverless.core.query import StreamStart, TaskQueries
from a2a_serverless.core.send import (
    AcceptedSend,
    MessageSender,
    ModePolicy,
    Replier,
    WaitPolicy,
)
from a2a_serverless.core.tail import LogTail, SettleWait
from a2a_serverless.models import (
    Caller,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    Task,
)
from a2a_serverless.store import TaskStore

# The names bindings and wiring import from here, wherever they are defined.
__all__ = [
    "A2AService",
    "AcceptedSend",
    "ModePolicy",
    "SettleWait",
    "StreamStart",
    "WaitPolicy",
]


class A2AService:
    """Send, get, list and cancel, scoped to the calling owner."""

    def __init__(
        self,
        store: TaskStore,
        executor: Executor,
        modes: ModePolicy | None = None,
        wait: WaitPolicy | None = None,
        push: PushService | None = None,
        streaming: bool = True,
        dedupe_window_seconds: float = 0.0,
        replier: Replier | None = None,
    ) -> None:
        self.store = store
        # Off (the Streaming parameter): the card says so and the stream methods refuse.
        self.streaming = streaming
        self.executor = executor
        self.modes = modes or ModePolicy()
        self.wait = wait or WaitPolicy()
        self.push = push
        self.queries = TaskQueries(store, executor, self.wait.poll)
        self.sender = MessageSender(
            store,
            executor,
            self.queries,
            self.modes,
            self.wait,
            push,
            dedupe_window_seconds,
            replier,
        )

    # -- SEND --------------------------------------------------------------------------------

    def activate_extensions(self, requested: Sequence[str]) -> list[str]:
        """The extensions a send will use (raises when a required one was not requested)."""
        return self.modes.activate(requested)

    def send_message(
        self,
        owner: str,
        request: SendMessageRequest,
        caller: Caller | None = None,
        extensions: Sequence[str] = (),
    ) -> SendMessageResponse:
        return self.sender.send_message(owner, request, caller, extensions)

    def accept_message(
        self,
        owner: str,
        request: SendMessageRequest,
        caller: Caller | None = None,
        extensions: Sequence[str] = (),
    ) -> AcceptedSend:
        return self.sender.accept_message(owner, request, caller, extensions)

    def settle_wait(self, accepted: AcceptedSend) -> SettleWait:
        return self.sender.settle_wait(accepted)

    def answer(self, accepted: AcceptedSend) -> SendMessageResponse:
        return self.sender.answer(accepted)

    def open_message_stream(
        self,
        owner: str,
        request: SendMessageRequest,
        caller: Caller | None = None,
        extensions: Sequence[str] = (),
    ) -> StreamStart:
        self._require_streaming("SendStreamingMessage")
        return self.sender.open_message_stream(owner, request, caller, extensions)

    # -- QUERY -------------------------------------------------------------------------------

    def get_task(self, owner: str, task_id: str, history_length: int | None = None) -> Task:
        return self.queries.get_task(owner, task_id, history_length)

    def list_tasks(self, owner: str, params: ListTasksRequest) -> ListTasksResponse:
        return self.queries.list_tasks(owner, params)

    def cancel_task(self, owner: str, task_id: str) -> Task:
        return self.queries.cancel_task(owner, task_id)

    def subscribe(self, owner: str, task_id: str) -> StreamStart:
        self._require_streaming("SubscribeToTask")
        return self.queries.subscribe(owner, task_id)

    def _require_streaming(self, operation: str) -> None:
        if not self.streaming:
            raise UnsupportedOperationError(
                f"{operation} is not supported: this agent does not stream "
                "(capabilities.streaming is false)"
            )

    def tail(self, start: StreamStart) -> LogTail:
        return self.queries.tail(start)
