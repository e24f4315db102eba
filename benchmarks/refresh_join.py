"""Incremental refresh against full recomputation, side by side, for a join view and a three-view chain.

Sources: facts(id, d, v) of N rows, PRIMARY KEY id, and dims(d, name, region) of N/100 rows, PRIMARY KEY d.
    join:   enriched   = SELECT f.id, f.v, m.name, m.region FROM facts f JOIN dims m ON f.d = m.d
    chain:  per_dim    = SELECT d, COUNT(*) AS n, SUM(v) AS total FROM facts GROUP BY d
            dim_totals = SELECT m.region, p.d, p.n, p.total FROM per_dim p JOIN dims m ON p.d = m.d
            per_region = SELECT region, SUM(total) AS total, SUM(n) AS n FROM dim_totals GROUP BY region
Each round updates a contiguous range of fact ids in one commit, moving each row to another dimension row (the
join key changes) and changing its value; with `--dim-changes`, that share of the dimension rows is renamed in
another commit. Then `refresh()` of the view (incremental; for the chain, all three views) and
`refresh(full=True)` (recomputed from the inputs and diffed against the snapshot) are timed in the same process,
one after the other. Medians of --repeat rounds; `batch s` is the incremental batches alone, without starting
their streaming queries.

    python benchmarks/refresh_join.py --view join chain --rows 100000 1000000 10000000 --changes 0.001 0.01 0.1
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
CREATE TABLE facts (id BIGINT NOT NULL, d BIGINT, v BIGINT, PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE dims (d BIGINT NOT NULL, name STRING, region BIGINT, PRIMARY KEY (d) NOT ENFORCED);
CREATE MATERIALIZED VIEW enriched AS SELECT f.id, f.v, m.name, m.region FROM facts f JOIN dims m ON f.d = m.d;
CREATE MATERIALIZED VIEW per_dim AS SELECT d, COUNT(*) AS n, SUM(v) AS total FROM facts GROUP BY d;
CREATE MATERIALIZED VIEW dim_totals AS
SELECT m.region, p.d, p.n, p.total FROM per_dim p JOIN dims m ON p.d = m.d;
CREATE MATERIALIZED VIEW per_region AS
SELECT region, SUM(total) AS total, SUM(n) AS n FROM dim_totals GROUP BY region;
"""
TARGETS = {"join": "enriched", "chain": "per_region"}  # refreshing the last view refreshes what it reads
REGIONS = 50


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--view", nargs="+", choices=sorted(TARGETS), default=["join", "chain"])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--changes",
        type=float,
        nargs="+",
        default=[0.001, 0.01, 0.1],
        help="shares of the fact rows changed per round",
    )
    parser.add_argument(
        "--dim-changes",
        type=float,
        default=0.0,
        help="share of the dimension rows renamed per round (default: none)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after each line, the median time and Spark jobs of every phase of the batches",
    )
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    print(
        f"{'view':>6} {'rows':>10} {'changed':>9} {'dims chg':>9} {'incremental s':>14} {'batch s':>8} "
        f"{'full s':>7} {'full/incr':>10}",
        flush=True,
    )
    for n in args.rows:
        for view in args.view:
            _run(
                spark,
                view,
                n,
                [max(int(n * share), 1) for share in args.changes],
                args.dim_changes,
                args.repeat,
                args.profile,
            )


def _run(spark, view: str, n: int, sizes: list[int], dim_share: float, repeat: int, profile: bool) -> None:
    catalog, refresher, batches = bench_refresher(spark, SQL)
    facts, dims = TableRef(catalog.sources["facts"].path), TableRef(catalog.sources["dims"].path)
    dim_rows = max(n // 100, 1)
    write_table(
        spark.range(n).select(
            F.col("id"), (F.col("id") % dim_rows).alias("d"), (F.col("id") % 97).alias("v")
        ),
        facts,
    )
    write_table(_dims(spark, 0, dim_rows, 0), dims)
    target = [TARGETS[view]]
    refresher.refresh(target)  # bootstrap
    dim_changed = int(dim_rows * dim_share)
    for changed in sizes:
        incremental, batch, full, rounds = [], [], [], []
        for r in range(repeat):
            start = (r * 7919) % max(n - changed, 1)
            merge_into(
                spark.range(start, start + changed).select(
                    F.col("id"),
                    ((F.col("id") + r + 1) % dim_rows).alias("d"),
                    ((F.col("id") + r + 1) % 89).alias("v"),
                ),
                facts,
                ["id"],
            )
            if dim_changed:
                first = (r * 131) % max(dim_rows - dim_changed, 1)
                merge_into(_dims(spark, first, first + dim_changed, r + 1), dims, ["d"])
            batches.clear()
            incremental.append(timed(lambda: refresher.refresh(target)))
            batch.append(sum(b.millis for b in batches if b.kind == "stream") / 1000)
            rounds.append([b for b in batches if b.kind == "stream"])
            full.append(timed(lambda: refresher.refresh(target, full=True)))
        inc, ful = statistics.median(incremental), statistics.median(full)
        print(
            f"{view:>6} {n:>10} {changed:>9} {dim_changed:>9} {inc:>14.3f} {statistics.median(batch):>8.3f} "
            f"{ful:>7.2f} {ful / inc:>9.1f}x",
            flush=True,
        )
        if profile:
            print(median_phases(rounds), flush=True)


def _dims(spark, first: int, last: int, revision: int):
    return spark.range(first, last).select(
        F.col("id").alias("d"),
        F.concat(F.lit("dim "), F.col("id"), F.lit(f" r{revision}")).alias("name"),
        (F.col("id") % REGIONS).alias("region"),
    )


if __name__ == "__main__":
    main()
