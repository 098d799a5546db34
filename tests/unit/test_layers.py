"""The package's layers import one way: models ← store ← core ← bindings ← handlers, with
flows, push and auth beside core (they use it; core never uses them), aws (its AWS adapters)
above it, and no import cycle.

Read from the source (every `import`, lazy ones inside functions included), so a wrong-way
import fails here before it becomes a tangle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "a2a_serverless"

CORE_AND_BELOW = {"models", "store", "core", "settings", "observability"}
COMPOSED = CORE_AND_BELOW | {"auth", "aws", "flows", "push"}  # what wiring composes
# What each layer may import of the package (besides itself). settings and observability are
# leaf modules every layer may use; wiring composes everything and only entry points use it.
ALLOWED: dict[str, set[str]] = {
    "models": set(),
    "settings": set(),
    "observability": {"settings"},
    "store": {"models"},
    "core": {"models", "store", "settings", "observability"},
    # Who is calling (API keys, JWT): the authorizer and the admin commands use it.
    "auth": {"models", "store", "settings"},
    # AWS adapters of core's interfaces (Step Functions, KMS, API Gateway usage plans).
    "aws": {"models", "core", "auth", "settings", "observability"},
    "flows": CORE_AND_BELOW,
    "push": CORE_AND_BELOW,
    "bindings": {"models", "core", "settings", "observability"},
    "wiring": COMPOSED,
    # The local stack; it reads (never writes) observability's request scope: the inspector's
    # records name the task and event a webhook POST served by its log keys.
    "local": COMPOSED | {"bindings", "wiring"},
    # The functions' entry code (functions/<name>/app.py binds it): the top, like wiring's users.
    "handlers": COMPOSED - {"aws"} | {"bindings", "wiring"},
    # The Web Adapter functions' server (run.sh execs it before their app): uvicorn only.
    "serve": set(),
    # The command (dev-only, like local): serves the local stack, scaffolds projects, manages a
    # deployed stack's API keys (the same code the authorizer and the store run).
    "cli": {"local", "settings", "models", "store", "core", "auth", "aws"},
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    assert parts[0] == "a2a_serverless", module
    return parts[1] if len(parts) > 1 else "__init__"


def package_imports() -> dict[str, set[str]]:
    """module name -> the a2a_serverless modules it imports."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(p for p in relative.parts if p != "__init__")
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("a2a_serverless"):
                    imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names if a.name.startswith("a2a_serverless"))
        found[name] = imported
    return found


def wrong_way(imports: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(imports.items()):
        source = layer_of(module)
        if source not in ALLOWED:
            continue
        for target in sorted(targets):
            layer = layer_of(target)
            if layer != source and layer != "__init__" and layer not in ALLOWED[source]:
                problems.append(f"{module} imports {target} ({source} -> {layer})")
    return problems


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles between modules (depth-first search; a package's __init__ counts as the
    package's module name)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for target in sorted(imports.get(module, ())):
            if target not in imports:
                continue
            if state.get(target) == 1:
                found.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[module] = 2

    for module in sorted(imports):
        if module not in state:
            visit(module, [module])
    return found


def test_every_layer_is_known() -> None:
    layers = {layer_of(m) for m in package_imports()}
    assert layers - {"__init__"} <= set(ALLOWED), layers - set(ALLOWED)


def test_imports_run_one_way() -> None:
    assert wrong_way(package_imports()) == []


def test_no_import_cycles() -> None:
    assert cycles(package_imports()) == []


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("a2a_serverless.core.push", "a2a_serverless.push.sender"),
        ("a2a_serverless.store.base", "a2a_serverless.core.errors"),
        ("a2a_serverless.bindings.rest", "a2a_serverless.wiring"),
        ("a2a_serverless.push.sender", "a2a_serverless.bindings.jsonrpc"),
    ],
)
def test_the_check_sees_a_wrong_way_import(module: str, target: str) -> None:
    assert wrong_way({module: {target}}), (module, target)


def test_the_check_sees_a_cycle() -> None:
    imports = {
        "a2a_serverless.core.a": {"a2a_serverless.core.b"},
        "a2a_serverless.core.b": {"a2a_serverless.core.a"},
    }
    assert cycles(imports)
