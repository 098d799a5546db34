"""The Streaming switch: off, the card says `streaming: false` and the stream methods answer
UnsupportedOperationError before anything is written (spec §3.1: capability checks)."""

from __future__ import annotations

import pytest

from a2a_serverless.core.card import CardFactory
from a2a_serverless.core.context import RequestContext
from a2a_serverless.core.errors import UnsupportedOperationError
from a2a_serverless.core.service import A2AService
from a2a_serverless.flows.echo import EchoFlow
from a2a_serverless.models import SendMessageRequest
from a2a_serverless.settings import Settings
from tests.fakes import InMemoryTaskStore
from tests.unit.test_send_path import RecordingExecutor, request


def test_streaming_off_refuses_the_stream_methods_and_writes_nothing() -> None:
    store = InMemoryTaskStore()
    executor = RecordingExecutor()
    service = A2AService(store, executor, streaming=False)
    send: SendMessageRequest = request()
    with pytest.raises(UnsupportedOperationError, match="SendStreamingMessage"):
        service.sender.open_stream(RequestContext.of_owner("alice"), send)
    assert store.tasks == {} and executor.started == []
    accepted = service.sender.accept(
        RequestContext.of_owner("alice"), send
    )  # unary sends still work
    with pytest.raises(UnsupportedOperationError, match="SubscribeToTask"):
        service.subscribe("alice", accepted.task_id)


@pytest.mark.parametrize("streaming", [True, False])
def test_the_card_declares_the_switch(streaming: bool) -> None:
    settings = Settings(streaming=streaming)
    card = CardFactory(settings, EchoFlow()).card_json("https://agent.example")
    assert card["capabilities"]["streaming"] is streaming
