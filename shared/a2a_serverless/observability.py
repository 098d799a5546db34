"""Structured JSON logs (Powertools) for every function, with the package's loggers attached."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers


def function_logger() -> Logger:
    """The function's Powertools logger; `a2a_serverless.*` loggers write through it."""
    logger = Logger()  # service name and level from POWERTOOLS_SERVICE_NAME / LOG_LEVEL
    copy_config_to_registered_loggers(source_logger=logger, include={"a2a_serverless"})
    return logger
