"""Incremental refresh against full recomputation, side by side, for a GROUP BY view.

A source of N rows (id, g, v) with PRIMARY KEY id and N/100 groups; the view
    SELECT g, COUNT(*) AS n, SUM(v) AS total, AVG(v) AS mean FROM facts GROUP BY g
For each change ratio, that share of rows is updated in one commit; then `refresh` (incremental) and
`refresh --full` (recompute from the inputs, diffed against the snapshot) are timed in the same process, one
after the other, and their ratio printed. Medians over --repeat runs.

    python benchmarks/refresh_groupby.py --rows 100000 1000000 --changes 0.001 0.01 0.1
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from mvengine.project.catalog import load_catalog
from mvengine.project.config import load_config
from mvengine.runtime.refresh import Refresher
from mvengine.runtime.session import spark_session
from mvengine.storage.api import merge_into, write_table
from mvengine.storage.tables import TableRef

SQL = """
CREATE TABLE facts (id BIGINT NOT NULL, g BIGINT, v BIGINT, PRIMARY KEY (id) NOT ENFORCED);
CREATE MATERIALIZED VIEW per_group AS
SELECT g, COUNT(*) AS n, SUM(v) AS total, AVG(v) AS mean FROM facts GROUP BY g;
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--changes", type=float, nargs="+", default=[0.001, 0.01, 0.1])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    print(f"{'rows':>10} {'changed':>8} {'incremental s':>14} {'full s':>8} {'full/incr':>10}")
    for n in args.rows:
        root = Path(tempfile.mkdtemp(prefix="mvbench"))
        (root / "views").mkdir()
        (root / "views" / "bench.sql").write_text(SQL)
        config = load_config(root)
        catalog = load_catalog(config)
        refresher = Refresher(spark, config, catalog)
        refresher.prepare_sources()
        facts = TableRef(catalog.sources["facts"].path)
        write_table(spark.range(n).select(F.col("id"), (F.col("id") % max(n // 100, 1)).alias("g"),
                                          (F.col("id") % 97).alias("v")), facts)
        refresher.refresh()  # bootstrap
        for ratio in args.changes:
            incremental, full = [], []
            for r in range(args.repeat):
                changed = max(int(n * ratio), 1)
                start = (r * 7919) % max(n - changed, 1)
                merge_into(spark.range(start, start + changed).select(
                    F.col("id"), (F.col("id") % max(n // 100, 1)).alias("g"),
                    ((F.col("id") + r + 1) % 89).alias("v")), facts, ["id"])
                incremental.append(_timed(lambda: refresher.refresh()))
                full.append(_timed(lambda: refresher.refresh(full=True)))
            inc, ful = statistics.median(incremental), statistics.median(full)
            print(f"{n:>10} {ratio:>8.1%} {inc:>14.1f} {ful:>8.1f} {ful / inc:>9.1f}x", flush=True)


def _timed(work) -> float:
    started = time.monotonic()
    work()
    return time.monotonic() - started


if __name__ == "__main__":
    main()
