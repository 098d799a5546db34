"""botocore's endpoints.json, cut to the services the functions call.

Every botocore client is made through the session's legacy endpoint resolver, which parses
botocore/data/endpoints.json whole: 1.2 MB (about 300 services in 8 partitions), 30-40 ms of
CPU at every cold start, for the four services a function talks to. The layer build
(shared/Makefile, and the Makefile `a2a-serverless new` writes) runs this module on the layer:
it writes the same data cut to those services (every partition, region and default kept) next
to this file, tagged with the botocore version it was cut from. The functions' own botocore
session (wiring.py) reads the cut file instead, when it was cut from the botocore they run
with; anything else (no file: the dev tree, tests; another version) reads botocore's own.

botocore is told the cut data is its own (its built-in path): it is, for these services, and
that keeps the endpoint URL to each service's endpoint ruleset, as with the whole file. Data
from elsewhere would make botocore resolve the URL the legacy way and hand it to the ruleset
as a fixed endpoint (no account-based DynamoDB endpoints, for one).

The same step writes the service models of those services without their documentation
(`_service-2.<service>.json`): botocore reads a client's whole model at its creation, gzipped
and mostly documentation (DynamoDB's: 556 KB, of which 113 KB is the API), 3-7 ms of CPU a
client; the functions' session reads the cut model instead, under the same version check.

Standard library only: the build runs it with whatever Python it has, on a layer whose
compiled packages are for Lambda's.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

# endpoints.json's names for the services of wiring.aws_client (Step Functions is "states").
SERVICES = ("dynamodb", "kms", "sqs", "states")
CUT_FILE = Path(__file__).with_name("_endpoints.json")
# botocore's data folders of the same services: their service models are cut too.
MODEL_SERVICES = ("dynamodb", "kms", "sqs", "stepfunctions")
# Mappings whose keys are names (an operation, shape or member may be called "documentation").
_NAMED = frozenset({"operations", "shapes", "members"})
_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def cut(endpoints: dict[str, Any], services: tuple[str, ...] = SERVICES) -> dict[str, Any]:
    """endpoints.json with each partition's services cut to `services`."""
    return {
        **endpoints,
        "partitions": [
            {
                **partition,
                "services": {
                    name: data for name, data in partition["services"].items() if name in services
                },
            }
            for partition in endpoints["partitions"]
        ],
    }


def botocore_version(botocore_dir: Path) -> str:
    """The version of the botocore package in `botocore_dir`, read from its source (the build
    cannot import a layer built for another platform)."""
    found = _VERSION.search((botocore_dir / "__init__.py").read_text())
    if found is None:
        raise ValueError(f"no __version__ in {botocore_dir / '__init__.py'}")
    return found.group(1)


def write_cut(botocore_dir: Path, destination: Path = CUT_FILE) -> Path:
    """Cut `botocore_dir`'s endpoints.json into `destination`, tagged with its version."""
    endpoints = json.loads((botocore_dir / "data" / "endpoints.json").read_text())
    document = {"botocore": botocore_version(botocore_dir), "endpoints": cut(endpoints)}
    destination.write_text(json.dumps(document, separators=(",", ":")))
    return destination


def read_cut(version: str, path: Path | None = None) -> dict[str, Any] | None:
    """The cut endpoints, if `path` (CUT_FILE) holds a cut of botocore `version`; else None."""
    try:
        document = json.loads((path or CUT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("botocore") != version:
        return None
    endpoints = document.get("endpoints")
    return endpoints if isinstance(endpoints, dict) else None


def use_cut_endpoints(loader: Any, version: str, path: Path | None = None) -> bool:
    """Make `loader` (a botocore Loader) answer "endpoints" with the cut data, as if from its
    built-in path, when `path` (CUT_FILE) is a cut of botocore `version`. Returns whether it
    does."""
    endpoints = read_cut(version, path)
    if endpoints is None:
        return False
    full = loader.load_data_with_path
    builtin = str(Path(loader.BUILTIN_DATA_PATH) / "endpoints")

    def load_data_with_path(name: str) -> tuple[Any, str]:
        if name == "endpoints":
            return endpoints, builtin
        return full(name)

    loader.load_data_with_path = load_data_with_path
    return True


def undocumented(value: Any, names: bool = False) -> Any:
    """A service model (or part of one) without its `documentation` strings. `names`: `value`
    maps names to definitions (operations, shapes, members), whose keys are all kept."""
    if isinstance(value, list):
        return [undocumented(item) for item in value]
    if not isinstance(value, dict):
        return value
    if names:
        return {key: undocumented(item) for key, item in value.items()}
    return {
        key: undocumented(item, key in _NAMED)
        for key, item in value.items()
        if not (key == "documentation" and isinstance(item, str))
    }


def model_file(service: str, folder: Path | None = None) -> Path:
    return (folder or CUT_FILE.parent) / f"_service-2.{service}.json"


def _latest_model(botocore_dir: Path, service: str) -> tuple[str, Path] | None:
    """The newest API version of `service` and its service-2 file, as botocore picks it."""
    found: dict[str, Path] = {}
    folder = botocore_dir / "data" / service
    for version in folder.iterdir() if folder.is_dir() else ():
        for name in ("service-2.json", "service-2.json.gz"):
            if (version / name).is_file():
                found.setdefault(version.name, version / name)
    if not found:
        return None
    latest = max(found)
    return latest, found[latest]


def write_model_cuts(botocore_dir: Path, folder: Path | None = None) -> list[Path]:
    """Each of MODEL_SERVICES' newest service model in `botocore_dir`, undocumented, into
    `folder` (this package's), tagged with the botocore version and API version."""
    written = []
    for service in MODEL_SERVICES:
        found = _latest_model(botocore_dir, service)
        if found is None:
            continue
        api_version, path = found
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        document = {
            "botocore": botocore_version(botocore_dir),
            "apiVersion": api_version,
            "model": undocumented(json.loads(raw)),
        }
        target = model_file(service, folder)
        target.write_text(json.dumps(document, separators=(",", ":")))
        written.append(target)
    return written


def read_model_cut(
    service: str, api_version: str, version: str, folder: Path | None = None
) -> dict[str, Any] | None:
    """The cut model of `service` at `api_version`, if there is one cut from botocore
    `version`; else None."""
    try:
        document = json.loads(model_file(service, folder).read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(document, dict)
        or document.get("botocore") != version
        or document.get("apiVersion") != api_version
    ):
        return None
    model = document.get("model")
    return model if isinstance(model, dict) else None


def use_cut_models(loader: Any, version: str, folder: Path | None = None) -> None:
    """Make `loader` (a botocore Loader) answer the service models of MODEL_SERVICES with
    their cuts in `folder` (this package's) when cut from botocore `version`; anything else
    (no cut, another version, another API version) from botocore's own files."""
    full = loader.load_data_with_path

    def load_data_with_path(name: str) -> tuple[Any, str]:
        service, _, rest = name.partition("/")
        api_version, _, type_name = rest.partition("/")
        if type_name == "service-2" and service in MODEL_SERVICES:
            model = read_model_cut(service, api_version, version, folder)
            if model is not None:
                return model, str(Path(loader.BUILTIN_DATA_PATH) / name)
        return full(name)

    loader.load_data_with_path = load_data_with_path


def main(argv: list[str]) -> int:
    """`python -m a2a_serverless.botocore_endpoints SITE_DIR`: cut SITE_DIR/botocore's
    endpoints into SITE_DIR/a2a_serverless/ (the layer's python/ folder)."""
    if len(argv) != 1:
        print("usage: python -m a2a_serverless.botocore_endpoints SITE_DIR", file=sys.stderr)
        return 2
    site = Path(argv[0])
    if not (site / "botocore" / "data" / "endpoints.json").is_file():
        print(f"no botocore in {site}: endpoints not cut (the functions read botocore's own)")
        return 0
    written = write_cut(site / "botocore", site / "a2a_serverless" / CUT_FILE.name)
    print(f"endpoints cut to {', '.join(SERVICES)}: {written}")
    models = write_model_cuts(site / "botocore", site / "a2a_serverless")
    print(f"service models without documentation: {', '.join(p.name for p in models)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
