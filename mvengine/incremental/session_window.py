"""GROUP BY a session window: not linear (a row may join two sessions into one, or its retraction split one),
so the rule re-forms the sessions of the partitions a batch touches (the rows' other GROUP BY values) and emits
the difference: every old session of those partitions retracted (-1), every new one inserted (+1); equal rows
cancel in the view's emit. This is seed 002's session example: a late row bridging two sessions retracts both
and inserts the merged one.

State: the input rows of each partition with their multiplicity (incremental/partition_rows.py), of only the
columns the sessions read (plan/operators/session.kept_positions), read back for the touched partitions only;
with the view's state_ttl, a partition untouched for that long leaves the view with its sessions; with its
allowed_lateness, each row also keeps its session's end, and the rows of the sessions the watermark closed leave
state (the sessions stay in the view). In Spark,
sessions are formed by Spark's own `session_window()` and aggregated by Spark's own functions over those rows,
so every aggregate Spark has works there.

On the driver (`driver_delta`), the same rule over the same state: the touched partitions' rows are sorted by
partition and time (numpy), and a session starts where a row's time passes the one before it by more
than the gap (Spark merges a row into a session that ends at or after its time); COUNT, SUM of integers, MIN and
MAX are computed per session (driver_support.session_unsupported says which calls, statically). A view with a
state_ttl runs in Spark.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import (
    DriverBatch,
    aggregated,
    consolidated,
    zset,
)
from mvengine.incremental.driver_expressions import evaluate_all
from mvengine.incremental.lateness import on_time, on_time_on_driver, time_position
from mvengine.incremental.partition_rows import (
    NEEDED_UNTIL,
    batch_time,
    copies,
    expanded,
    partition_ids,
    partition_rows,
    partition_rows_on_driver,
)
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate
from mvengine.plan.functions import aggregate_function, function_name
from mvengine.plan.nodes import Field, Node, SessionAggregate
from mvengine.plan.operators.session import kept_positions, position

NODE = SessionAggregate  # the plan node type this module maintains (plan/operators/session.py)


def delta(node: SessionAggregate, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    window = node.window
    fields = window.child.fields
    every = [f"_c{i}" for i in range(len(fields))]
    columns = [every[i] for i in kept_positions(node)]

    def of_input(changes: DataFrame) -> DataFrame:
        return changes.toDF(*every, WEIGHT, MTIME).select(*columns, WEIGHT, MTIME)

    arriving = on_time(window, child_delta(window.child, batch), batch)
    changed = batch.keep_small(consolidate(of_input(arriving), columns))
    partition = list(node.partition)
    parts = [F.expr(_positional(g, fields).sql("spark")) for g in partition]

    def prior() -> DataFrame | None:
        before = batch.as_before()
        return None if before is None else of_input(child_delta(window.child, before))

    ends = _with_ends(node, parts, fields) if batch.state.allows_lateness else None
    name = f"n{batch.node_id(node)}_rows"
    old, new, expired, _ = partition_rows(batch, name, changed, columns, parts, prior, ends, window.spec.size)
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
    time = F.col(f"_c{position(window.time, fields)}")
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


def _with_ends(
    node: SessionAggregate, parts: list[Column], fields: tuple[Field, ...]
) -> Callable[[DataFrame], DataFrame]:
    """A function giving rows of the window's input (its positional columns, and any others) their session's
    end, µs (NEEDED_UNTIL; NULL without a time): the sessions the driver cuts (`_cut`), by window functions."""
    gap = node.window.spec.size
    time = F.unix_micros(F.col(f"_c{position(node.window.time, fields)}").cast("timestamp"))

    def ended(rows: DataFrame) -> DataFrame:
        by_time = Window.partitionBy(*parts).orderBy(time)
        previous = F.lag(time).over(by_time)
        starts = F.when(previous.isNull() | (time > previous + gap), 1).otherwise(0)
        so_far = by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        numbered = rows.withColumn("_session", F.sum(starts).over(so_far))
        last = F.max(time).over(Window.partitionBy(*parts, F.col("_session")))
        return numbered.withColumn(NEEDED_UNTIL, last + gap).drop("_session")

    return ended


def _is_bound(e: exp.Expression, window_fields: tuple[Field, ...]) -> Field | None:
    """The session's start or end field that `e` refers to (None for another expression)."""
    bounds = [f for f in window_fields if f.window_bound in ("session start", "session end")]
    if isinstance(e, exp.Column):
        return next((f for f in bounds if f.name == e.name and f.qualifier == (e.table or None)), None)
    return None


def _positional(e: exp.Expression, fields: tuple[Field, ...]) -> exp.Expression:
    """`e` over the positional columns `_c<i>` of the window's input."""

    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return exp.column(f"_c{position(node, fields)}", quoted=True)
        return node

    return e.copy().transform(rename)


# -- on the driver -----------------------------------------------------------------------------------------------


def driver_delta(
    node: SessionAggregate, batch: DriverBatch, child_delta: Callable[[Node, DriverBatch], pa.Table]
) -> pa.Table:
    window = node.window
    keep = kept_positions(node)
    fields = [window.child.fields[i] for i in keep]
    arriving = on_time_on_driver(window, child_delta(window.child, batch), batch)
    changed = consolidated(
        zset([arriving.column(i) for i in keep], arriving.column(WEIGHT), arriving.column(MTIME))
    )
    columns = [f"_c{i}" for i in keep]
    name = f"n{batch.node_id(node)}_rows"

    def ends(rows: pa.Table) -> pa.Array:
        """Each row's NEEDED_UNTIL (`rows`: a Z-set of the kept columns; NULL without a time)."""
        at, gap = keep.index(time_position(window)), window.spec.size
        timed = pc.is_valid(rows.column(at)).to_numpy(zero_copy_only=False)
        rows = rows.filter(pa.array(timed))
        t = _micros(rows.column(at))
        session, _, last = _cut(t, partition_ids(evaluate_all(node.partition, rows, fields), len(t)), gap)
        end = np.zeros(len(timed), np.int64)
        end[timed] = t[last][session] + gap
        return pa.array(end, pa.int64(), mask=~timed)

    old, now, _ = partition_rows_on_driver(
        batch,
        name,
        changed,
        columns,
        node.partition,
        fields,
        ends if batch.state.allows_lateness else None,
        window.spec.size,
    )
    emitted = pa.concat_tables(
        [_driver_sessions(node, now, fields, keep, 1), _driver_sessions(node, old, fields, keep, -1)]
    )
    latest = pc.max(changed.column(MTIME))
    return consolidated(
        emitted.set_column(emitted.num_columns - 1, MTIME, pa.repeat(latest, emitted.num_rows))
    )


def _driver_sessions(
    node: SessionAggregate, rows: pa.Table, fields: list[Field], keep: list[int], sign: int
) -> pa.Table:
    """The view's aggregate rows over `rows` (a Z-set of the kept columns, weighted by multiplicity), one per
    session, as a Z-set of weight `sign` (at no time)."""
    window = node.window
    time = rows.column(keep.index(time_position(window)))
    rows = rows.filter(pc.is_valid(time))
    rows = expanded(rows)  # (each copy of a row counts)
    n = rows.num_rows
    time = rows.column(keep.index(time_position(window)))
    t = _micros(time)
    parts = evaluate_all(node.partition, rows, fields)
    session, first, last = _cut(t, partition_ids(parts, n), window.spec.size)
    arguments = pa.table({"_s": pa.array(session)})
    how: dict[str, object] = {}
    for j, call in enumerate(node.aggregates):
        f = aggregate_function(call)
        name = function_name(f)
        if isinstance(f.this, exp.Star):
            values: pa.ChunkedArray | pa.Array = pa.repeat(pa.scalar(1, pa.int64()), n)
            how[f"a{j}"] = "sum"
        else:
            values = evaluate_all([f.this], rows, fields)[0]
            how[f"a{j}"] = ("count", pc.CountOptions("only_valid")) if name == "count" else name
        arguments = arguments.append_column(f"a{j}", values)
    grouped = aggregated(arguments, ["_s"], how)
    by_session = pc.sort_indices(grouped.column("_s"))  # (grouped in the order sessions first appear)
    out: list[pa.ChunkedArray | pa.Array] = []
    p = 0
    for g in node.groups:
        kind = _is_bound(g, window.fields)
        if kind is not None and kind.window_bound == "session start":
            out.append(pa.array(t[first], pa.int64()).cast(time.type))
        elif kind is not None:
            out.append(pa.array(t[last] + window.spec.size, pa.int64()).cast(time.type))
        else:
            out.append(parts[p].take(pa.array(first, pa.int64())))
            p += 1
    out += [grouped.column(f"a{j}").take(by_session) for j in range(len(node.aggregates))]
    weight = pa.repeat(pa.scalar(sign, pa.int64()), len(first))
    return zset(out, weight, pa.nulls(len(first), pa.timestamp("us", tz="UTC")))


def _micros(time: pa.ChunkedArray) -> np.ndarray:
    """Times (none NULL) as µs."""
    return pc.cast(time, pa.int64()).to_numpy() if len(time) else np.zeros(0, np.int64)


def _cut(t: np.ndarray, partition: np.ndarray, gap: int) -> tuple[np.ndarray, ...]:
    """The sessions of rows at times `t` (µs) in partitions `partition` (ids): each row's session, and each
    session's first and last row. A session starts where a row's time passes the one before it in its
    partition by more than the gap."""
    n = len(t)
    order = np.lexsort((t, partition))
    starts = np.ones(n, bool)
    if n:
        t_sorted, p_sorted = t[order], partition[order]
        starts[1:] = (p_sorted[1:] != p_sorted[:-1]) | (t_sorted[1:] > t_sorted[:-1] + gap)
    first = order[np.flatnonzero(starts)]
    last = order[np.r_[np.flatnonzero(starts)[1:] - 1, n - 1]] if n else first
    session = np.empty(n, np.int64)
    session[order] = np.cumsum(starts) - 1
    return session, first, last
