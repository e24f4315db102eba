"""The phase profile of benchmark rounds: per view and phase, the median milliseconds and Spark jobs over the
rounds (each round one incremental refresh; runtime/profile.py says what a phase covers)."""

from __future__ import annotations

import statistics
from collections import defaultdict

from mvengine.runtime.refresh import BatchReport


def median_phases(rounds: list[list[BatchReport]]) -> str:
    millis: dict[tuple[str, str], list[int]] = defaultdict(list)
    jobs: dict[tuple[str, str], list[int]] = defaultdict(list)
    for reports in rounds:
        for report in reports:
            for phase in report.phases:
                millis[report.view, phase.name].append(phase.millis)
                jobs[report.view, phase.name].append(phase.jobs)
    lines = [f"    {'view':14} {'phase':22} {'median ms':>10} {'jobs':>5}"]
    for (view, name), values in millis.items():
        lines.append(
            f"    {view:14} {name:22} {statistics.median(values):>10.0f} "
            f"{statistics.median(jobs[view, name]):>5.0f}"
        )
    return "\n".join(lines)
