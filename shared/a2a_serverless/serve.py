"""The Web Adapter functions' HTTP server: `python -m a2a_serverless.serve app:app` (what
functions/<name>/run.sh execs) serves that ASGI app with uvicorn on 127.0.0.1:$PORT (8080
when unset) until SIGTERM.

Outside a2a_serverless.handlers on purpose: importing that package before `app` would hide
the function's init from its init pause."""

from __future__ import annotations

import os
import sys
from typing import Any

import uvicorn

# uvicorn for one local peer, the adapter: it pools connections across invocations, so no idle
# timeout that races its reuse after a thaw; request heads up to 256 KiB (it passes API
# Gateway's and Lambda's context as JSON headers); its X-Forwarded-* headers left to the app;
# no access log (the app logs each request), no lifespan, no added Server or Date header.
OPTIONS: dict[str, Any] = {
    "host": "127.0.0.1",
    "http": "h11",
    "loop": "asyncio",
    "lifespan": "off",
    "proxy_headers": False,
    "timeout_keep_alive": 86400,
    "h11_max_incomplete_event_size": 262144,
    "access_log": False,
    "server_header": False,
    "date_header": False,
    "log_level": "warning",
}


def main(argv: list[str]) -> None:
    """Serve `argv[0]` ("module:attribute") until the process is told to stop."""
    (app,) = argv
    uvicorn.run(app, port=int(os.environ.get("PORT") or 8080), **OPTIONS)


if __name__ == "__main__":
    main(sys.argv[1:])
