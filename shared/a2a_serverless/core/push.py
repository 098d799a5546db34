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
from a2a_serverless.store import TaskStore

MAX_CONFIG_ID_LENGTH = 128
MAX_TOKEN_LENGTH = 4096


class PushService:
    def __init__(self, store: TaskStore, enabled: bool, egress: EgressPolicy) -> None:
        self.store = store
        self.enabled = enabled
        self.egress = egress

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
        return config.model_copy(
            update={"id": config.id or str(uuid.uuid4()), "task_id": task_id, "tenant": None}
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
        stored = self.prepared(config, task_id)
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
