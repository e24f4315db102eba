"""What starting a Structured Streaming query costs, by kind of source: the floor under every one-shot
`mv refresh` of an incremental view (each runs one availableNow query per view).

Times `start()` to the end of the first `foreachBatch` call, which counts the batch's rows, and to the query's
end, for a Python data source that returns one row, for mvengine's change stream over a one-row Delta table (its
version-range stream, a Python data source, with the batch's changes read by `read_change_feed`, as refresh does:
a small feed by delta-rs on the driver), for Delta's own connector streaming the change feed of the same table
(when its jars are loaded: `make jars`), and for Spark's built-in text file source. Medians of --repeat runs,
after one warm-up run of each.

Each source is measured twice, in two child processes (a process has one Spark session): with the workers
started through `mvengine-worker-python` (what mvengine does) and with the plain interpreter, which imports
pyspark from the zip Spark puts on the workers' path.

    python benchmarks/stream_start.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from mvengine.runtime import session
from mvengine.runtime.session import spark_session
from mvengine.storage.api import batch_ranges, read_change_feed, stream_version_ranges, write_table
from mvengine.storage.tables import TableRef


class _OneRowReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def initialOffset(self) -> dict:
        return {"v": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start=None, limit=None) -> dict:
        return {"v": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition):
        yield (1,)


class OneRowSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "one_row"

    def schema(self) -> str:
        return "x int"

    def streamReader(self, schema) -> DataSourceStreamReader:
        return _OneRowReader()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workers", choices=["launcher", "interpreter"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workers is None:
        print(f"{'workers':12} {'source':32} {'first batch done s':>19} {'whole query s':>14}", flush=True)
        for workers in ("launcher", "interpreter"):
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--repeat",
                    str(args.repeat),
                    "--master",
                    args.master,
                    "--workers",
                    workers,
                ],
                check=True,
            )
        return
    if args.workers == "interpreter":
        session.worker_python = lambda: sys.executable
    spark = spark_session(master=args.master)
    spark.dataSource.register(OneRowSource)
    root = Path(tempfile.mkdtemp(prefix="mvstart"))
    (root / "text").mkdir()
    (root / "text" / "a.txt").write_text("a\n")
    delta = TableRef(str(root / "delta"))
    write_table(spark.range(1), delta)

    def count(df, batch_id, checkpoint):
        return df.count()

    def count_changes(df, batch_id, checkpoint):
        ((lo, hi),) = batch_ranges(checkpoint, batch_id).values()
        return read_change_feed(spark, delta, lo + 1, hi, driver_rows=50_000).rows.count()

    sources = {
        "python data source (one row)": (lambda: spark.readStream.format("one_row").load(), count),
        "mvengine change stream (Delta)": (
            lambda: stream_version_ranges(spark, {"t": delta}, starting_versions={"t": -1}),
            count_changes,
        ),
        "built-in text file source": (
            lambda: spark.readStream.format("text").load(str(root / "text")),
            count,
        ),
    }
    if session.has_native_delta(spark):
        sources["Delta connector change feed"] = (
            lambda: (
                spark.readStream.format("delta")
                .option("readChangeFeed", "true")
                .option("startingVersion", 0)
                .load(delta.uri)
            ),
            count,
        )
    for label, (make, consume) in sources.items():
        first, whole = [], []
        for run in range(args.repeat + 1):
            seen: list[float] = []
            checkpoint = tempfile.mkdtemp(dir=root)

            def batch(df, batch_id, seen=seen, checkpoint=checkpoint, consume=consume):
                consume(df, batch_id, checkpoint)
                seen.append(time.monotonic())

            started = time.monotonic()
            query = (
                make()
                .writeStream.foreachBatch(batch)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            if run:  # the first run warms up the JVM and the Python workers
                first.append(seen[0] - started)
                whole.append(time.monotonic() - started)
        print(
            f"{args.workers:12} {label:32} {statistics.median(first):>19.2f} "
            f"{statistics.median(whole):>14.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
