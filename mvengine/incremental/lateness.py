"""Rows later than a view's allowed lateness (`late_before`, µs): not applied, as if they never came (their window
is final and dropped from state), and kept in the batch's `late` list as (row JSON, event_time, _w) for the view's
late-rows table. A row whose time is NULL is never late. Both engines' forms, side by side: the window rules
(window_assign.py through the engine, session_window.py in Spark) call them."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch
from mvengine.incremental.driver import DriverBatch, data
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import WindowAssign


def time_position(node: WindowAssign) -> int:
    """Which of the child's fields the window's time column is."""
    fields = node.child.fields
    return next(
        i
        for i, f in enumerate(fields)
        if f.name == node.time.name and f.qualifier == (node.time.table or None)
    )


def on_time(node: WindowAssign, changes: DataFrame, batch: Batch) -> DataFrame:
    """The changes of the window's child less its late rows (which go to `batch.late`)."""
    if batch.late_before is None:
        return changes
    time = F.expr(node.time.sql("spark")).cast("timestamp")
    flagged = changes.withColumn(
        "_late", F.coalesce(F.unix_micros(time) < F.lit(batch.late_before), F.lit(False))
    )
    n = len(node.child.fields)
    late = flagged.where("_late").toDF(*[f"_c{i}" for i in range(n)], WEIGHT, MTIME, "_late")
    batch.late.append(
        late.select(
            F.to_json(
                F.struct(*[F.col(f"_c{i}").alias(f.name) for i, f in enumerate(node.child.fields)])
            ).alias("row"),
            F.col(f"_c{time_position(node)}").cast("timestamp").alias("event_time"),
            F.col(WEIGHT),
        )
    )
    return flagged.where(~F.col("_late")).drop("_late")


def on_time_on_driver(node: WindowAssign, changes: pa.Table, batch: DriverBatch) -> pa.Table:
    """`on_time` over the driver's changes (columns by position)."""
    if batch.late_before is None:
        return changes
    time = changes.column(time_position(node))
    late = pc.fill_null(pc.less(pc.cast(time, pa.int64()), batch.late_before), False)
    found = changes.filter(late)
    if found.num_rows:
        names = [f.name for f in node.child.fields]
        rows = [
            json.dumps(
                dict(zip(names, values)),
                default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v),
            )
            for values in zip(*(c.to_pylist() for c in data(found)))
        ]
        batch.late.append(
            pa.table(
                {
                    "row": pa.array(rows, pa.string()),
                    "event_time": pc.cast(found.column(time_position(node)), pa.timestamp("us", tz="UTC")),
                    WEIGHT: found.column(WEIGHT),
                }
            )
        )
    return changes.filter(pc.invert(late))
