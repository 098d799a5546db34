"""Replacing moto (and botocore) attributes for a local stack's life, and checking them first.

A patch names every attribute it replaces (`replaces`, as `module:Class.attr(params)`), so the
stack can check, before applying it, that moto still has each one in the shape the patch was
written against (moto_fidelity, moto_speedups).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

# moto's DynamoDB (and DynamoDB Streams) and SQS models are not thread-safe: every call of
# theirs, and every direct use of their models by the stack (TTL sweeps, stream trims),
# holds the service's lock. One per process: stacks of a process share moto's backends.
DYNAMODB_LOCK = threading.RLock()
SQS_LOCK = threading.RLock()

MOTO_CONSTRAINTS = Path(__file__).with_name("moto-constraints.txt")

# (id(target), name) -> [moto's own attribute, how many live replacements stack on it]: the
# checks look at moto's attribute even while an earlier, still running stack's patch is on it.
_ORIGINALS: dict[tuple[int, str], list[Any]] = {}


class Patches:
    """Attributes replaced on moto's classes and modules, restored by `undo`."""

    def __init__(self) -> None:
        self._applied: list[tuple[Any, str, Any]] = []

    def replace(self, target: Any, name: str, replacement: Any) -> None:
        # As stored, so that undo puts a staticmethod or classmethod back as one.
        current = vars(target)[name] if name in vars(target) else getattr(target, name)
        self._applied.append((target, name, current))
        _ORIGINALS.setdefault((id(target), name), [current, 0])[1] += 1
        setattr(target, name, replacement)

    def undo(self) -> None:
        for target, name, original in reversed(self._applied):
            setattr(target, name, original)
            entry = _ORIGINALS[(id(target), name)]
            entry[1] -= 1
            if not entry[1]:
                del _ORIGINALS[(id(target), name)]
        self._applied.clear()


def original(target: Any, name: str) -> Any:
    """`target.name` as moto defines it, under any replacement a live stack made."""
    entry = _ORIGINALS.get((id(target), name))
    if entry is None:
        return getattr(target, name)
    found = entry[0]
    return found.__get__(None, target) if isinstance(found, classmethod | staticmethod) else found


@dataclass(frozen=True)
class Patch:
    """One patch: what it replaces, and whether it re-implements moto logic (then it is
    written against the pinned moto version and checked against it)."""

    name: str
    apply: Callable[..., None]
    replaces: tuple[str, ...]
    reimplements: bool = False

    def __call__(self, patches: Patches, *args: Any, **kwargs: Any) -> None:
        self.apply(patches, *args, **kwargs)


def patch(*replaces: str, reimplements: bool = False) -> Callable[[Callable[..., None]], Patch]:
    """Declare a function `(patches, ...) -> None` as a Patch replacing `replaces`."""

    def declare(apply: Callable[..., None]) -> Patch:
        return Patch(apply.__name__, apply, replaces, reimplements)

    return declare


# The two modules of moto's Step Functions interpreter that bind `boto_client_for`, the
# factory of the clients its tasks call services with.
_SFN_CLIENTS = "moto.stepfunctions.parser.asl.utils.boto_client"
_SFN_LAMBDA = "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils"
STATE_MACHINE_CLIENTS = (
    f"{_SFN_CLIENTS}:boto_client_for(region, service, state_credentials)",
    f"{_SFN_LAMBDA}:boto_client_for(region, service, state_credentials)",
)


def wrap_state_machine_clients(
    patches: Patches, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> None:
    """Replace `boto_client_for` (STATE_MACHINE_CLIENTS) by `wrap(the current one)`."""
    modules = [importlib.import_module(name) for name in (_SFN_CLIENTS, _SFN_LAMBDA)]
    replacement = wrap(modules[0].boto_client_for)
    for module in modules:
        patches.replace(module, "boto_client_for", replacement)


_SPEC = re.compile(r"(?P<module>[\w.]+):(?P<path>[\w.]+)(?:\((?P<params>[\w, ]*)\))?$")


def pinned_moto_version() -> str | None:
    """The moto version moto-constraints.txt pins (`moto==X`), None if it pins none."""
    try:
        text = MOTO_CONSTRAINTS.read_text()
    except OSError:
        return None
    found = re.search(r"^moto==([\w.]+)\s*$", text, re.MULTILINE)
    return found.group(1) if found else None


@functools.cache
def _installed_moto() -> str:
    # metadata.version scans the installed distributions: once a process, not once a patch.
    return metadata.version("moto")


def problem(declared: Patch) -> str | None:
    """Why `declared` cannot apply to the moto installed (an attribute missing or changed, or
    another moto version for a re-implementation); None when it can."""
    for spec in declared.replaces:
        match = _SPEC.match(spec)
        if match is None:
            raise ValueError(f"{declared.name}: bad attribute spec {spec!r}")
        where = f"{match['module']}:{match['path']}"
        try:
            found: Any = importlib.import_module(match["module"])
            for part in match["path"].split("."):
                found = original(found, part)
        except (ImportError, AttributeError):
            return f"{where} is missing"
        if match["params"] is None:
            continue
        expected = [p.strip() for p in match["params"].split(",") if p.strip()]
        try:
            actual = list(inspect.signature(found).parameters)
        except (TypeError, ValueError):
            return f"{where} is not a callable"
        if actual != expected:
            return f"{where} takes ({', '.join(actual)}), not ({', '.join(expected)})"
    if declared.reimplements:
        installed, pinned = _installed_moto(), pinned_moto_version()
        if installed != pinned:
            return f"moto is {installed}, the patch was written for {pinned}"
    return None
