"""The fuzz suite's budget and tally: what each process counted, merged where the session
ends, written to .pytest-reports/fuzz.json and printed as one line."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.conftest import REPORTS

BUDGET_ENV = "A2A_FUZZ_EXAMPLES"
DEFAULT_BUDGET = 2500
HANG_SECONDS = 10.0  # a local request slower than this is a hang (a send settles in < 1 s)
REPORT = REPORTS / "fuzz.json"
MAX_PROBLEMS = 20


def budget(share: float) -> int:
    """This test's number of cases: `share` of A2A_FUZZ_EXAMPLES (at least 10)."""
    total = int(os.environ.get(BUDGET_ENV, "") or DEFAULT_BUDGET)
    return max(10, round(total * share))


@dataclass
class Tally:
    cases: int = 0
    server_errors: int = 0
    hangs: int = 0
    failures: int = 0
    open_streams: int = 0
    accepted: int = 0  # answered with a result (reached an operation and it succeeded)
    request_seconds: float = 0.0
    slowest_seconds: float = 0.0
    by_binding: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    first_problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        if len(self.first_problems) < MAX_PROBLEMS and text[:600] not in self.first_problems:
            self.first_problems.append(text[:600])

    @property
    def bad(self) -> bool:
        return bool(self.server_errors or self.hangs or self.failures)

    def as_record(self) -> dict[str, Any]:
        """Plain data, for another process to merge."""
        return {
            **vars(self),
            "by_binding": dict(self.by_binding),
            "statuses": dict(self.statuses),
        }

    @classmethod
    def merged(cls, records: list[dict[str, Any]]) -> Tally:
        """The tally of every process's `as_record`."""
        tally = cls()
        for record in records:
            for name in ("cases", "server_errors", "hangs", "failures", "open_streams"):
                setattr(tally, name, getattr(tally, name) + record[name])
            tally.accepted += record["accepted"]
            tally.request_seconds += record["request_seconds"]
            tally.slowest_seconds = max(tally.slowest_seconds, record["slowest_seconds"])
            tally.by_binding.update(record["by_binding"])
            tally.statuses.update(record["statuses"])
            for problem in record["first_problems"]:
                tally.problem(problem)
        return tally

    def as_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "server_errors": self.server_errors,
            "hangs": self.hangs,
            "oracle_failures": self.failures,
            "open_streams_hung_up": self.open_streams,
            "accepted": self.accepted,
            "request_seconds": round(self.request_seconds, 1),
            "slowest_seconds": round(self.slowest_seconds, 3),
            "hang_seconds": HANG_SECONDS,
            "budget": budget(1.0),
            "by_binding": dict(sorted(self.by_binding.items())),
            "statuses": dict(sorted(self.statuses.items())),
            "first_problems": self.first_problems,
        }

    def summary(self) -> str:
        return (
            f"fuzz: {self.cases} cases, {self.server_errors} 5xx, {self.hangs} hangs, "
            f"{self.failures} oracle failures, {self.accepted} accepted, "
            f"slowest {self.slowest_seconds:.2f} s "
            f"({', '.join(f'{k} {v}' for k, v in sorted(self.by_binding.items()))})"
        )

    def written(self) -> str:
        """Writes the report; the summary line that names it."""
        REPORTS.mkdir(exist_ok=True)
        REPORT.write_text(json.dumps(self.as_json(), indent=2) + "\n")
        return f"{self.summary()} (details: {REPORT})"


TALLY = Tally()
