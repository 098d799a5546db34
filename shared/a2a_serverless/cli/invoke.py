"""`a2a-serverless invoke FUNCTION EVENT.json`: the Docker-free `sam local invoke`.

Runs the function's real entry point on the event in a fresh local stack (a Web Adapter
function through its ASGI app, as the adapter would) and prints the result as JSON; a raising
handler prints Lambda's error object, exit 1. `--url` runs it inside a running `dev` stack.
A missing, non-JSON or unexpected event is refused in one line, exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

# Exit statuses: the handler raised / the command was used wrongly.
HANDLER_ERROR = 1
USAGE_ERROR = 2

# The top-level keys of each event source's events.
REST_PROXY_KEYS = (
    "resource",
    "path",
    "httpMethod",
    "headers",
    "multiValueHeaders",
    "queryStringParameters",
    "multiValueQueryStringParameters",
    "pathParameters",
    "stageVariables",
    "requestContext",
    "body",
    "isBase64Encoded",
)
# A REQUEST authorizer's event: the request without its body, and what it authorizes.
AUTHORIZER_REQUEST_KEYS = (
    "type",
    "methodArn",
    *(key for key in REST_PROXY_KEYS if key not in ("body", "isBase64Encoded")),
)
# The flow step input of the state machine (core/executor.py's payload, MarkFailed's), and the
# delegations' timer's check of a round.
STEP_INPUT_KEYS = (
    "taskId",
    "turn",
    "step",
    "caller",
    "extensions",
    "requestMetadata",
    "action",
    "error",
    "round",
)
BATCH_KEYS = ("Records",)


class UsageError(Exception):
    """The command cannot run as asked: one line for the user, exit USAGE_ERROR."""


def read_event(source: str) -> dict[str, Any]:
    """The event of `source` (a file, '-' for stdin), or UsageError saying what is wrong."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no event file {source!r}") from None
    except IsADirectoryError:
        raise UsageError(f"{source}: a folder, not an event file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{source}: not a UTF-8 text file") from None
    except OSError as exc:
        raise UsageError(f"{source}: cannot be read ({exc.strerror})") from None
    try:
        event = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{source}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    if not isinstance(event, dict):
        raise UsageError(f"{source}: an event is a JSON object, this is a {_json_type(event)}")
    return event


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, int | float) else "null"


def event_source(template: dict[str, Any], function: str) -> tuple[str, tuple[str, ...]] | None:
    """What invokes `function` in the template and the top-level keys its events have: its
    own Api / DynamoDB / SQS events, else an event source mapping, an API's authorizer or a
    state machine that names it. None: unknown (absent, or invoked in another way)."""
    resources = template.get("Resources") or {}
    props = (resources.get(function) or {}).get("Properties") or {}
    kinds = {str(event.get("Type")) for event in (props.get("Events") or {}).values()}
    if "Api" in kinds:
        return "an API Gateway REST proxy event", REST_PROXY_KEYS
    if kinds & {"DynamoDB", "SQS"}:
        return "a batch of DynamoDB stream or SQS records", BATCH_KEYS
    named = re.compile(rf"(?<![\w]){re.escape(function)}(?![\w])")
    for resource in resources.values():
        if not named.search(json.dumps(resource, default=str)):
            continue
        if resource.get("Type") == "AWS::Lambda::EventSourceMapping":
            return "a batch of DynamoDB stream or SQS records", BATCH_KEYS
        if resource.get("Type") == "AWS::Serverless::Api":
            return "an API Gateway REQUEST authorizer event", AUTHORIZER_REQUEST_KEYS
        if resource.get("Type") == "AWS::Serverless::StateMachine":
            return "the state machine's flow step input", STEP_INPUT_KEYS
    return None


def check_keys(
    event: dict[str, Any], function: str, source: tuple[str, tuple[str, ...]] | None
) -> None:
    """UsageError naming the first key of `event` its event source never delivers, and the
    expected key closest to it."""
    if source is None:
        return
    kind, expected = source
    for key in event:
        if key in expected:
            continue
        close = difflib.get_close_matches(key, expected, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"expected: {', '.join(expected)}"
        raise UsageError(f"unknown key {key!r}: {function} takes {kind} ({hint})")


def run(args: argparse.Namespace) -> int:
    try:
        if args.url:
            return _run_remote(args)
        return _run_here(args)
    except UsageError as exc:
        print(f"a2a-serverless invoke: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _run_here(args: argparse.Namespace) -> int:
    from a2a_serverless.cli.dev import missing_local_extra, stack_root

    problem = missing_local_extra("invoke", ("moto", "yaml"))
    if problem:
        print(problem, file=sys.stderr)
        return USAGE_ERROR
    from a2a_serverless.local.__main__ import parse_params
    from a2a_serverless.local.template import load_template

    event = read_event(args.event)
    parameters = parse_params(args.param)
    if args.flow:
        parameters["Flow"] = args.flow
    with stack_root(args.template) as root:
        template = load_template(root / "template.yaml")
        check_keys(event, args.function, event_source(template, args.function))
        if os.getcwd() not in sys.path:  # the flow is named relative to this folder
            sys.path.insert(0, os.getcwd())
        # The stack's JSON log lines go to stderr with the other logs: stdout is the answer.
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        stdout = sys.stdout
        sys.stdout = sys.stderr
        try:
            ok, result = invoke(root, args.function, event, parameters)
        finally:
            sys.stdout = stdout
    print(json.dumps(result, indent=2))
    if ok and isinstance(result, dict) and result.get("statusCode") == 404:
        print(f"a2a-serverless invoke: {fresh_stack_hint(event)}", file=sys.stderr)
    return 0 if ok else HANDLER_ERROR


def fresh_stack_hint(event: dict[str, Any]) -> str:
    """What a 404 of a fresh stack means (the samples name tasks it cannot hold), and how to
    run the event on a task that exists."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    principal = authorizer.get("principalId") if isinstance(authorizer, dict) else None
    return (
        "404 from a fresh stack, which holds no task; to run the event on a task, start "
        "`a2a-serverless dev`, send it a message as the event's principal (X-Local-Principal: "
        f"{principal or '<requestContext.authorizer.principalId>'}), put the task's id in "
        "the event's path and pathParameters, and add --url http://127.0.0.1:8000"
    )


def _run_remote(args: argparse.Namespace) -> int:
    """The function run inside the stack `a2a-serverless dev` serves at args.url."""
    import httpx

    from a2a_serverless.local.admin import INVOKE_PATH

    if args.flow or args.param:
        raise UsageError(
            "--flow and --param make a fresh stack: with --url the running one's apply"
        )
    event = read_event(args.event)
    template = _template_for_check(args.template)
    if template is not None:
        check_keys(event, args.function, event_source(template, args.function))
    url = args.url.rstrip("/") + INVOKE_PATH
    try:
        response = httpx.post(
            url,
            json={"function": args.function, "event": event},
            timeout=httpx.Timeout(960.0, connect=5.0),  # a function runs up to 900 s
        )
    except httpx.TransportError as exc:
        raise UsageError(
            f"no local stack answers at {args.url} ({type(exc).__name__}); "
            "start one with `a2a-serverless dev`"
        ) from None
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code != 200 or not isinstance(answer, dict) or "handled" not in answer:
        error = (answer or {}).get("error") if isinstance(answer, dict) else None
        detail = error.get("message") if isinstance(error, dict) else response.text[:200]
        raise UsageError(f"{url} answered {response.status_code}: {detail}")
    print(json.dumps(answer.get("result"), indent=2))
    return 0 if answer["handled"] else HANDLER_ERROR


def _template_for_check(template: str | None) -> dict[str, Any] | None:
    """The template the event's keys are checked against with --url (--template, else
    ./template.yaml), when one is there and can be read; else no check here."""
    path = Path(template) if template else Path.cwd() / "template.yaml"
    if not path.is_file():
        return None
    try:
        from a2a_serverless.local.template import load_template
    except ModuleNotFoundError:  # without the local extra the running stack is the judge
        return None
    return load_template(path)


def invoke(
    root: Path, function: str, event: dict[str, Any], parameters: dict[str, str]
) -> tuple[bool, Any]:
    """(handled, response or Lambda's error object) of `function` on `event`."""
    from a2a_serverless.local.admin import web_adapter
    from a2a_serverless.local.resources import STACK, LambdaContext
    from a2a_serverless.local.stack import LocalStack

    with LocalStack(root=root, parameters=parameters, event_sources=False) as stack:
        if function not in stack.functions:
            known = ", ".join(sorted(stack.functions))
            raise SystemExit(f"no function {function!r} in the template (it has: {known})")
        try:
            if stack.functions[function].is_web_adapter:
                return True, asyncio.run(web_adapter(stack.app_for(function), event))
            handler = stack.handler_for(function)
            return True, handler(event, LambdaContext(f"{STACK}-{function}"))
        except Exception as exc:  # reported as the Lambda runtime reports an unhandled error
            import traceback

            traceback.print_exc()
            return False, {"errorType": type(exc).__name__, "errorMessage": str(exc)}
