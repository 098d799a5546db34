"""API keys' throttling and quotas: each key has an API Gateway API key in the stack's usage plan,
whose value the authorizer returns as `usageIdentifierKey`. That value is random and unrelated
to the client's secret: API Gateway shows it in clear.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

USAGE_KEY_LENGTH = 40
_ALPHABET = string.ascii_letters + string.digits


class ApiGatewayUsageKeys:
    """UsageKeys (auth/api_keys.py) on API Gateway: `create_api_key` + `create_usage_plan_key`."""

    def __init__(self, client: Any, usage_plan_id: str) -> None:
        self._client = client  # a boto3 `apigateway` client
        self._usage_plan_id = usage_plan_id

    def create(self, name: str) -> tuple[str, str]:
        value = "".join(secrets.choice(_ALPHABET) for _ in range(USAGE_KEY_LENGTH))
        created = self._client.create_api_key(
            name=name,
            description="a2a-serverless API key (see the README: keys)",
            enabled=True,
            value=value,
        )
        usage_key_id = str(created["id"])
        try:
            self._client.create_usage_plan_key(
                usagePlanId=self._usage_plan_id, keyId=usage_key_id, keyType="API_KEY"
            )
        except BaseException:
            self.delete(usage_key_id)  # not left enabled outside the plan
            raise
        return usage_key_id, value

    def delete(self, usage_key_id: str) -> None:
        """Out of the usage plan, then deleted; a key already deleted is left alone (a
        repeated revoke, or one resumed after a failure, changes nothing)."""
        not_found = self._client.exceptions.NotFoundException
        try:
            self._client.get_api_key(apiKey=usage_key_id)
        except not_found:
            return
        try:
            self._client.delete_usage_plan_key(usagePlanId=self._usage_plan_id, keyId=usage_key_id)
        except not_found:
            pass  # not (or no longer) in the plan
        try:
            self._client.delete_api_key(apiKey=usage_key_id)
        except not_found:
            pass
