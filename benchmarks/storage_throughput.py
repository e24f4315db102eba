"""Throughput of the mvdelta data source on one machine: write, read, change-feed read and merge.

    python benchmarks/storage_throughput.py --rows 1000000 [--master local[2]] [--repeat 3]

Prints the median over --repeat runs of each operation, as seconds and rows/s, and a JSON line.
Reads are forced to materialise every column (a sum over a hash of all columns), not just counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from mvengine.runtime.session import spark_session
from mvengine.storage.api import merge_into, read_changes, read_table, write_table
from mvengine.storage.tables import TableRef


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session(master=args.master, conf={"spark.sql.shuffle.partitions": "2"})
    n = args.rows
    data = (
        spark.range(n, numPartitions=2)
        .selectExpr(
            "id",
            "concat('user_', id % 100000) as name",
            "cast(id % 1000 as int) as score",
            "timestamp_seconds(1790000000 + id) as ts",
            "cast(id % 97 as double) / 7 as ratio",
        )
        .cache()
    )
    data.count()
    results: dict[str, list[float]] = {"write": [], "read": [], "read_cdf": [], "merge_1pct": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            ref = TableRef(str(Path(tmp) / f"t{i}"))
            results["write"].append(timed(lambda: write_table(data, ref)))
            everything = "sum(hash(id, name, score, ts, ratio))"
            results["read"].append(timed(lambda: read_table(spark, ref).selectExpr(everything).collect()))
            results["read_cdf"].append(
                timed(lambda: read_changes(spark, ref, 0, 0).selectExpr(everything).collect())
            )
            delta = data.where(f"id % 100 = {i}").selectExpr(
                "id", "name", "score + 1 as score", "ts", "ratio"
            )
            results["merge_1pct"].append(timed(lambda: merge_into(delta, ref, ["id"])))
    report = {}
    for op, times in results.items():
        rows = n // 100 if op == "merge_1pct" else n
        median = statistics.median(times)
        report[op] = {
            "median_s": round(median, 3),
            "rows_per_s": round(rows / median),
            "rows": rows,
            "runs": [round(t, 3) for t in times],
        }
        print(
            f"{op:<11} {rows:>9} rows  median {median:7.2f} s  {rows / median:>12,.0f} rows/s   "
            f"runs {report[op]['runs']}"
        )
    print(json.dumps({"master": args.master, "rows": n, "results": report}))


if __name__ == "__main__":
    main()
