"""What reading a table's change data feed costs, by reader: `read_change_feed` with the feed read by delta-rs on
the driver and handed to Spark as Arrow (what refresh does for feeds of at most 50k rows), `read_changes`
(Delta's own connector when the session has it, with mvengine's commit times), Delta's connector alone
(`readChangeFeed`, when its jars are loaded: `make jars`), mvengine's `mvdelta` Python data source (delta-rs in
Spark's Python workers), and delta-rs alone on the driver (`load_cdf`, to Arrow). The table gets --rows inserted
rows, then as many updated (a MERGE), so the feed of the two commits holds --rows inserts and 2 × --rows update images.

Each reader counts the change rows of the two commits and collects their sum of ids (so every row is read);
medians of --repeat rounds (each round runs every reader once, in turn) after one warm-up run of each, all in
one process.

    python benchmarks/cdf_read.py --rows 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from deltalake import DeltaTable

from mvengine.runtime.session import has_native_delta, spark_session
from mvengine.storage.api import merge_into, read_change_feed, read_changes, write_table
from mvengine.storage.datasource import FORMAT
from mvengine.storage.tables import TableRef


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    ref = TableRef(tempfile.mkdtemp(prefix="mvcdf") + "/t")
    write_table(spark.range(args.rows).selectExpr("id", "id % 100 AS g"), ref)
    merge_into(spark.range(args.rows).selectExpr("id", "id % 7 AS g"), ref, ["id"])
    last = DeltaTable(ref.uri).version()  # the MERGE
    first = last - 1  # the inserts

    def api() -> int:
        return read_changes(spark, ref, first, last).selectExpr("count(*)", "sum(id)").collect()[0][0]

    def on_driver() -> int:
        feed = read_change_feed(spark, ref, first, last, driver_rows=10 * args.rows)
        return feed.rows.selectExpr("count(*)", "sum(id)").collect()[0][0]

    def mvdelta() -> int:
        df = (
            spark.read.format(FORMAT)
            .option("readChangeFeed", "true")
            .option("startingVersion", first)
            .option("endingVersion", last)
            .load(ref.uri)
        )
        return df.selectExpr("count(*)", "sum(id)").collect()[0][0]

    def native() -> int:
        df = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", first)
            .option("endingVersion", last)
            .load(ref.uri)
        )
        return df.selectExpr("count(*)", "sum(id)").collect()[0][0]

    def delta_rs() -> int:
        return DeltaTable(ref.uri).load_cdf(starting_version=first, ending_version=last).read_all().num_rows

    readers = {
        "read_change_feed, on the driver": on_driver,
        "read_changes (connector)": api,
        "mvdelta data source (Spark)": mvdelta,
        "delta-rs load_cdf (driver)": delta_rs,
    }
    if has_native_delta(spark):
        readers["Delta connector readChangeFeed"] = native
    for read in readers.values():  # warm the JVM up for all, so the first reader timed is not penalised
        read()
    # Rounds of every reader in turn, so that a drift of the machine or the JVM weighs on all of them alike.
    times: dict[str, list[float]] = {label: [] for label in readers}
    rows: dict[str, int] = {}
    for _ in range(args.repeat):
        for label, read in readers.items():
            started = time.monotonic()
            rows[label] = read()
            times[label].append(time.monotonic() - started)
    print(f"{'reader':34} {'change rows':>12} {'median s':>9}")
    for label in readers:
        print(f"{label:34} {rows[label]:>12} {statistics.median(times[label]):>9.3f}", flush=True)


if __name__ == "__main__":
    main()
