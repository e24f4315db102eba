"""What expectations add to a batch: the same GROUP BY view over two copies of one source, one declaring three
row-level expectations, side by side in one process.

Each source holds N rows (id, g, v, s) keyed by id; each round updates --changed-rows of them (a contiguous id
range) in both, in one commit each, and refreshes; the views' batches are timed (`batch s`, the median over
--repeat rounds, the GX import of the first check left out by a warm-up round), with the `expectations` phase
alone (GX validating the inserted rows: pandas on the driver, Spark above `[refresh] driver_max_changes`).

    .venv/bin/python benchmarks/expectations.py --rows 1000000 --changed-rows 10000 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics

from bench_project import bench_refresher  # benchmarks/bench_project.py
from pyspark.sql import functions as F

from mvengine.runtime.session import spark_session
from mvengine.storage.api import merge_into, write_table
from mvengine.storage.tables import TableRef

SQL = """
CREATE TABLE plain (id BIGINT NOT NULL, g BIGINT, v BIGINT, s STRING, PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE checked (id BIGINT NOT NULL, g BIGINT, v BIGINT, s STRING, PRIMARY KEY (id) NOT ENFORCED,
                      CONSTRAINT in_range EXPECT (v BETWEEN 0 AND 1000),
                      CONSTRAINT has_group EXPECT COLUMN g NOT NULL ON VIOLATION DROP ROW,
                      CONSTRAINT known_kind EXPECT COLUMN s VALUES IN ('a', 'b', 'c') ON VIOLATION QUARANTINE);
CREATE MATERIALIZED VIEW plain_groups AS SELECT g, COUNT(*) AS n, SUM(v) AS total FROM plain GROUP BY g;
CREATE MATERIALIZED VIEW checked_groups AS SELECT g, COUNT(*) AS n, SUM(v) AS total FROM checked GROUP BY g;
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changed-rows", type=int, nargs="+", default=[10_000])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    catalog, refresher, batches = bench_refresher(spark, SQL)
    tables = [TableRef(catalog.sources[name].path) for name in ("plain", "checked")]

    def rows(start: int, end: int, salt: int):
        return spark.range(start, end).select(
            F.col("id"),
            (F.col("id") % args.groups).alias("g"),
            ((F.col("id") + salt) % 997).alias("v"),
            F.when((F.col("id") + salt) % 200 == 0, "d").otherwise("a").alias("s"),
        )  # 1 in 200: quarantined

    for table in tables:
        write_table(rows(0, args.rows, 0), table)
    refresher.refresh()  # the views' first computation
    print(
        f"{'rows':>9} {'changed':>8} {'plain batch s':>14} {'checked batch s':>16} {'added s':>8} "
        f"{'expectations phase s':>21}",
        flush=True,
    )
    for changed in args.changed_rows:
        plain, checked, phase = [], [], []
        for r in range(args.repeat + 1):
            start = (r * 7919) % max(args.rows - changed, 1)
            for table in tables:
                merge_into(rows(start, start + changed, r + 1), table, ["id"])
            batches.clear()
            refresher.refresh()
            if r == 0:
                continue  # warm-up: the first check imports great-expectations (~4 s), once per process
            by_view = {b.view: b for b in batches}
            plain.append(by_view["plain_groups"].millis / 1000)
            checked.append(by_view["checked_groups"].millis / 1000)
            phase.append(
                sum(p.millis for p in by_view["checked_groups"].phases if p.name == "expectations") / 1000
            )
        p, c = statistics.median(plain), statistics.median(checked)
        print(
            f"{args.rows:>9} {changed:>8} {p:>14.3f} {c:>16.3f} {c - p:>8.3f} {statistics.median(phase):>21.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
