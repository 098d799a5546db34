"""Pin the shared layer's packages to the versions the tests run with.

`shared/requirements.txt` names the layer's dependencies with lower bounds; `sam build` would
otherwise install the newest release of each for the Lambda runtime, which is not always what
`.venv` (and so the test suite) resolved: aws-sam-translator, a dev tool, holds pydantic to
2.13 while the layer took 2.14. `shared/a2a_serverless/layer-constraints.txt` (pip's
constraints format) pins every package the layer installs — its requirements and what they
require for CPython 3.13 on arm64 Linux — to the version installed in `.venv`. The layer's
Makefile, the Makefile of a project made by `a2a-serverless new` and `.venv`'s install all read
it, and `tests/template/test_layer_constraints.py` fails when a pin and `.venv` disagree.

To move a dependency: install the new version into `.venv`, run `scripts/pin-layer`, run the
tests, commit both files.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "shared" / "requirements.txt"
CONSTRAINTS = ROOT / "shared" / "a2a_serverless" / "layer-constraints.txt"

# The Lambda runtime the layer is built for (template.yaml: python3.13, arm64).
LAMBDA_ENVIRONMENT = {
    **default_environment(),
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.13",
    "python_full_version": "3.13.0",
    "implementation_version": "3.13.0",
    "platform_machine": "aarch64",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "os_name": "posix",
}

HEADER = """\
# The shared layer's packages, pinned to the versions the test suite runs with (pip constraints).
# Written by scripts/pin-layer from .venv; read by shared/Makefile, by the Makefile of a project
# made by `a2a-serverless new` and by .venv's install. Do not edit by hand: install the version
# you want into .venv, run scripts/pin-layer, run the tests.
"""


def top_level_requirements(path: Path = REQUIREMENTS) -> list[Requirement]:
    """The layer's requirements (comments and blank lines skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(
        requirement.marker.evaluate({**LAMBDA_ENVIRONMENT, "extra": extra})
        for extra in (extras or {""})
    )


def layer_closure(requirements: list[Requirement]) -> dict[str, str]:
    """Every distribution the layer installs for the Lambda runtime → its version in this
    environment (its metadata gives what it requires); a missing one raises
    PackageNotFoundError."""
    versions: dict[str, str] = {}
    wanted: dict[str, set[str]] = {}
    pending = [r for r in requirements if _applies(r, set())]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        extras = wanted.setdefault(name, set())
        if name in versions and requirement.extras <= extras:
            continue
        extras |= requirement.extras
        distribution = importlib.metadata.distribution(name)
        versions[name] = distribution.version
        for needed in distribution.requires or []:
            child = Requirement(needed)
            if _applies(child, extras):
                pending.append(child)
    return dict(sorted(versions.items()))


def read_constraints(path: Path = CONSTRAINTS) -> dict[str, str]:
    """The pins of a constraints file: name → version."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def render(pins: dict[str, str]) -> str:
    return HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def main() -> int:
    pins = layer_closure(top_level_requirements())
    CONSTRAINTS.write_text(render(pins))
    print(f"{CONSTRAINTS.relative_to(ROOT)}: {len(pins)} packages pinned", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
