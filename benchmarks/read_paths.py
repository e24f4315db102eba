"""Which reader is fastest for each read refresh makes, measured side by side in one process.

A table of --rows rows (id, g) gets five MERGE commits of --changed rows each (half updates, half inserts).
Then, per reader, the median of --repeat timed runs (after one warm-up) of:
- `read at latest` / `read at older`: the table at its latest version / at the version before it (time travel:
  what a join's rule reads of its other input), counted and summed;
- `changes of one commit`: the change data feed of the last commit, counted and summed.

Readers: for whole tables, Spark's Parquet reader over the files delta-rs lists (`files|driver` column: what
`read_table` uses for tables whose rows are their files' rows); for changes, delta-rs on the driver handing
Arrow to Spark (`files|driver` column: what refresh uses for feeds of at most 50k rows); Delta's connector
(`delta`); and `mvdelta` (delta-rs in Python workers). The connector caches the state of the version it read
last, so its repeated reads of one version do not include the state rebuild a new version costs (that cost
shows in `read at older`, a version it does not cache).

    python benchmarks/read_paths.py --rows 1000000 --changed 10 10000 200000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from mvengine.runtime.session import has_native_delta, spark_session
from mvengine.storage.api import merge_into, read_change_feed, write_table
from mvengine.storage.datasource import FORMAT
from mvengine.storage.tables import TableRef


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changed", type=int, nargs="+", default=[10, 10_000, 200_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    if not has_native_delta(spark):
        raise SystemExit("Delta's connector is not in the session: run make jars first")

    def timed(read) -> float:
        times = []
        for run in range(args.repeat + 1):
            started = time.monotonic()
            read().selectExpr("count(*)", "sum(id)").collect()
            if run:
                times.append(time.monotonic() - started)
        return statistics.median(times)

    print(f"{'changed':>8} {'read':24} {'files|driver s':>15} {'delta s':>8} {'mvdelta s':>10}", flush=True)
    for changed in args.changed:
        ref = TableRef(tempfile.mkdtemp(prefix="mvread") + "/t")
        write_table(spark.range(args.rows).selectExpr("id", "id % 10 AS g"), ref)
        for i in range(5):
            start = args.rows - changed // 2 + i * changed
            merge_into(spark.range(start, start + changed).selectExpr("id", "id % 7 AS g"), ref, ["id"])
        last = ref.open().version()

        def files(version):
            dt = ref.open(version=version)
            return spark.read.parquet(*dt.file_uris())

        def delta(version):
            return spark.read.format("delta").option("versionAsOf", version).load(ref.uri)

        def mvdelta(version):
            return spark.read.format(FORMAT).option("versionAsOf", version).load(ref.uri)

        def changes(fmt):
            return lambda: (
                spark.read.format(fmt)
                .option("readChangeFeed", "true")
                .option("startingVersion", last)
                .option("endingVersion", last)
                .load(ref.uri)
            )

        for label, version in (("read at latest", last), ("read at older", last - 1)):
            cells = [timed(lambda read=read: read(version)) for read in (files, delta, mvdelta)]
            print(f"{changed:>8} {label:24} {cells[0]:>15.3f} {cells[1]:>8.3f} {cells[2]:>10.3f}", flush=True)
        on_driver = timed(lambda: read_change_feed(spark, ref, last, last, driver_rows=10 * changed).rows)
        print(
            f"{changed:>8} {'changes of one commit':24} {on_driver:>15.3f} {timed(changes('delta')):>8.3f} "
            f"{timed(changes(FORMAT)):>10.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
