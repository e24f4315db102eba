"""GROUP BY a session window: not linear (a row may join two sessions into one, or its retraction split one),
so the rule re-forms the sessions of the partitions a batch touches (the rows' other GROUP BY values) and emits
the difference: every old session of those partitions retracted (-1), every new one inserted (+1); equal rows
cancel in the view's emit. This is seed 002's session example: a late row bridging two sessions retracts both
and inserts the merged one.

State: the input rows of each partition with their multiplicity (incremental/partition_rows.py), read back for
the touched partitions only; with the view's state_ttl, a partition untouched for that long leaves the view with
its sessions. Sessions are formed by Spark's own `session_window()` and aggregated by Spark's own
functions over those rows, so every aggregate Spark has works here. Batches run in Spark (the driver rules do
not form sessions).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.lateness import on_time
from mvengine.incremental.partition_rows import batch_time, copies, partition_rows
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate
from mvengine.plan.nodes import Field, SessionAggregate

NODE = SessionAggregate  # the plan node type this module maintains (plan/operators/session.py)


def delta(node: SessionAggregate, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    window = node.window
    fields = window.child.fields
    columns = [f"_c{i}" for i in range(len(fields))]
    arriving = on_time(window, child_delta(window.child, batch), batch)
    changed = batch.keep_small(consolidate(arriving.toDF(*columns, WEIGHT, MTIME), columns))
    partition = list(node.partition)
    parts = [F.expr(_positional(g, fields).sql("spark")) for g in partition]

    def prior() -> DataFrame | None:
        before = batch.as_before()
        return None if before is None else child_delta(window.child, before).toDF(*columns, WEIGHT, MTIME)

    old, new, expired = partition_rows(batch, f"n{batch.node_id(node)}_rows", changed, columns, parts, prior)
    mtime = batch_time(changed)
    before = _sessions(node, old, fields, partition)
    after = _sessions(node, new, fields, partition)
    emitted = (
        after.withColumn(WEIGHT, F.lit(1).cast("long"))
        .unionAll(before.withColumn(WEIGHT, F.lit(-1).cast("long")))
        .withColumn(MTIME, mtime)
    )
    if expired is None:
        return emitted
    # (the partitions the view's state_ttl expires: their sessions leave the view)
    assert batch.clock is not None
    leaving = _sessions(node, expired, fields, partition).withColumns(
        {WEIGHT: F.lit(-1).cast("long"), MTIME: F.timestamp_micros(F.lit(batch.clock.now))}
    )
    return emitted.unionAll(leaving)


def _sessions(
    node: SessionAggregate, rows: DataFrame, fields: tuple[Field, ...], partition: list[exp.Expression]
) -> DataFrame:
    """The view's aggregate rows over `rows` (input rows with their multiplicity `_n`): one per session."""
    window = node.window
    each = copies(rows)
    time = F.col(f"_c{_position(window.time, fields)}")
    session = F.session_window(time, f"{window.spec.size} microseconds")
    groups = [F.expr(_positional(g, fields).sql("spark")).alias(f"_p{i}") for i, g in enumerate(partition)]
    aggregates = [
        F.expr(_positional(a, fields).sql("spark")).alias(f"_a{j}") for j, a in enumerate(node.aggregates)
    ]
    grouped = (
        each.groupBy(*groups, session.alias("_s")).agg(*aggregates)
        if aggregates
        else each.groupBy(*groups, session.alias("_s")).count().drop("count")
    )
    out, p = [], 0
    for g in node.groups:
        bound = _is_bound(g, window.fields)
        if bound:
            out.append(F.col(f"_s.{bound.name}"))
        else:
            out.append(F.col(f"_p{p}"))
            p += 1
    out += [F.col(f"_a{j}") for j in range(len(node.aggregates))]
    return grouped.select(*out).toDF(*[f.name for f in node.fields])


def _is_bound(e: exp.Expression, window_fields: tuple[Field, ...]) -> Field | None:
    """The session's start or end field that `e` refers to (None for another expression)."""
    bounds = [f for f in window_fields if f.window_bound in ("session start", "session end")]
    if isinstance(e, exp.Column):
        return next((f for f in bounds if f.name == e.name and f.qualifier == (e.table or None)), None)
    return None


def _position(column: exp.Column, fields: tuple[Field, ...]) -> int:
    return next(
        i for i, f in enumerate(fields) if f.name == column.name and f.qualifier == (column.table or None)
    )


def _positional(e: exp.Expression, fields: tuple[Field, ...]) -> exp.Expression:
    """`e` over the positional columns `_c<i>` of the window's input."""

    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return exp.column(f"_c{_position(node, fields)}", quoted=True)
        return node

    return e.copy().transform(rename)
