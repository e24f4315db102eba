"""Sustained throughput of `mv refresh --continuous`: a GROUP BY view kept fresh while a writer appends changes
at a fixed rate, and whether its freshness lag stays bounded.

The source `facts(id, g, v)` (N rows to start with) and the view of refresh_groupby.py
    SELECT g, COUNT(*) AS n, SUM(v) AS total, AVG(v) AS mean FROM facts GROUP BY g
`mv refresh --continuous --interval 0.1s` runs in a child process; this process appends --rate rows a second
(a commit every --every seconds, by delta-rs) for --duration seconds. For every source commit it records when the
view first reflected it (the view's commit time, from the Delta logs, minus the source commit's). The view keeps up
when it has reflected every commit shortly after the writer stops, and its lag stays bounded when the lag of the
last third of the commits is no larger than that of the first third.

    python benchmarks/continuous_throughput.py --rows 10000000 --rate 50000 --duration 60
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.project.layout import source_table
from mvengine.reading.versions import Versions
from mvengine.storage.sources import ensure_source_table
from mvengine.storage.tables import commit_metadata

sys.path.insert(0, str(Path(__file__).parent))
from continuous import reflected_at, refreshing  # benchmarks/continuous.py
from refresh_groupby import SQL  # the same view as the side-by-side benchmark

VIEW = "per_group"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="fact rows before the run")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=50_000, help="rows appended per second")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between the writer's commits")
    parser.add_argument("--duration", type=float, default=60, help="seconds the writer runs")
    parser.add_argument("--log", help="write the refresh's output there, with the phases of every batch")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mvthroughput"))
    (root / "views").mkdir()
    (root / "views" / "bench.sql").write_text(SQL.format(policy="auto"))
    config = load_config(root)
    catalog = load_catalog(config)
    facts = source_table(catalog.sources["facts"], {})
    ensure_source_table(facts, catalog.sources["facts"].schema)
    schema = catalog.sources["facts"].schema
    for first in range(0, args.rows, 1_000_000):
        write_deltalake(
            facts.uri, _facts(schema, first, min(first + 1_000_000, args.rows), args.groups), mode="append"
        )

    with refreshing(root, args.log):
        reflected_at(config, catalog, VIEW, "facts", facts.open().version(), 600, poll_s=0.2)  # the bootstrap
        per_commit = max(int(args.rate * args.every), 1)
        commits: list[tuple[int, int]] = []  # (facts version, its commit time in ms)
        next_id, started = args.rows, time.monotonic()
        while time.monotonic() - started < args.duration:
            write_deltalake(
                facts.uri, _facts(schema, next_id, next_id + per_commit, args.groups), mode="append"
            )
            next_id += per_commit
            version = facts.open().version()
            commits.append((version, int(commit_metadata(facts.open(), version)["timestamp"])))
            time.sleep(max(0.0, started + len(commits) * args.every - time.monotonic()))
        written_s = time.monotonic() - started
        reflected = _reflection_times(config, catalog, commits, timeout=120)
    lags = [(reflected[v] - t) / 1000 for v, t in commits]
    third = max(len(lags) // 3, 1)
    first, last = statistics.median(lags[:third]), statistics.median(lags[-third:])
    span_s = (max(reflected.values()) - commits[0][1]) / 1000
    rows = per_commit * len(commits)
    print(
        f"{len(commits)} commits of {per_commit} rows in {written_s:.1f} s ({rows / written_s:,.0f} rows/s "
        f"offered) into {args.rows} rows, {args.groups} groups"
    )
    print(f"every commit reflected {span_s:.1f} s after the first: {rows / span_s:,.0f} rows/s processed")
    print(
        f"freshness lag: p50 {statistics.median(lags):.2f} s, max {max(lags):.2f} s; median of the first "
        f"third {first:.2f} s, of the last third {last:.2f} s ({'bounded' if last <= first * 1.5 + 0.5 else 'growing'})"
    )


def _facts(schema: pa.Schema, first: int, stop: int, groups: int) -> pa.Table:
    ids = np.arange(first, stop, dtype=np.int64)
    return pa.Table.from_arrays([pa.array(ids), pa.array(ids % groups), pa.array(ids % 97)], schema=schema)


def _reflection_times(config, catalog, commits: list[tuple[int, int]], timeout: float) -> dict[int, int]:
    """For each facts version, the commit time (ms) of the first view version that reflects it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        versions = Versions(config, catalog)
        found: dict[int, int] = {}
        for v, commit in sorted(versions.snapshot_commits(VIEW).items()):
            reflects = min(versions.source_versions(VIEW, v).get("facts", [-1]))
            for facts_version, _ in commits:
                if facts_version <= reflects and facts_version not in found:
                    found[facts_version] = commit.timestamp_ms
        if len(found) == len(commits):
            return found
        time.sleep(0.5)
    raise SystemExit(f"{VIEW} did not reflect every commit within {timeout} s of the writer's end")


if __name__ == "__main__":
    main()
