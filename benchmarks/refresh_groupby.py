"""Incremental refresh against full recomputation, side by side, for a GROUP BY view.

A source of N rows (id, g, v) with PRIMARY KEY id, v a BIGINT (or a DOUBLE with `--values double`: exact
float sums, a map of digits per group), and the view
    SELECT g, COUNT(*) AS n, SUM(v) AS total, AVG(v) AS mean FROM facts GROUP BY g
For each change size, that many rows are updated (a contiguous id range, so with `--groups 1%` every group
changes) in one commit; then `refresh()` (incremental) and `refresh(full=True)` (recompute from the inputs,
diffed against the snapshot) are timed in the same process, one after the other. Each line is the median of
--repeat rounds; `batch s` is the incremental batch alone (what `mv refresh --continuous` pays per commit),
without starting the streaming query that a one-shot refresh also pays.

    python benchmarks/refresh_groupby.py --rows 100000 1000000 --changes 0.001 0.01 0.1
    python benchmarks/refresh_groupby.py --rows 100000 1000000 10000000 --changed-rows 10000 --groups 1000
    python benchmarks/refresh_groupby.py --rows 1000000 --changed-rows 10000 --groups 1000 --values double
"""

from __future__ import annotations

import argparse
import statistics

from bench_project import bench_refresher, timed  # benchmarks/bench_project.py
from phases import median_phases  # benchmarks/phases.py
from pyspark.sql import functions as F

from mvengine.runtime.session import spark_session
from mvengine.storage.api import merge_into, write_table
from mvengine.storage.tables import TableRef

SQL = """
CREATE TABLE facts (id BIGINT NOT NULL, g BIGINT, v {values}, PRIMARY KEY (id) NOT ENFORCED);
CREATE MATERIALIZED VIEW per_group WITH ('refresh_policy' = '{policy}') AS
SELECT g, COUNT(*) AS n, SUM(v) AS total, AVG(v) AS mean FROM facts GROUP BY g;
"""


def group_count(spec: str, rows: int) -> int:
    """`1000` (that many groups) or `1%` (that share of the rows)."""
    count = rows * float(spec[:-1]) / 100 if spec.endswith("%") else int(spec)
    return max(int(count), 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--changes",
        type=float,
        nargs="+",
        default=[0.001, 0.01, 0.1],
        help="shares of the rows changed per round",
    )
    parser.add_argument(
        "--changed-rows", type=int, nargs="+", help="numbers of rows changed per round (instead of --changes)"
    )
    parser.add_argument("--groups", nargs="+", default=["1%"], help="group counts: 1000, or 1%% of the rows")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--master",
        default="local[2]",
        help="local[2], or a cluster: spark://127.0.0.1:7177 (benchmarks/standalone_cluster.sh)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.executor.memory=5g (repeatable)",
    )
    parser.add_argument(
        "--policy",
        default="incremental",
        choices=["incremental", "auto"],
        help="the view's refresh_policy: 'incremental' times the delta rule at every size (the "
        "default); 'auto' lets a large batch be recomputed instead ([refresh] recompute_above)",
    )
    parser.add_argument(
        "--driver-max-changes",
        type=int,
        help="[refresh] driver_max_changes of the benchmark's project (default: mvengine's)",
    )
    parser.add_argument(
        "--values",
        default="bigint",
        choices=["bigint", "double"],
        help="the type of the summed column: bigint (exact in 64 bits) or double (exact float sums)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after each line, the median time and Spark jobs of every phase of the batches",
    )
    args = parser.parse_args()
    spark = spark_session(master=args.master, conf=dict(c.split("=", 1) for c in args.conf))
    print(
        f"{'rows':>10} {'groups':>8} {'changed':>9} {'incremental s':>14} {'batch s':>8} {'full s':>7} "
        f"{'full/incr':>10}",
        flush=True,
    )
    for n in args.rows:
        for spec in args.groups:
            groups = group_count(spec, n)
            sizes = args.changed_rows or [max(int(n * share), 1) for share in args.changes]
            _run(
                spark,
                n,
                groups,
                sizes,
                args.repeat,
                args.profile,
                args.policy,
                args.driver_max_changes,
                args.values,
            )


def _run(
    spark,
    n: int,
    groups: int,
    sizes: list[int],
    repeat: int,
    profile: bool,
    policy: str,
    driver_max_changes: int | None,
    values: str,
) -> None:
    conf = None if driver_max_changes is None else f"[refresh]\ndriver_max_changes = {driver_max_changes}\n"
    catalog, refresher, batches = bench_refresher(
        spark, SQL.format(policy=policy, values=values.upper()), conf
    )
    scale = 0.1 if values == "double" else 1  # 0.1 has no exact double: the sums are inexact in float64
    facts = TableRef(catalog.sources["facts"].path)
    write_table(
        spark.range(n).select(
            F.col("id"), (F.col("id") % groups).alias("g"), ((F.col("id") % 97) * scale).alias("v")
        ),
        facts,
    )
    refresher.refresh()  # bootstrap
    for changed in sizes:
        incremental, batch, full, rounds = [], [], [], []
        for r in range(repeat):
            start = (r * 7919) % max(n - changed, 1)
            merge_into(
                spark.range(start, start + changed).select(
                    F.col("id"),
                    (F.col("id") % groups).alias("g"),
                    (((F.col("id") + r + 1) % 89) * scale).alias("v"),
                ),
                facts,
                ["id"],
            )
            batches.clear()
            incremental.append(timed(lambda: refresher.refresh()))
            batch.append(sum(b.millis for b in batches if b.kind == "stream") / 1000)
            rounds.append([b for b in batches if b.kind == "stream"])
            full.append(timed(lambda: refresher.refresh(full=True)))
        inc, ful = statistics.median(incremental), statistics.median(full)
        print(
            f"{n:>10} {groups:>8} {changed:>9} {inc:>14.3f} {statistics.median(batch):>8.3f} {ful:>7.2f} "
            f"{ful / inc:>9.1f}x",
            flush=True,
        )
        if profile:
            print(median_phases(rounds), flush=True)


if __name__ == "__main__":
    main()
