"""A flow of "a user's own" for the smoke test's e2e (`scripts/dev --flow
tests.e2e.smoke_flows:asks`): no echo skill, no directives; every task waits for input."""

from __future__ import annotations

from a2a_serverless.flows import Outcome, StepContext


def asks(ctx: StepContext) -> Outcome:
    return Outcome.input_required("What else?")
