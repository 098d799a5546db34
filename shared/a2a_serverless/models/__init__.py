"""Pydantic models of the A2A 1.0 proto-JSON shapes (camelCase on the wire)."""

from a2a_serverless.models.a2a import *  # noqa: F403
from a2a_serverless.models.a2a import __all__  # noqa: F401
