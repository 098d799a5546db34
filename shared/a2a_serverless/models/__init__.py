"""Pydantic models of the A2A 1.0 proto-JSON shapes (camelCase on the wire), and the caller."""

from a2a_serverless.models.a2a import *  # noqa: F403
from a2a_serverless.models.a2a import __all__ as _a2a_all
from a2a_serverless.models.caller import Caller, Scheme

__all__ = [*_a2a_all, "Caller", "Scheme"]
