"""scripts/bench.py's cold-start phase with a flow of the user's own (`--flow`): every function's
probe runs with it, and the agent is imported by the functions that serve the flow only.
Nothing here is timed: the probes' modules are what is checked."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

bench = load_script("bench.py", "scripts_bench", register=True)

# A user's agent outside the repository: it writes the name of the function whose probe
# imported it (the probe's argument), then serves the echo flow.
AGENT = """
import json, sys
with open({marks!r}, "a") as marks:
    marks.write(json.loads(sys.argv[1])["name"] + "\\n")
from a2a_serverless.flows.echo import flow
"""


def test_the_cold_start_probes_run_with_the_users_flow(tmp_path: Path) -> None:
    marks = tmp_path / "imported-by.txt"
    (tmp_path / "my_agent.py").write_text(AGENT.format(marks=str(marks)))
    report = bench.cold_start(repeats=1, flow="my_agent:flow", flow_path=tmp_path)
    assert report["flow"] == "my_agent:flow"
    rows = report["functions"]
    assert set(rows) == set(bench.COLD_START_EVENTS)
    assert all("error" not in row for row in rows.values()), rows
    imported_by = set(marks.read_text().split())
    assert imported_by == {
        "AgentCardFunction",
        "FlowWorkerFunction",
        "SendMessageFunction",
        "StreamFunction",
    }
