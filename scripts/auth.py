"""Credentials for the agent: API keys (local or deployed stack), tokens and IAM users (local).

  scripts/auth create-key --principal alice [--description "laptop"]   # prints the key ONCE
  scripts/auth list-keys [--principal alice]
  scripts/auth revoke-key KEY_ID
  scripts/auth token --sub alice [--scope tasks.read --scope tasks.write] [--expires-in 3600]
  scripts/auth iam-credentials --user alice

Target: the local stack (`scripts/dev --param Auth=...`) at --url (default $A2A_URL or
http://127.0.0.1:8000), through its /_local/ admin endpoints. With --stack-name NAME
[--region R], a deployed stack (Auth=ApiKey): keys are created, listed and revoked directly in
its table and usage plan with your AWS credentials (the stack outputs TasksTableName and
UsagePlanId name them). `token` and `iam-credentials` are local only: a deployed Jwt stack
trusts your OIDC issuer's tokens, an Iam stack your AWS principals.

The secret (key, token, secret access key) goes alone to stdout, so that
`KEY=$(scripts/auth create-key --principal alice)` works; notes go to stderr. --json prints one
JSON object instead. A key cannot be shown again: only its SHA-256 is stored.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"


class CommandError(Exception):
    """A failure to report in one line (exit code 1)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/auth",
        description=__doc__,
        epilog=(
            "Local stack: scripts/dev --param Auth=ApiKey|Jwt|Iam, then the command of the mode. "
            "Deployed stack (Auth=ApiKey): add --stack-name NAME [--region R]; your AWS "
            "credentials need dynamodb:PutItem/GetItem/UpdateItem/Query on its table and "
            "apigateway:POST/DELETE on API keys and the usage plan. "
            "The key is printed once and cannot be shown again."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    # The target options work before or after the command (`scripts/auth create-key
    # --stack-name NAME ...` as the docs write it): the subcommands take them too, with no
    # defaults of their own, so a value given before the command is kept.
    def target_options(into: argparse.ArgumentParser, default: Any) -> None:
        def value(real: Any) -> Any:
            return real if default is None else default

        into.add_argument(
            "--url",
            default=value(os.environ.get("A2A_URL", DEFAULT_URL)),
            help=f"local stack base URL (default: $A2A_URL or {DEFAULT_URL})",
        )
        into.add_argument(
            "--stack-name",
            default=value(None),
            help="a deployed stack (keys only): work on its table and usage plan",
        )
        into.add_argument(
            "--region",
            default=value(None),
            help="the deployed stack's region (default: your AWS config)",
        )
        into.add_argument(
            "--json", action="store_true", default=value(False), help="print one JSON object"
        )

    target_options(parser, None)
    target = argparse.ArgumentParser(add_help=False)
    target_options(target, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, parents=[target])

    create = command("create-key", "create an API key for a principal (Auth=ApiKey); printed once")
    create.add_argument("--principal", required=True, help="the owner of the key's tasks")
    create.add_argument("--description", default="", help="a note for list-keys")

    revoke = command("revoke-key", "revoke an API key (by its key id)")
    revoke.add_argument("key_id", metavar="KEY_ID")

    listing = command("list-keys", "list API keys (never their secrets)")
    listing.add_argument("--principal", help="only this principal's keys")

    token = command("token", "a JWT of the local issuer for a subject (local Auth=Jwt only)")
    token.add_argument("--sub", required=True, help="the token's subject")
    token.add_argument("--scope", action="append", default=[], help="a scope (repeat for several)")
    token.add_argument("--expires-in", type=int, default=3600, help="lifetime in seconds")

    iam = command("iam-credentials", "an access key of a local IAM user (local Auth=Iam only)")
    iam.add_argument("--user", required=True, help="the IAM user name")
    return parser


# -- the local stack ------------------------------------------------------------------------


def _local(method: str, url: str, path: str, body: dict[str, Any] | None = None) -> Any:
    try:
        response = httpx.request(method, url.rstrip("/") + path, json=body, timeout=30.0)
    except httpx.TransportError as exc:
        raise CommandError(
            f"cannot reach the local stack at {url} ({exc}); start it with scripts/dev, or "
            "name another with --url"
        ) from exc
    if response.status_code == 404 and path.startswith("/_local/"):
        raise CommandError(_not_served(path, url, response))
    if response.status_code >= 400:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:300]
        raise CommandError(f"{method} {path}: {response.status_code} {message}")
    return response.json() if response.content else None


def _not_served(path: str, url: str, response: httpx.Response) -> str:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = ""
    if message.startswith("No API key"):
        return message
    mode = {
        "/_local/keys": "Auth=ApiKey",
        "/_local/tokens": "Auth=Jwt (with the local issuer: no --param JwtIssuer)",
        "/_local/iam": "Auth=Iam",
    }
    wanted = next((m for prefix, m in mode.items() if path.startswith(prefix)), "another mode")
    return f"the stack at {url} does not run {wanted}: start it with scripts/dev --param Auth=..."


def _local_command(args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "create-key":
        body = {"principal": args.principal, "description": args.description}
        made: dict[str, Any] = _local("POST", args.url, "/_local/keys", body)
        return made
    if args.command == "revoke-key":
        _local("DELETE", args.url, f"/_local/keys/{args.key_id}")
        return {"keyId": args.key_id, "revoked": True}
    if args.command == "list-keys":
        keys = _local("GET", args.url, "/_local/keys")["keys"]
        if args.principal is not None:
            keys = [k for k in keys if k["principal"] == args.principal]
        return {"keys": keys}
    if args.command == "token":
        body = {"sub": args.sub, "scopes": args.scope, "expiresIn": args.expires_in}
        token: dict[str, Any] = _local("POST", args.url, "/_local/tokens", body)
        return token
    made = _local("POST", args.url, "/_local/iam/users", {"user": args.user})
    return {**made, "region": "us-east-1", "service": "execute-api"}


# -- a deployed stack -------------------------------------------------------------------------


def _deployed_admin(stack_name: str, region: str | None) -> Any:
    """core.auth.ApiKeyAdmin over the stack's table and usage plan (from its outputs)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from a2a_serverless.core.auth import ApiKeyAdmin
    from a2a_serverless.core.usage_plans import ApiGatewayUsageKeys
    from a2a_serverless.store.dynamodb import DynamoDBTaskStore

    session = boto3.session.Session(region_name=region)
    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    except (ClientError, BotoCoreError) as exc:
        raise CommandError(f"cannot read stack {stack_name}: {exc}") from exc
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs") or []}
    table = outputs.get("TasksTableName")
    plan = outputs.get("UsagePlanId")
    if not table:
        raise CommandError(f"stack {stack_name} has no TasksTableName output")
    if not plan:
        mode = outputs.get("AuthMode", "unknown")
        raise CommandError(
            f"stack {stack_name} runs Auth={mode}, not ApiKey: it has no usage plan for keys"
        )
    store = DynamoDBTaskStore(session.client("dynamodb"), table)
    return ApiKeyAdmin(store, ApiGatewayUsageKeys(session.client("apigateway"), plan))


def _deployed_command(args: argparse.Namespace) -> dict[str, Any]:
    if args.command in ("token", "iam-credentials"):
        raise CommandError(
            f"{args.command} is local only: a deployed Auth=Jwt stack takes your OIDC "
            "issuer's tokens, an Auth=Iam stack SigV4 signatures of your AWS principals"
        )
    admin = _deployed_admin(args.stack_name, args.region)
    if args.command == "create-key":
        try:
            issued = admin.create(args.principal, args.description)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        return {"keyId": issued.key_id, "apiKey": issued.api_key, "principal": issued.principal}
    if args.command == "revoke-key":
        if not admin.revoke(args.key_id):
            raise CommandError(f"No API key {args.key_id}")
        return {"keyId": args.key_id, "revoked": True}
    records = admin.list(args.principal)
    return {
        "keys": [
            {
                "keyId": r.key_id,
                "principal": r.principal,
                "createdAt": r.created_at,
                "revoked": bool(r.revoked_at),
                "description": r.description,
            }
            for r in records
        ]
    }


# -- output ----------------------------------------------------------------------------------


def _print(args: argparse.Namespace, result: dict[str, Any]) -> None:
    def note(text: str) -> None:
        print(text, file=sys.stderr)

    if args.json:
        print(json.dumps(result, indent=2))
        if args.command == "create-key":
            note("The key cannot be shown again: store it now (only its hash is kept).")
        return
    target = args.url if not args.stack_name else f"stack {args.stack_name}"
    if args.command == "create-key":
        print(result["apiKey"])
        note(f"API key {result['keyId']} of principal {result['principal']} ({target}).")
        note("It cannot be shown again: store it now (only its hash is kept).")
        note('Send it as the header  X-API-Key: <key>   (curl -H "X-API-Key: $KEY" ...)')
    elif args.command == "revoke-key":
        note(f"API key {result['keyId']} revoked ({target}); answers cached by API Gateway")
        note("may still admit it for up to AuthCacheTtlSeconds.")
    elif args.command == "list-keys":
        for key in result["keys"]:
            state = "revoked" if key["revoked"] else "active"
            print(f"{key['keyId']}  {state:7}  {key['createdAt']}  {key['principal']}")
        if not result["keys"]:
            note("no keys")
    elif args.command == "token":
        print(result["token"])
        note(f"Send it as the header  Authorization: Bearer <token>   ({target})")
    else:
        print(f"export AWS_ACCESS_KEY_ID={result['accessKeyId']}")
        print(f"export AWS_SECRET_ACCESS_KEY={result['secretAccessKey']}")
        note(f"IAM user {result['arn']} ({target}): sign requests with SigV4, service")
        note("execute-api, region us-east-1 (e.g. botocore's SigV4Auth, or curl --aws-sigv4")
        note('"aws:amz:us-east-1:execute-api" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY").')


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = _deployed_command(args) if args.stack_name else _local_command(args)
    except CommandError as exc:
        print(f"scripts/auth: {exc}", file=sys.stderr)
        return 1
    _print(args, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
