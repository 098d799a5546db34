"""`a2a-serverless keys`: API keys of a deployed stack (Auth=ApiKey) or of the local stack, and
the local stack's other credentials.

  a2a-serverless keys create --principal alice [--description "laptop"]   # prints the key ONCE
  a2a-serverless keys list [--principal alice]
  a2a-serverless keys revoke KEY_ID
  a2a-serverless keys token --sub alice [--scope tasks.read] [--expires-in 3600]   # local only
  a2a-serverless keys iam-credentials --user alice                                 # local only

With --stack-name NAME [--region R]: the deployed stack's table and usage plan, with your AWS
credentials. Otherwise: the local stack at --url (default $A2A_URL or http://127.0.0.1:8000).
The secret goes alone to stdout (`KEY=$(a2a-serverless keys create ...)`), notes to stderr;
--json prints one JSON object. A key cannot be shown again: only its SHA-256 is stored.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
# The older command names scripts/auth takes -> this command's.
SCRIPT_COMMANDS = {
    "create-key": "create",
    "list-keys": "list",
    "revoke-key": "revoke",
    "token": "token",
    "iam-credentials": "iam-credentials",
}
EPILOG = (
    "Local stack: a2a-serverless dev --param Auth=ApiKey|Jwt|Iam, then the command of the mode. "
    "Deployed stack (Auth=ApiKey): add --stack-name NAME [--region R]; your AWS credentials "
    "need cloudformation:DescribeStacks on the stack, dynamodb:PutItem/GetItem/UpdateItem/Query "
    "on its table and apigateway:GET/POST/DELETE on API keys and the usage plan. "
    "The key is printed once and cannot be shown again."
)


class CommandError(Exception):
    """A failure to report in one line (exit code 1)."""


def add_arguments(parser: argparse.ArgumentParser, *, names: dict[str, str] | None = None) -> None:
    """The target options and the subcommands (dest `keys_command`, this command's names).
    `names` maps the names to show to this command's (scripts/auth keeps its older ones)."""
    names = names or {name: name for name in SCRIPT_COMMANDS.values()}
    shown = {ours: theirs for theirs, ours in names.items()}

    # The target options work before or after the subcommand (`keys create --stack-name NAME`
    # as the docs write it): the subcommands take them too, with no defaults of their own, so
    # a value given before the subcommand is kept.
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
            "--profile",
            default=value(None),
            help="the AWS profile for a deployed stack (default: your AWS config)",
        )
        into.add_argument(
            "--json", action="store_true", default=value(False), help="print one JSON object"
        )

    target_options(parser, None)
    target = argparse.ArgumentParser(add_help=False)
    target_options(target, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="keys_command", required=True, metavar="COMMAND")

    def command(ours: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(shown[ours], help=help, parents=[target])

    create = command("create", "create an API key for a principal (Auth=ApiKey); printed once")
    create.add_argument("--principal", required=True, help="the owner of the key's tasks")
    create.add_argument("--description", default="", help="a note shown when listing")

    listing = command("list", "list API keys (never their secrets)")
    listing.add_argument("--principal", help="only this principal's keys")

    revoke = command("revoke", "revoke an API key (by its key id)")
    revoke.add_argument("key_id", metavar="KEY_ID")

    token = command("token", "a JWT of the local issuer for a subject (local Auth=Jwt only)")
    token.add_argument("--sub", required=True, help="the token's subject")
    token.add_argument("--scope", action="append", default=[], help="a scope (repeat for several)")
    token.add_argument("--expires-in", type=int, default=3600, help="lifetime in seconds")

    iam = command("iam-credentials", "an access key of a local IAM user (local Auth=Iam only)")
    iam.add_argument("--user", required=True, help="the IAM user name")
    parser.set_defaults(keys_names=names)


# -- the local stack ------------------------------------------------------------------------


def _local(method: str, url: str, path: str, body: dict[str, Any] | None = None) -> Any:
    import httpx

    try:
        response = httpx.request(method, url.rstrip("/") + path, json=body, timeout=30.0)
    except httpx.TransportError as exc:
        raise CommandError(
            f"cannot reach the local stack at {url} ({exc}); start it with `a2a-serverless "
            "dev` (scripts/dev in the repository), or name another with --url"
        ) from exc
    if response.status_code == 404 and path.startswith("/_local/"):
        raise CommandError(_not_served(path, url, _message(response)))
    if response.status_code >= 400:
        raise CommandError(f"{method} {path}: {response.status_code} {_message(response)}")
    return response.json() if response.content else None


def _message(response: Any) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return str(response.text[:300])


def _not_served(path: str, url: str, message: str) -> str:
    if message.startswith("No API key"):
        return message
    mode = {
        "/_local/keys": "Auth=ApiKey",
        "/_local/tokens": "Auth=Jwt (with the local issuer: no --param JwtIssuer)",
        "/_local/iam": "Auth=Iam",
    }
    wanted = next((m for prefix, m in mode.items() if path.startswith(prefix)), "another mode")
    return (
        f"the stack at {url} does not run {wanted}: start it with "
        "a2a-serverless dev --param Auth=..."
    )


def _local_command(command: str, args: argparse.Namespace) -> dict[str, Any]:
    if command == "create":
        body = {"principal": args.principal, "description": args.description}
        made: dict[str, Any] = _local("POST", args.url, "/_local/keys", body)
        return made
    if command == "revoke":
        _local("DELETE", args.url, f"/_local/keys/{args.key_id}")
        return {"keyId": args.key_id, "revoked": True}
    if command == "list":
        keys = _local("GET", args.url, "/_local/keys")["keys"]
        if args.principal is not None:
            keys = [k for k in keys if k["principal"] == args.principal]
        return {"keys": keys}
    if command == "token":
        body = {"sub": args.sub, "scopes": args.scope, "expiresIn": args.expires_in}
        token: dict[str, Any] = _local("POST", args.url, "/_local/tokens", body)
        return token
    made = _local("POST", args.url, "/_local/iam/users", {"user": args.user})
    return {**made, "region": "us-east-1", "service": "execute-api"}


# -- a deployed stack -------------------------------------------------------------------------


def stack_outputs(session: Any, stack_name: str) -> dict[str, str]:
    """The outputs of a CloudFormation stack, by key."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    except (ClientError, BotoCoreError) as exc:
        raise CommandError(f"cannot read stack {stack_name}: {exc}") from exc
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs") or []}


def deployed_admin(stack_name: str, region: str | None, profile: str | None = None) -> Any:
    """auth.ApiKeyAdmin over the stack's table and usage plan (from its outputs)."""
    import boto3
    from botocore.exceptions import BotoCoreError

    from a2a_serverless.auth import ApiKeyAdmin
    from a2a_serverless.aws.usage_plans import ApiGatewayUsageKeys
    from a2a_serverless.store.dynamodb import DynamoDBTaskStore

    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
    except BotoCoreError as exc:
        raise CommandError(str(exc)) from exc
    outputs = stack_outputs(session, stack_name)
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


def _deployed_command(command: str, args: argparse.Namespace) -> dict[str, Any]:
    from botocore.exceptions import BotoCoreError, ClientError

    if command in ("token", "iam-credentials"):
        raise CommandError(
            f"{args.keys_command} is local only: a deployed Auth=Jwt stack takes your "
            "OIDC issuer's tokens, an Auth=Iam stack SigV4 signatures of your AWS principals"
        )
    admin = deployed_admin(args.stack_name, args.region, args.profile)
    try:
        if command == "create":
            try:
                issued = admin.create(args.principal, args.description)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            return {
                "keyId": issued.key_id,
                "apiKey": issued.api_key,
                "principal": issued.principal,
            }
        if command == "revoke":
            if not admin.revoke(args.key_id):
                raise CommandError(f"No API key {args.key_id}")
            return {"keyId": args.key_id, "revoked": True}
        records = admin.list(args.principal)
    except (ClientError, BotoCoreError) as exc:
        raise CommandError(f"stack {args.stack_name}: {exc}") from exc
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


def _print(command: str, args: argparse.Namespace, result: dict[str, Any]) -> None:
    def note(text: str) -> None:
        print(text, file=sys.stderr)

    if args.json:
        print(json.dumps(result, indent=2))
        if command == "create":
            note("The key cannot be shown again: store it now (only its hash is kept).")
        return
    target = args.url if not args.stack_name else f"stack {args.stack_name}"
    if command == "create":
        print(result["apiKey"])
        note(f"API key {result['keyId']} of principal {result['principal']} ({target}).")
        note("It cannot be shown again: store it now (only its hash is kept).")
        note('Send it as the header  X-API-Key: <key>   (curl -H "X-API-Key: $KEY" ...)')
    elif command == "revoke":
        note(f"API key {result['keyId']} revoked ({target}); answers cached by API Gateway")
        note("may still admit it for up to AuthCacheTtlSeconds.")
    elif command == "list":
        for key in result["keys"]:
            state = "revoked" if key["revoked"] else "active"
            print(f"{key['keyId']}  {state:7}  {key['createdAt']}  {key['principal']}")
        if not result["keys"]:
            note("no keys")
    elif command == "token":
        print(result["token"])
        note(f"Send it as the header  Authorization: Bearer <token>   ({target})")
    else:
        print(f"export AWS_ACCESS_KEY_ID={result['accessKeyId']}")
        print(f"export AWS_SECRET_ACCESS_KEY={result['secretAccessKey']}")
        note(f"IAM user {result['arn']} ({target}): sign requests with SigV4, service")
        note("execute-api, region us-east-1 (e.g. botocore's SigV4Auth, or curl --aws-sigv4")
        note('"aws:amz:us-east-1:execute-api" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY").')


def run(args: argparse.Namespace, prog: str = "a2a-serverless keys") -> int:
    """Run the parsed command; 0, or 1 with one line on stderr."""
    command = args.keys_names[args.keys_command]
    try:
        if args.stack_name:
            result = _deployed_command(command, args)
        else:
            result = _local_command(command, args)
    except CommandError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    _print(command, args, result)
    return 0


def script_main(argv: list[str] | None = None, prog: str = "scripts/auth") -> int:
    """scripts/auth: this command under its older names."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=__doc__,
        epilog=EPILOG.replace("a2a-serverless dev", "scripts/dev"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser, names=SCRIPT_COMMANDS)
    return run(parser.parse_args(argv), prog)
