"""Window assignment is linear: a change row of the input is the same change of each window its event time falls
in, so the delta of the windowed rows is the windowed delta, with no state.

A tumbling window of size s (offset o) holding time t starts at t - ((t - o) mod s); a hopping window of size s
every d holds t in the ceil(s / d) windows starting at t - ((t - o) mod d) - k·d (k = 0, 1, ...) that still end
after t. A row whose time is NULL is in no window. These are Spark's `window()` semantics, which the Spark rule
calls and the driver rule reproduces (tests/spark/test_refresh_windows.py checks both against Spark's batch SQL).
Session windows are not linear (a row can merge two sessions): their views are recomputed (plan/analysis.py).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverChildDelta, concat, data, zset
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import WindowAssign

NODE = WindowAssign  # the plan node type this module maintains (plan/operators/window.py)


def time_position(node: WindowAssign) -> int:
    """Which of the child's fields the window's time column is."""
    fields = node.child.fields
    return next(
        i
        for i, f in enumerate(fields)
        if f.name == node.time.name and f.qualifier == (node.time.table or None)
    )


def delta(node: WindowAssign, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    """The child's changes with Spark's window() of their time: a struct column named by the window's qualifier
    (GROUP BY window(...) reads `window`.`start`, as Spark does), or for a table-valued function the flat
    window_start, window_end and window_time columns."""
    child = without_late_rows(node, child_delta(node.child, batch), batch)
    spec = node.spec
    window = F.window(
        F.expr(node.time.sql("spark")),
        f"{spec.size} microseconds",
        f"{spec.slide} microseconds",
        f"{spec.offset} microseconds",
    )
    if spec.qualifier:
        return child.select("*", window.alias(spec.qualifier)).where(F.col(spec.qualifier).isNotNull())
    windowed = child.select("*", window.alias("_win")).where(F.col("_win").isNotNull())
    names = [f.name for f in node.fields[len(node.child.fields) :]]
    bounds = [F.col("_win.start"), F.col("_win.end"), F.col("_win.end") - F.expr("INTERVAL 1 MICROSECOND")]
    return windowed.withColumns(dict(zip(names, bounds))).drop("_win")


def without_late_rows(node: WindowAssign, changes: DataFrame, batch: Batch) -> DataFrame:
    """The changes less the rows later than the view's allowed lateness (`batch.late_before`), which go to
    `batch.late`: a row not applied, as if it never came (its window is final and dropped from state)."""
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


def without_late_rows_on_driver(node: WindowAssign, changes: pa.Table, batch: DriverBatch) -> pa.Table:
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


def driver_delta(node: WindowAssign, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    changes = without_late_rows_on_driver(node, child_delta(node.child, batch), batch)
    time = changes.column(time_position(node))
    changes = changes.filter(pc.is_valid(time))
    time = changes.column(time_position(node))
    t = time.cast(pa.int64()).to_numpy() if len(changes) else np.zeros(0, dtype=np.int64)
    spec = node.spec
    last_start = t - np.mod(t - spec.offset, spec.slide)
    extra = len(node.fields) - len(node.child.fields)
    parts = []
    for k in range(-(-spec.size // spec.slide)):
        start = last_start - k * spec.slide
        holds = start + spec.size > t
        rows = changes.filter(pa.array(holds)) if not holds.all() else changes
        start = start[holds]
        bounds = [pa.array(start).cast(time.type), pa.array(start + spec.size).cast(time.type)]
        if extra == 3:
            bounds.append(pa.array(start + spec.size - 1).cast(time.type))
        parts.append(zset([*data(rows), *bounds], rows.column(WEIGHT), rows.column(MTIME)))
    return concat(parts)
