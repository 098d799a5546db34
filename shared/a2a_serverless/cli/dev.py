"""`a2a-serverless dev`: the local stack for the project in the current folder.

Serves ./template.yaml, else the packaged template; `--reload` restarts a child server when a
.py file under the folder changes. Without the `local` extra, `dev` and `invoke` name the
missing module and its install command, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

# The modules of the `local` extra (pyproject.toml) each command needs.
LOCAL_MODULES = ("moto", "yaml", "uvicorn")
# Exit status of a command that cannot run as installed.
MISSING_EXTRA = 2

# Folders whose files are never the project's code.
_SKIP = {".git", ".venv", "venv", "node_modules", ".aws-sam", "__pycache__", ".mypy_cache"}
POLL_SECONDS = 0.5


@contextmanager
def stack_root(template: str | None) -> Iterator[Path]:
    """The folder holding the template.yaml to serve and its functions' code."""
    if template:
        path = Path(template).resolve()
        if path.name != "template.yaml" or not path.is_file():
            # The local stack reads <root>/template.yaml and the CodeUri folders beside it.
            raise SystemExit(f"--template must name an existing template.yaml, got {template!r}")
        yield path.parent
        return
    here = Path.cwd() / "template.yaml"
    if here.is_file():
        yield Path.cwd()
        return
    from a2a_serverless.cli.scaffold import write_stack

    with tempfile.TemporaryDirectory(prefix="a2a-serverless-") as folder:
        write_stack(Path(folder))
        yield Path(folder)


def install_command() -> str:
    """The pip command that adds the `local` extra to this installation: from the wheel or
    folder it was installed from when pip recorded one (direct_url.json), else by name."""
    from importlib import metadata

    try:
        recorded = metadata.distribution("a2a-serverless").read_text("direct_url.json")
        origin = json.loads(recorded or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        origin = {}
    url = origin.get("url", "") if isinstance(origin, dict) else ""
    if url.startswith("file://"):
        editable = (origin.get("dir_info") or {}).get("editable") is True
        return f'pip install {"-e " if editable else ""}"{unquote(urlparse(url).path)}[local]"'
    try:
        wheel = f"a2a_serverless-{metadata.version('a2a-serverless')}-py3-none-any.whl"
    except metadata.PackageNotFoundError:
        wheel = "a2a_serverless-*.whl"
    return (
        f'pip install "a2a-serverless[local]" (from a wheel: pip install "/path/to/{wheel}[local]"'
        '; from a source folder: pip install "/path/to/a2a-serverless[local]")'
    )


def missing_local_extra(command: str, modules: tuple[str, ...] = LOCAL_MODULES) -> str | None:
    """The line to print when a module of the `local` extra does not import, else None."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or name).split(".")[0]
            return (
                f"a2a-serverless {command}: the module {missing!r} is missing; it comes with "
                f"the package's local extra: {install_command()}"
            )
    return None


def run(args: argparse.Namespace, argv: list[str]) -> int:
    problem = missing_local_extra("dev")
    if problem:
        print(problem, file=sys.stderr)
        return MISSING_EXTRA
    if args.reload:
        return _reloading([a for a in argv if a != "--reload"])
    from a2a_serverless.local.__main__ import serve

    with stack_root(args.template) as root:
        return serve(args, root=root, prog="a2a-serverless dev")


def python_files(folder: Path) -> dict[Path, float]:
    """Every .py file under `folder` (not in a virtualenv, VCS or build folder) -> its mtime."""
    found: dict[Path, float] = {}
    for directory, subdirs, files in os.walk(folder):
        subdirs[:] = [d for d in subdirs if d not in _SKIP and not d.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                path = Path(directory, name)
                try:
                    found[path] = path.stat().st_mtime
                except FileNotFoundError:  # removed between the listing and the stat
                    continue
    return found


def _reloading(argv: list[str]) -> int:
    """Serve in a child process; restart it when a .py file changes; stop on Ctrl-C. A child
    that exits (a flow that no longer loads) is started again at the next edit."""
    folder = Path.cwd()
    command = [sys.executable, "-m", "a2a_serverless.cli", *argv]
    seen = python_files(folder)
    child = subprocess.Popen(command)
    print(f"a2a-serverless dev: watching {folder} for .py changes", flush=True)
    try:
        while True:
            time.sleep(POLL_SECONDS)
            now = python_files(folder)
            if now != seen:
                changed = sorted(str(p.relative_to(folder)) for p in set(now) ^ set(seen))
                changed += sorted(
                    str(p.relative_to(folder)) for p in now if p in seen and now[p] != seen[p]
                )
                seen = now
                print(f"a2a-serverless dev: {', '.join(changed)} changed, restarting", flush=True)
                _stop(child)
                child = subprocess.Popen(command)
    except KeyboardInterrupt:
        pass
    finally:
        _stop(child)
    return 0


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
