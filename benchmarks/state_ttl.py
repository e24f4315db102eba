"""A GROUP BY (or a top-N, or window functions, per user) over a stream whose keys come and go, refreshed after
each of --batches appends: whether a `state_ttl` keeps the view's state and a batch's time flat while the keys
ever seen grow (incremental/aggregate.py, top_n.py, partition_rows.py: a key untouched for the TTL leaves the
view and its state).

One append-only source, events, given --rows rows a batch, of users drawn from a window of --active users that
moves on by --drift users a batch (a user is active for --active / --drift batches, then never seen again).
Three views of the --query (QUERIES below), each in a project of its own, refreshed by turns per batch: `ttl`
(WITH ('state_ttl' = '--ttl seconds'), by the wall clock), `plain` (the same without it) and `recomputed`
('refresh_policy' = 'full'). Prints the median refresh time of the first, middle and last ten batches, the rows
of each view's state tables and snapshot at those batches, and the phases of the ttl view's first and last ten
batches and of the plain view's last ten.

    .venv/bin/python benchmarks/state_ttl.py                   # 100 batches on the driver
    .venv/bin/python benchmarks/state_ttl.py --engine spark    # every incremental batch in Spark
    .venv/bin/python benchmarks/state_ttl.py --query top-n     # each user's three largest amounts
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from phases import median_phases  # noqa: E402

from mvengine.config import load_config  # noqa: E402
from mvengine.project.catalog import load_catalog  # noqa: E402
from mvengine.reading.describe import state_rows  # noqa: E402
from mvengine.runtime.refresh import BatchReport, Refresher  # noqa: E402
from mvengine.runtime.session import spark_session  # noqa: E402

SOURCES = """
CREATE TABLE events (id BIGINT NOT NULL, u BIGINT, amount BIGINT) WITH ('append_only' = 'true');
"""
QUERIES = {
    "group-by": "SELECT u, COUNT(*) AS n, MAX(amount) AS top FROM events GROUP BY u",
    "top-n": "SELECT u, id, amount FROM (SELECT u, id, amount, ROW_NUMBER() OVER (PARTITION BY u ORDER BY amount "
    "DESC, id) AS rn FROM events) WHERE rn <= 3",
    "over": "SELECT u, id, SUM(amount) OVER (PARTITION BY u ORDER BY id) AS running FROM events",  # (Spark)
}
VIEW = "CREATE MATERIALIZED VIEW {name} WITH ({options}) AS\n{query};\n"


def project(root: Path, name: str, options: str, query: str) -> Path:
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "view.sql").write_text(VIEW.format(name=name, options=options, query=query))
    return root


def rows(first_id: int, n: int, low: int, active: int, rng: random.Random) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + n), pa.int64()),
            "u": pa.array([low + rng.randrange(active) for _ in range(n)], pa.int64()),
            "amount": pa.array([rng.randrange(1000) for _ in range(n)], pa.int64()),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1000, help="rows per batch")
    parser.add_argument("--active", type=int, default=500, help="users active at a time")
    parser.add_argument("--drift", type=int, default=100, help="new users a batch")
    parser.add_argument("--ttl", type=int, default=5, help="the ttl view's state_ttl, seconds")
    parser.add_argument("--engine", choices=["driver", "spark"], default="driver")
    parser.add_argument("--query", choices=list(QUERIES), default="group-by")
    args = parser.parse_args()
    spark = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    base = Path(tempfile.mkdtemp(prefix="state-ttl-"))
    views = {
        "ttl": f"'state_ttl' = '{args.ttl} seconds', 'refresh_policy' = 'incremental_strict'",
        "plain": "'refresh_policy' = 'incremental_strict'",
        "recomputed": "'refresh_policy' = 'full'",
    }
    runs = {}
    for name, options in views.items():
        root = project(base / name, name, options, QUERIES[args.query])
        config = load_config(root)
        if args.engine == "spark":
            config = replace(config, policy=replace(config.policy, driver_max_changes=0))
        catalog = load_catalog(config)
        print(f"{name}: {catalog.plans[name].state}", flush=True)
        reports: list[list[BatchReport]] = []
        refresher = Refresher(spark, config, catalog, report=lambda r, reports=reports: reports[-1].append(r))
        reports.append([])
        refresher.refresh()  # (makes the source, with its change data feed)
        state = str(base / name / "warehouse" / name / "_state")
        runs[name] = (refresher, catalog.sources["events"].path, state, [], [], [], reports)
    rng = random.Random(7)
    for batch in range(args.batches):
        new = rows(batch * args.rows, args.rows, batch * args.drift, args.active, rng)
        for name, (refresher, path, state, times, kept, held, reports) in runs.items():
            write_deltalake(path, new, mode="append")
            reports.append([])
            started = time.perf_counter()
            refresher.refresh()
            times.append(time.perf_counter() - started)
            kept.append(state_rows(state, {}))
            held.append(
                DeltaTable(str(base / name / "warehouse" / name / "snapshot")).to_pyarrow_table().num_rows
            )
    thirds = {"first": slice(0, 10), "middle": slice(args.batches // 2 - 5, args.batches // 2 + 5)}
    thirds["last"] = slice(args.batches - 10, args.batches)
    print(
        f"{args.batches} batches of {args.rows} rows, {args.active} users active, {args.drift} new a batch, "
        f"state_ttl {args.ttl} s, {args.query}, {args.engine}"
    )
    print(
        f"{'view':12} {'median refresh ms: first 10':>28} {'middle 10':>10} {'last 10':>8}   state rows   view rows"
    )
    for name, (_, _, _, times, kept, held, _) in runs.items():
        medians = [statistics.median(times[s]) * 1000 for s in thirds.values()]
        state = " · ".join(str(int(statistics.median(kept[s]))) for s in thirds.values())
        snapshot = " · ".join(str(int(statistics.median(held[s]))) for s in thirds.values())
        print(f"{name:12} {medians[0]:28.0f} {medians[1]:10.0f} {medians[2]:8.0f}   {state}   {snapshot}")
    reports = runs["ttl"][6]
    expired = sum(r.expired for batch in reports for r in batch)
    print(f"ttl: {expired} keys expired in all")
    for third in ("first", "last"):
        print(f"ttl, the {third} ten batches:\n{median_phases(reports[1:][thirds[third]])}")
    print(f"plain, the last ten batches:\n{median_phases(runs['plain'][6][1:][thirds['last']])}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
