"""The repository's scripts (scripts/*.py, no package) imported as modules by the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(filename: str, module_name: str, *, register: bool = False) -> ModuleType:
    """scripts/`filename` run as the module `module_name`; with `register`, put in sys.modules
    before it runs (a script whose dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(module_name, SCRIPTS / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
