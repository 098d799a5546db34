"""The Bedrock flow, offline: a stubbed bedrock-runtime client (botocore's Stubber for the
call's errors; a fake returning {"stream": events} as botocore does for the event stream,
which Stubber cannot produce). Never a real call."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from unittest import mock

import botocore.session
import pytest
from botocore.exceptions import ClientError, EventStreamError, ReadTimeoutError
from botocore.stub import Stubber

from a2a_serverless.core.query import TaskQueries
from a2a_serverless.core.tail import PollPolicy
from a2a_serverless.flows import FlowCanceled, OutcomeKind, StepContext
from a2a_serverless.flows.base import ArtifactChunk
from a2a_serverless.flows.bedrock import (
    METADATA_KEY,
    BedrockFlow,
    conversation,
)
from a2a_serverless.flows.runtime import FlowWorker
from a2a_serverless.models import Message, Part, Role, TaskState
from a2a_serverless.settings import get_settings
from a2a_serverless.store.content import reference
from tests.fakes import InMemoryContentStore, InMemoryTaskStore
from tests.helpers import NoExecutions, add_submitted_task

MODEL = "us.amazon.nova-lite-v1:0"


# -- fakes ---------------------------------------------------------------------------------------


class Recorder:
    """An emitter that keeps what the step wrote; `cancel_at`: the write (0-based) that finds
    the task canceled, as LogEmitter does when a cancel won the race."""

    def __init__(self, cancel_at: int | None = None) -> None:
        self.chunks: list[ArtifactChunk] = []
        self.statuses: list[Message] = []
        self.cancel_at = cancel_at

    def status(self, message: Message) -> None:
        self.statuses.append(message)

    def artifact(self, chunk: ArtifactChunk) -> None:
        if self.cancel_at is not None and len(self.chunks) >= self.cancel_at:
            raise FlowCanceled()
        self.chunks.append(chunk)

    @property
    def text(self) -> str:
        return "".join(p.text or "" for c in self.chunks for p in c.parts)


class FakeStream:
    """botocore's EventStream as the flow uses it: iterated once, closed; an exception among
    the events is raised at that point (as EventStream raises EventStreamError)."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.consumed = 0
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for event in self.events:
            self.consumed += 1
            if isinstance(event, BaseException):
                raise event
            yield event

    def close(self) -> None:
        self.closed = True


class FakeBedrock:
    """converse_stream answers with the next scripted item: events (a stream), or an
    exception the call raises."""

    def __init__(self, *script: list[Any] | BaseException) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.streams: list[FakeStream] = []

    def converse_stream(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        stream = FakeStream(item)
        self.streams.append(stream)
        return {"ResponseMetadata": {"HTTPStatusCode": 200}, "stream": stream}


class Clock:
    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def user(text: str) -> Message:
    return Message(message_id=f"u-{text}", role=Role.USER, parts=[Part(text=text)])


def agent(text: str) -> Message:
    return Message(message_id=f"a-{text}", role=Role.AGENT, parts=[Part(text=text)])


def context(history: list[Message], emitter: Recorder) -> StepContext:
    users = [m for m in history if m.role is Role.USER]
    return StepContext(
        task_id="t1",
        context_id="c1",
        turn=0,
        step=0,
        message=users[-1] if users else history[-1],
        history=history,
        state={},
        emitter=emitter,
    )


def answer(*texts: str, stop: str = "end_turn") -> list[Any]:
    """The events of a streamed answer, as botocore parses them."""
    return [
        {"messageStart": {"role": "assistant"}},
        *[{"contentBlockDelta": {"delta": {"text": t}, "contentBlockIndex": 0}} for t in texts],
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": stop}},
        {
            "metadata": {
                "usage": {
                    "inputTokens": 12,
                    "outputTokens": len(texts),
                    "totalTokens": 12 + len(texts),
                },
                "metrics": {"latencyMs": 321},
            }
        },
    ]


def make_flow(client: Any, **kwargs: Any) -> BedrockFlow:
    options: dict[str, Any] = {
        "model_id": MODEL,
        "system_prompt": "Be brief.",
        "max_tokens": 100,
        "temperature": 0.3,
        "clock": Clock(0.1),
        "sleep": lambda seconds: None,
    }
    options.update(kwargs)
    return BedrockFlow(client, **options)


def client_error(code: str, message: str = "details from AWS", status: int = 400) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "ConverseStream",
    )


def stream_error(code: str, message: str = "details from the stream") -> EventStreamError:
    # What botocore's EventStream raises for an exception event: the union member's name.
    return EventStreamError({"Error": {"Code": code, "Message": message}}, "ConverseStream")


def stubbed_client() -> tuple[Any, Stubber]:
    session = botocore.session.get_session()
    client = session.create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return client, Stubber(client)


# -- the conversation ----------------------------------------------------------------------------


def test_multi_turn_history_becomes_alternating_messages() -> None:
    history = [
        agent("Welcome!"),  # before the first user message: Converse must start with the user
        user("Plan a trip."),
        agent("Where to?"),
        agent("And when?"),
        user("Lisbon."),
        user("In May."),
    ]
    assert conversation(history) == [
        {"role": "user", "content": [{"text": "Plan a trip."}]},
        {"role": "assistant", "content": [{"text": "Where to?"}, {"text": "And when?"}]},
        {"role": "user", "content": [{"text": "Lisbon."}, {"text": "In May."}]},
    ]


def test_trailing_agent_messages_are_left_out() -> None:
    # A progress message after the user's: the model answers the user, so the user is last.
    messages = conversation([user("hi"), agent("thinking...")])
    assert messages == [{"role": "user", "content": [{"text": "hi"}]}]


def test_non_text_parts_are_described() -> None:
    message = Message(
        message_id="m",
        role=Role.USER,
        parts=[
            Part(text="Summarize:"),
            Part(data={"rows": [1, 2]}),
            Part(url="https://example.com/a.pdf", filename="a.pdf", media_type="application/pdf"),
            Part(raw="aGVsbG8=", media_type="image/png"),
        ],
    )
    (only,) = conversation([message])
    texts = [block["text"] for block in only["content"]]
    assert texts[0] == "Summarize:"
    assert texts[1] == '[data: {"rows": [1, 2]}]'
    assert texts[2] == "[file a.pdf, application/pdf: not shown to the model]"
    assert texts[3] == "[file unnamed, image/png: not shown to the model]"


def test_stored_history_text_is_read_back_for_the_model() -> None:
    content = InMemoryContentStore()
    content.put("t1", "text.long", b"a long question", "text/plain")
    content.put("t1", "raw.photo", b"\x89PNG", "image/png")
    earlier = Message(
        message_id="u-0",
        role=Role.USER,
        parts=[Part(url=reference("text.long")), Part(url=reference("raw.photo"))],
    )
    ctx = context([earlier, agent("Which part?"), user("The end.")], Recorder())
    ctx.content = content
    fake = FakeBedrock(answer("ok"))
    make_flow(fake).run_step(ctx)
    assert fake.requests[0]["messages"][0]["content"] == [
        {"text": "a long question"},
        {"text": "[file unnamed: not shown to the model]"},
    ]
    assert content.opened == [("t1", "text.long")]  # the file is not read


def test_request_carries_system_prompt_and_inference_settings() -> None:
    fake = FakeBedrock(answer("ok"))
    flow = make_flow(fake, top_p=0.9)
    flow.run_step(context([user("Plan a trip.")], Recorder()))
    (request,) = fake.requests
    assert request == {
        "modelId": MODEL,
        "messages": [{"role": "user", "content": [{"text": "Plan a trip."}]}],
        "inferenceConfig": {"maxTokens": 100, "temperature": 0.3, "topP": 0.9},
        "system": [{"text": "Be brief."}],
    }
    bare = make_flow(FakeBedrock(), system_prompt="").request([{"role": "user"}])
    assert "system" not in bare
    assert "topP" not in bare["inferenceConfig"]


def test_settings_are_read_at_the_first_step_and_arguments_win() -> None:
    env = {"BEDROCK_MODEL_ID": "anthropic.claude-3-haiku-20240307-v1:0", "BEDROCK_MAX_TOKENS": "77"}
    flow = BedrockFlow(FakeBedrock(), temperature=0.0)  # made before the environment is set
    with mock.patch.dict(os.environ, env):
        get_settings.cache_clear()
        try:
            request = flow.request([])
        finally:
            get_settings.cache_clear()
    assert request["modelId"] == "anthropic.claude-3-haiku-20240307-v1:0"
    assert request["inferenceConfig"]["maxTokens"] == 77
    assert request["inferenceConfig"]["temperature"] == 0.0


# -- streaming -----------------------------------------------------------------------------------


def test_answer_streams_as_append_chunks_with_usage_on_the_last() -> None:
    fake = FakeBedrock(answer("Lis", "bon ", "in ", "May ", "is ", "lovely."))
    recorder = Recorder()
    # Each clock reading is 0.1 s later; chunks at most every 0.25 s.
    flow = make_flow(fake, clock=Clock(0.1), flush_seconds=0.25)
    outcome = flow.run_step(context([user("Lisbon?")], recorder))
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.message is None
    assert recorder.text == "Lisbon in May is lovely."
    chunks = recorder.chunks
    assert 2 <= len(chunks) < 6  # fewer writes than tokens, the first token at once
    assert chunks[0].parts[0].text == "Lis"
    assert [c.append for c in chunks] == [False] + [True] * (len(chunks) - 1)
    assert [c.last_chunk for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert {c.artifact_id for c in chunks} == {"answer"}
    assert chunks[-1].metadata == {
        METADATA_KEY: {
            "modelId": MODEL,
            "stopReason": "end_turn",
            "usage": {"inputTokens": 12, "outputTokens": 6, "totalTokens": 18},
            "latencyMs": 321,
        }
    }
    assert all(c.metadata is None for c in chunks[:-1])
    assert fake.streams[0].closed


def test_fast_tokens_are_batched_into_few_writes() -> None:
    tokens = [f"t{i} " for i in range(200)]
    recorder = Recorder()
    flow = make_flow(FakeBedrock(answer(*tokens)), clock=Clock(0.0))  # all within one instant
    flow.run_step(context([user("count")], recorder))
    assert len(recorder.chunks) == 2  # the first token, then the rest with the last chunk
    assert recorder.text == "".join(tokens)


def test_a_large_burst_is_flushed_by_size() -> None:
    tokens = ["x" * 100] * 50
    recorder = Recorder()
    flow = make_flow(FakeBedrock(answer(*tokens)), clock=Clock(0.0), flush_chars=1000)
    flow.run_step(context([user("x")], recorder))
    assert recorder.text == "x" * 5000
    assert 5 <= len(recorder.chunks) <= 7


@pytest.mark.parametrize(
    ("stop", "kind", "says"),
    [
        ("end_turn", OutcomeKind.COMPLETED, None),
        ("stop_sequence", OutcomeKind.COMPLETED, None),
        ("max_tokens", OutcomeKind.COMPLETED, "token limit (100 tokens)"),
        ("model_context_window_exceeded", OutcomeKind.COMPLETED, "context window"),
        ("guardrail_intervened", OutcomeKind.REJECTED, "guardrail"),
        ("content_filtered", OutcomeKind.REJECTED, "content filter"),
        ("tool_use", OutcomeKind.FAILED, "tool_use"),
        ("malformed_model_output", OutcomeKind.FAILED, "malformed_model_output"),
    ],
)
def test_stop_reasons(stop: str, kind: OutcomeKind, says: str | None) -> None:
    recorder = Recorder()
    outcome = make_flow(FakeBedrock(answer("Some ", "text", stop=stop))).run_step(
        context([user("q")], recorder)
    )
    assert outcome.kind is kind
    if says is None:
        assert outcome.message is None
    else:
        assert isinstance(outcome.message, str) and says in outcome.message
    assert recorder.chunks[-1].last_chunk
    assert recorder.chunks[-1].metadata[METADATA_KEY]["stopReason"] == stop  # type: ignore[index]


def test_an_empty_answer_writes_no_artifact() -> None:
    recorder = Recorder()
    outcome = make_flow(FakeBedrock(answer())).run_step(context([user("q")], recorder))
    assert outcome.kind is OutcomeKind.COMPLETED
    assert outcome.message == "The model gave an empty answer."
    assert recorder.chunks == []


def test_nothing_to_answer_is_rejected_without_a_call() -> None:
    fake = FakeBedrock()
    outcome = make_flow(fake).run_step(context([agent("only me")], Recorder()))
    assert outcome.kind is OutcomeKind.REJECTED
    assert fake.requests == []


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "says"),
    [
        ("AccessDeniedException", 403, f"may not use the model {MODEL}"),
        ("ValidationException", 400, "refused the request"),
        ("ResourceNotFoundException", 404, "was not found"),
        ("ModelTimeoutException", 408, "took too long"),
        ("ModelErrorException", 424, "failed while producing"),
        ("ModelNotReadyException", 429, "not ready"),
        ("InternalServerException", 500, "internal error"),
    ],
)
def test_call_errors_fail_the_task_with_a_clear_message(code: str, status: int, says: str) -> None:
    client, stubber = stubbed_client()
    stubber.add_client_error(
        "converse_stream",
        service_error_code=code,
        service_message="arn:aws:iam::123456789012:role/secret-role is not authorized",
        http_status_code=status,
    )
    recorder = Recorder()
    with stubber:
        outcome = make_flow(client).run_step(context([user("q")], recorder))
    stubber.assert_no_pending_responses()
    assert outcome.kind is OutcomeKind.FAILED
    assert isinstance(outcome.message, str) and says in outcome.message
    # The service's own message (ARNs, account ids) never reaches the client.
    assert "secret-role" not in outcome.message and "123456789012" not in outcome.message
    assert recorder.chunks == []


def test_throttling_is_retried_then_fails() -> None:
    client, stubber = stubbed_client()
    for _ in range(3):
        stubber.add_client_error(
            "converse_stream", service_error_code="ThrottlingException", http_status_code=429
        )
    slept: list[float] = []
    with stubber:
        outcome = make_flow(client, sleep=slept.append).run_step(context([user("q")], Recorder()))
    stubber.assert_no_pending_responses()  # 1 call + 2 retries, then no more
    assert slept == [2.0, 4.0]
    assert outcome.kind is OutcomeKind.FAILED
    assert isinstance(outcome.message, str) and "throttling" in outcome.message


def test_throttling_then_success_completes() -> None:
    fake = FakeBedrock(client_error("ThrottlingException", status=429), answer("fine"))
    recorder = Recorder()
    outcome = make_flow(fake).run_step(context([user("q")], recorder))
    assert outcome.kind is OutcomeKind.COMPLETED
    assert recorder.text == "fine"
    assert len(fake.requests) == 2


def test_throttling_in_the_stream_before_any_text_is_retried() -> None:
    fake = FakeBedrock(
        [{"messageStart": {"role": "assistant"}}, stream_error("throttlingException")],
        answer("second try"),
    )
    recorder = Recorder()
    outcome = make_flow(fake).run_step(context([user("q")], recorder))
    assert outcome.kind is OutcomeKind.COMPLETED
    assert recorder.text == "second try"
    assert fake.streams[0].closed


def test_an_error_after_partial_text_closes_the_artifact_and_fails() -> None:
    events = [*answer("Half ", "an ")[:4], {"throttlingException": {"message": "slow down"}}]
    fake = FakeBedrock(events, answer("never asked"))
    recorder = Recorder()
    outcome = make_flow(fake).run_step(context([user("q")], recorder))
    assert outcome.kind is OutcomeKind.FAILED
    assert isinstance(outcome.message, str) and "incomplete" in outcome.message
    assert len(fake.requests) == 1  # the client saw text already: no retry
    assert recorder.text.startswith("Half ")
    last = recorder.chunks[-1]
    assert last.last_chunk
    assert last.metadata == {METADATA_KEY: {"modelId": MODEL, "error": "throttlingException"}}


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (stream_error("modelStreamErrorException"), "failed while producing"),
        (stream_error("validationException"), "refused the request"),
        (stream_error("internalServerException"), "internal error"),
        (ReadTimeoutError(endpoint_url="https://bedrock-runtime"), "did not answer in time"),
    ],
)
def test_stream_errors_fail_the_task(error: Exception, says: str) -> None:
    fake = FakeBedrock([{"messageStart": {"role": "assistant"}}, error])
    outcome = make_flow(fake, throttle_retries=0).run_step(context([user("q")], Recorder()))
    assert outcome.kind is OutcomeKind.FAILED
    assert isinstance(outcome.message, str) and says in outcome.message
    assert "details from the stream" not in outcome.message
    assert fake.streams[0].closed


def test_a_bug_is_not_disguised_as_a_bedrock_failure() -> None:
    # Not a botocore error: it propagates, and the state machine's Catch fails the task.
    fake = FakeBedrock([{"messageStart": {"role": "assistant"}}, KeyError("oops")])
    with pytest.raises(KeyError):
        make_flow(fake).run_step(context([user("q")], Recorder()))
    assert fake.streams[0].closed


# -- cancel --------------------------------------------------------------------------------------


def test_cancel_stops_reading_and_closes_the_stream() -> None:
    tokens = [f"w{i} " for i in range(100)]
    fake = FakeBedrock(answer(*tokens))
    recorder = Recorder(cancel_at=2)  # the third write finds the task canceled
    flow = make_flow(fake, clock=Clock(1.0))  # every token is its own chunk
    with pytest.raises(FlowCanceled):
        flow.run_step(context([user("q")], recorder))
    stream = fake.streams[0]
    assert stream.closed
    assert stream.consumed < 10  # stopped within a token of the cancel, not at the end
    assert len(recorder.chunks) == 2


# -- the client ----------------------------------------------------------------------------------


def test_client_is_made_lazily_with_adaptive_retries_and_a_long_read_timeout() -> None:
    flow = BedrockFlow(region="eu-west-1")
    assert flow._client is None
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    with mock.patch.dict(os.environ, env):
        client = flow.client
    assert client.meta.service_model.service_name == "bedrock-runtime"
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.config.retries["mode"] == "adaptive"
    assert client.meta.config.read_timeout == 300
    assert flow.client is client


# -- through the real FlowWorker over the in-memory store ------------------------------------------


def add_task(store: InMemoryTaskStore, text: str) -> None:
    add_submitted_task(store, user(text))


def test_a_turn_through_the_flow_worker_completes_with_the_streamed_artifact() -> None:
    store = InMemoryTaskStore()
    add_task(store, "Lisbon?")
    fake = FakeBedrock(answer("Lis", "bon ", "in ", "May."))
    flow = make_flow(fake, clock=Clock(0.1), flush_seconds=0.15)
    assert FlowWorker(store, flow).handle({"taskId": "t-1", "turn": 1})["continue"] is False
    queries = TaskQueries(store, NoExecutions(), PollPolicy())  # type: ignore[arg-type]
    task = queries.get_task("alice", "t-1")
    assert task.status.state is TaskState.COMPLETED
    (artifact,) = task.artifacts or []
    assert "".join(p.text or "" for p in artifact.parts) == "Lisbon in May."
    assert (artifact.metadata or {})[METADATA_KEY]["stopReason"] == "end_turn"
    assert fake.requests[0]["messages"] == [{"role": "user", "content": [{"text": "Lisbon?"}]}]


def test_a_failure_through_the_flow_worker_ends_the_task_failed_with_the_message() -> None:
    store = InMemoryTaskStore()
    add_task(store, "q")
    flow = make_flow(FakeBedrock(client_error("AccessDeniedException", status=403)))
    FlowWorker(store, flow).handle({"taskId": "t-1", "turn": 1})
    queries = TaskQueries(store, NoExecutions(), PollPolicy())  # type: ignore[arg-type]
    task = queries.get_task("alice", "t-1")
    assert task.status.state is TaskState.FAILED
    assert task.status.message is not None
    assert "may not use the model" in (task.status.message.parts[0].text or "")


def test_cancel_through_the_flow_worker_stops_the_model_stream() -> None:
    """CancelTask (core) ends the task while tokens stream; the next chunk's write loses to it
    and the flow closes the model's stream."""
    store = InMemoryTaskStore()
    add_task(store, "q")
    queries = TaskQueries(store, NoExecutions(), PollPolicy())  # type: ignore[arg-type]

    class CancelingStream(FakeStream):
        def __iter__(self) -> Iterator[dict[str, Any]]:
            for index, event in enumerate(super().__iter__()):
                if index == 3:  # after the first chunk was written
                    queries.cancel_task("alice", "t-1")
                yield event

    tokens = [f"w{i} " for i in range(50)]
    fake = FakeBedrock()
    stream = CancelingStream(answer(*tokens))
    fake.converse_stream = lambda **request: {"stream": stream}  # type: ignore[method-assign]
    flow = make_flow(fake, clock=Clock(1.0))  # every token is its own chunk
    FlowWorker(store, flow).handle({"taskId": "t-1", "turn": 1})
    task = queries.get_task("alice", "t-1")
    assert task.status.state is TaskState.CANCELED
    assert stream.closed and stream.consumed < 10
    assert [p.text for a in task.artifacts or [] for p in a.parts] == ["w0 ", "w1 "]
