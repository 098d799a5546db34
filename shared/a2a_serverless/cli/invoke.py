"""`a2a-serverless invoke FUNCTION EVENT.json`: the Docker-free `sam local invoke`.

A fresh local stack (moto, in this process) of the template, then the function's real entry
point on the event: a plain or Mangum handler is called as Lambda calls it; a Lambda Web
Adapter function (Handler run.sh) gets what the adapter makes of an API Gateway proxy event,
an HTTP request to its ASGI app with the requestContext in `x-amzn-request-context`, and its
response (a stream collected whole) is turned back into a proxy result. The result is printed
as JSON on stdout; a handler that raises prints Lambda's error object and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

# Exit statuses: the handler raised / the command was used wrongly.
HANDLER_ERROR = 1
USAGE_ERROR = 2


def read_event(source: str) -> dict[str, Any]:
    text = sys.stdin.read() if source == "-" else Path(source).read_text()
    event = json.loads(text)
    if not isinstance(event, dict):
        raise SystemExit(f"{source}: an event is a JSON object")
    return event


def run(args: argparse.Namespace) -> int:
    from a2a_serverless.cli.dev import stack_root
    from a2a_serverless.local.__main__ import parse_params

    event = read_event(args.event)
    parameters = parse_params(args.param)
    if args.flow:
        parameters["Flow"] = args.flow
    if os.getcwd() not in sys.path:  # the flow is named relative to this folder
        sys.path.insert(0, os.getcwd())
    # The stack's JSON log lines go to stderr with the rest of the logs: stdout is the answer.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        with stack_root(args.template) as root:
            ok, result = invoke(root, args.function, event, parameters)
    finally:
        sys.stdout = stdout
    print(json.dumps(result, indent=2))
    return 0 if ok else HANDLER_ERROR


def invoke(
    root: Path, function: str, event: dict[str, Any], parameters: dict[str, str]
) -> tuple[bool, Any]:
    """(handled, response or Lambda's error object) of `function` on `event`."""
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


async def web_adapter(app: Any, event: dict[str, Any]) -> dict[str, Any]:
    """What the Lambda Web Adapter does with a REST proxy event, and the proxy result it
    makes of the app's answer."""
    import httpx

    if "httpMethod" not in event or "requestContext" not in event:
        raise ValueError("a Web Adapter function takes an API Gateway (REST) proxy event")
    headers: dict[str, str] = {k: v[-1] for k, v in (event.get("multiValueHeaders") or {}).items()}
    headers.update(event.get("headers") or {})
    headers["x-amzn-request-context"] = json.dumps(event["requestContext"])
    query = event.get("multiValueQueryStringParameters") or {
        k: [v] for k, v in (event.get("queryStringParameters") or {}).items()
    }
    params = [(k, v) for k, values in query.items() for v in values]
    body = event.get("body") or ""
    content = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        response = await c.request(
            event["httpMethod"],
            event["path"],
            params=params,
            headers=headers,
            content=content,
            timeout=900,  # the functions' Lambda timeout
        )
    multi: dict[str, list[str]] = {}
    for name, value in response.headers.multi_items():
        multi.setdefault(name, []).append(value)
    try:
        text, encoded = response.content.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(response.content).decode("ascii"), True
    return {
        "statusCode": response.status_code,
        "headers": {name: values[-1] for name, values in multi.items()},
        "multiValueHeaders": multi,
        "body": text,
        "isBase64Encoded": encoded,
    }
