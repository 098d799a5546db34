"""`python -m a2a_serverless.local --port 8000`: the local A2A endpoint (what scripts/dev runs)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

DEFAULT_PORT = 8000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/dev",
        description="Run the whole stack of template.yaml locally (moto, no Docker, no AWS).",
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT_LOCAL", DEFAULT_PORT)))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--flow", help="module:attribute of the flow to serve (default: echo)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="template parameter override, e.g. --param WorkflowType=EXPRESS",
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    # The console shows one JSON log line per request; the EMF metric blobs CloudWatch reads
    # would bury them (POWERTOOLS_METRICS_DISABLED=false scripts/dev prints them too).
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    parameters = dict(p.split("=", 1) for p in args.param)
    if args.flow:
        parameters["Flow"] = args.flow

    import uvicorn

    from a2a_serverless.local.stack import LocalStack

    stack = LocalStack(parameters=parameters).start()
    try:
        gateway = stack.gateway()
        base = f"http://{args.host}:{args.port}"
        print(f"a2a-serverless local stack: {base}", flush=True)
        print(f"  Agent Card: {base}/.well-known/agent-card.json", flush=True)
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


if __name__ == "__main__":
    sys.exit(main())
