"""scripts/bench.py's cold-start phase with a flow of the user's own (`--flow`): every function's
probe runs with it, and the agent is imported by the functions that serve the flow only.
Nothing here is timed: the probes' modules are what is checked."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

bench = load_script("bench.py", "scripts_bench", register=True)

# A user's agent outside the repository: it writes the name of the function whose probe
# imported it ($A2A_BENCH_PROBE), then serves the echo flow.
AGENT = """
import os
with open({marks!r}, "a") as marks:
    marks.write(os.environ["A2A_BENCH_PROBE"] + "\\n")
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
    # Each function against the FastAPI peer of its kind (Mangum; uvicorn as run.sh starts
    # it), both peers answering their GetItem request.
    peers = report["fastapi_peers"]
    assert set(peers) == {"fastapi_mangum", "fastapi_uvicorn"}
    assert {peer["status"] for peer in peers.values()} == {200, "200"}
    ratios = bench.build_report({}, report)["cold_start_ratio_to_fastapi_peer"]
    assert set(ratios) == set(bench.COLD_START_EVENTS)
    assert all(0.05 < ratio < 20 for ratio in ratios.values()), ratios
    # The Web Adapter functions were served: their first request got the function's answer.
    assert {rows[name]["status"] for name in ("GetTaskFunction", "StreamFunction")} == {"404"}
