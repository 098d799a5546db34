"""An LLM agent on Amazon Bedrock: the task's conversation goes to a model through ConverseStream,
and the answer streams back as chunks of one artifact.

Select it with `FLOW=a2a_serverless.flows.bedrock:flow`, or subclass / construct BedrockFlow
(a flow of your own needs the template's `FlowUsesBedrock=true`). Model, prompt and inference
settings come from the BEDROCK_* settings or the constructor, which also takes a ready
`bedrock-runtime` client. Tokens are written as one chunk every FLUSH_SECONDS (or
FLUSH_CHARS); model errors end the task failed with a message saying which; a cancel is seen
at the next chunk written. The local stack replaces `new_client` (moto has no Bedrock).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from a2a_serverless.flows.base import Flow, Outcome, StepContext
from a2a_serverless.models import AgentSkill, Message, Part, Role
from a2a_serverless.settings import get_settings
from a2a_serverless.store.content import stored_name

logger = logging.getLogger(__name__)

ARTIFACT_ID = "answer"
# A chunk is written when this long has passed since the last one (the first token goes at
# once), or when this much text is waiting: about 5 writes a second while the model streams.
FLUSH_SECONDS = 0.2
FLUSH_CHARS = 2048
# Extra attempts when Bedrock throttles (or is unavailable) before anything was written; the
# SDK's own adaptive retries come first, these cover an error that arrives in the stream.
THROTTLE_RETRIES = 2
RETRY_BASE_SECONDS = 2.0
# botocore: the socket read timeout bounds the wait for the next stream event (the first one
# waits for the model to read the whole prompt); well inside the worker's 900 s step.
READ_TIMEOUT_SECONDS = 300
CONNECT_TIMEOUT_SECONDS = 10
SDK_MAX_ATTEMPTS = 4
# A `data` part is sent as JSON text, cut to this many characters.
MAX_DATA_CHARS = 8000
# The key of the Bedrock details (model, stop reason, token usage) in the artifact metadata.
METADATA_KEY = "bedrock"


@dataclass(frozen=True)
class BedrockConfig:
    model_id: str
    system_prompt: str
    max_tokens: int
    temperature: float
    top_p: float | None
    region: str


class BedrockFailure(Exception):
    """A Bedrock call that ended the turn: `message` is what the client is told."""

    def __init__(self, message: str, code: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable


# -- the conversation --------------------------------------------------------------------------


def part_text(part: Part) -> str | None:
    """What the model is shown of one part: text as is, data as JSON, a file by its name."""
    if part.text is not None:
        return part.text
    if part.data is not None or "data" in part.model_fields_set:
        rendered = json.dumps(part.data, ensure_ascii=False, default=str)
        if len(rendered) > MAX_DATA_CHARS:
            rendered = rendered[:MAX_DATA_CHARS] + "…"
        return f"[data: {rendered}]"
    # A stored file's reference names nothing the model should see.
    name = part.filename or (part.url if stored_name(part) is None else None) or "unnamed"
    kind = f", {part.media_type}" if part.media_type else ""
    return f"[file {name}{kind}: not shown to the model]"


def conversation(history: Iterable[Message]) -> list[dict[str, Any]]:
    """The history as Converse messages: roles alternate, the first and last are the user's
    (an agent message before the first user message, or after the last, is left out)."""
    messages: list[dict[str, Any]] = []
    for message in history:
        role = "user" if message.role is Role.USER else "assistant"
        blocks = [{"text": text} for part in message.parts if (text := part_text(part))]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        elif messages or role == "user":
            messages.append({"role": role, "content": blocks})
    while messages and messages[-1]["role"] != "user":
        messages.pop()
    return messages


# -- errors --------------------------------------------------------------------------------------


def _error_code(error: BaseException) -> str | None:
    """The AWS error code of a botocore ClientError (EventStreamError included), or None."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def _class_names(error: BaseException) -> set[str]:
    # botocore's exception classes are matched by name so that this module never imports
    # botocore (the card function imports the flow and must stay quick to start).
    return {cls.__name__ for cls in type(error).__mro__}


def _failure_for_code(code: str, model_id: str) -> BedrockFailure:
    key = code.lower()  # stream error events are lowerCamel (throttlingException)
    if key in ("throttlingexception", "servicequotaexceededexception"):
        return BedrockFailure(
            "Amazon Bedrock is throttling requests to this model (too many requests or "
            "tokens for the account's quota); please try again later.",
            code,
            retryable=True,
        )
    if key == "serviceunavailableexception":
        return BedrockFailure(
            "Amazon Bedrock is unavailable right now; please try again later.",
            code,
            retryable=True,
        )
    if key == "accessdeniedexception":
        return BedrockFailure(
            f"This agent may not use the model {model_id}: enable access to it in the Amazon "
            "Bedrock console and check the agent's IAM permissions.",
            code,
        )
    if key in ("unrecognizedclientexception", "expiredtokenexception", "invalidsignatureexception"):
        return BedrockFailure("Amazon Bedrock did not accept this agent's credentials.", code)
    if key == "resourcenotfoundexception":
        return BedrockFailure(f"The model {model_id} was not found in this Region.", code)
    if key == "validationexception":
        return BedrockFailure(
            f"Amazon Bedrock refused the request to {model_id} as invalid (an unknown model "
            "id, settings the model does not take, or a conversation too long for it).",
            code,
        )
    if key == "modelnotreadyexception":
        return BedrockFailure(f"The model {model_id} is not ready; please try again.", code)
    if key == "modeltimeoutexception":
        return BedrockFailure("The model took too long to answer.", code)
    if key in ("modelstreamerrorexception", "modelerrorexception"):
        return BedrockFailure("The model failed while producing its answer.", code)
    if key == "internalserverexception":
        return BedrockFailure("Amazon Bedrock had an internal error; please try again.", code)
    return BedrockFailure(f"The call to Amazon Bedrock failed ({code}).", code)


def classify(error: BaseException, model_id: str) -> BedrockFailure | None:
    """The failure a Bedrock call's exception means, or None when it is not one (a bug)."""
    if isinstance(error, BedrockFailure):
        return error
    code = _error_code(error)
    if code is not None:
        return _failure_for_code(code, model_id)
    names = _class_names(error)
    if names & {"ReadTimeoutError", "ConnectTimeoutError"}:
        return BedrockFailure("Amazon Bedrock did not answer in time.", type(error).__name__)
    if names & {"EndpointConnectionError", "ConnectionError"}:
        return BedrockFailure("Amazon Bedrock could not be reached.", type(error).__name__)
    if "NoCredentialsError" in names:
        return BedrockFailure(
            "This agent has no AWS credentials for Amazon Bedrock.", "NoCredentials"
        )
    if "BotoCoreError" in names:
        return BedrockFailure(
            f"The call to Amazon Bedrock failed ({type(error).__name__}).", type(error).__name__
        )
    return None


def _raise_as_failure(error: Exception, model_id: str, what: str) -> NoReturn:
    """Raise the failure `error` means (`classify`), logged as `what`; a bug as it is."""
    failure = classify(error, model_id)
    if failure is None:
        raise error
    logger.warning("%s: %s", what, error)
    raise failure from None


# Error members of the ConverseStream output union; botocore raises them as EventStreamError,
# a stream given as plain dicts (a stub) carries them as events.
_STREAM_ERRORS = (
    "internalServerException",
    "modelStreamErrorException",
    "validationException",
    "throttlingException",
    "serviceUnavailableException",
)


# -- streaming the answer ------------------------------------------------------------------------


class _ChunkWriter:
    """Collects the answer's text and writes it as append chunks of one artifact, at most one
    per FLUSH_SECONDS unless FLUSH_CHARS are waiting."""

    def __init__(
        self,
        ctx: StepContext,
        flush_seconds: float,
        flush_chars: int,
        clock: Callable[[], float],
    ) -> None:
        self._ctx = ctx
        self._flush_seconds = flush_seconds
        self._flush_chars = flush_chars
        self._clock = clock
        self._buffer: list[str] = []
        self._buffered = 0
        self._last: float | None = None
        self.chunks = 0
        self.chars = 0

    def add(self, text: str) -> None:
        self._buffer.append(text)
        self._buffered += len(text)
        now = self._clock()
        if (
            self._last is None
            or now - self._last >= self._flush_seconds
            or self._buffered >= self._flush_chars
        ):
            self._write(last_chunk=False)
            self._last = now

    def finish(self, metadata: dict[str, Any]) -> None:
        """The last chunk (what is still buffered, maybe nothing) with the metadata; nothing
        at all when the model said nothing."""
        if self.chunks or self._buffered:
            self._write(last_chunk=True, metadata=metadata)

    def _write(self, *, last_chunk: bool, metadata: dict[str, Any] | None = None) -> None:
        text = "".join(self._buffer)
        self._buffer.clear()
        self._buffered = 0
        self._ctx.artifact(
            text,
            artifact_id=ARTIFACT_ID,
            name=ARTIFACT_ID,
            append=self.chunks > 0,
            last_chunk=last_chunk,
            metadata=metadata,
        )
        self.chunks += 1
        self.chars += len(text)


@dataclass
class _Answer:
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None
    latency_ms: int | None = None


# Stop reasons (StopReason): what the task becomes, and what its status message says.
_CUT_OFF = {
    "max_tokens": "The answer was cut off at the token limit ({max_tokens} tokens).",
    "model_context_window_exceeded": "The answer was cut off: the model's context window is full.",
}
_FILTERED = ("guardrail_intervened", "content_filtered")


class BedrockFlow(Flow):
    """Answers each message with a model on Amazon Bedrock (ConverseStream)."""

    name = "bedrock"
    title = "Bedrock Agent"
    description = "An assistant answering with a large language model on Amazon Bedrock."
    skills = [
        AgentSkill(
            id="chat",
            name="Chat",
            description="Answers questions and requests in natural language; the answer "
            "streams as an artifact.",
            tags=["llm", "chat", "bedrock"],
            examples=["Explain the A2A protocol in two sentences."],
        )
    ]
    input_modes = ["text/plain", "application/json"]
    output_modes = ["text/plain"]

    def __init__(
        self,
        client: Any | None = None,
        *,
        model_id: str | None = None,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        region: str | None = None,
        flush_seconds: float = FLUSH_SECONDS,
        flush_chars: int = FLUSH_CHARS,
        throttle_retries: int = THROTTLE_RETRIES,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._overrides = {
            "model_id": model_id,
            "system_prompt": system_prompt,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "region": region,
        }
        self._config: BedrockConfig | None = None
        self.flush_seconds = flush_seconds
        self.flush_chars = flush_chars
        self.throttle_retries = throttle_retries
        self._sleep = sleep
        self._clock = clock

    @property
    def config(self) -> BedrockConfig:
        """Constructor arguments over settings, read at the first step (not at import)."""
        if self._config is None:
            settings = get_settings()
            values: dict[str, Any] = {
                "model_id": settings.bedrock_model_id,
                "system_prompt": settings.bedrock_system_prompt,
                "max_tokens": settings.bedrock_max_tokens,
                "temperature": settings.bedrock_temperature,
                "top_p": settings.bedrock_top_p,
                "region": settings.bedrock_region,
            }
            values.update({k: v for k, v in self._overrides.items() if v is not None})
            self._config = BedrockConfig(**values)
        return self._config

    @property
    def client(self) -> Any:
        """The bedrock-runtime client, made at first use (`new_client`)."""
        if self._client is None:
            self._client = new_client(self.config)
        return self._client

    def request(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The ConverseStream request for a conversation."""
        config = self.config
        inference: dict[str, Any] = {
            "maxTokens": config.max_tokens,
            "temperature": config.temperature,
        }
        if config.top_p is not None:
            inference["topP"] = config.top_p
        request: dict[str, Any] = {
            "modelId": config.model_id,
            "messages": messages,
            "inferenceConfig": inference,
        }
        if config.system_prompt:
            request["system"] = [{"text": config.system_prompt}]
        return request

    def step(self, ctx: StepContext) -> Outcome:
        messages = conversation(ctx.restore(message) for message in ctx.history)
        if not messages:
            return Outcome.rejected("There is nothing to answer: the message has no content.")
        request = self.request(messages)
        attempt = 0
        while True:
            writer = _ChunkWriter(ctx, self.flush_seconds, self.flush_chars, self._clock)
            try:
                answer = self._stream(request, writer)
            except BedrockFailure as failure:
                logger.warning(
                    "Bedrock call to %s failed: %s (attempt %d, %d chunks written)",
                    request["modelId"],
                    failure.code,
                    attempt + 1,
                    writer.chunks,
                )
                # Retried only while the client has seen nothing of this attempt.
                if failure.retryable and writer.chunks == 0 and attempt < self.throttle_retries:
                    self._sleep(RETRY_BASE_SECONDS * 2**attempt)
                    attempt += 1
                    continue
                return self._failed(writer, failure)
            return self._finished(writer, answer)

    def _stream(self, request: dict[str, Any], writer: _ChunkWriter) -> _Answer:
        model_id = request["modelId"]
        try:
            response = self.client.converse_stream(**request)
        except Exception as error:
            _raise_as_failure(error, model_id, "ConverseStream refused")
        stream = response["stream"]
        answer = _Answer()
        try:
            for event in _events(stream, model_id):
                if "contentBlockDelta" in event:
                    text = event["contentBlockDelta"].get("delta", {}).get("text")
                    if text:
                        writer.add(text)  # raises FlowCanceled once the task was canceled
                elif "messageStop" in event:
                    answer.stop_reason = event["messageStop"].get("stopReason")
                elif "metadata" in event:
                    answer.usage = event["metadata"].get("usage")
                    latency = event["metadata"].get("metrics", {}).get("latencyMs")
                    answer.latency_ms = int(latency) if latency is not None else None
        finally:
            # Stop the model's stream (and its billing) on a cancel or an error.
            close = getattr(stream, "close", None)
            if callable(close):
                close()
        return answer

    def _metadata(self, answer: _Answer | None, error: str | None = None) -> dict[str, Any]:
        details: dict[str, Any] = {"modelId": self.config.model_id}
        if answer is not None:
            if answer.stop_reason is not None:
                details["stopReason"] = answer.stop_reason
            if answer.usage is not None:
                details["usage"] = answer.usage
            if answer.latency_ms is not None:
                details["latencyMs"] = answer.latency_ms
        if error is not None:
            details["error"] = error
        return {METADATA_KEY: details}

    def _finished(self, writer: _ChunkWriter, answer: _Answer) -> Outcome:
        writer.finish(self._metadata(answer))
        reason = answer.stop_reason
        if reason in _FILTERED:
            return Outcome.rejected(
                "The answer was stopped by a content filter"
                + (" (a Bedrock guardrail)." if reason == "guardrail_intervened" else ".")
            )
        if reason in _CUT_OFF:
            return Outcome.completed(_CUT_OFF[reason].format(max_tokens=self.config.max_tokens))
        if reason in (None, "end_turn", "stop_sequence"):
            if writer.chunks == 0:
                return Outcome.completed("The model gave an empty answer.")
            return Outcome.completed()
        # tool_use (this agent offers no tools), malformed_model_output, malformed_tool_use.
        return Outcome.failed(f"The model stopped without a usable answer ({reason}).")

    def _failed(self, writer: _ChunkWriter, failure: BedrockFailure) -> Outcome:
        if writer.chunks:
            # Close the artifact the client has been reading, so it knows it is partial.
            writer.finish(self._metadata(None, error=failure.code))
            return Outcome.failed(f"{failure.message} The answer so far is incomplete.")
        return Outcome.failed(failure.message)


def new_client(
    config: BedrockConfig, session: Any = None, default_region: str | None = None
) -> Any:
    """A bedrock-runtime client for `config`, from `session` (a boto3 Session; None: boto3's
    default one) in config.region, else `default_region`, else the session's. boto3 is
    imported only here."""
    import boto3
    from botocore.config import Config

    client_config = Config(
        retries={"mode": "adaptive", "max_attempts": SDK_MAX_ATTEMPTS},
        read_timeout=READ_TIMEOUT_SECONDS,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
    )
    return (session or boto3).client(
        "bedrock-runtime", region_name=config.region or default_region or None, config=client_config
    )


def _events(stream: Iterable[dict[str, Any]], model_id: str) -> Iterator[dict[str, Any]]:
    """The stream's events; an error, raised by botocore or carried as an event, as a
    BedrockFailure."""
    iterator = iter(stream)
    while True:
        try:
            event = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            _raise_as_failure(error, model_id, "ConverseStream failed while streaming")
        for name in _STREAM_ERRORS:
            if name in event:
                logger.warning("ConverseStream error event %s: %s", name, event[name])
                raise _failure_for_code(name, model_id)
        yield event


flow = BedrockFlow()
