"""The inspector's pages: `/_local/inspector` (the tasks) and `/_local/inspector/tasks/{id}` (a
task's timeline, turns, executions, flow states, webhooks and cost), served by the local stack's
admin endpoints to loopback requests only.

Pages are rendered on the server (Jinja2, every value escaped); a little JavaScript
(static/inspector.js) follows them live: the tasks list and a task's panels are fetched again
every two seconds, the timeline follows the event log over SSE, and the talk form sends to the
stack's own API as a client would. With Auth on, the credential the user signs in with is kept
in a cookie of this page; the inspector shows only the tasks of the principal it names.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from a2a_serverless.local.inspector import data
from a2a_serverless.store import InvalidPageToken

PREFIX = "/_local/inspector"
HERE = Path(__file__).parent
CREDENTIAL_COOKIE = "a2a_inspector_credential"
# How often a followed timeline looks for new events, and how long one SSE response lasts (the
# browser's EventSource reconnects, resuming after the last event it saw).
FOLLOW_SECONDS = 0.3
STREAM_SECONDS = 300.0
MAX_FORM_BYTES = 16 * 1024


class NotSignedIn(Exception):
    """Auth is on and the request names no principal the stack's authenticator accepts."""


def create_app(stack: Any, auth_mode: str) -> Starlette:
    """The inspector of `stack` (a started LocalStack) for its Auth mode."""
    import jinja2

    # Autoescape on for every template: a task's text is shown, never run.
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True
    )
    environment.filters["pretty"] = _pretty
    templates = Jinja2Templates(env=environment)

    def owner_of(request: Request) -> str | None:
        """Whose tasks the request may see: None for every task (Auth=None)."""
        if auth_mode == "None":
            return None
        credential = request.cookies.get(CREDENTIAL_COOKIE)
        if not credential:
            raise NotSignedIn()
        return _principal(auth_mode, credential)

    def page(request: Request, name: str, status: int = 200, **values: Any) -> Response:
        context = {"prefix": PREFIX, "auth_mode": auth_mode, **values}
        return templates.TemplateResponse(request, name, context, status_code=status)

    def sign_in_page(request: Request, error: str = "") -> Response:
        return page(request, "sign_in.html", 401, error=error)

    async def tasks_page(request: Request) -> Response:
        try:
            owner = owner_of(request)
            listing = await _listing(stack, request, owner)
        except NotSignedIn:
            return sign_in_page(request)
        except (ValueError, InvalidPageToken) as error:
            return page(request, "tasks.html", 400, listing=None, error=str(error), query={})
        query = dict(request.query_params)
        next_href = None
        if listing.next_page_token:
            next_href = "?" + urlencode({**query, "pageToken": listing.next_page_token})
        return page(request, "tasks.html", listing=listing, query=query, next_href=next_href)

    async def tasks_json(request: Request) -> Response:
        try:
            listing = await _listing(stack, request, owner_of(request))
        except NotSignedIn:
            return JSONResponse({"error": "sign in"}, status_code=401)
        except (ValueError, InvalidPageToken) as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse(
            {
                "rows": [asdict(row) for row in listing.rows],
                "nextPageToken": listing.next_page_token,
            }
        )

    async def task_page(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        try:
            view = await run_in_threadpool(data.task_view, stack, task_id, owner_of(request))
        except NotSignedIn:
            return sign_in_page(request)
        if view is None:
            return page(request, "missing.html", 404, task_id=task_id)
        cost = _cost(stack, task_id)
        return page(request, "task.html", view=view, cost=cost)

    async def panels_json(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        try:
            view = await run_in_threadpool(data.task_view, stack, task_id, owner_of(request))
        except NotSignedIn:
            return JSONResponse({"error": "sign in"}, status_code=401)
        if view is None:
            return JSONResponse({"error": "no such task"}, status_code=404)
        return JSONResponse(
            {
                "state": view.state,
                "updated": view.updated,
                "turns": [asdict(turn) for turn in view.turns],
                "executions": [asdict(e) for e in view.executions],
                "flowStates": [asdict(f) for f in view.flow_states],
                "pushConfigs": [asdict(c) for c in view.push_configs],
                "deliveries": [asdict(d) for d in view.deliveries],
                "cost": _cost(stack, task_id),
            }
        )

    async def events_stream(request: Request) -> Response:
        """The task's events after `after` (or the browser's Last-Event-ID), then each new
        one as it is written (`data:` the event's view as JSON, `id:` its seq), and its
        history messages after the first `history` (`event: history`); `event: end` once the
        task has ended."""
        task_id = request.path_params["task_id"]
        try:
            owner = owner_of(request)
        except NotSignedIn:
            return JSONResponse({"error": "sign in"}, status_code=401)
        view = await run_in_threadpool(data.task_view, stack, task_id, owner)
        if view is None:
            return JSONResponse({"error": "no such task"}, status_code=404)
        after = _int(request.headers.get("last-event-id") or request.query_params.get("after"))

        async def follow() -> Any:
            seen = after
            history = _int(request.query_params.get("history"))
            loop = asyncio.get_running_loop()
            ends = loop.time() + STREAM_SECONDS
            yield b"retry: 1000\n\n"
            while loop.time() < ends:
                # The state first: a task seen ended has no event after those read next.
                ended = await run_in_threadpool(data.task_ended, stack, task_id)
                events = await run_in_threadpool(data.events_after, stack, task_id, seen)
                for event in events:
                    seen = max(seen, event.seq or seen)
                    body = json.dumps(asdict(event))
                    yield f"id: {event.seq}\ndata: {body}\n\n".encode()
                messages = await run_in_threadpool(data.history_after, stack, task_id, history)
                for message in messages:
                    history += 1
                    yield f"event: history\ndata: {json.dumps(asdict(message))}\n\n".encode()
                if ended:
                    yield b"event: end\ndata: {}\n\n"
                    return
                if await request.is_disconnected():
                    return
                await asyncio.sleep(FOLLOW_SECONDS)

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(follow(), media_type="text/event-stream", headers=headers)

    async def sign_in(request: Request) -> Response:
        # A urlencoded form of one field (no multipart parser needed).
        form = parse_qs((await request.body())[:MAX_FORM_BYTES].decode(errors="replace"))
        credential = (form.get("credential") or [""])[0].strip()
        try:
            _principal(auth_mode, credential)
        except NotSignedIn:
            return sign_in_page(request, "The stack does not accept this credential.")
        response = RedirectResponse(PREFIX, status_code=303)
        # Readable by the page's script: it sends the credential to the API with each message.
        response.set_cookie(
            CREDENTIAL_COOKIE, quote(credential, safe=""), samesite="strict", path="/"
        )
        return response

    async def sign_out(request: Request) -> Response:
        response = RedirectResponse(PREFIX, status_code=303)
        response.delete_cookie(CREDENTIAL_COOKIE, path="/")
        return response

    return Starlette(
        routes=[
            Route(PREFIX, tasks_page),
            Route(f"{PREFIX}/", tasks_page),
            Route(f"{PREFIX}/tasks.json", tasks_json),
            Route(f"{PREFIX}/sign-in", sign_in, methods=["POST"]),
            Route(f"{PREFIX}/sign-out", sign_out, methods=["POST"]),
            Route(f"{PREFIX}/tasks/{{task_id}}", task_page),
            Route(f"{PREFIX}/tasks/{{task_id}}/panels.json", panels_json),
            Route(f"{PREFIX}/tasks/{{task_id}}/events", events_stream),
            Mount(f"{PREFIX}/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ]
    )


async def _listing(stack: Any, request: Request, owner: str | None) -> data.TaskPage:
    query = request.query_params
    if owner is None:
        owner = query.get("owner") or None
    return await run_in_threadpool(
        data.list_tasks,
        stack,
        owner,
        query.get("contextId") or None,
        query.get("status") or None,
        query.get("pageToken") or None,
    )


def _principal(auth_mode: str, credential: str) -> str:
    """The owner a credential names, as the stack's authorizer reads it (NotSignedIn when it
    names none). Iam: SigV4 signs each request, a browser holds no such credential."""
    from urllib.parse import unquote

    from a2a_serverless import wiring
    from a2a_serverless.auth import API_KEY_HEADER, AUTHORIZATION_HEADER, Unauthenticated

    credential = unquote(credential)
    if not credential or auth_mode not in ("ApiKey", "Jwt"):
        raise NotSignedIn()
    authenticator = wiring.get_authenticator()
    if authenticator is None:
        raise NotSignedIn()
    headers = (
        {API_KEY_HEADER: credential}
        if auth_mode == "ApiKey"
        else {AUTHORIZATION_HEADER: f"Bearer {credential}"}
    )
    try:
        return authenticator.authenticate(headers).caller.owner
    except Unauthenticated:
        raise NotSignedIn() from None


def _cost(stack: Any, task_id: str) -> list[dict[str, Any]] | None:
    """The task's cost rows, service by service then the total: its units and their $ for
    this task and per 1M such tasks (local/meter.py, the benchmark's meter). None: the stack
    is not metered."""
    meter = getattr(stack, "meter", None)
    if meter is None:
        return None
    units = meter.units(task_id)
    price = meter.price(task_id, stack.parameters.get("WorkflowType", "EXPRESS"))
    described = _units_text(units)
    return [
        {
            "service": service,
            "units": described.get(service, ""),
            "usd": usd,
            "usdPerMillion": price["per_million"][service],
        }
        for service, usd in price["per_task"].items()
    ]


def _units_text(units: dict[str, Any]) -> dict[str, str]:
    """What each service's price counts, in words."""
    functions = units.get("lambda") or {}
    lambdas = "; ".join(
        f"{name}: {row['invocations']:g} x {row['billed_ms'] / max(row['invocations'], 1):.0f} ms"
        f" at {row['memory_mb']} MB"
        for name, row in sorted(functions.items())
    )
    flow = units.get("stepfunctions") or {}
    timer = units.get("timer") or {}
    ddb = units.get("dynamodb") or {}
    return {
        "apigateway": f"{units.get('api_requests', 0):g} requests",
        "lambda": lambdas,
        "stepfunctions": f"{flow.get('executions', 0)} executions, "
        f"{flow.get('state_transitions', 0)} state transitions",
        "stepfunctions_timer": f"{timer.get('state_transitions', 0)} state transitions",
        "dynamodb": f"{ddb.get('wru', 0):g} WRU, {ddb.get('rru', 0):g} RRU",
        "sqs": f"{sum((units.get('sqs_requests') or {}).values()):g} requests",
        "cloudwatch_logs": f"{units.get('log_bytes', 0):g} bytes",
        "s3": f"{sum((units.get('s3_requests') or {}).values()):g} requests, "
        f"{units.get('s3_stored_bytes', 0):g} bytes stored",
    }


def _pretty(value: Any) -> str:
    """A JSON text (or value) indented for reading."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _int(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0
