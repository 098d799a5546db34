"""The headers a flow sends to a remote agent it delegates to, from Secrets Manager."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit


class AgentCredentials:
    """Headers per remote agent: the secret `name`, or `{prefix}{host[:port]}` of the agent's
    URL, is a JSON object of header name to value. No such secret: no headers. A secret
    that is not such an object raises ValueError naming the secret (never its value). Each
    secret is read at most once per `ttl` seconds (a rotated key is picked up after that)."""

    def __init__(
        self,
        client_factory: Callable[[], Any],
        prefix: str,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client_factory = client_factory
        self._client: Any = None
        self._prefix = prefix
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()

    def secret_name(self, agent_url: str, name: str | None = None) -> str:
        """The secret that holds the agent's headers: `name` when given, else the prefix and
        the URL's host (with its port when the URL names one), lower case."""
        if name:
            return name
        parts = urlsplit(agent_url)
        host = (parts.hostname or "").lower()
        if not host:
            raise ValueError(f"not an agent URL: {agent_url!r}")
        if ":" in host:  # an IPv6 address, as the URL writes it
            host = f"[{host}]"
        return f"{self._prefix}{host}:{parts.port}" if parts.port else f"{self._prefix}{host}"

    def headers(self, agent_url: str, name: str | None = None) -> dict[str, str]:
        """The headers to send to the agent at `agent_url` (a copy: the caller may change it)."""
        secret = self.secret_name(agent_url, name)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(secret)
        if cached is not None and now - cached[0] < self._ttl:
            return dict(cached[1])
        found = self._read(secret)
        with self._lock:
            self._cache[secret] = (now, found)
        return dict(found)

    def _read(self, secret: str) -> dict[str, str]:
        if self._client is None:
            self._client = self._client_factory()
        client = self._client
        try:
            answer = client.get_secret_value(SecretId=secret)
        except client.exceptions.ResourceNotFoundException:
            return {}
        text = answer.get("SecretString")
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            value = None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ValueError(
                f"secret {secret!r}: expected a JSON object of header name to value "
                '(e.g. {"X-API-Key": "..."})'
            )
        return value
