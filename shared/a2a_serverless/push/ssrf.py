"""Compatibility alias: the SSRF guard now lives in core/egress.py."""

from a2a_serverless.core.egress import (  # noqa: F401
    EgressPolicy,
    UnsafeWebhookUrl,
    VettedTarget,
    address_block_reason,
    vet_url,
)
