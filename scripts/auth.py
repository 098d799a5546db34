"""scripts/auth: `a2a-serverless keys` (a2a_serverless/cli/keys.py) under its older command
names — create-key, list-keys, revoke-key, token, iam-credentials (scripts/auth --help)."""

from __future__ import annotations

import sys

from a2a_serverless.cli.keys import script_main


def main(argv: list[str] | None = None) -> int:
    return script_main(argv)


if __name__ == "__main__":
    sys.exit(main())
