"""Push notification configs (spec §3.1.7 to §3.1.10): scoped to the task's owner, URLs vetted."""

from __future__ import annotations

import uuid

from a2a_serverless.core.egress import EgressPolicy, UnsafeWebhookUrl, vet_url
from a2a_serverless.core.errors import (
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    invalid_field,
)
from a2a_serverless.models import (
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)
from a2a_serverless.settings import get_settings
from a2a_serverless.store import TaskStore

MAX_CONFIG_ID_LENGTH = 128
MAX_TOKEN_LENGTH = 4096


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
        """The config ready to store: enabled, URL vetted (SSRF), id assigned, task bound."""
        self.require_enabled()
        prefix = f"{field}." if field else ""
        try:
            vet_url(config.url, self.egress)
        except UnsafeWebhookUrl as exc:
            raise invalid_field(f"{prefix}url", str(exc)) from None
        if config.id is not None and not 0 < len(config.id) <= MAX_CONFIG_ID_LENGTH:
            raise invalid_field(f"{prefix}id", f"must be 1 to {MAX_CONFIG_ID_LENGTH} characters")
        if config.token is not None and len(config.token) > MAX_TOKEN_LENGTH:
            raise invalid_field(f"{prefix}token", f"must be at most {MAX_TOKEN_LENGTH} characters")
        # They become HTTP headers of every delivery (X-A2A-Notification-Token, Authorization):
        # a value no header can carry would be accepted here and refused at every delivery.
        auth = config.authentication
        for name, value in (
            ("token", config.token),
            ("authentication.scheme", auth.scheme if auth else None),
            ("authentication.credentials", auth.credentials if auth else None),
        ):
            if value is not None and not _header_safe(value):
                raise invalid_field(
                    f"{prefix}{name}",
                    "must be printable ASCII (it is sent as an HTTP header): no control or "
                    "non-ASCII characters",
                )
        self._check_room(task_id, config.id, field)
        return config.model_copy(update={"id": config.id or str(uuid.uuid4()), "task_id": task_id})

    def _check_room(self, task_id: str, config_id: str | None, field: str) -> None:
        """Refuse a config that would take the task past its cap (every config is POSTed
        every event: the cap bounds one task's share of a stream batch). Replacing a config
        of the same id adds none. InvalidParams naming the field rather than
        UnsupportedOperation: push notifications are supported, and the client can fix this
        request (reuse or delete a config). The field named: the inline config of a send,
        else `taskId` (the task that is full). A check, then a write: concurrent creates may
        pass it together, so the cap is soft by a few."""
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


def _header_safe(value: str) -> bool:
    """Printable ASCII (space to tilde): what an HTTP header value can carry as is."""
    return all(" " <= ch <= "~" for ch in value)
