"""A push config's token and credentials are sent as HTTP headers on every delivery: a value no
header can carry is refused when the config is created, naming the field (it used to be
accepted, and then every delivery failed)."""

from __future__ import annotations

import pytest

from a2a_serverless.core.egress import EgressPolicy
from a2a_serverless.core.errors import InvalidParamsError
from a2a_serverless.core.push import PushService
from a2a_serverless.models import TaskPushNotificationConfig
from tests.fakes import InMemoryTaskStore


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"token": "tök"}, "token"),
        ({"token": "a\r\nX-Evil: 1"}, "token"),
        (
            {"authentication": {"scheme": "Bearer", "credentials": "pässword"}},
            "authentication.credentials",
        ),
        ({"authentication": {"scheme": "Be\narer"}}, "authentication.scheme"),
    ],
)
def test_values_no_header_can_carry_are_refused(config: dict, field: str) -> None:
    push = PushService(InMemoryTaskStore(), True, EgressPolicy())
    model = TaskPushNotificationConfig.model_validate({"url": "https://93.184.216.34/h", **config})
    with pytest.raises(InvalidParamsError) as refused:
        push.prepared(model, "t1", "configuration.taskPushNotificationConfig")
    assert refused.value.violations[0][0] == f"configuration.taskPushNotificationConfig.{field}"


def test_printable_ascii_is_fine() -> None:
    push = PushService(InMemoryTaskStore(), True, EgressPolicy())
    model = TaskPushNotificationConfig.model_validate(
        {
            "url": "https://93.184.216.34/h",
            "token": "t0k3n-~!",
            "authentication": {"scheme": "Basic", "credentials": "dXNlcjpwYXNz"},
        }
    )
    assert push.prepared(model, "t1").token == "t0k3n-~!"
