"""The Lambda functions' entry code, one module per function of template.yaml.

`functions/<name>/app.py` (this repository's, and a scaffolded project's) only binds these:
the code lives once, in the package, and a project built on it deploys the same functions.
The API functions' modules offer `create()`, called by app.py at import, so each import of a
function (a Lambda init, or a local stack started in the same process as an earlier one)
builds its app from the settings of that moment rather than a cached one.
"""

from __future__ import annotations

from a2a_serverless import wiring
from a2a_serverless.flows.base import Flow
from a2a_serverless.settings import get_settings


class FlowLoadError(RuntimeError):
    """The configured FLOW cannot be served: raised at a function's init, so Lambda reports
    the init as failed with this message instead of failing every task later."""


def flow_at_init() -> Flow:
    """The configured flow, loaded now (Lambda init), or a FlowLoadError that says which
    FLOW and why: an import error, a missing attribute, an object that is not a flow."""
    spec = get_settings().flow
    try:
        return wiring.get_flow()
    except Exception as exc:  # whatever the user's module raised
        hint = (
            " (its module must be in the layer or the function's code)"
            if isinstance(exc, ModuleNotFoundError)
            else ""
        )
        raise FlowLoadError(
            f"cannot load the flow FLOW={spec!r}: {type(exc).__name__}: {exc}{hint}"
        ) from exc
