"""The local inspector: a page of the local stack that shows what it holds and records (tasks,
their event logs, executions, webhook deliveries, flow states). Local only: never imported by
the functions."""
