"""`a2a-serverless keys --stack-name`: keys of a deployed stack, created, listed and revoked in
its table and usage plan (moto: a table with the template's key schema, an API Gateway usage
plan, and a CloudFormation stack whose outputs name them), then checked as the authorizer
checks; run from the command's entry (`a2a_serverless.cli.main`), and through scripts/auth,
the same command under its older names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from a2a_serverless.auth import ApiKeyAuthenticator, Unauthenticated
from a2a_serverless.cli import main
from a2a_serverless.local.template import load_template
from a2a_serverless.store.dynamodb import DynamoDBTaskStore
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
TABLE = "deployed-tasks"

auth_script = load_script("auth.py", "scripts_auth")


def stack_template(outputs: dict[str, str]) -> str:
    return json.dumps(
        {
            "Resources": {"Handle": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {name: {"Value": value} for name, value in outputs.items()},
        }
    )


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",  # the stack is elsewhere: --region must win
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        table = load_template(ROOT / "template.yaml")["Resources"]["TasksTable"]["Properties"]
        db = boto3.client("dynamodb", region_name=REGION)
        db.create_table(
            TableName=TABLE,
            AttributeDefinitions=table["AttributeDefinitions"],
            KeySchema=table["KeySchema"],
            GlobalSecondaryIndexes=table["GlobalSecondaryIndexes"],
            BillingMode="PAY_PER_REQUEST",
        )
        apigateway = boto3.client("apigateway", region_name=REGION)
        plan = apigateway.create_usage_plan(name="a2a-keys")["id"]
        cfn = boto3.client("cloudformation", region_name=REGION)
        cfn.create_stack(
            StackName="agent",
            TemplateBody=stack_template(
                {"TasksTableName": TABLE, "UsagePlanId": plan, "AuthMode": "ApiKey"}
            ),
        )
        cfn.create_stack(
            StackName="jwt-agent",
            TemplateBody=stack_template({"TasksTableName": TABLE, "AuthMode": "Jwt"}),
        )
        yield {"db": db, "apigateway": apigateway, "plan": plan}


def keys(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`a2a-serverless keys --stack-name agent --region eu-west-1 ARGV...`"""
    code = main(["keys", "--stack-name", "agent", "--region", REGION, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def plan_keys(deployed: dict[str, Any]) -> list[str]:
    items = deployed["apigateway"].get_usage_plan_keys(usagePlanId=deployed["plan"])["items"]
    return [item["id"] for item in items]


def authenticate(deployed: dict[str, Any], key: str) -> Any:
    store = DynamoDBTaskStore(deployed["db"], TABLE)
    return ApiKeyAuthenticator(store).authenticate({"X-API-Key": key})


def test_create_list_revoke_on_a_deployed_stack(
    deployed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = keys(capsys, "create", "--principal", "alice", "--description", "ci")
    assert code == 0, err
    key = out.strip()
    assert key.startswith("a2a_") and len(key) == 60
    assert "cannot be shown again" in err
    # The authorizer's check finds it, with its usage plan key.
    found = authenticate(deployed, key)
    assert found.caller.principal == "alice"
    (usage_key_id,) = plan_keys(deployed)
    assert (
        found.usage_key
        == deployed["apigateway"].get_api_key(apiKey=usage_key_id, includeValue=True)["value"]
    )
    # Only the hash is stored.
    items = deployed["db"].scan(TableName=TABLE)["Items"]
    assert items and key.split("_", 2)[2] not in json.dumps(items)

    code, out, _ = keys(capsys, "--json", "list")
    listed = json.loads(out)["keys"]
    assert code == 0 and [(k["principal"], k["revoked"]) for k in listed] == [("alice", False)]
    assert listed[0]["description"] == "ci"
    key_id = listed[0]["keyId"]
    assert key.startswith(f"a2a_{key_id}_")

    code, _, err = keys(capsys, "revoke", key_id)
    assert code == 0, err
    with pytest.raises(Unauthenticated):
        authenticate(deployed, key)
    assert plan_keys(deployed) == []
    code, out, _ = keys(capsys, "list")
    assert code == 0 and "revoked" in out and "alice" in out

    code, _, err = keys(capsys, "revoke", "zzzzzzzzzzzz")
    assert code == 1 and "No API key" in err


def test_refusals(deployed: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = keys(capsys, "create", "--principal", "bad\x00principal")
    assert code == 1 and out == "" and "principal" in err
    assert plan_keys(deployed) == []  # nothing left behind
    for command in (["token", "--sub", "alice"], ["iam-credentials", "--user", "alice"]):
        code, _, err = keys(capsys, *command)
        assert code == 1 and "local only" in err
    code = main(["keys", "--stack-name", "jwt-agent", "--region", REGION, "list"])
    assert code == 1 and "Auth=Jwt" in capsys.readouterr().err
    code = main(["keys", "--stack-name", "nope", "--region", REGION, "list"])
    assert code == 1 and "cannot read stack nope" in capsys.readouterr().err


def test_target_options_go_before_or_after_the_command(
    deployed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """`a2a-serverless keys create --stack-name NAME …` as the README and docs write it."""
    code = main(
        ["keys", "create", "--stack-name", "agent", "--region", REGION, "--principal", "after"]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and out.strip().startswith("a2a_")
    assert authenticate(deployed, out.strip()).caller.principal == "after"
    code = main(["keys", "list", "--stack-name", "agent", "--region", REGION, "--json"])
    assert code == 0 and "after" in capsys.readouterr().out


def test_scripts_auth_is_the_same_command_under_its_older_names(
    deployed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    target = ["--stack-name", "agent", "--region", REGION]
    code = auth_script.main([*target, "create-key", "--principal", "bob"])
    key = capsys.readouterr().out.strip()
    assert code == 0 and authenticate(deployed, key).caller.principal == "bob"
    code = auth_script.main(["list-keys", *target, "--json"])
    (listed,) = json.loads(capsys.readouterr().out)["keys"]
    assert code == 0 and listed["principal"] == "bob"
    code = auth_script.main(["revoke-key", *target, listed["keyId"]])
    assert code == 0, capsys.readouterr().err
    with pytest.raises(Unauthenticated):
        authenticate(deployed, key)
    code = auth_script.main([*target, "token", "--sub", "bob"])
    assert code == 1 and "token is local only" in capsys.readouterr().err


def test_help_documents_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["keys", "--help"])
    text = capsys.readouterr().out
    for word in ("create", "list", "revoke", "token", "iam-credentials", "--stack-name", "--url"):
        assert word in text
    with pytest.raises(SystemExit):
        auth_script.main(["--help"])
    text = capsys.readouterr().out
    for word in ("create-key", "revoke-key", "list-keys", "token", "iam-credentials"):
        assert word in text


def test_local_target_unreachable_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["keys", "--url", "http://127.0.0.1:9", "list"])
    assert code == 1 and "cannot reach the local stack" in capsys.readouterr().err
    code = auth_script.main(["--url", "http://127.0.0.1:9", "list-keys"])
    assert code == 1 and "cannot reach the local stack" in capsys.readouterr().err


def test_an_unknown_profile_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["keys", "list", "--stack-name", "agent", "--profile", "no-such-profile"])
    assert code == 1 and "no-such-profile" in capsys.readouterr().err
