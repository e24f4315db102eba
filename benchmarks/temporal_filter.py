"""A temporal filter over a stream, refreshed after each of --batches appends: whether a batch's time and the
view's size stay flat as the stream grows (incremental/filter.py: a batch reads the stream's new rows and, of
the rows before it, only those whose time the clock passed since the last batch).

One append-only source, events, given --rows rows a batch (users drawn from --users), their times the wall
clock's, less up to a second. Two views of the same SQL, `SELECT u, COUNT(*) ... WHERE ts > NOW() - INTERVAL
--window SECOND GROUP BY u`: `incremental`, as planned, and `recomputed`, with 'refresh_policy' = 'full' (recomputed
from the whole stream every batch). Each runs in a project of its own, by turns per batch; prints the median
refresh time of the first, middle and last ten batches, the rows the window holds (the sum of the counts) at
those batches, and the phases of the incremental view's first and last ten batches.

    .venv/bin/python benchmarks/temporal_filter.py                   # 100 batches on the driver
    .venv/bin/python benchmarks/temporal_filter.py --engine spark    # every incremental batch in Spark
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from phases import median_phases  # noqa: E402

from mvengine.config import load_config  # noqa: E402
from mvengine.project.catalog import load_catalog  # noqa: E402
from mvengine.runtime.refresh import BatchReport, Refresher  # noqa: E402
from mvengine.runtime.session import spark_session  # noqa: E402

SOURCES = """
CREATE TABLE events (id BIGINT NOT NULL, u BIGINT, ts TIMESTAMP) WITH ('append_only' = 'true');
"""
VIEW = """CREATE MATERIALIZED VIEW {name} WITH ('refresh_policy' = '{policy}') AS
SELECT u, COUNT(*) AS n FROM events WHERE ts > NOW() - INTERVAL '{window}' SECOND GROUP BY u;
"""


def project(root: Path, name: str, policy: str, window: int) -> Path:
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "view.sql").write_text(VIEW.format(name=name, policy=policy, window=window))
    return root


def rows(first_id: int, n: int, users: int, rng: random.Random) -> pa.Table:
    now = dt.datetime.now(dt.UTC)
    times = sorted(now - dt.timedelta(seconds=rng.uniform(0, 1)) for _ in range(n))
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + n), pa.int64()),
            "u": pa.array([rng.randrange(users) for _ in range(n)], pa.int64()),
            "ts": pa.array(times, pa.timestamp("us", tz="UTC")),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1000, help="rows per batch")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--window", type=int, default=5, help="seconds the view holds a row")
    parser.add_argument("--engine", choices=["driver", "spark"], default="driver")
    args = parser.parse_args()
    spark = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    base = Path(tempfile.mkdtemp(prefix="temporal-filter-"))
    runs = {}
    for name, policy in (("incremental", "incremental_strict"), ("recomputed", "full")):
        root = project(base / name, name, policy, args.window)
        config = load_config(root)
        if args.engine == "spark":
            config = replace(config, policy=replace(config.policy, driver_max_changes=0))
        catalog = load_catalog(config)
        print(f"{name}: {catalog.plans[name].state}", flush=True)
        reports: list[list[BatchReport]] = []
        refresher = Refresher(spark, config, catalog, report=lambda r, reports=reports: reports[-1].append(r))
        reports.append([])
        refresher.refresh()  # (makes the source, with its change data feed)
        runs[name] = (refresher, catalog.sources["events"].path, [], [], reports)
    rng = random.Random(7)
    for batch in range(args.batches):
        new = rows(batch * args.rows, args.rows, args.users, rng)
        for name, (refresher, path, times, held, reports) in runs.items():
            write_deltalake(path, new, mode="append")
            reports.append([])
            started = time.perf_counter()
            refresher.refresh()
            times.append(time.perf_counter() - started)
            snapshot = DeltaTable(str(base / name / "warehouse" / name / "snapshot")).to_pyarrow_table()
            held.append(pc.sum(snapshot.column("n")).as_py() or 0)
    thirds = {"first": slice(0, 10), "middle": slice(args.batches // 2 - 5, args.batches // 2 + 5)}
    thirds["last"] = slice(args.batches - 10, args.batches)
    print(f"{args.batches} batches of {args.rows} rows, a {args.window} s window, {args.engine}")
    print(
        f"{'view':12} {'median refresh ms: first 10':>28} {'middle 10':>10} {'last 10':>8}   rows in the window"
    )
    for name, (_, _, times, held, _) in runs.items():
        medians = [statistics.median(times[s]) * 1000 for s in thirds.values()]
        windows = " · ".join(str(int(statistics.median(held[s]))) for s in thirds.values())
        print(f"{name:12} {medians[0]:28.0f} {medians[1]:10.0f} {medians[2]:8.0f}   {windows}")
    reports = runs["incremental"][4]
    for third in ("first", "last"):
        print(f"incremental, the {third} ten batches:\n{median_phases(reports[1:][thirds[third]])}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
