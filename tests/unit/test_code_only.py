"""tests/unit is code only: the guard of tests/unit/conftest.py refuses processes, sockets,
name lookups, moto and local stacks, and no file here imports them at module level."""

from __future__ import annotations

import ast
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.unit import code_only
from tests.unit.code_only import RULE, CodeOnlyError

UNIT = Path(__file__).resolve().parent
# Modules whose import starts nothing, but whose use in a unit test would.
NOT_AT_MODULE_LEVEL = ("moto", "subprocess", "a2a_serverless.local.stack")


def refused(call: Callable[[], object], what: str) -> None:
    with pytest.raises(CodeOnlyError) as raised:
        call()
    assert what in str(raised.value) and RULE in str(raised.value)


def _reap(pid: int) -> None:
    if pid == 0:  # the guard let a fork through: the child leaves at once
        os._exit(0)
    os.waitpid(pid, 0)


def test_processes_are_refused() -> None:
    import subprocess
    from subprocess import Popen

    refused(lambda: subprocess.run(["true"], check=False), "subprocess.Popen")
    refused(lambda: Popen(["true"]), "subprocess.Popen")
    refused(lambda: os.popen("true"), "subprocess.Popen")
    refused(lambda: _reap(os.fork()), "os.fork")
    refused(lambda: _reap(os.posix_spawn("/bin/true", ["true"], {})), "os.posix_spawn")
    refused(lambda: os.system("true"), "os.system")


def test_sockets_and_name_lookups_are_refused() -> None:
    with socket.socket() as sock:  # making one is fine: nothing leaves the process
        refused(lambda: sock.connect(("127.0.0.1", 9)), "socket.socket.connect")
        refused(lambda: sock.bind(("127.0.0.1", 0)), "socket.socket.bind")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        refused(lambda: udp.sendto(b"x", ("127.0.0.1", 9)), "socket.socket.sendto")
    refused(lambda: socket.getaddrinfo("localhost", 80), "socket.getaddrinfo")
    refused(lambda: socket.create_connection(("127.0.0.1", 9)), "socket.create_connection")
    refused(lambda: httpx.get("http://127.0.0.1:9/"), "socket.")


def test_moto_is_refused() -> None:
    from moto import mock_aws
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    def as_context() -> None:
        with mock_aws():
            pass

    @mock_aws
    def decorated() -> None:
        pass

    refused(as_context, "moto.mock_aws start")
    refused(lambda: mock_aws().start(), "moto.mock_aws start")
    refused(decorated, "moto.mock_aws start")
    refused(lambda: ThreadedMotoServer(port=0).start(), "ThreadedMotoServer start")


def test_a_local_stack_is_refused() -> None:
    from a2a_serverless.local.stack import LocalStack

    # Without __init__: the guard refuses before start reads anything.
    refused(lambda: LocalStack.__new__(LocalStack).start(), "LocalStack start")


@pytest.fixture(scope="module")
def lookup_in_module_setup() -> Iterator[str]:
    try:
        socket.getaddrinfo("localhost", 80)
    except CodeOnlyError:
        yield "refused"
    else:
        yield "allowed"


def test_fixtures_are_guarded_too(lookup_in_module_setup: str) -> None:
    assert lookup_in_module_setup == "refused"


def test_in_process_concurrency_still_works() -> None:
    import asyncio
    import threading

    async def twice() -> int:
        return sum(await asyncio.gather(asyncio.sleep(0, 1), asyncio.sleep(0, 1)))

    assert asyncio.run(twice()) == 2  # an event loop's socketpair is neither bound nor connected
    seen: list[int] = []
    thread = threading.Thread(target=seen.append, args=(1,))
    thread.start()
    thread.join()
    assert seen == [1]


def test_a_guarded_call_passes_through_while_the_guard_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wrapped = code_only._guard("a call", lambda value: value * 2)
    refused(lambda: wrapped(2), "a call")
    monkeypatch.setattr(code_only, "_active", False)  # another folder's test in this session
    assert wrapped(2) == 4


def module_level_imports(source: str) -> set[str]:
    """The modules a file imports outside any function or class."""
    found: set[str] = set()
    pending: list[ast.AST] = list(ast.parse(source).body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def forbidden_imports(source: str) -> set[str]:
    return {
        name
        for name in module_level_imports(source)
        for banned in NOT_AT_MODULE_LEVEL
        if name == banned or name.startswith(f"{banned}.")
    }


def test_module_level_imports_are_found_wherever_they_hide() -> None:
    source = (
        "import os\n"
        "from moto import mock_aws\n"
        "try:\n    import subprocess as sp\nexcept ImportError:\n    pass\n"
        "if True:\n    from a2a_serverless.local import stack\n"
        "def f():\n    import moto.core\n"
        "class C:\n    import subprocess\n"
    )
    assert forbidden_imports(source) == {
        "moto",
        "moto.mock_aws",
        "subprocess",
        "a2a_serverless.local.stack",
    }


def test_no_unit_file_imports_moto_the_local_stack_or_subprocess_at_module_level() -> None:
    offenders = {
        str(path.relative_to(UNIT)): sorted(found)
        for path in sorted(UNIT.rglob("*.py"))
        if (found := forbidden_imports(path.read_text()))
    }
    assert offenders == {}, f"{RULE}: {offenders}"
