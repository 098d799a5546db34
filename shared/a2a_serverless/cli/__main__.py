"""`python -m a2a_serverless.cli`: the `a2a-serverless` command without its script."""

import sys

from a2a_serverless.cli import main

sys.exit(main())
