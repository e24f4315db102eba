"""Nexmark throughput, query by query: incremental refresh against full recomputation over the same events.

For each query of examples/nexmark (with the helper views it reads), in a project of its own: Nexmark's events
(mvengine/nexmark.py, as `mv demo` writes them) at --rate events per second of event time, --warmup seconds of
them before the view starts, then batches of --interval seconds of events, one pipeline batch each (what
`mv refresh --continuous` runs per trigger), until --seconds of events have been generated after the warm-up
(at least 60: a steady state). Reported per query:

- incremental events/s: the events of the measured batches over the time their refreshes took (median batch);
- full events/s: the same events over the time a recomputation of the view over all events so far takes
  (`refresh(full=True)` after each of the last --full-runs batches, median): mvengine's own, on the driver
  when the inputs are small (issue 36);
- Spark full: the same recomputation by Spark (`driver_max_changes = 0`): the view's SQL run by Spark and
  written to Delta, what a Spark pipeline that recomputes its views does every run;
- whether the incremental snapshot equals the recomputed one (it must; "n/a" for a view whose rows depend on
  when rows arrived, q12's PROCTIME(), which a recomputation cannot know).

    .venv/bin/python benchmarks/nexmark.py --rate 1000 --interval 5 --seconds 60
    .venv/bin/python benchmarks/nexmark.py --queries q5 q9 q18 --rate 2000
    .venv/bin/python benchmarks/nexmark.py --queries q17 --profile   # and where a batch's time goes
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from phases import median_phases  # noqa: E402  (benchmarks/phases.py)

from mvengine.config import load_config  # noqa: E402
from mvengine.nexmark import NexmarkFeed  # noqa: E402
from mvengine.project.catalog import load_catalog  # noqa: E402
from mvengine.runtime.refresh import BatchReport, Refresher, view_tables  # noqa: E402
from mvengine.runtime.session import spark_session  # noqa: E402
from mvengine.storage.api import read_table  # noqa: E402

EXAMPLE = ROOT / "examples" / "nexmark" / "views"


def query_files() -> dict[str, Path]:
    """Each query's file, by the name of the view the file ends with (q0 ... q22)."""
    found = {}
    for path in sorted(EXAMPLE.glob("q*.sql")):
        names = re.findall(r"CREATE MATERIALIZED VIEW (\w+)", path.read_text(), re.IGNORECASE)
        found[names[-1]] = path
    return found


def project(root: Path, query: Path) -> Path:
    (root / "views").mkdir(parents=True)
    shutil.copy(EXAMPLE / "sources.sql", root / "views")
    shutil.copy(query, root / "views")
    (root / "conf").mkdir()
    (root / "conf" / "mvengine.toml").write_text('[spark.conf]\n"spark.sql.shuffle.partitions" = "2"\n')
    return root


def measure(spark, name: str, path: Path, args) -> dict:
    root = project(Path(tempfile.mkdtemp(prefix=f"nexmark-{name}-")), path)
    config = load_config(root)
    catalog = load_catalog(config)
    plan = catalog.plans[name]
    feed = NexmarkFeed(config, catalog, seed=7, interval=args.warmup, rate=args.rate)
    feed.start()
    feed.next_batch()  # the warm-up events
    feed.interval = args.interval
    reports: list[BatchReport] = []
    refresher = Refresher(spark, config, catalog, report=reports.append)
    in_spark = dataclasses.replace(config, policy=dataclasses.replace(config.policy, driver_max_changes=0))
    spark_refresher = Refresher(spark, in_spark, catalog)
    refresher.refresh()
    batches = max(1, round(args.seconds / args.interval))
    incremental, full, spark_full, rounds = [], [], [], []
    per_batch = round(args.rate * args.interval)
    equal = True
    for i in range(batches):
        feed.next_batch()
        reports.clear()
        started = time.perf_counter()
        refresher.refresh()
        incremental.append(time.perf_counter() - started)
        rounds.append([r for r in reports if r.kind == "stream"])
        if i >= batches - args.full_runs:
            ours = read_table(spark, view_tables(plan, {}).snapshot)
            ours = ours.select(*ours.columns).collect()
            started = time.perf_counter()
            refresher.refresh(full=True, names=[name])
            full.append(time.perf_counter() - started)
            recomputed = read_table(spark, view_tables(plan, {}).snapshot).collect()
            equal = equal and sorted(map(tuple, ours), key=repr) == sorted(map(tuple, recomputed), key=repr)
            started = time.perf_counter()
            spark_refresher.refresh(full=True, names=[name])
            spark_full.append(time.perf_counter() - started)
            recomputed = read_table(spark, view_tables(plan, {}).snapshot).collect()
            equal = equal and sorted(map(tuple, ours), key=repr) == sorted(map(tuple, recomputed), key=repr)
    if (
        plan.by_arrival
    ):  # a recomputation cannot know when rows arrived (q12's PROCTIME()): nothing to compare
        equal = "n/a"
    shutil.rmtree(root, ignore_errors=True)
    return {
        "query": name,
        "strategy": plan.strategy,
        "events": batches * per_batch,
        "batch_s": statistics.median(incremental),
        "incremental_eps": per_batch / statistics.median(incremental),
        "full_s": statistics.median(full),
        "full_eps": per_batch / statistics.median(full),
        "spark_full_s": statistics.median(spark_full),
        "equal": equal,
        "phases": median_phases(rounds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", nargs="*", help="the queries to run (default: all)")
    parser.add_argument("--rate", type=int, default=1000, help="events per second of event time")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds of events per batch")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="seconds of events measured (at least 60)"
    )
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds of events before the view starts")
    parser.add_argument(
        "--full-runs", type=int, default=2, help="recomputations measured, after the last batches"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print each query's median phases of a batch (runtime/profile.py)",
    )
    args = parser.parse_args()
    files = query_files()
    names = args.queries or sorted(files, key=lambda q: int(q[1:]))
    spark = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    print(
        f"rate {args.rate} events/s, batches of {args.interval:g} s ({round(args.rate * args.interval)} events), "
        f"{args.seconds:g} s of events after {args.warmup:g} s of warm-up, local[2]"
    )
    print(
        f"{'query':6} {'strategy':12} {'events':>7} {'batch s':>8} {'incr ev/s':>10} {'full s':>7} "
        f"{'full ev/s':>10} {'full/incr':>9} {'Spark full s':>12} {'Spark/incr':>10}  equal"
    )
    for name in names:
        r = measure(spark, name, files[name], args)
        print(
            f"{r['query']:6} {r['strategy']:12} {r['events']:7d} {r['batch_s']:8.2f} {r['incremental_eps']:10.0f} "
            f"{r['full_s']:7.2f} {r['full_eps']:10.0f} {r['full_s'] / r['batch_s']:8.1f}x "
            f"{r['spark_full_s']:12.2f} {r['spark_full_s'] / r['batch_s']:9.1f}x  {r['equal']}",
            flush=True,
        )
        if args.profile:
            print(r["phases"], flush=True)


if __name__ == "__main__":
    main()
