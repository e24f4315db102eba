"""An interval join over two streams, refreshed after each of --batches appends: whether a batch's time stays flat
as the streams grow (plan/time_bounds.py: each side is read before the batch only within the times the other
side's changes can meet, so a batch opens the recent files of a stream, not all of them).

Two append-only sources, clicks and shows, each given --rows rows a batch (users drawn from --users), their
event times advancing --seconds a batch. Two views of the same rows: `bounded`, the interval join as written,
and `unbounded`, the same condition hidden from the planner (`(...) = TRUE`), which reads the whole of the other
side every batch, as a regular join does. Each runs in a project of its own, by turns per batch; prints the
median refresh time of the first, middle and last ten batches, and the views' rows.

    .venv/bin/python benchmarks/interval_join.py                   # 100 batches on the driver
    .venv/bin/python benchmarks/interval_join.py --engine spark    # every batch in Spark
    .venv/bin/python benchmarks/interval_join.py --kind left       # a LEFT interval join (padded clicks)
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
CREATE TABLE clicks (id BIGINT NOT NULL, u BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH ('append_only' = 'true');
CREATE TABLE shows (id BIGINT NOT NULL, u BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH ('append_only' = 'true');
"""
CONDITION = "c.ts BETWEEN s.ts AND s.ts + INTERVAL '1' MINUTE"
VIEW = "CREATE MATERIALIZED VIEW {name} AS SELECT c.id AS click, s.id AS shown, c.u\n"
VIEW += "FROM clicks c {kind} JOIN shows s ON c.u = s.u AND {condition};\n"
START = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)


def project(root: Path, name: str, condition: str, kind: str) -> Path:
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "view.sql").write_text(VIEW.format(name=name, condition=condition, kind=kind.upper()))
    return root


def rows(
    first_id: int, n: int, users: int, start: dt.datetime, seconds: float, rng: random.Random
) -> pa.Table:
    times = sorted(start + dt.timedelta(seconds=rng.uniform(0, seconds)) for _ in range(n))
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
    parser.add_argument("--rows", type=int, default=1000, help="rows per source per batch")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0, help="event time a batch covers")
    parser.add_argument("--engine", choices=["driver", "spark"], default="driver")
    parser.add_argument("--kind", choices=["inner", "left", "full"], default="inner", help="the join's kind")
    args = parser.parse_args()
    spark = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    base = Path(tempfile.mkdtemp(prefix="interval-join-"))
    runs = {}
    for name, condition in (("bounded", CONDITION), ("unbounded", f"({CONDITION}) = TRUE")):
        root = project(base / name, name, condition, args.kind)
        config = load_config(root)
        if args.engine == "spark":
            config = replace(config, policy=replace(config.policy, driver_max_changes=0))
        catalog = load_catalog(config)
        print(f"{name}: {catalog.plans[name].state}", flush=True)
        paths = {s: catalog.sources[s].path for s in ("clicks", "shows")}
        reports: list[list[BatchReport]] = []
        refresher = Refresher(spark, config, catalog, report=lambda r, reports=reports: reports[-1].append(r))
        reports.append([])
        refresher.refresh()  # (makes the sources, with their change data feed)
        runs[name] = (refresher, paths, [], reports)
    rng = random.Random(7)
    for batch in range(args.batches):
        start = START + dt.timedelta(seconds=batch * args.seconds)
        new = {
            s: rows(batch * args.rows, args.rows, args.users, start, args.seconds, rng)
            for s in ("clicks", "shows")
        }
        for refresher, paths, times, reports in runs.values():
            for source, table in new.items():
                write_deltalake(paths[source], table, mode="append")
            reports.append([])
            started = time.perf_counter()
            refresher.refresh()
            times.append(time.perf_counter() - started)
    thirds = {"first": slice(0, 10), "middle": slice(args.batches // 2 - 5, args.batches // 2 + 5)}
    thirds["last"] = slice(args.batches - 10, args.batches)
    print(
        f"{args.batches} batches of {args.rows} rows per source, {args.kind} join, {args.engine}: median refresh ms"
    )
    print(f"{'view':10} {'first 10':>9} {'middle 10':>10} {'last 10':>8}  rows")
    for name, (_, _, times, _) in runs.items():
        medians = [statistics.median(times[s]) * 1000 for s in thirds.values()]
        found = DeltaTable(str(base / name / "warehouse" / name / "snapshot")).to_pyarrow_table().num_rows
        print(f"{name:10} {medians[0]:9.0f} {medians[1]:10.0f} {medians[2]:8.0f}  {found}")
    for name, (_, _, _, reports) in runs.items():
        for third in ("first", "last"):
            print(f"{name}, the {third} ten batches:\n{median_phases(reports[1:][thirds[third]])}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
