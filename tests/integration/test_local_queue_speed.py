"""moto_speedups.retention_read_directly: receiving from a queue looks at its messages a number
of times that does not grow with each message received, and answers as moto does, retention
included. Counts, not times."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from a2a_serverless.local import moto_speedups
from a2a_serverless.local.patching import Patches

QUEUED = 200
RETENTION = 60  # seconds


@pytest.fixture
def queue() -> Iterator[tuple[Any, str]]:
    with mock_aws():
        client = boto3.client("sqs", region_name="us-east-1")
        url = client.create_queue(
            QueueName="speed.fifo",
            Attributes={"FifoQueue": "true", "MessageRetentionPeriod": str(RETENTION)},
        )["QueueUrl"]
        for n in range(QUEUED):
            client.send_message(
                QueueUrl=url,
                MessageBody=str(n),
                MessageGroupId=f"g{n % 20}",
                MessageDeduplicationId=str(n),
            )
        yield client, url


def _receive(client: Any, url: str) -> list[str]:
    messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [m["Body"] for m in messages]


def _visibility_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of moto's visibility checks of a message (each count of the queue makes one
    per message)."""
    from moto.sqs.models import Message

    checks = [0]
    visible = Message.visible

    def counted(message: Any) -> bool:
        checks[0] += 1
        return bool(visible.fget(message))

    monkeypatch.setattr(Message, "visible", property(counted))
    return checks


@pytest.mark.parametrize("sped_up", [False, True])
def test_a_receive_answers_as_moto_does(
    queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch, sped_up: bool
) -> None:
    """Messages within the retention period are received (ten, a group's in order); past it,
    none is."""
    client, url = queue
    patches = Patches()
    if sped_up:
        moto_speedups.retention_read_directly(patches)
    try:
        first = _receive(client, url)
        from moto.sqs import models

        now = models.unix_time()
        monkeypatch.setattr(models, "unix_time", lambda: now + RETENTION + 1)
        late = _receive(client, url)
    finally:
        patches.undo()
    assert first == [str(n) for n in range(10)]
    assert late == []


def test_a_receive_looks_at_each_message_a_few_times(
    queue: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto counted every message of the queue three times for each message it received (to
    read the retention period among all the queue's attributes)."""
    client, url = queue
    checks = _visibility_checks(monkeypatch)
    patches = Patches()
    moto_speedups.retention_read_directly(patches)
    try:
        assert len(_receive(client, url)) == 10
    finally:
        patches.undo()
    assert checks[0] <= 3 * QUEUED, checks[0]
