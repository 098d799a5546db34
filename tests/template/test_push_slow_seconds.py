"""PushSlowSeconds: the threshold past which a stream batch parks a webhook, as deployed."""

from __future__ import annotations

from typing import Any

from a2a_serverless.settings import Settings
from tests.template.sam import resources_of_type


def test_the_slow_threshold_is_a_parameter_of_the_sender_with_the_settings_default(
    cfn: dict[str, Any],
) -> None:
    parameter = cfn["Parameters"]["PushSlowSeconds"]
    default = Settings.model_fields["push_slow_seconds"].default
    assert (parameter["Type"], float(parameter["Default"])) == ("Number", default)
    # One owner's slow webhooks hold everyone's next delivery for about this long per batch:
    # no more than a quiet first delivery on AWS (~0.5 s), so that stays within 2x of it.
    assert 0 < parameter["MinValue"] <= default <= 0.5 < parameter["MaxValue"]
    sender = resources_of_type(cfn, "AWS::Lambda::Function")["WebhookSenderFunction"]
    env = sender["Properties"]["Environment"]["Variables"]
    assert env["PUSH_SLOW_SECONDS"] == {"Ref": "PushSlowSeconds"}
