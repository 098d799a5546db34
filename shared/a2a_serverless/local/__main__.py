"""`python -m a2a_serverless.local --port 8000`: the local A2A endpoint (what scripts/dev runs;
`a2a-serverless dev` serves it through `serve`)."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from pathlib import Path

from a2a_serverless.local.issuer import ISSUER_PATH, LOCAL_AUDIENCE

DEFAULT_PORT = 8000


def auth_banner(parameters: dict[str, str], base: str) -> list[str]:
    """What the banner says about authentication: the mode, and how to get a credential."""
    mode = parameters.get("Auth", "None")
    url = "" if base == f"http://127.0.0.1:{DEFAULT_PORT}" else f" --url {base}"
    if mode == "None":
        return ["auth: none — open; name a principal with X-Local-Principal"]
    if mode == "ApiKey":
        return [
            "auth: ApiKey — send X-API-Key: <key> (X-Local-Principal is ignored)",
            f"  make a key: a2a-serverless keys create --principal alice{url}",
        ]
    if mode == "Jwt":
        issuer = parameters.get("JwtIssuer", "")
        lines = [
            "auth: Jwt — send Authorization: Bearer <token> (X-Local-Principal is ignored)",
            f"  issuer: {issuer}   audience: {parameters.get('JwtAudience', '')}",
        ]
        if issuer.rstrip("/").endswith(ISSUER_PATH):
            lines.append(f"  make a token: a2a-serverless keys token --sub alice{url}")
        else:
            lines.append("  tokens come from that issuer (the local one serves none)")
        return lines
    if mode == "Iam":
        return [
            "auth: Iam — SigV4-sign requests (service execute-api, region us-east-1); "
            "X-Local-Principal is ignored",
            f"  make credentials: a2a-serverless keys iam-credentials --user alice{url}",
        ]
    return [f"auth: {mode}"]


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the local stack (scripts/dev and `a2a-serverless dev`)."""
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT_LOCAL", DEFAULT_PORT)))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--public-url",
        default=os.environ.get("PUBLIC_BASE_URL", ""),
        help="the URL clients reach the stack at, named in the Agent Card (default: "
        "PUBLIC_BASE_URL, else the listening address; for --host 0.0.0.0, this machine's name)",
    )
    parser.add_argument(
        "--flow", help="module:attribute of the flow to serve, importable from the current folder"
    )
    add_param_argument(parser, "template parameter override, e.g. --param WorkflowType=EXPRESS")
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Secrets Manager secret the stack holds, e.g. the headers for a remote agent a "
        "flow delegates to: --secret 'a2a-serverless-local/agents/127.0.0.1:8001="
        '{"X-API-Key": "..."}\' (repeatable)',
    )
    parser.add_argument(
        "--no-meter",
        dest="meter",
        action="store_false",
        help="do not count the AWS units each task consumes (the inspector's cost)",
    )
    parser.add_argument("--log-level", default="warning")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def listening_url(host: str, port: int) -> str:
    """The URL of a server listening on `host`:`port`; a wildcard address (all interfaces)
    is named by this machine's name."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return f"http://{_url_host(host)}:{port}"


def add_param_argument(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """The repeatable `--param NAME=VALUE` option that `parse_params` reads."""
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help=help)


def parse_params(pairs: list[str], option: str = "--param") -> dict[str, str]:
    """`NAME=VALUE` pairs (--param, --secret) as a dict; a pair without `=` is refused."""
    bad = [p for p in pairs if "=" not in p]
    if bad:
        # A --secret is not echoed: it may be a value given without its name.
        got = "" if option == "--secret" else f", got {bad[0]!r}"
        raise SystemExit(f"{option} takes NAME=VALUE{got}")
    return dict(p.split("=", 1) for p in pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/dev",
        description="Run the whole stack of template.yaml locally (moto, no Docker, no AWS).",
    )
    add_stack_arguments(parser)
    return serve(parser.parse_args(argv))


def serve(args: argparse.Namespace, root: Path | None = None, prog: str = "scripts/dev") -> int:
    """Serve the stack of `root`/template.yaml (None: this repository's) until Ctrl-C."""
    # The flow is named relative to the folder the command runs in, as users expect (a
    # console script's sys.path starts with its bin folder, not the current one).
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    # The console shows one JSON log line per request; the EMF metric blobs CloudWatch reads
    # would bury them (POWERTOOLS_METRICS_DISABLED=false scripts/dev prints them too).
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    parameters = parse_params(args.param)
    if args.flow:
        parameters["Flow"] = args.flow
    # This machine's URL of the stack (the banner's commands, the local issuer).
    local_host = (
        "127.0.0.1" if args.host in ("", "0.0.0.0") else "::1" if args.host == "::" else args.host
    )
    base = f"http://{_url_host(local_host)}:{args.port}"
    public_url = (getattr(args, "public_url", "") or "").rstrip("/") or listening_url(
        args.host, args.port
    )
    if parameters.get("Auth") == "Jwt" and not parameters.get("JwtIssuer"):
        # No issuer of your own: this server is one (local/issuer.py), and the authorizer
        # fetches its JWKS over HTTP as it would from Cognito or Auth0.
        parameters["JwtIssuer"] = f"{base}{ISSUER_PATH}"
        parameters.setdefault("JwtAudience", LOCAL_AUDIENCE)

    import uvicorn

    from a2a_serverless.local.admin import is_loopback
    from a2a_serverless.local.stack import LocalStack

    secrets = parse_params(getattr(args, "secret", None) or [], "--secret")
    metered = getattr(args, "meter", True)
    stack = LocalStack(root=root, parameters=parameters, secrets=secrets, meter=metered).start()
    try:
        problem = _startup_problem()
        if problem:
            # Refused at startup, not at the first message (a task FAILED with an import error).
            print(f"{prog}: {problem}", file=sys.stderr, flush=True)
            return 2
        # The card's URLs come from here, never from a client's Host header (see gateway.py).
        gateway = stack.gateway(
            public_url, trust_loopback_host=is_loopback(args.host) and not args.public_url
        )
        print(f"a2a-serverless local stack: {base}", flush=True)
        print(f"  Agent Card: {public_url}/.well-known/agent-card.json", flush=True)
        print(f"  Inspector:  {base}/_local/inspector", flush=True)
        if not is_loopback(args.host):
            print(
                f"  listening beyond loopback: the card names {public_url} (--public-url to "
                "change it); /_local/ credential endpoints answer this machine only",
                flush=True,
            )
        for line in auth_banner(stack.parameters, base):
            print(f"  {line}", flush=True)
        print(f"  flow: {stack.env.get('FLOW')}   (Ctrl-C stops)", flush=True)
        uvicorn.run(
            gateway,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
    finally:
        stack.stop()
    print("a2a-serverless local stack stopped", flush=True)
    return 0


def _startup_problem() -> str | None:
    """Why the stack cannot serve: its settings (a variable exported before the command wins
    over the template's) or its flow (one that does not load, or whose steps run longer than
    the workflow lets them); None when both are fine. The check of handlers.flow_at_init,
    in this command's words (the local stack may not import the functions' entry code)."""
    from a2a_serverless import wiring
    from a2a_serverless.flows.base import load_problem, step_length_problem
    from a2a_serverless.settings import SettingsError, get_settings

    try:
        get_settings()
    except SettingsError as exc:
        return str(exc)
    spec = os.environ.get("FLOW", "")
    try:
        flow = wiring.get_flow()
    except Exception as exc:  # whatever the user's module raised
        hint = "run the command from the folder that holds the module, or put it on PYTHONPATH"
        return load_problem(repr(spec), exc, hint)
    problem = step_length_problem(flow, get_settings().workflow_type)
    return f"cannot serve the flow {spec!r}: {problem}" if problem else None


if __name__ == "__main__":
    sys.exit(main())
