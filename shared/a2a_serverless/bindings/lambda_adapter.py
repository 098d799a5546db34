"""Lambda entry points for buffered (Mangum) HTTP functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from mangum import Mangum


def mangum_handler(app: FastAPI) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """API Gateway REST (v1) proxy events -> the FastAPI app."""
    return Mangum(app, lifespan="off")
