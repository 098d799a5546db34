"""Push notification configs (spec §3.1.7 to §3.1.10): scoped to the task's owner, URLs vetted."""

from __future__ import annotations

import uuid
from typing import Any

from a2a_serverless.core.egress import EgressPolicy, UnsafeWebhookUrl, vet_url
from a2a_serverless.core.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    invalid_field,
)
from a2a_serverless.models import (
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)
from a2a_serverless.models.limits import (
    MAX_AUTH_CREDENTIALS_BYTES,
    MAX_AUTH_SCHEME_BYTES,
    MAX_PUSH_CONFIG_ID_CHARS,
    MAX_PUSH_TOKEN_BYTES,
    MAX_PUSH_URL_BYTES,
    MAX_TENANT_CHARS,
    MAX_WEBHOOK_HEAD_BYTES,
)
from a2a_serverless.settings import get_settings
from a2a_serverless.store import TaskStore, utf8_size

MAX_CONFIG_ID_LENGTH = MAX_PUSH_CONFIG_ID_CHARS
MAX_TOKEN_LENGTH = MAX_PUSH_TOKEN_BYTES


class PushService:
    def __init__(
        self,
        store: TaskStore,
        enabled: bool,
        egress: EgressPolicy,
        max_configs_per_task: int | None = None,
    ) -> None:
        self.store = store
        self.enabled = enabled
        self.egress = egress
        self.max_configs_per_task = (
            get_settings().push_max_configs_per_task
            if max_configs_per_task is None
            else max_configs_per_task
        )

    def require_enabled(self) -> None:
        if not self.enabled:
            raise PushNotificationNotSupportedError(
                "Push notifications are not supported by this agent "
                "(capabilities.pushNotifications is false)"
            )

    def prepared(
        self, config: TaskPushNotificationConfig, task_id: str, field: str = ""
    ) -> TaskPushNotificationConfig:
        """The config ready to store: every field within its bound (all violations at once,
        before the URL's host is resolved), URL vetted (SSRF), id assigned, task bound."""
        self.require_enabled()
        prefix = f"{field}." if field else ""
        violations = config_violations(config.wire(), prefix)
        if violations:
            raise InvalidParamsError(violations=violations)
        try:
            vet_url(config.url, self.egress)
        except UnsafeWebhookUrl as exc:
            raise invalid_field(f"{prefix}url", str(exc)) from None
        self._check_room(task_id, config.id, field)
        return config.model_copy(update={"id": config.id or str(uuid.uuid4()), "task_id": task_id})

    def _check_room(self, task_id: str, config_id: str | None, field: str) -> None:
        """Refuse (InvalidParams naming `field`) a config that would take the task past its cap;
        replacing a config of the same id adds none. Check then write: the cap is soft by a few."""
        existing = [c.id for c, _ in self.store.list_push_configs(task_id)]
        if config_id is not None and config_id in existing:
            return
        if len(existing) >= self.max_configs_per_task:
            raise invalid_field(
                field or "taskId",
                f"task {task_id} already has {len(existing)} push notification configs, the "
                f"most allowed ({self.max_configs_per_task}); delete one or reuse its id",
            )

    def _owned(self, owner: str, task_id: str) -> None:
        record = self.store.get_record(task_id) if task_id else None
        if record is None or record.owner != owner:
            raise TaskNotFoundError(taskId=task_id or None)

    def create(
        self, owner: str, task_id: str, config: TaskPushNotificationConfig
    ) -> TaskPushNotificationConfig:
        self.require_enabled()
        if config.task_id and config.task_id != task_id:
            raise invalid_field("taskId", "does not match the task in the request path")
        self._owned(owner, task_id)
        # Events already written are not this config's (their stream batch may not have been
        # read yet): it gets the ones after the task's last event now.
        stored = self.prepared(config, task_id).for_events_after(self.store.last_seq(task_id))
        self.store.put_push_config(stored)
        return stored

    def get(self, owner: str, task_id: str, config_id: str) -> TaskPushNotificationConfig:
        self.require_enabled()
        self._owned(owner, task_id)
        config = self.store.get_push_config(task_id, config_id) if config_id else None
        if config is None:
            raise TaskNotFoundError(
                f"Push notification config {config_id} of task {task_id} does not exist",
                taskId=task_id,
                configId=config_id,
            )
        return config

    def list(self, owner: str, task_id: str) -> ListTaskPushNotificationConfigsResponse:
        self.require_enabled()
        self._owned(owner, task_id)
        configs = [config for config, _ in self.store.list_push_configs(task_id)]
        return ListTaskPushNotificationConfigsResponse(configs=configs or None)

    def delete(self, owner: str, task_id: str, config_id: str) -> None:
        """Idempotent: deleting a config that is already gone succeeds."""
        self.require_enabled()
        self._owned(owner, task_id)
        self.store.delete_push_config(task_id, config_id)


def config_violations(config: Any, prefix: str = "") -> list[tuple[str, str]]:
    """The bounds of a push config given as proto-JSON (`prefix` names where it sits in the
    request): its id, tenant and url, and its token and authentication, which every delivery
    sends as HTTP headers. A value of the wrong type is skipped (the schema names it)."""
    if not isinstance(config, dict):
        return []
    found: list[tuple[str, str]] = []
    config_id, tenant = config.get("id"), config.get("tenant")
    if isinstance(config_id, str) and not 0 < len(config_id) <= MAX_PUSH_CONFIG_ID_CHARS:
        found.append((f"{prefix}id", f"must be 1 to {MAX_PUSH_CONFIG_ID_CHARS} characters"))
    if isinstance(tenant, str) and len(tenant) > MAX_TENANT_CHARS:
        found.append((f"{prefix}tenant", f"must be at most {MAX_TENANT_CHARS} characters"))
    url = config.get("url")
    if isinstance(url, str) and utf8_size(url) > MAX_PUSH_URL_BYTES:
        found.append((f"{prefix}url", f"must be at most {MAX_PUSH_URL_BYTES} bytes"))
    auth = config.get("authentication")
    auth = auth if isinstance(auth, dict) else {}
    # They become HTTP headers of every delivery (X-A2A-Notification-Token, Authorization):
    # a value no header can carry would be accepted here and refused at every delivery.
    headers: dict[str, str] = {}
    for name, value, bound in (
        ("token", config.get("token"), MAX_PUSH_TOKEN_BYTES),
        ("authentication.scheme", auth.get("scheme"), MAX_AUTH_SCHEME_BYTES),
        ("authentication.credentials", auth.get("credentials"), MAX_AUTH_CREDENTIALS_BYTES),
    ):
        if not isinstance(value, str):
            continue
        if not _header_safe(value):
            found.append(
                (
                    f"{prefix}{name}",
                    "must be printable ASCII (it is sent as an HTTP header): no control or "
                    "non-ASCII characters",
                )
            )
        elif utf8_size(value) > bound:
            found.append((f"{prefix}{name}", f"must be at most {bound} bytes"))
        else:
            headers[name] = value
    credentials = headers.get("authentication.credentials")
    if credentials is not None and not found and isinstance(url, str):
        # Every delivery carries them all (Authorization: "<scheme> <credentials>").
        head = utf8_size(url) + sum(utf8_size(v) for v in headers.values()) + 1
        if head > MAX_WEBHOOK_HEAD_BYTES:
            found.append(
                (
                    f"{prefix}authentication.credentials",
                    f"with url, token and scheme, must be at most {MAX_WEBHOOK_HEAD_BYTES} "
                    f"bytes (they are sent with every delivery; these are {head})",
                )
            )
    return found


def _header_safe(value: str) -> bool:
    """Printable ASCII (space to tilde): what an HTTP header value can carry as is."""
    return all(" " <= ch <= "~" for ch in value)
