"""`a2a-serverless smoke BASE_URL`: is the A2A endpoint at BASE_URL working, end to end?

One PASS / FAIL / SKIP line per check (agent-card, send-blocking, send-nonblocking, stream,
subscribe, push-config, jsonrpc; with --long, long-subscribe and long-request); exit 1 if any
failed. With a2a-sdk installed, bodies are parsed strictly as A2A 1.0 protobuf types; without
it, shapes, states and ids are checked. The checks are described in docs/deploy.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

CARD_PATH = "/.well-known/agent-card.json"
A2A_JSON = "application/a2a+json"
EVENT_STREAM = "text/event-stream"
DEFAULT_PUSH_URL = "https://example.com/a2a-smoke"
DEFAULT_TEXT = "a2a smoke test"
TERMINAL_STATES = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
# A stream closes and a blocking send returns after one of these (spec §3.1.2).
SETTLED_STATES = TERMINAL_STATES | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}
# Top-level fields the server adds to the card when AGENT_CARD_V03_FIELDS is on, for 0.3-only
# clients: deliberate, so they are set aside before the strict 1.0 parse.
CARD_V03_FIELDS = ("url", "preferredTransport", "protocolVersion")
# API Gateway's (REST) integration timeout: a route that does not stream is cut there.
GATEWAY_LIMIT_SECONDS = 29.0
# How far past the limit a long check's task runs.
LONG_MARGIN_SECONDS = 6
SUBSCRIBE_SLOW_SECONDS = 3
STREAM_SLOW_SECONDS = 3
# What proves the streaming path when the agent's own flow cannot: the same stack on the echo flow.
ECHO_FLOW = "a2a_serverless.flows.echo:flow"
PROVE_WITH_ECHO = f"deploy once with Flow={ECHO_FLOW} to prove it"
# A stream whose first event came less than this before its last one proves no live delivery.
LIVE_MARGIN_SECONDS = 0.5
POLL_SECONDS = 0.5

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


class CheckFailed(Exception):
    """The check found the endpoint wrong; the message says what and, when known, why."""


class CheckSkipped(Exception):
    """The check cannot apply to this agent; the message says why."""


@dataclass
class Result:
    name: str
    status: str
    seconds: float
    detail: str
    timings: dict[str, float] = field(default_factory=dict)


# -- small helpers -------------------------------------------------------------------------


def normalise_url(url: str) -> str:
    """scheme://host[:port]/path with the case-insensitive parts lowered, default ports and
    trailing slashes dropped: two spellings of one endpoint compare equal."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(scheme)
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    return f"{scheme}://{host}{port}{parts.path.rstrip('/')}"


def a2a_types() -> tuple[Any, Any] | None:
    """(a2a.types, protobuf's json_format), or None without a2a-sdk (an optional extra)."""
    # Imported here: `a2a-serverless --help` need not load protobuf.
    try:
        from a2a import types
        from google.protobuf import json_format  # type: ignore[import-untyped]
    except ImportError:
        return None
    return types, json_format


def strict(data: Any, type_name: str, what: str) -> Any:
    """Parse proto-JSON as A2A 1.0 clients do (as the a2a.types message `type_name`), but
    refusing unknown fields and enum spellings; without a2a-sdk, only that it is an object."""
    if not isinstance(data, dict):
        raise CheckFailed(f"{what} is not a JSON object: {_short(data)}")
    found = a2a_types()
    if found is None:
        return data
    types, json_format = found
    try:
        return json_format.ParseDict(data, getattr(types, type_name)(), ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise CheckFailed(f"{what} is not a strict A2A 1.0 {type_name}: {exc}") from None


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def error_reason(response: httpx.Response) -> str | None:
    """The google.rpc ErrorInfo reason of an HTTP+JSON error body, if it has one."""
    try:
        body = response.json()
        details = body["error"].get("details", [])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith(".ErrorInfo"):
            return str(detail.get("reason"))
    return None


def describe_error(response: httpx.Response) -> str:
    """One line on an unexpected HTTP answer, with the likely cause of the usual deploy errors."""
    status = response.status_code
    text = f"HTTP {status}"
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        words = [str(error.get("status") or ""), error_reason(response) or ""]
        text = " ".join([text, *filter(None, words)]) + f": {error.get('message', '')}"
    elif body is not None:
        text += f": {_short(body)}"
    elif response.content:
        text += f": {_short(response.text)}"
    message = body.get("message") if isinstance(body, dict) else None
    if status == 403 and message == "Missing Authentication Token":
        text += " (API Gateway has no such route: is the stage, e.g. /prod, in the base URL?)"
    elif status in (401, 403):
        text += " (authenticated stack? pass --api-key KEY, --token T or --header NAME:VALUE)"
    elif status == 504:
        text += " (the gateway timed out: see the function's logs)"
    return text


def json_answer(response: httpx.Response, request: str) -> Any:
    """The JSON body of a 200 answer to `request` (named in the error); CheckFailed otherwise."""
    if response.status_code != 200:
        raise CheckFailed(f"{request}: {describe_error(response)}")
    try:
        return response.json()
    except ValueError:
        raise CheckFailed(f"{request}: body is not JSON: {_short(response.text)}") from None


def user_message(text: str, task_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    return message


def send_body(text: str, *, return_immediately: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"message": user_message(text)}
    if return_immediately:
        body["configuration"] = {"returnImmediately": True}
    return body


def state_of(member: dict[str, Any]) -> str:
    return str(member.get("status", {}).get("state", "TASK_STATE_UNSPECIFIED"))


_T = TypeVar("_T")


def timed(timings: dict[str, float], name: str, call: Callable[[], _T]) -> _T:
    """`call()`, with its duration in seconds put in `timings[name]`."""
    started = time.perf_counter()
    result = call()
    timings[name] = round(time.perf_counter() - started, 3)
    return result


def _long_failure(elapsed: float, exc: Exception, limit: float) -> str:
    """A long request's failure, with the likely cause when it came at the gateway's limit."""
    cut = abs(elapsed - limit) < 3
    return f"after {elapsed:.1f} s: {exc}" + (
        f" — cut at the gateway's {limit:.0f} s limit: the route is buffered "
        "(its integration URI must end in response-streaming-invocations, "
        "ResponseTransferMode STREAM, timeoutInMillis raised)"
        if cut
        else ""
    )


# -- SSE -----------------------------------------------------------------------------------


@dataclass
class StreamRun:
    """What one SSE response carried, checked event by event as it arrived."""

    headers_s: float = 0.0
    first_byte_s: float | None = None
    first_event_s: float | None = None
    total_s: float = 0.0
    kinds: list[str] = field(default_factory=list)
    comments: int = 0
    task_id: str | None = None
    context_id: str | None = None
    first_state: str | None = None
    settled: str | None = None  # the state (or "message") after which the stream must close
    # A subscribe that starts on an interrupted task follows the task's next turn (it stays
    # open until the client answers): the reader stops after the snapshot.
    waiting_for_next_turn: bool = False

    def add(self, data: str, expect_task_id: str | None) -> None:
        try:
            payload = json.loads(data)
        except ValueError:
            raise CheckFailed(f"SSE data is not JSON: {_short(data)}") from None
        if not isinstance(payload, dict) or len(payload) != 1:
            raise CheckFailed(f"SSE data is not one StreamResponse member: {_short(data)}")
        strict(payload, "StreamResponse", "SSE event")
        kind, member = next(iter(payload.items()))
        if self.settled is not None:
            raise CheckFailed(f"{kind} event after the stream should have closed ({self.settled})")
        if not self.kinds:
            if kind not in ("task", "message"):
                raise CheckFailed(f"first event is {kind}, not a Task or a Message")
            if kind == "message":
                self.settled = "message"
            else:
                self.task_id, self.context_id = member.get("id"), member.get("contextId")
                self.first_state = state_of(member)
                if expect_task_id and self.task_id != expect_task_id:
                    raise CheckFailed(f"snapshot of task {self.task_id}, not {expect_task_id}")
        else:
            if kind not in ("statusUpdate", "artifactUpdate"):
                raise CheckFailed(f"{kind} event after the Task (only updates may follow)")
            ids = (member.get("taskId"), member.get("contextId"))
            if ids != (self.task_id, self.context_id):
                raise CheckFailed(f"{kind} of another task/context {ids}")
        if kind in ("task", "statusUpdate") and state_of(member) in SETTLED_STATES:
            self.settled = state_of(member)
        self.kinds.append(kind)

    def summary(self) -> str:
        counts = {kind: self.kinds.count(kind) for kind in dict.fromkeys(self.kinds)}
        events = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        return f"{len(self.kinds)} events ({events}), ended {self.settled}"

    def timings(self) -> dict[str, float]:
        values = {
            "headers_s": self.headers_s,
            "first_byte_s": self.first_byte_s,
            "first_event_s": self.first_event_s,
            "total_s": self.total_s,
        }
        return {k: round(v, 3) for k, v in values.items() if v is not None}


# -- the checks ----------------------------------------------------------------------------


class Smoke:
    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str],
        timeout: float,
        text: str,
        push_url: str,
        long: bool,
        limit: float = GATEWAY_LIMIT_SECONDS,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.text = text
        self.push_url = push_url
        self.long = long
        # The limit a long check must outlive, and how long its task runs.
        self.limit = limit
        self.long_slow = int(limit) + LONG_MARGIN_SECONDS
        self.client = httpx.Client(
            headers={"A2A-Version": "1.0", **headers},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=False,
        )
        # From the card. Without a readable card every feature is assumed on, so each check
        # still tries its operation and reports what the server answered.
        self.streaming = True
        self.push_notifications = True
        self.echo = False
        self.reachable = True

    def close(self) -> None:
        self.client.close()

    # -- transport ------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return self.base_url + path

    def rest(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, timeout: float = 0
    ) -> httpx.Response:
        headers = {"Content-Type": A2A_JSON} if body is not None else {}
        content = json.dumps(body).encode() if body is not None else None
        wait: Any = timeout or httpx.USE_CLIENT_DEFAULT
        return self.client.request(
            method, self.url(path), content=content, headers=headers, timeout=wait
        )

    def rest_ok(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, timeout: float = 0
    ) -> Any:
        return json_answer(self.rest(method, path, body, timeout=timeout), f"{method} {path}")

    def send(self, text: str, *, return_immediately: bool, timeout: float = 0) -> dict[str, Any]:
        """POST /message:send; the strict SendMessageResponse as JSON."""
        body = send_body(text, return_immediately=return_immediately)
        data = self.rest_ok("POST", "/message:send", body, timeout=timeout)
        strict(data, "SendMessageResponse", "SendMessageResponse")
        if not isinstance(data, dict) or set(data) not in ({"task"}, {"message"}):
            raise CheckFailed(f"SendMessageResponse is neither a task nor a message: {data}")
        return data

    def get_task(self, task_id: str) -> dict[str, Any]:
        data = self.rest_ok("GET", f"/tasks/{task_id}")
        strict(data, "Task", "Task")
        if data.get("id") != task_id:
            raise CheckFailed(f"GET /tasks/{task_id} answered task {data.get('id')}")
        return data

    def stream(
        self,
        path: str,
        body: dict[str, Any] | None,
        *,
        expect_task_id: str | None = None,
        hold: float = 0.0,
        limit: float = 0.0,
    ) -> StreamRun | httpx.Response:
        """POST an SSE request and check it as it arrives; the error response if it was refused
        up front (no stream). With expect_task_id (a subscribe), a snapshot of an interrupted
        task ends the reading at once (the stream would wait for the task's next turn), or,
        with `hold`, once the stream has stayed open that many seconds. `limit`: the longest
        the stream may stay open (default: the run's timeout)."""
        limit = limit or self.timeout
        started = time.perf_counter()
        run = StreamRun()
        headers = {"Content-Type": A2A_JSON, "Accept": EVENT_STREAM}
        content = json.dumps(body).encode() if body is not None else b""
        with self.client.stream(
            "POST", self.url(path), content=content, headers=headers
        ) as response:
            run.headers_s = time.perf_counter() - started
            if response.status_code != 200:
                response.read()
                return response
            content_type = response.headers.get("content-type", "")
            if not content_type.startswith(EVENT_STREAM):
                response.read()
                raise CheckFailed(
                    f"200 with Content-Type {content_type!r}, not {EVENT_STREAM}: "
                    f"{_short(response.text)}"
                )
            data: list[str] = []
            # SSE (WHATWG): `data:` lines accumulate, a blank line ends the event, `:` lines
            # are comments (the server's heartbeats); other fields are ignored.
            for line in response.iter_lines():
                elapsed = time.perf_counter() - started
                if run.first_byte_s is None:
                    run.first_byte_s = elapsed
                if run.waiting_for_next_turn and elapsed >= hold:
                    run.total_s = elapsed
                    return run
                if elapsed > limit:
                    raise CheckFailed(f"stream still open after {limit:.0f} s")
                if line == "":
                    if data:
                        run.add("\n".join(data), expect_task_id)
                        if run.first_event_s is None:
                            run.first_event_s = elapsed
                        data = []
                        if (
                            expect_task_id
                            and len(run.kinds) == 1
                            and run.first_state in (SETTLED_STATES - TERMINAL_STATES)
                        ):
                            run.waiting_for_next_turn = True
                            if not hold:
                                run.total_s = time.perf_counter() - started
                                return run
                            run.settled = None  # it follows the next turn: it stays open
                    continue
                if line.startswith(":"):
                    if run.settled is not None:
                        raise CheckFailed(
                            f"stream stayed open after the {run.settled} event "
                            "(the server must close it)"
                        )
                    run.comments += 1
                    continue
                name, _, value = line.partition(":")
                if name == "data":
                    data.append(value[1:] if value.startswith(" ") else value)
            if data:
                raise CheckFailed("stream ended inside an event (no blank line after it)")
        run.total_s = time.perf_counter() - started
        if not run.kinds:
            raise CheckFailed("stream closed without any event")
        if run.settled is None:
            raise CheckFailed(
                f"stream closed before a terminal or interrupted status ({run.summary()})"
            )
        return run

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC 1.0 call on POST /; the result, or CheckFailed with the error."""
        request_id = f"smoke-{uuid.uuid4().hex[:8]}"
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = self.client.post(
            self.url("/"),
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        payload = json_answer(response, method)
        if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
            raise CheckFailed(f"{method}: not a JSON-RPC 2.0 response: {_short(payload)}")
        if payload.get("id") != request_id:
            raise CheckFailed(f"{method}: answered id {payload.get('id')!r}, sent {request_id!r}")
        if "error" in payload:
            error = payload["error"] if isinstance(payload["error"], dict) else {}
            reasons = [
                d.get("reason")
                for d in error.get("data") or []
                if isinstance(d, dict) and str(d.get("@type", "")).endswith(".ErrorInfo")
            ]
            raise CheckFailed(
                f"{method}: error {error.get('code')} {reasons[0] if reasons else ''}: "
                f"{error.get('message')}"
            )
        if set(payload) != {"jsonrpc", "id", "result"}:
            raise CheckFailed(f"{method}: envelope must hold exactly one result: {_short(payload)}")
        result = payload["result"]
        if not isinstance(result, dict):
            raise CheckFailed(f"{method}: result is not an object: {_short(result)}")
        return result

    def wait_settled(self, task_id: str) -> tuple[dict[str, Any], int]:
        """GET /tasks/{id} until the task is terminal or interrupted; (task, reads)."""
        deadline = time.perf_counter() + self.timeout
        reads = 0
        while True:
            task = self.get_task(task_id)
            reads += 1
            if state_of(task) in SETTLED_STATES:
                return task, reads
            if time.perf_counter() > deadline:
                raise CheckFailed(
                    f"task {task_id} still {state_of(task)} after {self.timeout:.0f} s"
                )
            time.sleep(POLL_SECONDS)

    def settled_task(self, text: str) -> dict[str, Any]:
        """A task of this run that has settled (for the checks that need one to work on)."""
        data = self.send(text, return_immediately=False)
        if "task" not in data:
            raise CheckSkipped("the agent answers with a Message, not a Task: no task to use")
        task = data["task"]
        if state_of(task) not in SETTLED_STATES:
            task, _ = self.wait_settled(task["id"])
        return task

    # -- 1. agent card --------------------------------------------------------------------

    def check_agent_card(self) -> tuple[str, dict[str, float]]:
        try:
            response = self.client.get(self.url(CARD_PATH))
        except httpx.TransportError:
            self.reachable = False
            raise
        card = json_answer(response, f"GET {CARD_PATH}")
        if not isinstance(card, dict):
            raise CheckFailed(f"the card is not a JSON object: {_short(card)}")
        compat = [name for name in CARD_V03_FIELDS if name in card]
        strict_card = {k: v for k, v in card.items() if k not in CARD_V03_FIELDS}
        strict(strict_card, "AgentCard", "the Agent Card")
        capabilities = card.get("capabilities") or {}
        self.streaming = bool(capabilities.get("streaming"))
        self.push_notifications = bool(capabilities.get("pushNotifications"))
        self.echo = any(skill.get("id") == "echo" for skill in card.get("skills") or [])

        interfaces = card.get("supportedInterfaces") or []
        declared = {(i.get("protocolBinding"), i.get("protocolVersion")): i for i in interfaces}
        missing = [
            f"{binding} {version}"
            for binding, version in (("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"))
            if (binding, version) not in declared
        ]
        if missing:
            raise CheckFailed(f"the card does not declare {', '.join(missing)}: {interfaces}")
        expected = normalise_url(self.base_url)
        for interface in interfaces:
            url = str(interface.get("url", ""))
            if normalise_url(url) != expected:
                raise CheckFailed(
                    f"interface {interface.get('protocolBinding')} "
                    f"{interface.get('protocolVersion')} is at {url!r}, not at the base URL "
                    f"{self.base_url!r}: {self._url_hint(url)}"
                )
        names = ", ".join(
            f"{i.get('protocolBinding')} {i.get('protocolVersion')}" for i in interfaces
        )
        features = [
            f"streaming {'on' if self.streaming else 'off'}",
            f"push {'on' if self.push_notifications else 'off'}",
        ]
        if compat:
            features.append(f"0.3 card fields {', '.join(compat)}")
        flow = "echo flow" if self.echo else "custom flow"
        return (
            f"{card.get('name')!r} ({flow}): {names} at the base URL; {'; '.join(features)}",
            {"card_s": round(response.elapsed.total_seconds(), 3)},
        )

    def _url_hint(self, card_url: str) -> str:
        card, base = urlsplit(card_url), urlsplit(self.base_url)
        same_origin = (card.scheme, card.netloc.lower()) == (base.scheme, base.netloc.lower())
        if same_origin and base.path.rstrip("/").endswith(card.path.rstrip("/")):
            missing = base.path.rstrip("/")[len(card.path.rstrip("/")) :]
            return (
                f"the path prefix {missing!r} (the API Gateway stage) is missing; set "
                "PUBLIC_BASE_URL to the full stage URL, or leave it empty to derive it"
            )
        return (
            "PUBLIC_BASE_URL does not match the URL clients call; set it to this base URL "
            "(with the stage, e.g. /prod), or leave it empty to derive it from the request"
        )

    # -- 2. send --------------------------------------------------------------------------

    def timed_send(self, *, return_immediately: bool) -> tuple[dict[str, Any] | None, float]:
        """The smoke text sent: the task answered (None for a Message) and the seconds it took."""
        started = time.perf_counter()
        data = self.send(self.text, return_immediately=return_immediately)
        return data.get("task"), time.perf_counter() - started

    def check_send_blocking(self) -> tuple[str, dict[str, float]]:
        task, elapsed = self.timed_send(return_immediately=False)
        if task is None:
            return "answered with a Message", {"send_s": round(elapsed, 3)}
        state = state_of(task)
        if state not in SETTLED_STATES:
            raise CheckFailed(
                f"a blocking send returned task {task.get('id')} still {state} after "
                f"{elapsed:.1f} s (BlockingMaxWaitSeconds reached, or the flow never ran: see "
                "the Step Functions execution and FlowWorkerFunction logs)"
            )
        parts = sum(len(a.get("parts", [])) for a in task.get("artifacts", []))
        return (
            f"task {task['id']} {state} with {len(task.get('artifacts', []))} artifact(s), "
            f"{parts} part(s)",
            {"send_s": round(elapsed, 3)},
        )

    def check_send_nonblocking(self) -> tuple[str, dict[str, float]]:
        task, returned = self.timed_send(return_immediately=True)
        if task is None:
            return "answered with a Message (no task to get)", {"send_s": round(returned, 3)}
        first_state = state_of(task)
        read = time.perf_counter()
        got = self.get_task(task["id"])
        get_task_s = time.perf_counter() - read
        if got.get("contextId") != task.get("contextId"):
            raise CheckFailed(f"GetTask contextId {got.get('contextId')} != {task['contextId']}")
        final, reads = (
            (got, 1) if state_of(got) in SETTLED_STATES else self.wait_settled(task["id"])
        )
        settled = returned + time.perf_counter() - read
        return (
            f"task {task['id']} returned {first_state}, GetTask saw {state_of(got)}, "
            f"{state_of(final)} after {reads} read(s)",
            {
                "send_s": round(returned, 3),
                "get_task_s": round(get_task_s, 3),
                "settled_s": round(settled, 3),
            },
        )

    # -- 3. streaming ---------------------------------------------------------------------

    def check_stream(self) -> tuple[str, dict[str, float]]:
        # The echo flow spreads its reply over STREAM_SLOW_SECONDS: events that all arrive at
        # the end mean a buffered route (what a gateway without response streaming does).
        text = f"{self.text} [slow={STREAM_SLOW_SECONDS}]" if self.echo else self.text
        body = send_body(text, return_immediately=False)
        outcome = self.stream("/message:stream", body)
        if isinstance(outcome, httpx.Response):
            if not self.streaming and error_reason(outcome) == "UNSUPPORTED_OPERATION":
                raise CheckSkipped(
                    "the card says streaming: false and the server refused with "
                    "UnsupportedOperationError, as it must"
                )
            raise CheckFailed(f"POST /message:stream: {describe_error(outcome)}")
        if not self.streaming:
            raise CheckFailed("the card says streaming: false but /message:stream streamed")
        timings = outcome.timings()
        first = timings.get("first_event_s", 0.0)
        ahead = outcome.total_s - first
        detail = (
            f"{outcome.summary()}; first byte {timings.get('first_byte_s', 0):.2f} s, "
            f"first event {first:.2f} s, total {outcome.total_s:.2f} s"
        )
        if self.echo and ahead < STREAM_SLOW_SECONDS / 2:
            raise CheckFailed(
                f"{detail}: the first event came only {ahead:.2f} s before the end of a "
                f"[slow={STREAM_SLOW_SECONDS}] reply, so the events were held back and sent "
                "together (a buffered route: its integration must use "
                "response-streaming-invocations with ResponseTransferMode STREAM)"
            )
        if self.echo:
            return f"{detail}: delivered live, {ahead:.2f} s before the end", timings
        if ahead < LIVE_MARGIN_SECONDS:
            detail += (
                f" (the stream ended within {LIVE_MARGIN_SECONDS} s of its first event: "
                f"live delivery is not provable with this flow: {PROVE_WITH_ECHO})"
            )
        else:
            detail += f": the first event came {ahead:.2f} s before the end (delivered live)"
        return detail, timings

    # -- 4. subscribe ---------------------------------------------------------------------

    def check_subscribe(self) -> tuple[str, dict[str, float]]:
        # The echo flow spreads its reply over SUBSCRIBE_SLOW_SECONDS, so the task is still
        # busy when the subscribe arrives; another flow gets the plain text and may be done.
        text = f"{self.text} [slow={SUBSCRIBE_SLOW_SECONDS}]" if self.echo else self.text
        started = time.perf_counter()
        data = self.send(text, return_immediately=True)
        if "message" in data:
            raise CheckSkipped("the agent answers with a Message: no task to subscribe to")
        task_id = data["task"]["id"]
        sent = time.perf_counter() - started
        outcome = self.stream(f"/tasks/{task_id}:subscribe", None, expect_task_id=task_id)
        if isinstance(outcome, httpx.Response):
            reason = error_reason(outcome)
            if reason == "UNSUPPORTED_OPERATION":
                if not self.streaming:
                    raise CheckSkipped(
                        "the card says streaming: false and the server refused with "
                        "UnsupportedOperationError, as it must"
                    )
                state = state_of(self.get_task(task_id))
                if state in TERMINAL_STATES:
                    raise CheckSkipped(
                        f"task {task_id} was already {state} "
                        f"{time.perf_counter() - started:.1f} s after the send; the server "
                        "answered UnsupportedOperationError as the spec requires"
                        + (" (unexpected with [slow=3]: a cold start?)" if self.echo else "")
                    )
            raise CheckFailed(f"POST /tasks/{task_id}:subscribe: {describe_error(outcome)}")
        if outcome.kinds[0] != "task":
            raise CheckFailed("the first subscribe event must be the Task snapshot")
        if outcome.waiting_for_next_turn:
            raise CheckSkipped(
                f"task {task_id} is already {outcome.first_state}: the snapshot arrived; "
                "a subscribe then follows the next turn, which only a reply would start"
            )
        if outcome.first_state in TERMINAL_STATES:
            raise CheckFailed(
                f"subscribe opened on a {outcome.first_state} task (expected "
                "UnsupportedOperationError)"
            )
        if self.echo and len(outcome.kinds) < 2:
            raise CheckFailed(f"only the snapshot arrived, no events ({outcome.summary()})")
        timings = {"send_s": round(sent, 3), **outcome.timings()}
        return (
            f"task {task_id}: snapshot {outcome.first_state}; {outcome.summary()}; "
            f"snapshot after {timings.get('first_event_s', 0):.2f} s, "
            f"total {outcome.total_s:.2f} s",
            timings,
        )

    # -- 5. push notification configs -----------------------------------------------------

    def check_push_config(self) -> tuple[str, dict[str, float]]:
        timings: dict[str, float] = {}
        # A settled task: nothing more happens to it, so the webhook receives nothing.
        task_id = self.settled_task(self.text)["id"]
        token = f"smoke-{uuid.uuid4().hex}"
        configs = f"/tasks/{task_id}/pushNotificationConfigs"

        body = {"url": self.push_url, "token": token}
        response = timed(timings, "create_s", lambda: self.rest("POST", configs, body))
        if not self.push_notifications:
            if error_reason(response) == "PUSH_NOTIFICATION_NOT_SUPPORTED":
                raise CheckSkipped(
                    "the card says pushNotifications: false and the server refused with "
                    "PushNotificationNotSupportedError, as it must"
                )
            raise CheckFailed(
                "the card says pushNotifications: false but create answered "
                + describe_error(response)
            )
        if response.status_code != 200:
            hint = ""
            if response.status_code == 400 and error_reason(response) == "INVALID_PARAMS":
                hint = " (the webhook URL was refused: pick another with --push-url)"
            raise CheckFailed(f"POST {configs}: {describe_error(response)}{hint}")
        created = response.json()
        strict(created, "TaskPushNotificationConfig", "created config")
        config_id = created.get("id")
        if not config_id or created.get("url") != self.push_url:
            raise CheckFailed(f"created config lacks an id or has another url: {created}")
        config = f"{configs}/{config_id}"

        got = timed(timings, "get_s", lambda: self.rest_ok("GET", config))
        strict(got, "TaskPushNotificationConfig", "config")
        if (got.get("id"), got.get("url")) != (config_id, self.push_url):
            raise CheckFailed(f"GET {config} answered {got}")

        listed = timed(timings, "list_s", lambda: self.rest_ok("GET", configs))
        strict(listed, "ListTaskPushNotificationConfigsResponse", "config list")
        if config_id not in [c.get("id") for c in listed.get("configs", [])]:
            raise CheckFailed(f"GET {configs} does not list {config_id}: {listed}")

        deleted = timed(timings, "delete_s", lambda: self.rest("DELETE", config))
        if deleted.status_code not in (200, 204):
            raise CheckFailed(f"DELETE {config}: {describe_error(deleted)}")
        after = self.rest("GET", config)
        if after.status_code != 404:
            raise CheckFailed(f"GET after DELETE answered {describe_error(after)}, not 404")
        return f"task {task_id}: config {config_id} created, read, listed, deleted", timings

    # -- 6. JSON-RPC 1.0 ------------------------------------------------------------------

    def check_jsonrpc(self) -> tuple[str, dict[str, float]]:
        timings: dict[str, float] = {}
        message = {"message": user_message(self.text)}
        sent = timed(timings, "send_s", lambda: self.rpc("SendMessage", message))
        strict(sent, "SendMessageResponse", "SendMessage result")
        if set(sent) == {"message"}:
            return "SendMessage answered with a Message (no task to get or list)", timings
        if set(sent) != {"task"}:
            raise CheckFailed(f"SendMessage result is neither a task nor a message: {sent}")
        task = sent["task"]
        if state_of(task) not in SETTLED_STATES:
            raise CheckFailed(f"a blocking SendMessage returned the task {state_of(task)}")

        got = timed(timings, "get_task_s", lambda: self.rpc("GetTask", {"id": task["id"]}))
        strict(got, "Task", "GetTask result")
        if got.get("id") != task["id"] or state_of(got) != state_of(task):
            raise CheckFailed(f"GetTask answered {got.get('id')} {state_of(got)}")

        query = {"contextId": task["contextId"], "pageSize": 10}
        listed = timed(timings, "list_tasks_s", lambda: self.rpc("ListTasks", query))
        strict(listed, "ListTasksResponse", "ListTasks result")
        ids = [t.get("id") for t in listed.get("tasks", [])]
        if task["id"] not in ids:
            raise CheckFailed(f"ListTasks of context {task['contextId']} lacks {task['id']}")
        return (
            f"task {task['id']} {state_of(task)}; GetTask, ListTasks (totalSize "
            f"{listed.get('totalSize')}) agree",
            timings,
        )

    # -- 7. long-lived requests (--long) ---------------------------------------------------

    def skip_unless_long(self, does: str) -> None:
        """Skips a check of --long when it was not given; `does` says what it would do."""
        if not self.long:
            limit = f"the gateway's {self.limit:.0f} s limit"
            raise CheckSkipped(f"not requested: --long {does} {limit}")

    def check_long_subscribe(self) -> tuple[str, dict[str, float]]:
        self.skip_unless_long(f"holds a subscribe open {self.long_slow} s, past")
        if not self.streaming:
            raise CheckSkipped("the card says streaming: false: no subscribe to hold open")
        started = time.perf_counter()
        # The echo flow's task stays busy long_slow seconds; another flow's only if it waits
        # for input, and then the subscribe (following its next turn) is held on keep-alives.
        text = f"{self.text} [slow={self.long_slow}]" if self.echo else self.text
        data = self.send(text, return_immediately=True)
        if "message" in data:
            raise CheckSkipped("the agent answers with a Message: no task to subscribe to")
        task_id = data["task"]["id"]
        hold = 0.0
        if not self.echo:
            task, _ = self.wait_settled(task_id)
            if state_of(task) in TERMINAL_STATES:
                raise CheckSkipped(
                    f"needs a task open past {self.limit:.0f} s: this flow's task "
                    f"was {state_of(task)} {time.perf_counter() - started:.1f} s after the "
                    "send (the echo flow's [slow=N], or a task that waits for input, proves "
                    f"it: {PROVE_WITH_ECHO})"
                )
            hold = float(self.long_slow)
        sent = time.perf_counter() - started
        wait = max(self.timeout, self.long_slow * 2.5)
        try:
            outcome = self.stream(
                f"/tasks/{task_id}:subscribe", None, expect_task_id=task_id, hold=hold, limit=wait
            )
        except (CheckFailed, httpx.TransportError) as exc:
            raise CheckFailed(
                _long_failure(time.perf_counter() - started - sent, exc, self.limit)
            ) from None
        if isinstance(outcome, httpx.Response):
            raise CheckFailed(f"POST /tasks/{task_id}:subscribe: {describe_error(outcome)}")
        if outcome.total_s <= self.limit:
            raise CheckFailed(
                f"the subscribe ended after only {outcome.total_s:.1f} s ({outcome.summary()}): "
                f"[slow={self.long_slow}] did not apply"
            )
        ended = (
            f"closed by the smoke, the task still {outcome.first_state}"
            if outcome.waiting_for_next_turn
            else f"ended {outcome.settled}"
        )
        return (
            f"task {task_id}: subscribe open {outcome.total_s:.1f} s (> "
            f"{self.limit:.0f} s), {len(outcome.kinds)} events, "
            f"{outcome.comments} keep-alives, {ended}",
            {"send_s": round(sent, 3), **outcome.timings()},
        )

    def check_long_request(self) -> tuple[str, dict[str, float]]:
        self.skip_unless_long(f"runs a {self.long_slow} s blocking send through")
        if not self.echo:
            raise CheckSkipped(
                f"needs the echo flow ([slow=N]): only a task that takes more than "
                f"{self.limit:.0f} s proves it, and this agent runs another flow: {PROVE_WITH_ECHO}"
            )
        started = time.perf_counter()
        wait = max(self.timeout, self.long_slow * 2.5)
        try:
            data = self.send(
                f"{self.text} [slow={self.long_slow}]", return_immediately=False, timeout=wait
            )
        except (CheckFailed, httpx.TransportError) as exc:
            raise CheckFailed(
                _long_failure(time.perf_counter() - started, exc, self.limit)
            ) from None
        elapsed = time.perf_counter() - started
        task = data.get("task", {})
        if state_of(task) not in SETTLED_STATES:
            raise CheckFailed(f"returned after {elapsed:.1f} s with the task {state_of(task)}")
        if elapsed <= self.limit:
            raise CheckFailed(
                f"returned after only {elapsed:.1f} s: [slow={self.long_slow}] did not apply"
            )
        return (
            f"task {task.get('id')} {state_of(task)} after {elapsed:.1f} s (> {self.limit:.0f} s)",
            {"send_s": round(elapsed, 3)},
        )

    # -- running --------------------------------------------------------------------------

    def checks(self) -> list[tuple[str, Callable[[], tuple[str, dict[str, float]]]]]:
        return [
            ("agent-card", self.check_agent_card),
            ("send-blocking", self.check_send_blocking),
            ("send-nonblocking", self.check_send_nonblocking),
            ("stream", self.check_stream),
            ("subscribe", self.check_subscribe),
            ("push-config", self.check_push_config),
            ("jsonrpc", self.check_jsonrpc),
            ("long-subscribe", self.check_long_subscribe),
            ("long-request", self.check_long_request),
        ]

    def run_one(self, name: str, check: Callable[[], tuple[str, dict[str, float]]]) -> Result:
        if not self.reachable:
            return Result(name, SKIP, 0.0, f"not run: {self.base_url} is unreachable")
        started = time.perf_counter()
        timings: dict[str, float] = {}
        try:
            detail, timings = check()
            status = PASS
        except CheckSkipped as exc:
            status, detail = SKIP, str(exc)
        except CheckFailed as exc:
            status, detail = FAIL, str(exc)
        except httpx.TimeoutException as exc:
            status = FAIL
            detail = f"no answer within {self.timeout:.0f} s ({type(exc).__name__}: {exc})"
        except httpx.TransportError as exc:
            status, detail = FAIL, f"cannot reach {self.base_url}: {type(exc).__name__}: {exc}"
        except Exception as exc:  # a smoke test reports, it does not crash
            status, detail = FAIL, f"unexpected {type(exc).__name__}: {exc}"
        return Result(name, status, round(time.perf_counter() - started, 3), detail, timings)


def parse_header(value: str) -> tuple[str, str]:
    name, sep, header_value = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME:VALUE, got {value!r}")
    return name.strip(), header_value.strip()


def _base_url(value: str) -> str:
    if urlsplit(value).scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"BASE_URL must be an http(s) URL, got {value!r}")
    return value


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:
        raise argparse.ArgumentTypeError(f"--timeout must be a positive number, got {value!r}")
    return number


DESCRIPTION = (
    "Smoke-test a deployed A2A endpoint (the stack output ApiUrl, with its stage) over "
    "HTTP+JSON and JSON-RPC 1.0. Prints one PASS/FAIL/SKIP line per check with timings; exits "
    "1 if any check failed."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base_url", metavar="BASE_URL", type=_base_url, help="the agent's base URL")
    parser.add_argument(
        "--header",
        action="append",
        type=parse_header,
        default=[],
        metavar="NAME:VALUE",
        help="extra header on every request (repeatable), e.g. 'X-Tenant:acme'",
    )
    credential = parser.add_mutually_exclusive_group()
    credential.add_argument(
        "--api-key", metavar="KEY", help="send 'X-API-Key: KEY' on every request (Auth=ApiKey)"
    )
    credential.add_argument(
        "--token", metavar="T", help="send 'Authorization: Bearer T' on every request (Auth=Jwt)"
    )
    parser.add_argument(
        "--timeout",
        type=_positive,
        default=60.0,
        metavar="SECONDS",
        help="longest wait for one request, stream or task to settle (default: 60)",
    )
    parser.add_argument(
        "--text",
        default=DEFAULT_TEXT,
        help=f"text of the messages sent (default: {DEFAULT_TEXT!r})",
    )
    parser.add_argument(
        "--push-url",
        default=DEFAULT_PUSH_URL,
        metavar="URL",
        help=(
            "webhook URL of the push config created and deleted (default: "
            f"{DEFAULT_PUSH_URL}; it receives nothing: the config's task has settled)"
        ),
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help=(
            f"also prove streams and requests outlive the gateway's "
            f"{GATEWAY_LIMIT_SECONDS:.0f} s limit: a subscribe held open and a blocking send "
            f"of about {GATEWAY_LIMIT_SECONDS + LONG_MARGIN_SECONDS:.0f} s (echo flow); adds "
            f"about {2 * (GATEWAY_LIMIT_SECONDS + LONG_MARGIN_SECONDS) + 5:.0f} s"
        ),
    )
    parser.add_argument(
        "--long-limit",
        type=float,
        default=GATEWAY_LIMIT_SECONDS,
        metavar="SECONDS",
        help=(
            "the limit --long must outlive (default: API Gateway's "
            f"{GATEWAY_LIMIT_SECONDS:.0f} s); lower it to try --long quickly on a local stack"
        ),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the results as one JSON document on stdout (the lines go to stderr)",
    )


def run(args: argparse.Namespace) -> int:
    """Run every check against args.base_url; 0 when none failed."""
    base_url = args.base_url.strip().rstrip("/")
    # Be liberal: the card's own URL names the same agent.
    base_url = base_url.removesuffix(CARD_PATH).rstrip("/")
    headers = dict(args.header)
    if args.api_key:
        headers["X-API-Key"] = args.api_key
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    out = sys.stderr if args.json else sys.stdout
    smoke = Smoke(
        base_url,
        headers=headers,
        timeout=args.timeout,
        text=args.text,
        push_url=args.push_url,
        long=args.long,
        limit=args.long_limit,
    )
    print(f"smoke test of {base_url}", file=out, flush=True)
    parsing = a2a_types() is not None
    if not parsing:
        print(
            "note: a2a-sdk is not installed: bodies are checked for shape, states and ids, not "
            "parsed strictly as A2A 1.0 types (pip install 'a2a-serverless[a2a-sdk]')",
            file=out,
            flush=True,
        )
    started = time.perf_counter()
    results: list[Result] = []
    try:
        for name, check in smoke.checks():
            result = smoke.run_one(name, check)
            results.append(result)
            print(
                f"{result.status}  {result.name:<17} {result.seconds:7.2f}s  {result.detail}",
                file=out,
                flush=True,
            )
    finally:
        smoke.close()
    total = time.perf_counter() - started
    counts = {status: sum(r.status == status for r in results) for status in (PASS, FAIL, SKIP)}
    ok = counts[FAIL] == 0
    print(
        f"{'OK' if ok else 'FAILED'}: {counts[PASS]} passed, {counts[FAIL]} failed, "
        f"{counts[SKIP]} skipped in {total:.1f} s",
        file=out,
        flush=True,
    )
    if args.json:
        document = {
            "baseUrl": base_url,
            "ok": ok,
            "seconds": round(total, 3),
            "counts": counts,
            "strictParsing": parsing,
            "checks": [asdict(r) for r in results],
        }
        print(json.dumps(document, indent=2))
    return 0 if ok else 1


def main(argv: list[str] | None = None, prog: str = "scripts/smoke") -> int:
    """The command on its own (scripts/smoke)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=f"example: {prog} https://abc123.execute-api.eu-west-1.amazonaws.com/prod "
        "--api-key $KEY",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
