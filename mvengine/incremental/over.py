"""Over (plan/operators/over.py): window functions over partitions. A row's window values depend on the other
rows of its partition, but only on them: the rule evaluates the windows over the touched partitions' rows
before and after the batch (incremental/partition_rows.py keeps them) with Spark's own window functions, and
emits the difference — the rows whose values stayed cancel out, so a change re-emits only the rows whose frame
holds it (at most n+1 for `ROWS BETWEEN n PRECEDING AND CURRENT ROW`). With the view's state_ttl, a partition
untouched for that long leaves the view: its rows are retracted with their window values (in Spark only).
On the driver (`driver_delta`), the same rule over the same state, the windows evaluated in numpy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverState, consolidated, data, match, normalized, zset
from mvengine.incremental.driver_expressions import NotOnDriver, cast, evaluate_all
from mvengine.incremental.lateness import on_time, on_time_on_driver, time_position
from mvengine.incremental.over_carry import CARRY_ROW, INPUT_ROW, ROW, Carry, carry_of
from mvengine.incremental.partition_rows import (
    COUNT,
    NEEDED_UNTIL,
    batch_time,
    copies,
    distinct_values,
    expanded,
    partition_ids,
    partition_rows,
    partition_rows_on_driver,
)
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, null_safe_equal, quote
from mvengine.plan.nodes import Field, Node, Over
from mvengine.plan.operators.over import rows_back, running

NODE = Over  # the plan node type this module maintains (plan/operators/over.py)


def delta(node: Over, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    names = [f.name for f in node.child.fields]
    arriving = child_delta(node.child, batch)
    if batch.state.allows_lateness:
        arriving = on_time(node, arriving, batch)
    changed = batch.keep_small(consolidate(arriving, names))
    parts = [F.expr(local(p)) for p in node.partition]
    if batch.state.allows_lateness and running(node):
        return _carried_delta(node, batch, changed, names, parts)

    def prior() -> DataFrame | None:
        before = batch.as_before()
        return None if before is None else child_delta(node.child, before)

    back = rows_back(node) if batch.state.allows_lateness else None
    ends = None if back is None else _followed(node, parts, back)
    name = f"n{batch.node_id(node)}_rows"
    old, new, expired, _ = partition_rows(batch, name, changed, names, parts, prior, ends)
    outputs = [f.name for f in node.fields]

    def evaluated(rows: DataFrame, sign: int) -> DataFrame:
        return _evaluated(node, rows, names).select(
            *[quote(c) for c in outputs], F.lit(sign).cast("long").alias(WEIGHT)
        )

    emitted = evaluated(new, 1).unionByName(evaluated(old, -1)).withColumn(MTIME, batch_time(changed))
    if expired is not None:  # (the partitions the view's state_ttl expires: their rows leave the view)
        assert batch.clock is not None
        leaving = evaluated(expired, -1).withColumn(MTIME, F.timestamp_micros(F.lit(batch.clock.now)))
        emitted = emitted.unionByName(leaving)
    return consolidate(emitted, outputs)


def _carried_delta(
    node: Over, batch: Batch, changed: DataFrame, names: list[str], parts: list[Column]
) -> DataFrame:
    """`delta` for running windows under a lateness (incremental/over_carry.py): the state rows behind the late
    cutoff, of any partition, are folded into their carry rows; the touched partitions' other rows are
    evaluated after those, before and after the batch."""
    carry = carry_of(node)
    i = batch.node_id(node)
    time = F.unix_micros(F.col(quote(names[time_position(node)])).cast("timestamp"))
    fold, swept = None, None
    if batch.late_before is not None and _sweeps(
        batch.state, f"n{i}_rows", names[time_position(node)], batch
    ):
        fold = F.coalesce(time < F.lit(batch.late_before), F.lit(True))
        template = changed.select(*[quote(c) for c in names], F.col(WEIGHT).alias(COUNT)).limit(0)
        swept = batch.state.read(f"n{i}_rows", template).where(time < F.lit(batch.late_before))
    old, new, _, folded = partition_rows(
        batch, f"n{i}_rows", changed, names, parts, lambda: None, fold=fold, swept=swept
    )
    keys = list(carry.parts)
    touched = changed.select(*[p.alias(k) for p, k in zip(parts, keys)])
    if folded is not None:
        touched = touched.unionByName(folded.select(*[p.alias(k) for p, k in zip(parts, keys)]))
    touched = touched.distinct()
    template = touched.select(
        *keys, *[F.lit(None).cast(f.type.sql("spark")).alias(f.name) for f in carry.carries]
    ).limit(0)
    held = batch.state.read_for(f"n{i}_carry", template, touched, keys).select(
        *keys, *[f.name for f in carry.carries]
    )
    child = [(c, changed.schema[c].dataType) for c in names]
    rows = [*(quote(c) for c in names), *keys, ROW, *(f.name for f in carry.carries), COUNT]

    def as_rows(partition_rows: DataFrame) -> DataFrame:
        return partition_rows.select(
            *[quote(c) for c in names],
            *[p.alias(k) for p, k in zip(parts, keys)],
            F.lit(INPUT_ROW).alias(ROW),
            *[F.lit(None).cast(f.type.sql("spark")).alias(f.name) for f in carry.carries],
            COUNT,
        )

    def carry_rows(carried: DataFrame) -> DataFrame:
        return carried.select(
            *[F.lit(None).cast(t).alias(c) for c, t in child],
            *keys,
            F.lit(CARRY_ROW).alias(ROW),
            *[f.name for f in carry.carries],
            F.lit(1).cast("long").alias(COUNT),
        ).select(*rows)

    def evaluated(partition_rows: DataFrame) -> DataFrame:
        values = [F.expr(local(w)).alias(v.name) for w, v in zip(carry.node.windows, carry.values)]
        return copies(partition_rows).select(*rows, *values)

    if folded is not None and not folded.isEmpty():
        folding = folded.select(*[p.alias(k) for p, k in zip(parts, keys)]).distinct()
        h, f = held.alias("h"), folding.alias("f")
        before = carry_rows(held.join(folding, null_safe_equal(h, f, keys), "left_semi"))
        last = (
            evaluated(before.unionByName(as_rows(folded)))
            .groupBy(*keys)
            .agg(
                F.max_by(
                    F.struct(*[F.expr(local(e)).alias(c.name) for e, c in zip(carry.folded, carry.carries)]),
                    F.col(carry.position.name),
                ).alias("_last")
            )
            .where(F.col("_last").isNotNull())  # (a global aggregate: one row, also over none)
            .select(*keys, *[F.col(f"_last.{c.name}").alias(c.name) for c in carry.carries])
        )
        last = batch.keep_small(last)
        batch.state.stage(f"n{i}_carry", last, keys)
        h, n = held.alias("h"), last.alias("n")
        held = held.join(last, null_safe_equal(h, n, keys), "left_anti").unionByName(last)
    carried = carry_rows(batch.keep_small(held))  # (read once: the rows before and after both start from it)
    outputs = [f.name for f in node.fields]

    def emitted(partition_rows: DataFrame, sign: int) -> DataFrame:
        values = evaluated(carried.unionByName(as_rows(partition_rows))).where(F.col(ROW) == INPUT_ROW)
        return values.select(
            *[quote(c) for c in names],
            *[F.expr(local(o)).alias(f.name) for o, f in zip(carry.outputs, node.fields[len(names) :])],
            F.lit(sign).cast("long").alias(WEIGHT),
        )

    both = emitted(new, 1).unionByName(emitted(old, -1)).withColumn(MTIME, batch_time(changed))
    return consolidate(both, outputs)


def _followed(node: Over, parts: list[Column], back: int) -> Callable[[DataFrame], DataFrame]:
    """A function giving the rows of the input (named columns, and any others) the event time of the row
    `back` rows after each in its partition (NEEDED_UNTIL; NULL when there is none yet), as `_ends` does."""
    time = F.unix_micros(F.col(quote(node.child.fields[time_position(node)].name)).cast("timestamp"))

    def followed(rows: DataFrame) -> DataFrame:
        return rows.withColumn(
            NEEDED_UNTIL, F.lead(time, back).over(Window.partitionBy(*parts).orderBy(time))
        )

    return followed


def _evaluated(node: Over, rows: DataFrame, names: list[str]) -> DataFrame:
    """Every copy of the rows, with its window values."""
    windows = [F.expr(local(w)).alias(f.name) for w, f in zip(node.windows, node.fields[len(names) :])]
    return copies(rows).select(*[quote(c) for c in names], *windows)


def local(e: exp.Expression) -> str:
    """`e` as Spark SQL over the rule's unqualified columns."""
    return (
        e.copy()
        .transform(lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
        .sql("spark")
    )


# -- on the driver -----------------------------------------------------------------------------------------------
#
# The same rule over the same state (incremental/partition_rows.py): each window is evaluated over the touched
# partitions' rows sorted by partition and ORDER BY (numpy), as Spark's window frames evaluate it, so that
# floating-point sums add in Spark's order: a growing frame (from UNBOUNDED PRECEDING) accumulates row by row,
# any other adds its rows again from its first. driver_support.over_unsupported says which functions and
# frames, statically.


def driver_delta(
    node: Over, batch: DriverBatch, child_delta: Callable[[Node, DriverBatch], pa.Table]
) -> pa.Table:
    fields = list(node.child.fields)
    columns = [f.name for f in fields]
    if len(set(columns)) < len(columns):
        raise NotOnDriver("window functions over an input of two columns of one name")
    arriving = child_delta(node.child, batch)
    if batch.state.allows_lateness:
        arriving = on_time_on_driver(node, arriving, batch)
    changed = consolidated(arriving)
    if batch.state.allows_lateness and running(node):
        emitted = _carried_on_driver(node, batch, changed, fields, columns)
    else:
        name = f"n{batch.node_id(node)}_rows"
        back = rows_back(node) if batch.state.allows_lateness else None
        ends = None if back is None else partial(_ends, node, fields, back)
        old, new, _ = partition_rows_on_driver(batch, name, changed, columns, node.partition, fields, ends)
        emitted = pa.concat_tables([_windowed(node, new, fields, 1), _windowed(node, old, fields, -1)])
    latest = pc.max(changed.column(MTIME))
    return consolidated(
        emitted.set_column(emitted.num_columns - 1, MTIME, pa.repeat(latest, emitted.num_rows))
    )


def _carried_on_driver(
    node: Over, batch: DriverBatch, changed: pa.Table, fields: list[Field], columns: list[str]
) -> pa.Table:
    """`_carried_delta` on the driver: what the touched partitions emit, at no time."""
    carry = carry_of(node)
    i = batch.node_id(node)
    t = time_position(node)
    cutoff = batch.late_before

    def fold(rows: pa.Table) -> pa.Array:
        assert cutoff is not None
        return pc.fill_null(pc.less(pc.cast(rows.column(t), pa.int64()), cutoff), True)

    name = f"n{i}_rows"
    sweep = cutoff is not None and _sweeps(batch.state, name, columns[t], batch)
    old, new, folded = partition_rows_on_driver(
        batch,
        name,
        changed,
        columns,
        node.partition,
        fields,
        fold=fold if sweep else None,
        swept=_behind(batch, name, columns[t], cutoff) if sweep and cutoff is not None else None,
    )
    keys = list(carry.parts)
    parts = evaluate_all(node.partition, folded, fields)
    touched = [
        pa.chunked_array([*c.chunks, *p.chunks], c.type)
        for c, p in zip(evaluate_all(node.partition, changed, fields), parts)
    ]
    held = _held_carries(batch, f"n{i}_carry", carry, touched)
    if folded.num_rows:
        before = held
        if keys:
            before = held.take(
                match([held.column(k) for k in keys], distinct_values(parts), "left semi", null_safe=True)[0]
            )
        last = _at_last(carry, _carried_values(carry, before, folded, parts))
        schema = batch.state.schema(f"n{i}_carry")
        if schema is not None:
            last = pa.table([cast(last.column(n), schema.field(n).type) for n in schema.names], schema=schema)
        batch.state.stage(f"n{i}_carry", last, keys)
        if keys:
            kept, _ = match(
                [held.column(k) for k in keys], [last.column(k) for k in keys], "left anti", null_safe=True
            )
            held = pa.concat_tables([held.take(kept), last.cast(held.schema)])
        else:
            held = last.cast(held.schema)
    n = len(columns)

    def emitted(rows: pa.Table, sign: int) -> pa.Table:
        values = _carried_values(carry, held, rows, evaluate_all(node.partition, rows, fields))
        values = values.filter(pc.equal(values.column(ROW), INPUT_ROW))
        outputs = evaluate_all(carry.outputs, values, [*carry.fields, *carry.values])
        weight = pa.repeat(pa.scalar(sign, pa.int64()), values.num_rows)
        return zset(
            [*values.columns[:n], *outputs], weight, pa.nulls(values.num_rows, pa.timestamp("us", tz="UTC"))
        )

    return pa.concat_tables([emitted(new, 1), emitted(old, -1)])


_YEAR_ONE = -62_135_596_800_000_000  # (µs: the least time a Python datetime holds)


def _sweeps(state: DriverState, name: str, time: str, batch: Batch | DriverBatch) -> bool:
    """Whether the batch folds the rows behind its late cutoff, of every partition, into their carries: once
    the files of state table `name` wholly behind it (by `time`, their statistics) hold policy.fold_sweep_rows
    rows. A batch between sweeps folds none and costs what the windows without a carry cost; the state holds
    the rows within the lateness and about that many more. (By the table's version before the batch: a batch
    replayed decides as its first attempt did.)"""
    cutoff = batch.late_before
    return cutoff is not None and state.rows_before(name, time, cutoff) >= state.policy.fold_sweep_rows


def _behind(batch: DriverBatch, name: str, time: str, cutoff: int) -> pa.Table | None:
    """The rows of state table `name` whose `time` is before `cutoff` (µs), in any partition: read by the files'
    statistics, which a table clustered by its key (its timestamps first) keeps narrow."""
    schema = batch.state.schema(name)
    if schema is None or not pa.types.is_timestamp(schema.field(time).type):
        return None
    kind = schema.field(time).type
    low, high = (pa.scalar(v, pa.int64()).cast(kind) for v in (_YEAR_ONE, cutoff - 1))
    found = batch.state.read_within(name, (time, low, high))
    if found is None:
        return None
    most = batch.state.policy.driver_read_rows
    if found.num_rows > most:
        raise NotOnDriver(f"more than {most} rows of state {name} are behind the late cutoff")
    return found.filter(pc.fill_null(pc.less(pc.cast(found.column(time), pa.int64()), cutoff), False))


def _held_carries(batch: DriverBatch, name: str, carry: Carry, touched: list[pa.ChunkedArray]) -> pa.Table:
    """The carry rows (`carry.parts`, then the carries) of the partitions whose values are `touched`."""
    keys = list(carry.parts)
    schema = batch.state.schema(name)
    if schema is None:
        types = [*(p.type for p in touched), *carry.arrow_types()]
        return pa.table([pa.array([], t) for t in types], names=[*keys, *(f.name for f in carry.carries)])
    if not keys:
        found = batch.state.read_all(name)
    else:
        values = [cast(v, schema.field(k).type) for k, v in zip(keys, distinct_values(touched))]
        found = batch.state.lookup(name, pa.table(values, names=keys), keys)
    assert found is not None  # (its schema was found)
    return found.select(schema.names)


def _carried_values(carry: Carry, held: pa.Table, rows: pa.Table, parts: list[pa.ChunkedArray]) -> pa.Table:
    """The carry rows `held` and the input's `rows` (a Z-set weighted by multiplicity, the partitions' values
    `parts`) as the rows of `carry.fields`, a row per copy, with the evaluated windows (`carry.values`)."""
    n, m = rows.num_rows, held.num_rows
    inputs = [
        *data(rows),
        *parts,
        pa.repeat(pa.scalar(INPUT_ROW, pa.int32()), n),
        *(pa.nulls(n, t) for t in carry.arrow_types()),
    ]
    carried = [
        *(pa.nulls(m, c.type) for c in data(rows)),
        *(held.column(k) for k in carry.parts),
        pa.repeat(pa.scalar(CARRY_ROW, pa.int32()), m),
        *(held.column(f.name) for f in carry.carries),
    ]
    names = [f.name for f in carry.fields]
    table = pa.concat_tables(
        [
            pa.table([*inputs, rows.column(WEIGHT)], names=[*names, WEIGHT]),
            pa.table([*carried, pa.repeat(pa.scalar(1, pa.int64()), m)], names=[*names, WEIGHT]),
        ],
        promote_options="permissive",
    )
    fields = list(carry.fields)
    rows = zset(
        table.columns[:-1], table.column(WEIGHT), pa.nulls(table.num_rows, pa.timestamp("us", tz="UTC"))
    )
    values = _windowed(carry.node, rows, fields, 1)
    return values.rename_columns([*names, *(v.name for v in carry.values), WEIGHT, MTIME])


def _at_last(carry: Carry, values: pa.Table) -> pa.Table:
    """The carry rows after the rows of `values` (`_carried_values`): each partition's new carries, as its last
    row (by its position) has them."""
    partition = partition_ids([values.column(k) for k in carry.parts], values.num_rows)
    position = values.column(carry.position.name).to_numpy(zero_copy_only=False)
    order = np.lexsort((position, partition))
    ends = np.r_[partition[order][1:] != partition[order][:-1], True] if len(order) else np.zeros(0, bool)
    last = pa.array(order[ends], pa.int64())
    folded = evaluate_all(carry.folded, values, [*carry.fields, *carry.values])
    return pa.table(
        [*(values.column(k).take(last) for k in carry.parts), *(f.take(last) for f in folded)],
        names=[*carry.parts, *(f.name for f in carry.carries)],
    )


def _ends(node: Over, fields: list[Field], back: int, rows: pa.Table) -> pa.Array:
    """Each row's NEEDED_UNTIL (`rows`: a Z-set of the input's rows): the event time of the row `back` rows after
    it in its partition, by time (NULL first, as Spark sorts ascending); NULL when there is none."""
    n = rows.num_rows
    time = rows.column(time_position(node))
    t = pc.fill_null(pc.cast(time, pa.int64()), -(2**63)).to_numpy() if n else np.zeros(0, np.int64)
    timed = np.asarray(pc.is_valid(time), bool) if n else np.zeros(0, bool)
    partition = partition_ids(evaluate_all(node.partition, rows, fields), n)
    order = np.lexsort((t, partition))
    follower = np.arange(n) + back
    inside = follower < n
    inside[inside] = partition[order][follower[inside]] == partition[order][inside]
    at = order[np.where(inside, follower, 0)] if n else order
    ends = np.zeros(n, np.int64)
    ends[order] = np.where(inside, t[at], 0)
    known = np.zeros(n, bool)
    known[order] = inside & timed[at]
    return pa.array(ends, pa.int64(), mask=~known)


def _windowed(node: Over, rows: pa.Table, fields: list[Field], sign: int) -> pa.Table:
    """Every copy of `rows` (a Z-set weighted by multiplicity) with its window values, as a Z-set of weight
    `sign` (at no time)."""
    rows = expanded(rows)
    n = rows.num_rows
    partition = partition_ids(evaluate_all(node.partition, rows, fields), n)
    values = []
    sorted_by: dict[str, _Sorted] = {}  # (windows of one ORDER BY sort the rows once)
    for window in node.windows:
        order = window.args.get("order")
        by = "" if order is None else order.sql("spark")
        if by not in sorted_by:
            sorted_by[by] = _Sorted.of(window, rows, fields, partition)
        frame = sorted_by[by]
        in_order = _values_in_order(window, frame, rows, fields)
        values.append(in_order.take(pa.array(frame.position, pa.int64())))
    weight = pa.repeat(pa.scalar(sign, pa.int64()), n)
    return zset([*data(rows), *values], weight, pa.nulls(n, pa.timestamp("us", tz="UTC")))


@dataclass
class _Sorted:
    """A window's rows in its order (by partition, then its ORDER BY): per sorted position, where its partition
    and its peers (the rows its ORDER BY does not tell apart) begin and end."""

    order: np.ndarray  # the rows' indices, sorted
    position: np.ndarray  # each row's sorted position
    first: np.ndarray  # per sorted position: its partition's first position, and its last
    last: np.ndarray
    peer_first: np.ndarray  # its peers' first position, and their last
    peer_last: np.ndarray
    peer_starts: np.ndarray  # whether it is the first of its peers

    @classmethod
    def of(cls, window: exp.Window, rows: pa.Table, fields: list[Field], partition: np.ndarray) -> _Sorted:
        ordered = window.args["order"].expressions if window.args.get("order") else []
        keys = evaluate_all([o.this for o in ordered], rows, fields)
        codes = [_sort_codes(k, o) for k, o in zip(keys, ordered)]
        n = len(partition)
        order = np.lexsort((*reversed(codes), partition)) if n else np.zeros(0, np.int64)
        starts = _starts([partition[order]], n)
        peer_starts = _starts([partition[order], *(c[order] for c in codes)], n)
        position = np.empty(n, np.int64)
        position[order] = np.arange(n)
        return cls(order, position, *_spans(starts), *_spans(peer_starts), peer_starts)


def _sort_codes(values: pa.ChunkedArray, ordered: exp.Ordered) -> np.ndarray:
    """Integers that sort as Spark sorts `values` by `ordered` (ASC NULLS FIRST unless said otherwise; NaN
    above every number, -0.0 equal to 0.0), equal where the values are."""
    descending = bool(ordered.args.get("desc"))
    nulls_first = ordered.args.get("nulls_first")
    nulls_first = not descending if nulls_first is None else bool(nulls_first)
    return _codes(values, descending, nulls_first)


def _codes(values: pa.ChunkedArray, descending: bool, nulls_first: bool) -> np.ndarray:
    """Dense ranks of `values` (from 0, in Spark's order of values), reversed when `descending`; NULL below or
    above them all."""
    n = len(values)
    if values.type == pa.null() or not n:
        return np.zeros(n, np.int64)
    values = normalized(values.combine_chunks())
    valid = np.asarray(pc.is_valid(values), bool)
    if pa.types.is_floating(values.type):
        _, ranks = np.unique(
            pc.fill_null(values, pa.scalar(0, values.type)).to_numpy(), return_inverse=True
        )  # (NaN last, as one)
    else:
        ranks = np.asarray(pc.rank(values, "ascending", tiebreaker="dense"), np.int64) - 1
    ranks = ranks.astype(np.int64)
    top = int(ranks.max()) + 1
    if descending:
        ranks = top - 1 - ranks
    return np.where(valid, ranks, -1 if nulls_first else top)


def _starts(sorted_keys: list[np.ndarray], n: int) -> np.ndarray:
    """Per sorted position, whether its keys differ from those of the position before (the first's do)."""
    starts = np.ones(n, bool)
    if n:
        starts[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in sorted_keys])
    return starts


def _spans(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sorted position, the first and the last position of its run (runs begin where `starts`)."""
    n = len(starts)
    at = np.arange(n)
    first = np.maximum.accumulate(np.where(starts, at, 0)) if n else at
    ends = np.r_[starts[1:], True] if n else starts
    last = np.minimum.accumulate(np.where(ends, at, n)[::-1])[::-1] if n else at
    return first, last


def _values_in_order(window: exp.Window, frame: _Sorted, rows: pa.Table, fields: list[Field]) -> pa.Array:
    """The window's value for each sorted position."""
    f = window.this
    n = len(frame.order)
    at = np.arange(n)
    if isinstance(f, exp.RowNumber):
        return pa.array(at - frame.first + 1, pa.int32())
    if isinstance(f, exp.Rank):
        return pa.array(frame.peer_first - frame.first + 1, pa.int32())
    if isinstance(f, exp.DenseRank):
        groups = np.cumsum(frame.peer_starts)
        return pa.array(groups - groups[frame.first] + 1 if n else at, pa.int32())
    argument = _sorted_argument(f, frame, rows, fields)
    if isinstance(f, (exp.Lag, exp.Lead)):
        return _offset_value(f, frame, argument, rows, fields)
    start, end = _frame_bounds(window, frame)
    return _aggregate(f, argument, start, end, frame)


def _sorted_argument(f: exp.Expression, frame: _Sorted, rows: pa.Table, fields: list[Field]) -> pa.Array:
    if isinstance(f.this, exp.Star):  # COUNT(*)
        return pa.repeat(pa.scalar(1, pa.int64()), len(frame.order))
    return evaluate_all([f.this], rows, fields)[0].combine_chunks().take(pa.array(frame.order, pa.int64()))


def _offset_value(
    f: exp.Lag | exp.Lead, frame: _Sorted, argument: pa.Array, rows: pa.Table, fields: list[Field]
) -> pa.Array:
    """LAG and LEAD: the argument `offset` rows before (after) in the partition, else the default."""
    offset = int(f.args["offset"].name) if f.args.get("offset") else 1
    n = len(frame.order)
    source = np.arange(n) + (offset if isinstance(f, exp.Lead) else -offset)
    inside = (source >= frame.first) & (source <= frame.last)
    taken = argument.take(pa.array(np.where(inside, source, 0), pa.int64(), mask=~inside))
    default = f.args.get("default")
    if default is None or isinstance(default, exp.Null):
        return taken
    fallback = evaluate_all([default], rows, fields)[0].combine_chunks()
    fallback = cast(fallback.take(pa.array(frame.order, pa.int64())), argument.type)
    return pc.if_else(pa.array(inside), taken, fallback)


def _frame_bounds(window: exp.Window, frame: _Sorted) -> tuple[np.ndarray, np.ndarray]:
    """Per sorted position, its frame's first and last position (an empty frame ends before it starts). Without
    a frame: the partition, or (with ORDER BY) RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW."""
    spec = window.args.get("spec")
    at = np.arange(len(frame.order))
    if spec is None:
        return frame.first, (frame.peer_last if window.args.get("order") else frame.last)
    rows = str(spec.args.get("kind")).upper() == "ROWS"
    low = _bound(spec.args.get("start"), spec.args.get("start_side"))
    high = _bound(spec.args.get("end") or "CURRENT ROW", spec.args.get("end_side"))
    if rows:
        start = frame.first if low is None else np.maximum(at + low, frame.first)
        end = frame.last if high is None else np.minimum(at + high, frame.last)
    else:  # (RANGE: of UNBOUNDED and CURRENT ROW alone, the current row's peers)
        start = frame.first if low is None else frame.peer_first
        end = frame.last if high is None else frame.peer_last
    return start, end


def _bound(bound: object, side: object) -> int | None:
    """A frame bound as an offset from the current row (None: unbounded)."""
    if isinstance(bound, str) and bound.upper() == "UNBOUNDED":
        return None
    if isinstance(bound, str) and bound.upper() == "CURRENT ROW":
        return 0
    assert isinstance(bound, exp.Literal)  # (driver_support.over_unsupported: an integer)
    return int(bound.name) * (-1 if str(side).upper() == "PRECEDING" else 1)


def _aggregate(
    f: exp.Expression, argument: pa.Array, start: np.ndarray, end: np.ndarray, frame: _Sorted
) -> pa.Array:
    """COUNT, SUM, AVG, MIN or MAX of the sorted `argument` over each position's frame [start, end]."""
    valid = np.asarray(pc.is_valid(argument), np.int64)
    counts = _prefix_sums(valid, start, end)
    if isinstance(f, exp.Count):
        return pa.array(counts, pa.int64())
    empty = counts == 0
    if isinstance(f, (exp.Min, exp.Max)):
        codes = _codes(pa.chunked_array([argument]), False, not isinstance(f, exp.Min))
        chosen = _range_extreme(codes, start, end, np.minimum if isinstance(f, exp.Min) else np.maximum)
        ranked = np.empty(int(codes.max()) + 2 if len(codes) else 0, np.int64)
        ranked[codes + 1] = np.arange(len(codes))  # (a row of each code; NULL's is -1 or the top)
        picked = ranked[chosen + 1] if len(codes) else chosen
        return argument.take(pa.array(np.where(empty, 0, picked), pa.int64(), mask=empty))
    integers = pa.types.is_integer(argument.type)
    if not (integers or pa.types.is_floating(argument.type)):
        raise NotOnDriver(f"a window's sum of {argument.type}")
    filled = pc.fill_null(argument, 0).to_numpy(zero_copy_only=False)
    if integers and _fits(filled, 2**63 if isinstance(f, exp.Sum) else 2**53):
        total = _prefix_sums(filled.astype(np.int64), start, end)  # (exact: an AVG's double sum is too)
        if isinstance(f, exp.Sum):
            return pa.array(total, pa.int64(), mask=empty)
        return pa.array(total / np.where(empty, 1, counts), pa.float64(), mask=empty)
    if integers and isinstance(f, exp.Sum):
        raise NotOnDriver("a SUM beyond the range of BIGINT")  # (Spark's error, which Spark gives)
    total = _float_sums(filled.astype(np.float64) + 0.0, start, end, frame)
    if isinstance(f, exp.Sum):
        return pa.array(total, pa.float64(), mask=empty)
    return pa.array(total / np.where(empty, 1, counts), pa.float64(), mask=empty)


def _fits(values: np.ndarray, bound: int) -> bool:
    """Whether every partial sum of `values` stays below `bound` in magnitude."""
    return not len(values) or int(np.abs(values.astype(np.float64)).max()) * len(values) < bound


def _prefix_sums(values: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Exact sums of integers over [start, end] (0 where the frame is empty)."""
    prefix = np.r_[0, np.cumsum(values)]
    return np.where(end >= start, prefix[np.maximum(end + 1, 0)] - prefix[np.minimum(start, len(values))], 0)


def _float_sums(values: np.ndarray, start: np.ndarray, end: np.ndarray, frame: _Sorted) -> np.ndarray:
    """Sums of doubles over [start, end], added in Spark's order: from the frame's first row on. A long frame
    from its partition's first row is the running sum at its last row (Spark's growing frame accumulates row
    by row, which gives the same sums); every other is added up again, a row at a time for all frames at once.
    NULLs are 0.0 here, which adds nothing to a sum that starts at 0.0."""
    n = len(values)
    growing = (start == frame.first) & (end - start >= _SHORT_FRAME)
    sums = np.zeros(n)
    if growing.any():
        running = np.zeros(n)
        with np.errstate(invalid="ignore"):
            for a in np.unique(frame.first[growing]):
                b = frame.last[a] + 1
                running[a:b] = np.cumsum(values[a:b])
        sums = np.where(growing, running[np.clip(end, 0, n - 1)], sums)
    summed = ~growing & (end >= start)
    if summed.any():
        width = int((end - start)[summed].max()) + 1
        if width * n > 50_000_000:
            raise NotOnDriver(f"window frames of {width} rows over {n} rows")
        total = np.zeros(n)
        with np.errstate(invalid="ignore"):  # (inf + -inf is NaN, as in Spark)
            for k in range(width):
                at = start + k
                total = total + np.where(at <= end, values[np.clip(at, 0, n - 1)], 0.0)
        sums = np.where(summed, total, sums)
    return sums


_SHORT_FRAME = 64  # (rows: a frame this long or shorter is added up again, whatever its start)


def _range_extreme(codes: np.ndarray, start: np.ndarray, end: np.ndarray, pick: np.ufunc) -> np.ndarray:
    """The least (`np.minimum`) or greatest code over each [start, end] (a sparse table: log n levels of the
    extremes of 2^k rows); where a frame is empty, anything."""
    n = len(codes)
    if not n:
        return codes
    levels = [codes]
    while 2 ** len(levels) <= n:
        half = 2 ** (len(levels) - 1)
        below = levels[-1]
        levels.append(pick(below[:-half], below[half:]))
    length = np.maximum(end - start + 1, 1)
    k = np.floor(np.log2(length)).astype(np.int64)
    found = np.empty(n, codes.dtype)
    for level in np.unique(k):
        rows = np.flatnonzero(k == level)
        table = levels[level]
        a = np.clip(start[rows], 0, len(table) - 1)
        b = np.clip(end[rows] - 2**level + 1, 0, len(table) - 1)
        found[rows] = pick(table[a], table[b])
    return found
