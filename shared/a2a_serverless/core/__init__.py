"""Protocol operations: they know tasks, flows and errors, nothing of HTTP or JSON-RPC."""
