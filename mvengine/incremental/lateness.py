"""Rows later than a view's allowed lateness (`late_before`, µs): not applied, as if they never came (their window
is final and dropped from state), and kept in the batch's `late` list as (row JSON, event_time, _w) for the view's
late-rows table. A row whose time is NULL is never late for a window (it joins none), and always for window
functions ordered by event time (it would sort before the rows whose values are final). Both engines' forms,
side by side: the window rules (window_assign.py through the engine, session_window.py) and over.py call them.

The row's JSON is written by one function (storage/row_json.py), which Spark runs as an Arrow UDF, so a late row
reads the same whichever engine set it aside."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch
from mvengine.incremental.driver import DriverBatch, data
from mvengine.incremental.exact_sum import arrow_udf
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Over, WindowAssign
from mvengine.plan.operators.over import event_time_order
from mvengine.storage.row_json import rows_json


def time_position(node: WindowAssign | Over) -> int:
    """Which of the child's fields the window's (or the window functions') time column is."""
    fields, time = node.child.fields, _time(node)
    return next(
        i for i, f in enumerate(fields) if f.name == time.name and f.qualifier == (time.table or None)
    )


def _time(node: WindowAssign | Over) -> exp.Column:
    if isinstance(node, Over):
        time = event_time_order(node)
        assert time is not None  # (plan/view_plan._check_lateness)
        return time
    return node.time


def on_time(node: WindowAssign | Over, changes: DataFrame, batch: Batch) -> DataFrame:
    """The changes of the node's child less its late rows (which go to `batch.late`)."""
    if batch.late_before is None:
        return changes
    time = changes[time_position(node)].cast("timestamp")
    flagged = changes.withColumn(
        "_late", F.coalesce(F.unix_micros(time) < F.lit(batch.late_before), F.lit(isinstance(node, Over)))
    )
    n = len(node.child.fields)
    late = flagged.where("_late").toDF(*[f"_c{i}" for i in range(n)], WEIGHT, MTIME, "_late")
    batch.late.append(
        late.select(
            arrow_udf(rows_json, "string")(
                F.struct(*[F.col(f"_c{i}").alias(f.name) for i, f in enumerate(node.child.fields)])
            ).alias("row"),
            F.col(f"_c{time_position(node)}").cast("timestamp").alias("event_time"),
            F.col(WEIGHT),
        )
    )
    return flagged.where(~F.col("_late")).drop("_late")


def on_time_on_driver(node: WindowAssign | Over, changes: pa.Table, batch: DriverBatch) -> pa.Table:
    """`on_time` over the driver's changes (columns by position)."""
    if batch.late_before is None:
        return changes
    time = changes.column(time_position(node))
    late = pc.fill_null(pc.less(pc.cast(time, pa.int64()), batch.late_before), isinstance(node, Over))
    found = changes.filter(late)
    if found.num_rows:
        columns = [c.combine_chunks() for c in data(found)]
        rows = pa.StructArray.from_arrays(columns, names=[f.name for f in node.child.fields])
        batch.late.append(
            pa.table(
                {
                    "row": rows_json(rows),
                    "event_time": pc.cast(found.column(time_position(node)), pa.timestamp("us", tz="UTC")),
                    WEIGHT: found.column(WEIGHT),
                }
            )
        )
    return changes.filter(pc.invert(late))
