"""scripts/smoke: `a2a-serverless smoke` (a2a_serverless/cli/smoke.py), the post-deploy smoke
test of an A2A endpoint (scripts/smoke --help)."""

from __future__ import annotations

import sys

from a2a_serverless.cli.smoke import main

if __name__ == "__main__":
    sys.exit(main())
