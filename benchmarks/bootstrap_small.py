"""What building views over small inputs costs: the bootstrap of a fresh project, view by view.

A keyed source `t (k, g, v)` and a bag `b (g, v)` of --rows rows each, and eleven views over them (the top-N,
deduplication and OVER views of tests/spark/test_refresh_window_functions.py). Each round makes a fresh project,
writes the rows, and times its first refresh (every view's bootstrap) in one warm Spark session. Prints the median
seconds of the whole refresh over --repeat rounds and the median phase profile of each view's bootstrap.

    python benchmarks/bootstrap_small.py --rows 0 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa
from bench_project import bench_refresher  # benchmarks/bench_project.py
from deltalake import write_deltalake
from phases import median_phases  # benchmarks/phases.py

from mvengine.runtime.session import spark_session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.spark.test_refresh_differential import SOURCES  # noqa: E402
from tests.spark.test_refresh_window_functions import VIEWS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[0, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session(master="local[2]")
    for rows in args.rows:
        seconds, rounds = [], []
        for _ in range(args.repeat + 1):  # the first round warms the session up
            catalog, refresher, batches = bench_refresher(spark, SOURCES + VIEWS)
            t, b = catalog.sources["t"], catalog.sources["b"]
            keyed = [{"k": i, "g": f"g{i % 7}", "v": i % 11} for i in range(rows)]
            write_deltalake(t.path, pa.Table.from_pylist(keyed, schema=t.schema), mode="append")
            bag = [{"g": f"g{i % 5}", "v": i % 13} for i in range(rows)]
            write_deltalake(b.path, pa.Table.from_pylist(bag, schema=b.schema), mode="append")
            started = time.monotonic()
            refresher.refresh()
            seconds.append(time.monotonic() - started)
            rounds.append(list(batches))
        print(
            f"{rows} rows: first refresh of {len(rounds[-1])} views, median {statistics.median(seconds[1:]):.1f} s"
        )
        print(median_phases(rounds[1:]))


if __name__ == "__main__":
    main()
