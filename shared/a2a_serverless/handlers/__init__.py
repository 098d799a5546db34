"""The Lambda functions' entry code, one module per function of template.yaml.

`functions/<name>/app.py` (this repository's, and a scaffolded project's) only binds these:
the code lives once, in the package, and a project built on it deploys the same functions.
The API functions' modules offer `create()`, called by app.py at import, so each import of a
function (a Lambda init, or a local stack started in the same process as an earlier one)
builds its app from the settings of that moment rather than a cached one.
"""

from __future__ import annotations

import gc
import random
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from a2a_serverless.flows.base import Flow

T = TypeVar("T")


def _entry_point_importing() -> bool:
    """True while a function's entry code is being imported as `app` (how the Lambda runtime
    and uvicorn load `functions/<name>/app.py`) and has not bound its `create` yet: that
    function's init. Not when a test, the local stack or a tool imports the package."""
    app = sys.modules.get("app")
    return app is not None and not hasattr(app, "create")


# Init pause: the cyclic GC is off from this import until create() returns (`init_done`), then
# the init's objects are frozen, so the collector stops traversing them (docs/deploy.md).
_paused = False
if _entry_point_importing() and gc.isenabled():
    gc.disable()
    _paused = True


def init_done(built: T) -> T:
    """`built` (what create() returns), once the init pause is over: collection back on, the
    init's objects frozen. Every function's create() returns through it; idempotent."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
    return built


class FlowLoadError(RuntimeError):
    """The configured FLOW cannot be served: raised at a function's init, so Lambda reports
    the init as failed with this message instead of failing every task later."""


def flow_at_init() -> Flow:
    """The configured flow, loaded now (Lambda init), or a FlowLoadError that says which
    FLOW and why: an import error, a missing attribute, an object that is not a flow, steps
    longer than the workflow runs them (its `max_step_seconds`)."""
    from a2a_serverless import wiring
    from a2a_serverless.flows.base import load_problem, step_length_problem
    from a2a_serverless.settings import get_settings

    settings = get_settings()
    spec = settings.flow
    try:
        flow = wiring.get_flow()
    except Exception as exc:  # whatever the user's module raised
        hint = "its module must be in the layer or the function's code"
        raise FlowLoadError(load_problem(f"FLOW={spec!r}", exc, hint)) from exc
    problem = step_length_problem(flow, settings.workflow_type)
    if problem:
        raise FlowLoadError(f"cannot serve the flow FLOW={spec!r}: {problem}")
    return flow


def after_restore() -> None:
    """Lambda SnapStart after-restore hook: reseed `random` from os.urandom and drop the AWS
    clients' pooled connections, which every environment resumed from one snapshot would share."""
    from a2a_serverless import wiring

    random.seed()
    wiring.close_aws_connections()


_hooked = False


def register_snapstart_hooks() -> None:
    """Run `after_restore` when Lambda resumes this function from a SnapStart snapshot.
    `snapshot_restore_py` exists in Lambda's managed Python runtimes only: elsewhere (the
    local stack, tests) there is no snapshot, and nothing to register."""
    global _hooked
    if _hooked:
        return
    try:
        from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]
    except ImportError:
        return
    register_after_restore(after_restore)
    _hooked = True
