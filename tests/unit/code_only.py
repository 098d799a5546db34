"""The guard of tests/unit: while it is on, starting a process, opening a network connection,
resolving a name, starting moto or a local stack raises `CodeOnlyError`.

The replacements are installed once and pass through while the guard is off, so the same
session may run other folders' tests. Modules loaded later (moto, the local stack) are patched
when they are imported; importing any of them is never refused.
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

RULE = "tests/unit is code only: move this test to tests/integration"


class CodeOnlyError(RuntimeError):
    """Raised by a guarded call made while a tests/unit test runs."""


_active = False  # module-wide, not per thread: servers and pools run in threads


@contextmanager
def guarded() -> Iterator[None]:
    """Turn the guard on for the block (each phase of a unit test)."""
    global _active
    saved, _active = _active, True
    try:
        yield
    finally:
        _active = saved


def _guard(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def guarded_call(*args: Any, **kwargs: Any) -> Any:
        if _active:
            raise CodeOnlyError(f"{what} called: {RULE}")
        return original(*args, **kwargs)

    guarded_call.__code_only__ = True  # type: ignore[attr-defined]
    return guarded_call


def _replace(owner: Any, name: str, what: str) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, "__code_only__", False):
        return
    setattr(owner, name, _guard(what, original))


# Module name -> what to guard once it is loaded: (class, method, label).
_LATER: dict[str, list[tuple[str, str, str]]] = {
    "moto.core.models": [
        ("MockAWS", "start", "moto.mock_aws start"),
        ("ServerModeMockAWS", "start", "moto.mock_aws start (server mode)"),
        ("ProxyModeMockAWS", "start", "moto.mock_aws start (proxy mode)"),
    ],
    "moto.moto_server.threaded_moto_server": [
        ("ThreadedMotoServer", "start", "moto ThreadedMotoServer start"),
    ],
    "a2a_serverless.local.stack": [("LocalStack", "start", "LocalStack start")],
}


def _patch_loaded(module: ModuleType) -> None:
    for owner_name, attr, label in _LATER.get(module.__name__, []):
        owner = getattr(module, owner_name, None)
        # Only a class's own method: a subclass inheriting it is already covered.
        if owner is not None and attr in vars(owner):
            _replace(owner, attr, label)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Lets the other finders find a module of `_LATER`, and patches it once loaded."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _LATER:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:  # get_source (tracebacks), is_package, ...
        return getattr(self._inner, name)

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _patch_loaded(module)


_installed = False


def install() -> None:
    """Install the replacements (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    import subprocess  # here: no tests/unit file imports it at module level

    # Every Popen (subprocess.run, asyncio, os.popen) starts its child here.
    _replace(subprocess.Popen, "_execute_child", "subprocess.Popen")
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        _replace(os, name, f"os.{name}")
    for name in ("connect", "connect_ex", "bind", "sendto"):
        _replace(socket.socket, name, f"socket.socket.{name}")
    for name in ("getaddrinfo", "create_connection", "create_server", "gethostbyname"):
        _replace(socket, name, f"socket.{name}")
    for name in _LATER:
        if name in sys.modules:
            _patch_loaded(sys.modules[name])
    sys.meta_path.insert(0, _PatchOnImport())
