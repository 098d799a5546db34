"""The routing the bindings need, on plain Starlette. FastAPI (its import builds its OpenAPI
models, its route set-up loads pydantic.v1) cost each HTTP function's init about 0.2 s of CPU
for features these routes never used: parameter parsing, response models, docs.

A route handler takes the request and its path parameters by name (`task_id`), sync or async
(sync ones run in the thread pool, as FastAPI ran them); a router's dependencies run first, in
order, before the body is read (the A2A-Version check)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Dependency = Callable[[Request], Any]
Handler = Callable[..., Any]

P = ParamSpec("P")
T = TypeVar("T")

# As many threads as anyio's default limiter allows Starlette's run_in_threadpool (none is
# started before the first call).
THREADS = 40
_executor = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="a2a-worker")


async def run_in_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`func(*args, **kwargs)` in a worker thread, in a copy of the caller's context: what
    Starlette's `run_in_threadpool` does, on asyncio's own executor. run_in_threadpool goes
    through anyio, whose asyncio backend (~14 ms of CPU to import) a buffered response never
    needs otherwise: every HTTP function's first request paid it. A cancelled caller stops
    waiting at once and the call finishes in its thread, as with anyio under a plain
    `Task.cancel()`. Not for code running inside an anyio cancel scope (an SSE response's
    task group), whose cancellation anyio's own thread call handles: sse.py keeps it."""
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor, call)


class APIRouter:
    """Routes sharing dependencies (the part of FastAPI's APIRouter these bindings used)."""

    def __init__(self, dependencies: Sequence[Dependency] = ()) -> None:
        self.dependencies = list(dependencies)
        self.routes: list[Route] = []

    def add_api_route(self, path: str, handler: Handler, methods: list[str]) -> None:
        route = Route(path, _endpoint(handler, self.dependencies), methods=methods)
        # Starlette adds HEAD to every GET route; FastAPI did not: HEAD stays a 405.
        route.methods = {method.upper() for method in methods}
        missing = set(_path_names(handler)) - set(route.param_convertors)
        if missing:
            # FastAPI would have read them from the query string; nothing here does.
            raise TypeError(f"{handler.__name__}: {sorted(missing)} not in the path {path}")
        self.routes.append(route)

    def get(self, path: str) -> Callable[[Handler], Handler]:
        return self._decorator(path, "GET")

    def post(self, path: str) -> Callable[[Handler], Handler]:
        return self._decorator(path, "POST")

    def _decorator(self, path: str, method: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.add_api_route(path, handler, methods=[method])
            return handler

        return register

    def include_router(self, other: APIRouter) -> None:
        """`other`'s routes after these (each keeps its own router's dependencies)."""
        self.routes.extend(other.routes)


def Depends(dependency: Dependency) -> Dependency:
    return dependency


def _path_names(handler: Handler) -> list[str]:
    return [name for name in inspect.signature(handler).parameters if name != "request"]


def _endpoint(handler: Handler, dependencies: list[Dependency]) -> Callable[[Request], Any]:
    path_names = _path_names(handler)
    wants_request = "request" in inspect.signature(handler).parameters
    is_async = inspect.iscoroutinefunction(handler)

    async def endpoint(request: Request) -> Response:
        for dependency in dependencies:
            dependency(request)
        kwargs: dict[str, Any] = {name: request.path_params[name] for name in path_names}
        if wants_request:
            kwargs["request"] = request
        if is_async:
            response: Response = await handler(**kwargs)
        else:
            response = await run_in_thread(handler, **kwargs)
        return response

    return endpoint


def starlette_app(routers: Sequence[APIRouter]) -> Starlette:
    """An app serving the routers' routes in order, without slash redirects: behind API
    Gateway a redirect's Location drops the stage (`/prod`), so `GET /tasks/` answered an
    empty 307 to a URL that does not exist. Routes that a trailing slash reaches at the
    gateway declare both spellings instead."""
    app = Starlette(routes=[route for router in routers for route in router.routes])
    app.router.redirect_slashes = False
    return app
