"""Fixtures: template.yaml as written (SAM) and as CloudFormation receives it (translated)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.template.sam import OfflineManagedPolicyLoader, load_sam, translate


@pytest.fixture(scope="session")
def sam() -> dict[str, Any]:
    """template.yaml, parsed with CloudFormation short tags. Do not mutate: copy first."""
    return load_sam()


@pytest.fixture(scope="session")
def policy_loader() -> OfflineManagedPolicyLoader:
    return OfflineManagedPolicyLoader()


@pytest.fixture(scope="session")
def cfn(sam: dict[str, Any], policy_loader: OfflineManagedPolicyLoader) -> dict[str, Any]:
    """The translated CloudFormation template (parameters at their defaults)."""
    return translate(sam, loader=policy_loader)
