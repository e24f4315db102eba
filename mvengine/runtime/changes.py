"""The input changes of one pipeline batch: each change feed read once, however many views read it, and
counted in one Spark job at most; a view's own changes handed to the views downstream in memory.

Changes live on the driver as Arrow when they were read or computed there, and in Spark otherwise; each form
is made from the other only when a view's batch asks for it (a Spark job one way, ~3 µs a row the other)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mvengine.incremental.batch import Batch
from mvengine.incremental.collected import collect_small
from mvengine.incremental.driver import consolidated
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, from_change_feed
from mvengine.policy import DEFAULT_POLICY, ExecutionPolicy
from mvengine.storage.api import RETRACTIONS, ChangeFeed, read_change_feed
from mvengine.storage.change_reader import CHANGE_COLUMNS
from mvengine.storage.tables import TableRef

# Types whose values Spark groups without changing them (not floating point, not nested).
GROUPED_EXACTLY = (
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.DecimalType,
    T.StringType,
    T.BinaryType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
)


@dataclass
class InputChanges:
    """One input's changes over a version range (from exclusive, to inclusive), as a Z-set: on the driver
    (`arrow`: the input's columns, _w, _mtime) or in Spark (`frame()`), each made from the other on demand."""

    spark: SparkSession
    rows: int
    retractions: int  # rows deleted or updated away (the append-only check)
    arrow: pa.Table | None = None
    _frame: DataFrame | None = None

    def frame(self) -> DataFrame:
        if self._frame is None:
            self._frame = self.spark.createDataFrame(self.arrow)
        return self._frame

    def on_driver(self, most: int) -> pa.Table | None:
        """The changes as Arrow (collected from Spark in one job when they are there and few); None when they
        are more than `most` rows."""
        if self.arrow is None and self.rows <= most:
            assert self._frame is not None  # the changes are in Spark or on the driver
            self.arrow = collect_small(self._frame, most)
        return self.arrow


@dataclass
class ViewOutput:
    """What a view committed in the batch: its snapshot went from `version_before` to `version`, by `changes`."""

    version_before: int
    version: int
    changes: InputChanges


@dataclass
class BatchChanges:
    spark: SparkSession
    policy: ExecutionPolicy = DEFAULT_POLICY
    outputs: dict[str, ViewOutput] = field(default_factory=dict)
    _feeds: dict[tuple[str, int, int], ChangeFeed] = field(default_factory=dict)
    _counted: dict[tuple[str, int, int], InputChanges] = field(default_factory=dict)
    _batches: list[Batch] = field(default_factory=list)
    # The expectations' outcomes of a source's changes, by (source, from, to): checked once per batch.
    checked: dict[tuple[str, int, int], list] = field(default_factory=dict)

    def read(
        self, wanted: dict[str, tuple[TableRef, int, int]], *, driver_rows: int | None = None
    ) -> dict[str, InputChanges]:
        """Each input's changes over its range. A view's output of this batch is taken from memory when it
        covers the range; any other range is read from the table's change feed (once per batch), by delta-rs on
        the driver as Arrow when it holds at most `driver_rows` rows: the policy's change_feed_on_driver, or up
        to driver_max_changes for a view whose batches the driver computes (no Spark at all). Both beat Delta's
        connector, which first rebuilds the table's state in a Spark job (benchmarks/README.md, "Which reader,
        which writer")."""
        least = self.policy.change_feed_on_driver
        driver_rows = least if driver_rows is None else driver_rows
        found: dict[str, InputChanges] = {}
        for name, (ref, lo, hi) in wanted.items():
            output = self.outputs.get(name)
            if output is not None and (output.version_before, output.version) == (lo, hi):
                found[name] = output.changes
                continue
            key = (ref.uri, lo, hi)
            feed = self._feeds.get(key)
            if feed is None or (feed.in_spark and driver_rows > least):
                if feed is not None:  # read by Spark for another view; this one can take more on the driver
                    feed.release()
                    self._counted.pop(key, None)
                feed = read_change_feed(self.spark, ref, lo + 1, hi, driver_rows=driver_rows)
                if feed.in_spark:  # cached by the count, for the rules to read again
                    feed.rows.persist()
                self._feeds[key] = feed
        self._count([(ref.uri, lo, hi) for name, (ref, lo, hi) in wanted.items() if name not in found])
        for name, (ref, lo, hi) in wanted.items():
            if name not in found:
                found[name] = self._counted[(ref.uri, lo, hi)]
        return found

    def _count(self, keys: list[tuple[str, int, int]]) -> None:
        """Count the feeds not yet counted: those read on the driver there, the others in one Spark job (which
        also fills their caches)."""
        counts: dict[tuple[str, int, int], tuple[int, int]] = {}
        in_spark = []
        for key in dict.fromkeys(keys):
            if key in self._counted:
                continue
            feed = self._feeds[key]
            counted = feed.counts() if key[2] > key[1] else (0, 0)
            if counted is None:
                counts[key] = (0, 0)  # a range may hold no changes: no row in the count
                in_spark.append((key, feed.rows))
            else:
                counts[key] = counted
        if in_spark:
            labelled = [
                frame.select(F.lit(i).alias("_feed"), "_change_type") for i, (_, frame) in enumerate(in_spark)
            ]
            df = labelled[0]
            for frame in labelled[1:]:
                df = df.unionByName(frame)
            retracting = F.col("_change_type").isin(*RETRACTIONS)
            for row in (
                df.groupBy("_feed")
                .agg(F.count(F.lit(1)).alias("rows"), F.sum(retracting.cast("long")).alias("retractions"))
                .collect()
            ):
                counts[in_spark[row["_feed"]][0]] = (row["rows"], row["retractions"])
        for key, (rows, retractions) in counts.items():
            feed = self._feeds[key]
            # Over several versions, a row may come and go within the range: cancelled here, never seen by the
            # rules (an expression that fails on it, under ANSI mode, does not fail a batch that no longer
            # holds it, and a re-planned batch picks up the fix of a poison row). Not for floating-point or
            # nested columns: grouping would turn -0.0 into 0.0, and the driver groups no nested values.
            cancels = retractions > 0 and key[2] - key[1] > 1
            if feed.in_spark:
                columns = [c for c in feed.rows.columns if c not in CHANGE_COLUMNS]
                frame = from_change_feed(feed.rows, columns)
                if cancels and all(isinstance(f.dataType, GROUPED_EXACTLY) for f in frame.schema.fields):
                    frame = consolidate(frame, columns)
                self._counted[key] = InputChanges(self.spark, rows, retractions, _frame=frame)
            else:
                changes = _zset(feed.arrow)
                if cancels and not any(
                    pa.types.is_floating(f.type) or pa.types.is_nested(f.type) for f in changes.schema
                ):
                    changes = consolidated(changes).rename_columns(changes.column_names)
                self._counted[key] = InputChanges(self.spark, rows, retractions, arrow=changes)

    def keep_until_released(self, batch: Batch) -> None:
        """A view's batch, whose DataFrames (its output among them) live until the pipeline batch ends."""
        self._batches.append(batch)

    def release(self) -> None:
        for batch in self._batches:
            batch.release()
        self._batches.clear()
        for feed in self._feeds.values():
            feed.release()
        self._feeds.clear()
        self._counted.clear()
        self.outputs.clear()
        self.checked.clear()


def _zset(feed: pa.Table) -> pa.Table:
    """Delta CDF rows on the driver as a Z-set (as zset.from_change_feed does in Spark)."""
    kinds = feed.column("_change_type")
    weight = pc.if_else(
        pc.is_in(kinds, pa.array(["insert", "update_postimage"])),
        pa.scalar(1, pa.int64()),
        pa.scalar(-1, pa.int64()),
    )
    columns = [c for c in feed.column_names if c not in CHANGE_COLUMNS]
    return (
        feed.select(columns)
        .append_column(WEIGHT, weight)
        .append_column(MTIME, feed.column("_commit_timestamp"))
    )
