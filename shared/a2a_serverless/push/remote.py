"""A synchronous client for a remote A2A agent: resolve its Agent Card, then send a message
(non-blocking, a push config inline), get, cancel, or set a push config on one of its tasks.

- Every request (the card too) goes through the egress guard (`vet_url`) and is made at the
  vetted, pinned address (`request_pinned`), with timeouts and a cap on what is read.
- The interface is chosen as the a2a-sdk client chooses it: the card's first interface (card
  order) whose binding we speak, JSON-RPC or HTTP+JSON, preferring that binding's A2A 1.0
  interface; interfaces of a version we do not speak (0.3) are passed over.
- A 0.3 card (`url`, `preferredTransport`, `additionalInterfaces`) is read as the a2a-sdk
  reads it; its interfaces are 0.3 ones, so it ends in `NoSupportedInterface`.
- Errors: `RemoteA2AError` (the agent answered an A2A error), `RemoteCallFailed` (no usable
  answer), `RemoteRefused` (the egress policy refuses the URL), `NoSupportedInterface`.
  Caller headers (credentials) are sent with every request and appear in no error or log.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from pydantic import ValidationError

from a2a_serverless.core.delegation import DelegationOutcome, RemoteFailure
from a2a_serverless.core.egress import EgressPolicy, UnsafeWebhookUrl, vet_url
from a2a_serverless.core.errors import ERRORS
from a2a_serverless.models import (
    AgentCard,
    AgentInterface,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    Task,
    TaskPushNotificationConfig,
)
from a2a_serverless.push.delivery import Answer, RequestFailed, request_pinned

if TYPE_CHECKING:
    import httpx

JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
PROTOCOL_VERSION = "1.0"
CARD_PATH = "/.well-known/agent-card.json"
MAX_CARD_BYTES = 1024 * 1024
MAX_ANSWER_BYTES = 4 * 1024 * 1024
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_REASON_BY_CODE = {row.jsonrpc_code: row.reason for row in ERRORS.values()}


class RemoteAgentError(RemoteFailure):
    """Any failure of a call to a remote agent (its `outcome` as a delegation sees it)."""


class RemoteA2AError(RemoteAgentError):
    """The remote agent answered an A2A error: ``reason`` names it (``TASK_NOT_FOUND``...),
    ``code`` is its JSON-RPC code or HTTP status, as the binding carried it."""

    def __init__(self, reason: str, code: int, message: str) -> None:
        super().__init__(f"the remote agent answered {reason} ({code}): {message}")
        self.outcome = DelegationOutcome.ERROR
        self.reason = reason
        self.code = code
        self.message = message


class RemoteCallFailed(RemoteAgentError):
    """No usable answer: no connection, a timeout, a body too large, an answer that is not
    A2A. ``retryable`` when trying again later may help."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        outcome = DelegationOutcome.UNREACHABLE if retryable else DelegationOutcome.ERROR
        super().__init__(message, outcome, retryable)


class RemoteRefused(RemoteAgentError):
    """The egress policy refuses the URL (``reason``: `UnsafeWebhookUrl`'s code)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, DelegationOutcome.REFUSED)
        self.reason = reason


class NoSupportedInterface(RemoteAgentError):
    """The card lists no interface we speak."""


def card_url_of(url: str) -> str:
    """The card's URL: ``url`` when its path ends in ``.json``, else the well-known path
    under it."""
    parts = urlsplit(url)
    if parts.path.endswith(".json"):
        return url
    return parts._replace(path=parts.path.rstrip("/") + CARD_PATH).geturl()


def parse_card(payload: Any) -> AgentCard:
    """A 1.0 card, or a 0.3 one with its interfaces as `supportedInterfaces` (as the a2a-sdk
    reads them). Raises ``RemoteCallFailed`` for anything else."""
    if isinstance(payload, dict) and "supportedInterfaces" not in payload and "url" in payload:
        payload = dict(payload)
        version = payload.get("protocolVersion") or "0.3.0"
        extra = payload.get("additionalInterfaces") or []
        payload["supportedInterfaces"] = [
            {
                "url": payload["url"],
                "protocolBinding": payload.get("preferredTransport") or JSONRPC,
                "protocolVersion": version,
            },
            *(
                {
                    "url": i.get("url"),
                    "protocolBinding": i.get("transport"),
                    "protocolVersion": version,
                }
                for i in extra
                if isinstance(i, dict)
            ),
        ]
    try:
        return AgentCard.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(card)"
        raise RemoteCallFailed(f"the agent card is not valid: {where}: {first['msg']}") from None


def _major_minor(version: str) -> tuple[int, int] | None:
    try:
        numbers = [int(p) for p in version.split(".")[:2]]
    except ValueError:
        return None
    return (numbers[0], numbers[1] if len(numbers) > 1 else 0) if numbers else None


def _speaks(interface: AgentInterface) -> bool:
    # No version counts as the current one, as the a2a-sdk client counts it.
    version = interface.protocol_version
    return interface.protocol_binding in (JSONRPC, HTTP_JSON) and (
        not version or _major_minor(version) == (1, 0)
    )


def choose_interface(card: AgentCard) -> AgentInterface:
    """The binding of the card's first interface we speak, and that binding's interface
    declaring 1.0 first (else its first without a version)."""
    spoken = [i for i in card.supported_interfaces if _speaks(i)]
    if not spoken:
        offered = ", ".join(
            f"{i.protocol_binding} {i.protocol_version or '(no version)'}"
            for i in card.supported_interfaces
        )
        raise NoSupportedInterface(
            f"the agent offers no interface this client speaks (JSONRPC or HTTP+JSON, A2A 1.0); "
            f"it offers: {offered or 'none'}"
        )
    binding = [i for i in spoken if i.protocol_binding == spoken[0].protocol_binding]
    return next((i for i in binding if i.protocol_version), binding[0])


@dataclass
class _Http:
    """The guarded, pinned, bounded requests of one client."""

    egress: EgressPolicy
    headers: Mapping[str, str] = field(repr=False)  # the caller's credentials
    resolve: Callable[..., list[Any]]
    transport: httpx.BaseTransport | None
    connect_timeout: float
    read_timeout: float

    def request(
        self,
        method: str,
        url: str,
        payload: Any = None,
        *,
        max_bytes: int,
        protocol: bool = True,
    ) -> Answer:
        try:
            target = vet_url(url, self.egress, self.resolve)
        except UnsafeWebhookUrl as exc:
            raise RemoteRefused(exc.reason, f"the remote agent's URL is refused: {exc}") from None
        headers = dict(self.headers)
        for name in [k for k in headers if k.lower() in _OURS]:
            del headers[name]
        # No transfer compression: the cap bounds the bytes as received and as decoded.
        headers.update({"Accept": "application/json", "Accept-Encoding": "identity"})
        body = None
        if protocol:
            headers["A2A-Version"] = PROTOCOL_VERSION
        if payload is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(payload, separators=(",", ":")).encode()
        try:
            return request_pinned(
                target,
                method,
                headers,
                body,
                max_bytes=max_bytes,
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
                transport=self.transport,
            )
        except RequestFailed as exc:
            raise RemoteCallFailed(f"the remote agent: {exc}", exc.retryable) from None


_OURS = frozenset(("accept", "accept-encoding", "a2a-version", "content-type", "content-length"))


def _json(answer: Answer) -> Any:
    try:
        return json.loads(answer.body)
    except (ValueError, UnicodeDecodeError):
        return None


def _reason_of(details: Any) -> str | None:
    """The reason of the first google.rpc ErrorInfo of ``details``."""
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and detail.get("@type") == _ERROR_INFO:
            reason = detail.get("reason")
            return reason if isinstance(reason, str) and reason else None
    return None


def _not_a2a(answer: Answer) -> RemoteCallFailed:
    retryable = answer.status >= 500 or answer.status in (408, 429)
    return RemoteCallFailed(
        f"the remote agent answered HTTP {answer.status} without an A2A answer", retryable
    )


def _parsed(model: type[Any], value: Any) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError:
        raise RemoteCallFailed(
            f"the remote agent's answer is not a valid {model.__name__}"
        ) from None


@dataclass
class RemoteAgent:
    """A remote agent's card and the interface chosen from it; one HTTP request per call."""

    card: AgentCard
    interface: AgentInterface
    _http: _Http = field(repr=False)

    @property
    def name(self) -> str:
        return self.card.name

    @property
    def push_notifications(self) -> bool:
        """Whether the card says the agent sends push notifications."""
        capabilities = self.card.capabilities
        return bool(capabilities is not None and capabilities.push_notifications)

    @classmethod
    def resolve(
        cls,
        card_url: str,
        *,
        egress: EgressPolicy,
        headers: Mapping[str, str] | None = None,
        resolve: Callable[..., list[Any]] = socket.getaddrinfo,
        transport: httpx.BaseTransport | None = None,
        connect_timeout: float = 3.0,
        read_timeout: float = 10.0,
    ) -> RemoteAgent:
        """GET the card (``card_url``, or the well-known path under a base URL) and choose
        its interface. ``resolve`` and ``transport`` are for tests."""
        http = _Http(egress, dict(headers or {}), resolve, transport, connect_timeout, read_timeout)
        answer = http.request(
            "GET", card_url_of(card_url), max_bytes=MAX_CARD_BYTES, protocol=False
        )
        if answer.status != 200:
            raise RemoteCallFailed(
                f"the agent card was not served (HTTP {answer.status})",
                answer.status >= 500 or answer.status in (408, 429),
            )
        payload = _json(answer)
        if not isinstance(payload, dict):
            raise RemoteCallFailed("the agent card is not a JSON object")
        card = parse_card(payload)
        return cls(card, choose_interface(card), http)

    @classmethod
    def from_card(
        cls,
        card: AgentCard,
        *,
        egress: EgressPolicy,
        headers: Mapping[str, str] | None = None,
        resolve: Callable[..., list[Any]] = socket.getaddrinfo,
        transport: httpx.BaseTransport | None = None,
        connect_timeout: float = 3.0,
        read_timeout: float = 10.0,
    ) -> RemoteAgent:
        """A client of a card already at hand (no request)."""
        http = _Http(egress, dict(headers or {}), resolve, transport, connect_timeout, read_timeout)
        return cls(card, choose_interface(card), http)

    # -- operations --------------------------------------------------------------------------

    def send(
        self, message: Message, *, push: TaskPushNotificationConfig | None = None
    ) -> Task | Message:
        """SendMessage, non-blocking (`returnImmediately`), with ``push`` inline if given."""
        request = SendMessageRequest(
            tenant=self.interface.tenant,
            message=message,
            configuration=SendMessageConfiguration(
                return_immediately=True, task_push_notification_config=push
            ),
        )
        result = self._call("SendMessage", "POST", "/message:send", request.wire())
        response = _parsed(SendMessageResponse, result)
        return response.task if response.task is not None else response.message

    def get_task(self, task_id: str, *, history_length: int | None = None) -> Task:
        query = {} if history_length is None else {"historyLength": history_length}
        path = f"/tasks/{quote(task_id, safe='')}" + (f"?{urlencode(query)}" if query else "")
        params = {"id": task_id, **query}
        return _parsed(Task, self._call("GetTask", "GET", path, self._tenanted(params)))

    def cancel_task(self, task_id: str) -> Task:
        path = f"/tasks/{quote(task_id, safe='')}:cancel"
        return _parsed(
            Task, self._call("CancelTask", "POST", path, self._tenanted({"id": task_id}))
        )

    def set_push_config(
        self, task_id: str, config: TaskPushNotificationConfig
    ) -> TaskPushNotificationConfig:
        body = config.model_copy(update={"task_id": task_id, "tenant": self.interface.tenant})
        path = f"/tasks/{quote(task_id, safe='')}/pushNotificationConfigs"
        result = self._call("CreateTaskPushNotificationConfig", "POST", path, body.wire())
        return _parsed(TaskPushNotificationConfig, result)

    # -- the two bindings ----------------------------------------------------------------------

    @property
    def _rest(self) -> bool:
        return self.interface.protocol_binding == HTTP_JSON

    def _tenanted(self, params: dict[str, Any]) -> dict[str, Any]:
        tenant = self.interface.tenant
        return {**params, "tenant": tenant} if tenant else params

    def _call(self, method: str, verb: str, path: str, params: dict[str, Any]) -> Any:
        if self._rest:
            return self._rest_call(verb, path, params)
        return self._rpc_call(method, params)

    def _rest_call(self, verb: str, path: str, body: dict[str, Any]) -> Any:
        # The body is the whole request, path fields and tenant included, as the a2a-sdk sends it.
        tenant = self.interface.tenant
        prefix = f"/{quote(tenant, safe='')}" if tenant else ""
        url = self.interface.url.rstrip("/") + prefix + path
        answer = self._http.request(
            verb, url, body if verb == "POST" else None, max_bytes=MAX_ANSWER_BYTES
        )
        payload = _json(answer)
        if 200 <= answer.status < 300:
            if not isinstance(payload, dict):
                raise RemoteCallFailed("the remote agent's answer is not a JSON object")
            return payload
        error = payload.get("error") if isinstance(payload, dict) else None
        if not isinstance(error, dict):
            raise _not_a2a(answer)
        reason = _reason_of(error.get("details")) or str(error.get("status") or "UNKNOWN")
        code = error.get("code")
        raise RemoteA2AError(
            reason,
            code if isinstance(code, int) else answer.status,
            str(error.get("message") or ""),
        )

    def _rpc_call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = str(uuid.uuid4())
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        answer = self._http.request("POST", self.interface.url, payload, max_bytes=MAX_ANSWER_BYTES)
        reply = _json(answer)
        if not isinstance(reply, dict) or ("result" not in reply and "error" not in reply):
            raise _not_a2a(answer)
        error = reply.get("error")
        if error is not None:
            if not isinstance(error, dict) or not isinstance(error.get("code"), int):
                raise RemoteCallFailed("the remote agent's JSON-RPC error is malformed")
            code = error["code"]
            reason = _reason_of(error.get("data")) or _REASON_BY_CODE.get(code, "UNKNOWN")
            raise RemoteA2AError(reason, code, str(error.get("message") or ""))
        if reply.get("id") != request_id:
            raise RemoteCallFailed("the remote agent answered another JSON-RPC request id")
        result = reply["result"]
        if not isinstance(result, dict):
            raise RemoteCallFailed("the remote agent's result is not a JSON object")
        return result
