"""Two principals on every operation of every binding the card declares: the other
principal's tasks, contexts, history, artifacts, push configs and page tokens are never
revealed, and nothing one principal does changes anything of the other's.

The pair is the key-collision pair of the issue: A = `alice2…` with tasks in context `proj#1`,
B = `alice2…#proj` with tasks in context `1` (an unescaped `{owner}#{contextId}` key is the
same for both). Each principal owns a working task, an input-required task, a completed task
(two turns: history and artifacts) and a task in a context of its own; the input-required and
completed tasks have push configs whose webhook URL, token and credentials are secrets.

Then, for each binding (HTTP+JSON 1.0, JSON-RPC 1.0, JSON-RPC 0.3) and each direction (B on
A's resources, A on B's), every operation is tried on the other's resources:
- the answer must be the spec's: TaskNotFound for anything naming the other's task, a list of
  the caller's own tasks only, a new task of the caller's own for a send into the other's
  contextId, UnsupportedOperation for the extended card (open mode has none);
- a leak is any of the other's ids, texts, page tokens or webhook URL/token/credentials in any
  byte of the answer (except a value the caller itself sent in that request: an error may
  name the id it was asked about);
- a mutation is any change of the other's own view (its tasks as GetTask shows them, their
  push configs, its listings) measured after every single attempt.
The counts go to the terminal (`-s`) and to `.pytest-reports/isolation-{open,ApiKey}.json`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest

from tests import wire
from tests.e2e import rpc
from tests.e2e.conftest import LOCAL_PRINCIPAL_HEADER, ROOT, checked_client, server_fixture

pytestmark = pytest.mark.e2e

REPORT = ROOT / ".pytest-reports" / "isolation.json"
A2A_VERSION = {"rest": "1.0", "jsonrpc-1.0": "1.0", "jsonrpc-0.3": None}  # None: 0.3
BINDINGS = tuple(A2A_VERSION)
# Strings shorter than this are not searched for (B's context `1` is in every timestamp).
MIN_SECRET_LENGTH = 6
WAIT_SECONDS = 30.0


# -- the two principals --------------------------------------------------------------------------
#
# ONE fixture names both principals as the request headers that authenticate each: in open mode
# (the session's local stack) `X-Local-Principal`; with Auth=ApiKey (a stack run as deployed,
# the real authorizer in front of every route) each principal's own API key. The rest of the
# module is the same for both.

# The auth modes' ApiKey server (one process for the three modules that need one).
apikey_server = server_fixture(
    "dev-isolation-apikey",
    args=("--param", "Auth=ApiKey", "--param", "AuthCacheTtlSeconds=5"),
)


@pytest.fixture(params=["open", "ApiKey"])
def target(request: pytest.FixtureRequest, base_url: str) -> tuple[str, dict[str, dict[str, str]]]:
    """(base URL, A's and B's headers): the issue's `#`-collision pair, unique per run."""
    base = f"alice2-{uuid.uuid4().hex[:8]}"
    names = {"A": base, "B": f"{base}#proj"}
    if request.param == "open":
        return base_url, {k: {LOCAL_PRINCIPAL_HEADER: v} for k, v in names.items()}
    server = request.getfixturevalue("apikey_server")
    keys: dict[str, dict[str, str]] = {}
    with httpx.Client(base_url=server.base_url, timeout=30) as admin:
        for k, name in names.items():
            made = admin.post("/_local/keys", json={"principal": name})
            assert made.status_code == 201, made.text
            keys[k] = {"X-API-Key": made.json()["apiKey"]}
    return server.base_url, keys


# The context of each principal's first tasks: the same unescaped key `alice2…#proj#1`.
COLLIDING_CONTEXT = {"A": "proj#1", "B": "1"}


# -- one answer, whatever the binding ------------------------------------------------------------

OK = ("ok", None)
# The spec's answers, REST (HTTP status, reason) and JSON-RPC (code, reason): 1.0 §5.4 table;
# §3.3.2 "Servers MUST NOT reveal the existence of resources the client is not authorized to
# access": the other's task is TaskNotFound, exactly as a task that never existed.
NOT_FOUND = {"rest": (404, "TASK_NOT_FOUND"), "rpc": (-32001, "TASK_NOT_FOUND")}
UNSUPPORTED = {"rest": (400, "UNSUPPORTED_OPERATION"), "rpc": (-32004, "UNSUPPORTED_OPERATION")}


@dataclass
class Answer:
    """What one call got back: `outcome` is ("ok", None) for a result, else (HTTP status of a
    REST error or JSON-RPC error code, ErrorInfo reason)."""

    request: str  # the URL (percent-decoded) and body the caller sent
    body: bytes  # every byte of the answer (the first SSE event at most)
    outcome: tuple[int | str, str | None]
    result: Any = None  # the parsed result (for streams: the first event)

    @property
    def label(self) -> str:
        code, reason = self.outcome
        return f"{code} {reason}" if reason else str(code)


def _reason(details: list[dict[str, Any]] | None) -> str | None:
    for detail in details or []:
        if detail.get("@type", "").endswith("google.rpc.ErrorInfo"):
            return str(detail["reason"])
    return None


def _request_text(request: httpx.Request) -> str:
    return unquote(str(request.url)) + " " + request.content.decode(errors="replace")


def _rest_answer(response: httpx.Response, body: bytes, first_event: Any = None) -> Answer:
    request = _request_text(response.request)
    if response.status_code >= 400:
        error = json.loads(body)["error"]
        return Answer(request, body, (response.status_code, _reason(error.get("details"))))
    result = first_event if first_event is not None else (json.loads(body) if body else None)
    return Answer(request, body, OK, result)


def _rpc_answer(request: httpx.Request, body: bytes, envelope: dict[str, Any]) -> Answer:
    text = _request_text(request)
    if "error" in envelope:
        error = envelope["error"]
        return Answer(text, body, (error["code"], _reason(error.get("data"))))
    return Answer(text, body, OK, envelope["result"])


def _first_event(response: httpx.Response) -> tuple[bytes, Any]:
    """The bytes up to the first `data:` event of an SSE answer, and that event; the caller
    hangs up after it (a stream it should never have got could last for minutes)."""
    raw = bytearray()
    for line in response.iter_lines():
        raw.extend(line.encode() + b"\n")
        if line.startswith("data: "):
            return bytes(raw), json.loads(line[len("data: ") :])
    return bytes(raw), None


# -- one caller: a principal on a binding ---------------------------------------------------------


def rest_config(config: dict[str, Any]) -> dict[str, Any]:
    return {
        **({"id": config["id"]} if "id" in config else {}),
        "url": config["url"],
        "token": config["token"],
        "authentication": {"scheme": "Bearer", "credentials": config["credentials"]},
    }


class Caller:
    """Every operation of one binding, as one principal, each returning an Answer."""

    def __init__(self, base_url: str, headers: dict[str, str], binding: str) -> None:
        self.binding = binding
        self.http = checked_client(base_url, principal=None, version=A2A_VERSION[binding])
        self.http.headers.update(headers)

    @property
    def rest(self) -> bool:
        return self.binding == "rest"

    @property
    def v03(self) -> bool:
        return self.binding == "jsonrpc-0.3"

    def close(self) -> None:
        self.http.close()

    # -- transport --

    def _rest(self, method: str, path: str, body: Any = None) -> Answer:
        response = self.http.request(method, path, json=body)
        return _rest_answer(response, response.content)

    def _rest_stream(self, path: str, body: Any = None) -> Answer:
        with self.http.stream("POST", path, json=body) as response:
            if response.headers.get("content-type", "").startswith(wire.EVENT_STREAM):
                raw, event = _first_event(response)
                return _rest_answer(response, raw, event)
            return _rest_answer(response, response.read())

    def _rpc(self, method: str, params: Any) -> Answer:
        body = rpc.request_body(method, params)
        rpc.checked_request(self.http, body, validate=True)
        response = self.http.post("/", json=body)
        assert response.status_code == 200, response.text
        return _rpc_answer(response.request, response.content, response.json())

    def _rpc_stream(self, method: str, params: Any) -> Answer:
        body = rpc.request_body(method, params)
        rpc.checked_request(self.http, body, validate=True)
        with self.http.stream("POST", "/", json=body) as response:
            assert response.status_code == 200, response.read()
            if response.headers["content-type"].startswith(wire.EVENT_STREAM):
                raw, event = _first_event(response)
                return _rpc_answer(response.request, raw, event or {"result": None})
            content = response.read()
            return _rpc_answer(response.request, content, json.loads(content))

    def _message(self, text: str, task_id: str | None, context_id: str | None) -> dict:
        build = rpc.msg03 if self.v03 else rpc.msg10
        return build(text, task_id=task_id, context_id=context_id)

    # -- operations --

    def get_task(self, task_id: str) -> Answer:
        if self.rest:
            return self._rest("GET", f"/tasks/{quote(task_id, safe='')}?historyLength=100")
        method = "tasks/get" if self.v03 else "GetTask"
        return self._rpc(method, {"id": task_id, "historyLength": 100})

    def list_tasks(self, **query: Any) -> Answer | None:
        """None: the binding has no ListTasks (A2A 0.3)."""
        if self.v03:
            return None
        if self.rest:
            response = self.http.get("/tasks", params=query)
            return _rest_answer(response, response.content)
        return self._rpc("ListTasks", query)

    def cancel(self, task_id: str) -> Answer:
        if self.rest:
            return self._rest("POST", f"/tasks/{quote(task_id, safe='')}:cancel")
        return self._rpc("tasks/cancel" if self.v03 else "CancelTask", {"id": task_id})

    def subscribe(self, task_id: str) -> Answer:
        if self.rest:
            return self._rest_stream(f"/tasks/{quote(task_id, safe='')}:subscribe")
        return self._rpc_stream(
            "tasks/resubscribe" if self.v03 else "SubscribeToTask", {"id": task_id}
        )

    def send(
        self,
        text: str,
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        streaming: bool = False,
        return_immediately: bool = False,
    ) -> Answer:
        params: dict[str, Any] = {"message": self._message(text, task_id, context_id)}
        if return_immediately:
            params["configuration"] = {"returnImmediately": True}  # 1.0 spelling
        if self.rest:
            if streaming:
                return self._rest_stream("/message:stream", params)
            return self._rest("POST", "/message:send", params)
        if self.v03:
            method = "message/stream" if streaming else "message/send"
        else:
            method = "SendStreamingMessage" if streaming else "SendMessage"
        return self._rpc_stream(method, params) if streaming else self._rpc(method, params)

    def push_create(self, task_id: str, config: dict[str, Any]) -> Answer:
        if self.rest:
            path = f"/tasks/{quote(task_id, safe='')}/pushNotificationConfigs"
            return self._rest("POST", path, rest_config(config))
        if self.v03:
            auth = {"schemes": ["Bearer"], "credentials": config["credentials"]}
            inner = {"url": config["url"], "token": config["token"], "authentication": auth}
            params = {"taskId": task_id, "pushNotificationConfig": inner}
            return self._rpc("tasks/pushNotificationConfig/set", params)
        params = {"taskId": task_id, **rest_config(config)}
        return self._rpc("CreateTaskPushNotificationConfig", params)

    def push_get(self, task_id: str, config_id: str | None) -> Answer:
        """`config_id` None: 0.3's "the task's config" (other bindings require an id)."""
        if self.rest:
            path = f"/tasks/{quote(task_id, safe='')}/pushNotificationConfigs/"
            return self._rest("GET", path + quote(config_id or "", safe=""))
        if self.v03:
            params = {"id": task_id}
            if config_id is not None:
                params["pushNotificationConfigId"] = config_id
            return self._rpc("tasks/pushNotificationConfig/get", params)
        return self._rpc("GetTaskPushNotificationConfig", {"taskId": task_id, "id": config_id})

    def push_list(self, task_id: str) -> Answer:
        if self.rest:
            return self._rest("GET", f"/tasks/{quote(task_id, safe='')}/pushNotificationConfigs")
        if self.v03:
            return self._rpc("tasks/pushNotificationConfig/list", {"id": task_id})
        return self._rpc("ListTaskPushNotificationConfigs", {"taskId": task_id})

    def push_delete(self, task_id: str, config_id: str) -> Answer:
        if self.rest:
            path = f"/tasks/{quote(task_id, safe='')}/pushNotificationConfigs/"
            return self._rest("DELETE", path + quote(config_id, safe=""))
        if self.v03:
            params = {"id": task_id, "pushNotificationConfigId": config_id}
            return self._rpc("tasks/pushNotificationConfig/delete", params)
        return self._rpc("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": config_id})

    def extended_card(self) -> Answer:
        if self.rest:
            return self._rest("GET", "/extendedAgentCard")
        if self.v03:
            return self._rpc("agent/getAuthenticatedExtendedCard", None)
        return self._rpc("GetExtendedAgentCard", {})


# -- what each principal owns ----------------------------------------------------------------------


@dataclass
class World:
    """One principal's resources, and every value of theirs the other must never see."""

    name: str
    owner: Caller  # REST 1.0 as this principal: its own view
    tasks: dict[str, str] = field(default_factory=dict)  # role -> task id
    contexts: dict[str, str] = field(default_factory=dict)  # role -> context id
    configs: dict[str, tuple[str, str]] = field(default_factory=dict)  # role -> (task, config)
    page_token: str = ""
    secrets: set[str] = field(default_factory=set)
    # Values of this principal's own resources (its tasks, contexts, …): found in its answers
    # they are its own, even where the other principal happens to use the same string.
    own: set[str] = field(default_factory=set)
    own_task_ids: set[str] = field(default_factory=set)

    def learn(self, *values: str) -> None:
        self.secrets.update(v for v in values if v)

    def own_task(self, task: dict[str, Any]) -> None:
        self.own_task_ids.add(task["id"])
        self.own.update({task["id"], task["contextId"]})
        self.own.update(m["messageId"] for m in task.get("history", []))


def _wait(owner: Caller, task_id: str, states: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        answer = owner.get_task(task_id)
        assert answer.outcome == OK, answer.label
        if answer.result["status"]["state"] in states:
            return answer.result
        assert time.monotonic() < deadline, answer.result
        time.sleep(0.1)


def _sent_task(answer: Answer) -> dict[str, Any]:
    assert answer.outcome == OK, (answer.label, answer.body[:300])
    return answer.result["task"]


def build_world(name: str, owner: Caller) -> World:
    """The resources of one principal, made over REST 1.0 by the principal itself."""
    world = World(name, owner)
    marker = f"secret-{name}-{uuid.uuid4().hex[:10]}"
    colliding = COLLIDING_CONTEXT[name]

    def send(text: str, **message: Any) -> dict[str, Any]:
        task = _sent_task(owner.send(text, **message))
        world.learn(*(m["messageId"] for m in task.get("history", [])))
        return task

    # Working for the whole test (a 600 s reply, ~20 s per chunk; canceled by its owner at
    # the end). Sent non-blocking: a blocking send would wait for the reply.
    working = send(f"{marker} working [slow=600]", return_immediately=True)
    _wait(owner, working["id"], {"TASK_STATE_WORKING"})
    asking = send(f"{marker} asking [input]", context_id=colliding)
    assert asking["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asking
    done = send(f"{marker} first turn [input]", context_id=colliding)
    done = send(f"{marker} second turn", task_id=done["id"], context_id=colliding)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    joinable = send(f"{marker} hello", context_id=f"join-{name}-{uuid.uuid4().hex[:10]}")
    world.tasks = {
        "working": working["id"],
        "input-required": asking["id"],
        "completed": done["id"],
        "joinable": joinable["id"],
    }
    world.contexts = {
        "auto": working["contextId"],
        "colliding": colliding,
        "joinable": joinable["contextId"],
    }

    for role, config_id in (("input-required", None), ("completed", f"cfg-{marker}")):
        task_id = world.tasks[role]
        secret = {
            "url": f"http://127.0.0.1:9/hook/{name}?key=url-token-{marker}",
            "token": f"token-{marker}",
            "credentials": f"credentials-{marker}",
            **({"id": config_id} if config_id else {}),
        }
        created = owner.push_create(task_id, secret)
        assert created.outcome == OK, created.label
        world.configs[role] = (task_id, created.result["id"])
        world.learn(created.result["id"], *(v for k, v in secret.items() if k != "id"))

    page = owner.list_tasks(pageSize=1)
    assert page is not None and page.outcome == OK
    world.page_token = page.result["nextPageToken"]
    assert world.page_token
    world.learn(marker, world.page_token, *world.tasks.values(), *world.contexts.values())
    for task_id in world.tasks.values():
        got = owner.get_task(task_id)
        assert got.outcome == OK, got.label
        task = got.result
        world.own_task(task)
        world.learn(*(m["messageId"] for m in task.get("history", [])))
        world.learn(*(task["status"].get("message", {}).get("messageId", ""),))
    world.own.update(world.contexts.values())
    world.secrets = {s for s in world.secrets if len(s) >= MIN_SECRET_LENGTH}
    return world


def snapshot(world: World) -> dict[str, Any]:
    """The owner's own view of everything it has: what no other principal may change."""
    owner = world.owner
    view: dict[str, Any] = {}
    for role, task_id in world.tasks.items():
        answer = owner.get_task(task_id)
        assert answer.outcome == OK, (role, answer.label)
        task = dict(answer.result)
        if role == "working":  # still producing its reply: its artifacts grow by design
            task.pop("artifacts", None)
            task["status"] = {"state": task["status"]["state"]}
        view[f"task {role}"] = task
        configs = owner.push_list(task_id)
        view[f"configs {role}"] = (configs.outcome, configs.result)
    for query in ({}, *({"contextId": c} for c in world.contexts.values())):
        listed = owner.list_tasks(**query)
        assert listed is not None
        view[f"list {query}"] = (
            listed.result.get("totalSize"),
            sorted(t["id"] for t in listed.result.get("tasks", [])),
        )
    return view


# -- the matrix ----------------------------------------------------------------------------------


def expected(table: dict[str, tuple[int, str]], binding: str) -> tuple[int | str, str | None]:
    return table["rest" if binding == "rest" else "rpc"]


@dataclass
class Attempt:
    """One operation tried by the actor: how to call it, and what the spec answers."""

    operation: str
    target: str  # which of the victim's resources
    call: Callable[[Caller], Answer | None]
    check: Callable[[Answer], str | None]  # None when the answer is the spec's, else why not


@dataclass
class Tally:
    """What the matrix tried and found (the failures keep their where and why)."""

    attempts: int = 0
    leaks: list[str] = field(default_factory=list)
    mutations: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    answers: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    operations: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)  # (operation, binding)
    bindings: set[str] = field(default_factory=set)
    directions: set[str] = field(default_factory=set)

    def report(self) -> dict[str, Any]:
        return {
            "operations": sorted(self.operations),
            "bindings": sorted(self.bindings),
            "directions": sorted(self.directions),
            "operation_binding_pairs": len(self.pairs),
            "attempts": self.attempts,
            "leaks": len(self.leaks),
            "mutations": len(self.mutations),
            "wrong_answers": len(self.wrong),
            "answers": {
                op: {b: sorted(labels) for b, labels in by_binding.items()}
                for op, by_binding in sorted(self.answers.items())
            },
            "details": {"leaks": self.leaks, "mutations": self.mutations, "wrong": self.wrong},
        }


def leaks_in(answer: Answer, victim: World, actor: World) -> list[str]:
    """The victim's values in the answer's bytes, apart from those the actor sent itself in
    this request and those that are (also) the actor's own."""
    text = answer.body.decode(errors="replace")
    return sorted(s for s in victim.secrets - actor.own if s in text and s not in answer.request)


def is_not_found(binding: str) -> Callable[[Answer], str | None]:
    def check(answer: Answer) -> str | None:
        want = expected(NOT_FOUND, binding)
        return None if answer.outcome == want else f"want {want}, got {answer.label}"

    return check


def only_own_tasks(
    actor: World, exactly: Callable[[], set[str]] | None = None
) -> Callable[[Answer], str | None]:
    """A listing of the caller's own tasks only; `exactly`: which ones (when a listing of the
    caller's shows exactly those, the key it read was the caller's own, not a colliding one)."""

    def check(answer: Answer) -> str | None:
        if answer.outcome != OK:
            return f"want a listing, got {answer.label}"
        ids = {t["id"] for t in answer.result.get("tasks", [])}
        foreign = ids - actor.own_task_ids
        total = answer.result.get("totalSize", 0)
        if foreign:
            return f"listed tasks that are not the caller's: {sorted(foreign)}"
        if total > len(actor.own_task_ids):
            return f"totalSize {total} > the caller's {len(actor.own_task_ids)} tasks"
        if exactly is not None and (ids != exactly() or total != len(ids)):
            return f"want exactly {sorted(exactly())}, got {sorted(ids)} (totalSize {total})"
        return None

    return check


def attempts_for(binding: str, actor: World, victim: World) -> list[Attempt]:
    tasks, configs = victim.tasks, victim.configs
    not_found = is_not_found(binding)
    marker = f"intruder-{actor.name}-{uuid.uuid4().hex[:8]}"
    mine = {
        "url": f"http://127.0.0.1:9/hook/{actor.name}?key={marker}",
        "token": f"token-{marker}",
        "credentials": f"credentials-{marker}",
    }
    found: list[Attempt] = []

    def add(operation: str, target: str, call: Callable[[Caller], Any], check: Any) -> None:
        found.append(Attempt(operation, target, call, check))

    for role, task_id in tasks.items():
        add("GetTask", role, lambda c, t=task_id: c.get_task(t), not_found)
    if binding != "jsonrpc-0.3":  # 0.3 has no ListTasks

        def everything() -> set[str]:  # read when checked: sends add tasks of the actor's
            return set(actor.own_task_ids)

        in_colliding = {actor.tasks["input-required"], actor.tasks["completed"]}
        colliding = COLLIDING_CONTEXT[actor.name]
        queries: list[tuple[str, dict[str, Any], Callable[[], set[str]] | None]] = [
            ("no filter", {}, everything),
            ("history and artifacts", {"historyLength": 100, "includeArtifacts": True}, everything),
            ("the other's contextId", {"contextId": victim.contexts["colliding"]}, set),
            ("the other's auto contextId", {"contextId": victim.contexts["auto"]}, set),
            # The case: B's `1` and A's `proj#1` must be two keys.
            ("own colliding contextId", {"contextId": colliding}, lambda: in_colliding),
            (
                "own colliding contextId + status",
                {"contextId": colliding, "status": "TASK_STATE_INPUT_REQUIRED"},
                lambda: {actor.tasks["input-required"]},
            ),
            ("the other's page token", {"pageToken": victim.page_token}, None),
            (
                "the other's page token, size 1",
                {"pageToken": victim.page_token, "pageSize": 1},
                None,
            ),
        ]
        queries += [
            (f"status {state}", {"status": f"TASK_STATE_{state}"}, None)
            for state in ("WORKING", "INPUT_REQUIRED", "COMPLETED")
        ]
        for target, query, exactly in queries:
            add(
                "ListTasks",
                target,
                lambda c, q=query: c.list_tasks(**q),
                only_own_tasks(actor, exactly),
            )
    for role in ("working", "input-required", "completed"):
        add("CancelTask", role, lambda c, t=tasks[role]: c.cancel(t), not_found)
    for role in ("working", "input-required", "completed"):
        add("SubscribeToTask", role, lambda c, t=tasks[role]: c.subscribe(t), not_found)
    for role in ("working", "input-required", "completed"):
        task_id, context_id = (
            tasks[role],
            victim.contexts.get("colliding" if role != "working" else "auto"),
        )
        for streaming in (False, True):
            operation = "SendStreamingMessage" if streaming else "SendMessage"
            add(
                operation,
                f"follow-up to {role} (taskId)",
                lambda c, t=task_id, s=streaming: c.send(
                    f"{marker} let me in", task_id=t, streaming=s
                ),
                not_found,
            )
            add(
                operation,
                f"follow-up to {role} (taskId + contextId)",
                lambda c, t=task_id, x=context_id, s=streaming: c.send(
                    f"{marker} let me in", task_id=t, context_id=x, streaming=s
                ),
                not_found,
            )
    for streaming in (False, True):
        add(
            "SendStreamingMessage" if streaming else "SendMessage",
            "the other's contextId (no taskId)",
            lambda c, s=streaming: c.send(
                f"{marker} join", context_id=victim.contexts["joinable"], streaming=s
            ),
            new_own_task(actor, victim, victim.contexts["joinable"], marker),
        )
    for role in ("input-required", "completed"):
        task_id, config_id = configs[role]
        add("CreatePushConfig", role, lambda c, t=task_id: c.push_create(t, mine), not_found)
        add("GetPushConfig", role, lambda c, t=task_id, i=config_id: c.push_get(t, i), not_found)
        if binding == "jsonrpc-0.3":
            add(
                "GetPushConfig",
                f"{role} (no config id)",
                lambda c, t=task_id: c.push_get(t, None),
                not_found,
            )
        add("ListPushConfigs", role, lambda c, t=task_id: c.push_list(t), not_found)
        add(
            "DeletePushConfig",
            role,
            lambda c, t=task_id, i=config_id: c.push_delete(t, i),
            not_found,
        )
        # The other's config id through a task of the caller's own: not there, nothing deleted.
        own_task = actor.tasks["completed"]
        add(
            "GetPushConfig",
            f"{role}'s config via own task",
            lambda c, i=config_id, t=own_task: c.push_get(t, i),
            not_found,
        )
        add(
            "DeletePushConfig",
            f"{role}'s config via own task",
            lambda c, i=config_id, t=own_task: c.push_delete(t, i),
            lambda a: None if a.outcome == OK else f"want idempotent success, got {a.label}",
        )
    # Open mode has no extended card (UnsupportedOperation); with authentication on, a card of
    # the agent's own may come back: either way nothing of the other's (the leak search).
    unsupported = expected(UNSUPPORTED, binding)
    add(
        "GetExtendedAgentCard",
        "-",
        lambda c: c.extended_card(),
        lambda a: None if a.outcome in (unsupported, OK) else f"want {unsupported}, got {a.label}",
    )
    return found


def new_own_task(
    actor: World, victim: World, context_id: str, marker: str
) -> Callable[[Answer], str | None]:
    """A send into the other's contextId makes a task of the caller's own in a context of the
    caller's own with the same id: never a turn of the other's tasks."""

    def check(answer: Answer) -> str | None:
        if answer.outcome != OK:
            return f"want a new task, got {answer.label}"
        result = answer.result
        task = result.get("task", result)  # 1.0: {task}; 0.3: the Task itself
        if task.get("kind") == "status-update" or "statusUpdate" in task:
            return f"want a Task first, got {result}"
        if task["id"] in victim.tasks.values():
            return f"joined the other's task {task['id']}"
        if task["contextId"] != context_id:
            return f"contextId {task['contextId']} is not the one sent"
        texts = [
            p.get("text", "")
            for m in task.get("history", [])
            if m.get("role") in ("ROLE_USER", "user")
            for p in m.get("parts", [])
        ]
        if not texts or any(marker not in t for t in texts):
            return f"history holds messages that are not the caller's: {texts}"
        actor.own_task_ids.add(task["id"])
        actor.own.update({task["id"], task["contextId"]})
        return None

    return check


def run_direction(tally: Tally, actor: World, victim: World, callers: dict[str, Caller]) -> None:
    """Every attempt of every binding, actor on victim's resources, the victim's view checked
    after each one."""
    baseline = snapshot(victim)
    direction = f"{actor.name} on {victim.name}'s"
    tally.directions.add(direction)
    for binding, caller in callers.items():
        tally.bindings.add(binding)
        for attempt in attempts_for(binding, actor, victim):
            answer = attempt.call(caller)
            if answer is None:
                continue
            where = f"{direction} {binding} {attempt.operation} [{attempt.target}]"
            tally.attempts += 1
            tally.operations.add(attempt.operation)
            tally.pairs.add((attempt.operation, binding))
            labels = tally.answers.setdefault(attempt.operation, {}).setdefault(binding, set())
            labels.add(answer.label)
            leaked = leaks_in(answer, victim, actor)
            if leaked:
                tally.leaks.append(f"{where}: {leaked} in {answer.body[:300]!r}")
            why = attempt.check(answer)
            if why:
                tally.wrong.append(f"{where}: {why}")
            now = snapshot(victim)
            if now != baseline:
                changed = sorted(k for k in baseline if baseline[k] != now.get(k))
                tally.mutations.append(f"{where}: changed {changed}")
                baseline = now  # count each change once


@pytest.fixture
def callers(
    target: tuple[str, dict[str, dict[str, str]]],
) -> Iterator[dict[str, dict[str, Caller]]]:
    base_url, principals = target
    made = {
        name: {b: Caller(base_url, headers, b) for b in BINDINGS}
        for name, headers in principals.items()
    }
    yield made
    for by_binding in made.values():
        for caller in by_binding.values():
            caller.close()


def test_two_principals_share_nothing_on_any_binding(
    callers: dict[str, dict[str, Caller]], request: pytest.FixtureRequest
) -> None:
    mode = request.node.callspec.params["target"]
    worlds = {name: build_world(name, by_binding["rest"]) for name, by_binding in callers.items()}
    a, b = worlds["A"], worlds["B"]
    # The detector is live: each owner's own answers do hold its values.
    for world in (a, b):
        other = b if world is a else a
        own = world.owner.get_task(world.tasks["completed"])
        assert leaks_in(own, world, other), "the leak search finds nothing even where it must"

    tally = Tally()
    try:
        run_direction(tally, b, a, callers["B"])
        run_direction(tally, a, b, callers["A"])
    finally:
        report = tally.report()
        REPORT.parent.mkdir(exist_ok=True)
        report["mode"] = mode
        REPORT.with_name(f"isolation-{mode}.json").write_text(json.dumps(report, indent=2) + "\n")
        print(
            f"\nisolation ({mode}): {len(tally.operations)} operations x "
            f"{len(tally.bindings)} bindings"
            f" ({len(tally.pairs)} pairs) x {len(tally.directions)} directions,"
            f" {tally.attempts} attempts:"
            f" {len(tally.leaks)} leaks, {len(tally.mutations)} mutations,"
            f" {len(tally.wrong)} answers not the spec's"
        )
        for op, by_binding in report["answers"].items():
            print(f"  {op}: " + "; ".join(f"{b} {', '.join(v)}" for b, v in by_binding.items()))
    # The owners can still act on all of it, and the snapshot sees their changes (so it would
    # have seen the other's).
    for world in (a, b):
        other = b if world is a else a
        before = snapshot(world)
        mine = world.owner.list_tasks()
        assert mine is not None and only_own_tasks(other)(mine), "the list check is blind"
        assert is_not_found("rest")(world.owner.get_task(world.tasks["working"]))
        canceled = world.owner.cancel(world.tasks["working"])
        assert canceled.outcome == OK, canceled.label
        assert canceled.result["status"]["state"] == "TASK_STATE_CANCELED"
        task_id, config_id = world.configs["input-required"]
        assert world.owner.push_delete(task_id, config_id).outcome == OK  # no webhook to retry
        answered = world.owner.send("now", task_id=task_id)
        assert answered.outcome == OK, answered.label
        assert answered.result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        after = snapshot(world)
        changed = {k for k in before if before[k] != after[k]}
        assert {"task working", "task input-required", "configs input-required"} <= changed
    assert tally.leaks == [], tally.leaks
    assert tally.mutations == [], tally.mutations
    assert tally.wrong == [], tally.wrong
    assert tally.bindings == set(BINDINGS) and len(tally.directions) == 2
    # Every operation of each binding (0.3 has no ListTasks).
    assert len(tally.pairs) == len(tally.operations) * len(BINDINGS) - 1 == 32, tally.pairs
