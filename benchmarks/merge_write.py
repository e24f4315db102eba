"""Which writer is fastest for the writes refresh makes, measured side by side in one process.

A table of --rows rows (id, g, v), written sorted by id (as refresh writes a keyed snapshot). Then, per writer,
the median of --repeat timed runs (after one warm-up) of:
- `merge N`: an upsert by id of N rows (every other one an existing id, the rest new), the MERGE a keyed
  view's batch makes into its snapshot;
- `append N`: an append of N rows (a changelog write), from Spark (`write_table`) and from the driver
  (`on_driver=True`, as refresh does for batches of at most 500k rows).

Writers: delta-rs (`merge_into` / `write_table`: what refresh uses; the merged rows are staged as Parquet by
the executors or, `on_driver`, collected as Arrow) and Delta's connector (`DeltaTable.merge` /
`df.write.format("delta")`). Each MERGE commits a new version, so every run merges into a table that the
previous runs changed; both writers get the same sequence of sources.

    python benchmarks/merge_write.py --rows 10000000 --changed 10 100000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from delta.tables import DeltaTable as SparkDeltaTable

from mvengine.runtime.session import spark_session
from mvengine.storage.api import has_native_delta, merge_into, write_table
from mvengine.storage.tables import TableRef


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--changed", type=int, nargs="+", default=[10, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    if not has_native_delta(spark):
        raise SystemExit("Delta's connector is not in the session: run make jars first")
    ref = TableRef(tempfile.mkdtemp(prefix="mvmerge") + "/t")
    write_table(spark.range(args.rows).selectExpr("id", "id % 1000 AS g", "id AS v"), ref, cluster_by=["id"])

    def source(changed: int, run: int):
        # Every other row an existing id (spread over the table), the others new ids past its end.
        step = max(args.rows // max(changed // 2, 1), 1)
        return spark.range(changed).selectExpr(
            f"CASE WHEN id % 2 = 0 THEN (id DIV 2) * {step} ELSE {args.rows} + {run} * {changed} + id END AS id",
            f"{run} AS g",
            "id AS v",
        )

    def timed(work) -> float:
        times = []
        for run in range(args.repeat + 1):
            started = time.monotonic()
            work(run)
            if run:
                times.append(time.monotonic() - started)
        return statistics.median(times)

    def rs_merge(changed):
        return lambda run: merge_into(source(changed, run), ref, ["id"], on_driver=changed <= 500_000)

    def native_merge(changed):
        def merge(run):
            (
                SparkDeltaTable.forPath(spark, ref.uri)
                .alias("t")
                .merge(source(changed, 100 + run).alias("s"), "t.id = s.id")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )

        return merge

    print(f"{'work':24} {'delta-rs s':>11} {'connector s':>12}", flush=True)
    for changed in args.changed:
        print(
            f"{'merge ' + str(changed):24} {timed(rs_merge(changed)):>11.3f} {timed(native_merge(changed)):>12.3f}",
            flush=True,
        )
    log = TableRef(tempfile.mkdtemp(prefix="mvappend") + "/t")
    write_table(spark.range(1).selectExpr("id", "id AS g", "id AS v"), log)
    for changed in args.changed:
        rows = spark.range(changed).selectExpr("id", "id % 1000 AS g", "id AS v")
        rs = timed(lambda run: write_table(rows, log, on_driver=changed <= 500_000))
        native = timed(lambda run: rows.write.format("delta").mode("append").save(log.uri))
        print(f"{'append ' + str(changed):24} {rs:>11.3f} {native:>12.3f}", flush=True)


if __name__ == "__main__":
    main()
