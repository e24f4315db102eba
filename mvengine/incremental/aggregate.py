"""GROUP BY aggregates (seed 003): per-group accumulators in state, and a change only for groups whose output
changed — `-old +new` for an update, `+new` for a group's first row, `-old` when its row count reaches zero.

State table `n<i>_acc`: the group columns, `_n` (rows in the group), and each aggregate's accumulators
(incremental/accumulators.py: one class per aggregate, its math in its docstring); the values of MIN/MAX over an
input that deletes, and of DISTINCT aggregates, are counted in a multiset table `n<i>_ms<j>` (group, value,
count). An aggregate without GROUP BY has one row, which exists even when its input is empty (COUNT = 0,
SUM = NULL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mvengine.incremental import exact_sum
from mvengine.incremental.accumulators import COUNT, Accumulator, Multiset, accumulator
from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import (
    DriverBatch,
    DriverChildDelta,
    align,
    concat,
    group_by,
    match,
    normalized,
    zset,
)
from mvengine.incremental.driver_expressions import NotOnDriver, cast, evaluate
from mvengine.incremental.zset import MTIME, WEIGHT, null_safe_equal, quote
from mvengine.plan.analysis import is_append_only
from mvengine.plan.nodes import Aggregate
from mvengine.plan.types import type_name

NODE = Aggregate  # the plan node type this module maintains (plan/operators/aggregate.py)

DELETE = "_delete"


def _describe(node: Aggregate) -> tuple[list[Accumulator], list[str]]:
    """The accumulators of the node's aggregates, and the distinct arguments that need a multiset."""
    multisets: list[str] = []
    append_only = is_append_only(node.child)
    aggs = [
        accumulator(i, call, type_name(f.type), append_only, multisets)
        for i, (call, f) in enumerate(zip(node.aggregates, node.fields[len(node.groups) :]))
    ]
    return aggs, multisets


def delta(node: Aggregate, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    nid = batch.node_id(node)
    groups = [f.name for f in node.fields[: len(node.groups)]]
    aggs, multisets = _describe(node)
    child = child_delta(node.child, batch)
    rows = child.select(
        *[F.expr(g.sql("spark")).alias(name) for g, name in zip(node.groups, groups)],
        *[F.expr(arg).alias(f"_x{j}") for j, arg in enumerate(_arguments(aggs))],
        F.col(WEIGHT),
        F.col(MTIME),
    )
    if multisets:  # read again by each multiset
        rows = batch.keep_small(rows)
    arg_column = {arg: f"_x{j}" for j, arg in enumerate(_arguments(aggs))}

    # 1. What this batch adds to each affected group's accumulators.
    w = F.col(WEIGHT)
    partial_columns = [F.sum(w).alias(COUNT), F.max(MTIME).alias(MTIME)]
    for a in aggs:
        x = F.col(arg_column[a.argument]) if a.argument is not None else F.lit(1)  # COUNT(*): every row
        partial_columns.extend(a.partial(x, w))
    grouped = rows.groupBy(*[quote(g) for g in groups]) if groups else rows.groupBy()
    partial = grouped.agg(*partial_columns)
    exact = [(a, column, square) for a in aggs for column, square in a.digit_columns()]
    if exact:
        partial = _with_exact_sums(rows, partial, groups, exact, arg_column)
    if multisets:
        partial = batch.keep_small(partial)

    # 2. The accumulators before the batch, for the affected groups only.
    acc_name = f"n{nid}_acc"
    template = _acc_template(partial, groups, aggs)
    old = batch.state.read_candidates(acc_name, template, partial, groups).alias("o")
    d = partial.alias("d")
    joined = d.join(old, null_safe_equal(d, old, groups), "left")  # every affected group has a row in d

    def o(c: str) -> Column:
        return F.col(f"o.{quote(c)}")

    def dd(c: str) -> Column:
        return F.col(f"d.{quote(c)}")

    new_columns = [F.coalesce(dd(g), o(g)).alias(g) for g in groups]
    new_columns.append((F.coalesce(o(COUNT), F.lit(0)) + F.coalesce(dd(COUNT), F.lit(0))).alias(COUNT))
    old_columns = [F.coalesce(dd(g), o(g)).alias(g) for g in groups] + [o(COUNT).alias(COUNT)]
    for a in aggs:
        new_columns.extend(a.merged(o, dd))
        old_columns.extend(a.old(o))
    old_exists = o(COUNT).isNotNull()  # grouped: rows are deleted at zero; global: the row always exists
    joined = joined.select(
        F.struct(*old_columns).alias("old"),
        F.struct(*new_columns).alias("new"),
        old_exists.alias("_old_exists"),
        dd(MTIME).alias(MTIME),
    )
    new = joined.select("new.*", "old", "_old_exists", MTIME)

    # 3. Values held in multisets (MIN/MAX that must survive deletes, DISTINCT aggregates).
    affected = partial.select(*[quote(g) for g in groups])
    for j, argument in enumerate(multisets):
        values = _multiset_values(batch, nid, j, rows, affected, groups, arg_column[argument], aggs)
        v = values.alias("v")
        n = new.alias("n")
        new = n.join(v, null_safe_equal(n, v, groups), "left").select(
            "n.*", *[F.col(f"v.{quote(a.value)}").alias(a.value) for a in aggs if a.multiset == j]
        )
    new = batch.keep_small(new)

    # 4. State: the new accumulators; a group whose count reached zero is deleted (a global one is kept).
    state_columns = template.columns
    deleted = (F.col(COUNT) == 0) if groups else F.lit(False)
    # (A group that came and went within the batch has nothing to delete: delta-rs's MERGE rejects such rows.)
    batch.state.stage(
        acc_name,
        new.where(~deleted | F.col("_old_exists")).select(
            *[quote(c) for c in state_columns], deleted.alias(DELETE)
        ),
        groups,
        DELETE,
    )

    # 5. Output: -old +new for groups whose output changed (both come from the same row: no shuffle).
    outputs = [f.name for f in node.fields]
    results = outputs[len(groups) :]
    old_row = F.struct(
        *[F.col(f"old.{quote(g)}").alias(g) for g in groups],
        *[_result(a, "old").alias(name) for a, name in zip(aggs, results)],
    )
    new_row = F.struct(
        *[F.col(quote(g)).alias(g) for g in groups],
        *[_result(a, None).alias(name) for a, name in zip(aggs, results)],
    )
    # The rows are columns of their own before they are compared and emitted: each use of an expression would
    # otherwise evaluate it again (an exact sum's value, a variance, are not cheap).
    new = new.select(COUNT, "_old_exists", MTIME, old_row.alias("_old_row"), new_row.alias("_new_row"))
    old_row, new_row = F.col("_old_row"), F.col("_new_row")
    new_exists = (F.col(COUNT) > 0) if groups else F.lit(True)
    old_exists = F.col("_old_exists")
    changed = ~(old_exists & new_exists & old_row.eqNullSafe(new_row))
    # _mtime rides inside the exploded struct: beside it, Spark's nested-column pruning through the explode
    # can drop it when a filter (a HAVING) sits above (INTERNAL_ERROR_ATTRIBUTE_NOT_FOUND).
    mtime = F.col(MTIME)
    emitted = F.filter(
        F.array(
            F.struct(
                F.lit(-1).cast("long").alias(WEIGHT),
                old_row.alias("row"),
                mtime.alias(MTIME),
                (old_exists & changed).alias("on"),
            ),
            F.struct(
                F.lit(1).cast("long").alias(WEIGHT),
                new_row.alias("row"),
                mtime.alias(MTIME),
                (new_exists & changed).alias("on"),
            ),
        ),
        lambda e: e["on"],
    )
    return new.select(F.explode(emitted).alias("_e")).select(
        *[F.col("_e.row").getField(c).alias(c) for c in outputs],
        F.col(f"_e.{WEIGHT}").alias(WEIGHT),
        F.col(f"_e.{MTIME}").alias(MTIME),
    )


def _with_exact_sums(
    rows: DataFrame,
    partial: DataFrame,
    groups: list[str],
    exact: list[tuple[Accumulator, str, bool]],
    arg_column: dict[str, str],
) -> DataFrame:
    """The partial with, per group, the batch's exact sums (maps of digits, incremental/exact_sum.py) for each
    (accumulator, state column, of squares) of `exact`: every row's digits times its weight, summed per slot."""
    frame, tagged = rows, []
    for i, (a, _column, square) in enumerate(exact):
        assert a.argument is not None  # sums take an argument
        frame = exact_sum.with_digits(frame, arg_column[a.argument], f"_dg{i}", square=square)
        tagged.append(F.transform(F.col(f"_dg{i}"), _tagged(i)))
    keys = [quote(g) for g in groups]
    digits = frame.select(*keys, F.explode(F.concat(*tagged)).alias("_e")).select(
        *keys, "_e.tag", "_e.slot", "_e.digit"
    )
    sums = digits.groupBy(*keys, "tag", "slot").agg(F.sum("digit").alias("digit")).where(F.col("digit") != 0)
    maps = sums.groupBy(*keys).agg(
        *[
            F.map_from_entries(F.collect_list(F.when(F.col("tag") == i, F.struct("slot", "digit")))).alias(
                column
            )
            for i, (_, column, _) in enumerate(exact)
        ]
    )
    p, m = partial.alias("p"), maps.alias("m")
    on = null_safe_equal(p, m, groups) if groups else F.lit(True)
    return p.join(m, on, "left").select("p.*", *[F.col(f"m.{quote(column)}") for _, column, _ in exact])


def _tagged(tag: int) -> Callable[[Column], Column]:
    """A digit (slot, digit) as (tag, slot, digit times the row's weight). A function of one parameter: Spark's
    transform() takes a lambda of two as (element, position)."""
    return lambda e: F.struct(
        F.lit(tag).alias("tag"), e["slot"].alias("slot"), (e["digit"] * F.col(WEIGHT)).alias("digit")
    )


def _of_multiset(aggs: list[Accumulator], j: int) -> list[Multiset]:
    """The accumulators over multiset j (of one distinct argument)."""
    return [a for a in aggs if isinstance(a, Multiset) and a.multiset == j]


def _arguments(aggs: list[Accumulator]) -> list[str]:
    seen: list[str] = []
    for a in aggs:
        if a.argument is not None and a.argument not in seen:
            seen.append(a.argument)
    return seen


def _acc_template(partial: DataFrame, groups: list[str], aggs: list[Accumulator]) -> DataFrame:
    """An empty DataFrame with the columns (and types) of the accumulator table."""
    columns = [F.col(quote(g)) for g in groups] + [F.col(COUNT).cast("long").alias(COUNT)]
    for a in aggs:
        columns.extend(a.columns())
    return partial.select(*columns).limit(0)


def _multiset_values(
    batch: Batch,
    nid: int,
    j: int,
    rows: DataFrame,
    affected_groups: DataFrame,
    groups: list[str],
    x: str,
    aggs: list[Accumulator],
) -> DataFrame:
    """Apply the batch to multiset j (group, value, count) and compute, per affected group, the aggregates
    that read it (MIN, MAX, COUNT DISTINCT, SUM DISTINCT) over the values whose count is positive."""
    name = f"n{nid}_ms{j}"
    keys = [*groups, "_value"]
    counted = (
        rows.groupBy(*[quote(g) for g in groups], F.col(x).alias("_value"))
        .agg(F.sum(WEIGHT).alias(COUNT))
        .where(F.col(COUNT) != 0)
    )
    template = counted.limit(0)
    old = batch.state.read_for(name, template, affected_groups, groups).alias("o")
    d = counted.alias("d")
    merged = d.join(old, null_safe_equal(d, old, keys), "full_outer").select(
        *[F.coalesce(F.col(f"d.{quote(k)}"), F.col(f"o.{quote(k)}")).alias(k) for k in keys],
        (F.coalesce(F.col(f"o.{COUNT}"), F.lit(0)) + F.coalesce(F.col(f"d.{COUNT}"), F.lit(0))).alias(COUNT),
        F.col(f"d.{COUNT}").isNotNull().alias("_touched"),
        F.col(f"o.{COUNT}").isNotNull().alias("_existed"),
    )
    merged = batch.keep_small(merged)
    gone = F.col(COUNT) <= 0
    batch.state.stage(
        name,
        merged.where(F.col("_touched") & (~gone | F.col("_existed"))).select(
            *[quote(k) for k in keys], COUNT, gone.alias(DELETE)
        ),
        keys,
        DELETE,
    )
    present = merged.where(F.col(COUNT) > 0)
    value = F.col("_value")
    results = [a.over_values(value, F.col(COUNT)) for a in _of_multiset(aggs, j)]
    per_group = present.groupBy(*[quote(g) for g in groups]).agg(*results)
    # Groups whose values are all gone still need a row (their value is NULL, or 0 for COUNT DISTINCT).
    every = affected_groups.alias("g")
    p = per_group.alias("p")
    return every.join(p, null_safe_equal(every, p, groups), "left").select(
        *[F.col(f"g.{quote(g)}").alias(g) for g in groups],
        *[_or_when_none(a, F.col(f"p.{quote(a.value)}")).alias(a.value) for a in _of_multiset(aggs, j)],
    )


def _or_when_none(a: Multiset, value: Column) -> Column:
    """The value, or the accumulator's value over no values (NULL, or 0 for COUNT DISTINCT)."""
    none = a.when_none()
    return value if none is None else F.coalesce(value, none)


def _result(a: Accumulator, prefix: str | None) -> Column:
    """The aggregate's output from its accumulators (`old.` or current columns)."""
    return a.result(lambda name: F.col(f"{prefix}.{quote(name)}") if prefix else F.col(quote(name)))


# -- on the driver ---------------------------------------------------------------------------------------------
# The same five steps over Arrow tables. The accumulator and multiset tables are the ones the Spark form keeps
# (a view's batches may take either form), so their schema, read from the state, gives the types.


def driver_delta(node: Aggregate, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    nid = batch.node_id(node)
    groups = [f.name for f in node.fields[: len(node.groups)]]
    aggs, multisets = _describe(node)
    child = child_delta(node.child, batch)
    acc_name = f"n{nid}_acc"
    schema = batch.state.schema(acc_name)
    if schema is None:
        raise NotOnDriver(f"state {acc_name} does not exist")
    inputs = node.child.fields
    weight, mtime = child.column(WEIGHT), child.column(MTIME)
    group_values = [
        cast(normalized(evaluate(g, child, inputs)), schema.field(name).type)
        for g, name in zip(node.groups, groups)
    ]
    values: dict[str | None, pa.ChunkedArray] = {  # by argument; COUNT(*) has none
        a.argument: evaluate(a.expression, child, inputs) for a in aggs if a.expression is not None
    }

    # 1. What this batch adds to each affected group's accumulators.
    columns: dict[str, pa.ChunkedArray] = {**dict(zip(groups, group_values)), COUNT: weight, MTIME: mtime}
    sums: list[tuple[Any, ...]] = [
        (COUNT, "sum"),
        (MTIME, "max"),
    ]  # (column, Arrow's aggregate[, its options])
    for a in aggs:
        for name, contribution, how in a.partial_arrow(values.get(a.argument), weight, schema):
            columns[name] = contribution
            sums.append((name, *how) if isinstance(how, tuple) else (name, how))
    rows = pa.table(list(columns.values()), names=list(columns))
    if not groups and rows.num_rows == 0:
        return _no_change(node, schema, aggs, child)
    if any(
        a.ordered for a in aggs
    ):  # in the order the rows arrived in (a stable sort keeps a commit's order)
        rows = rows.take(pc.sort_indices(rows, [(MTIME, "ascending")]))
    grouped = group_by(rows, groups).aggregate(sums)
    partial = pa.table(
        [grouped.column(g) for g in groups] + [grouped.column(f"{s[0]}_{s[1]}") for s in sums],
        names=[*groups, *[s[0] for s in sums]],
    )
    exact = [(a, column, square) for a in aggs for column, square in a.digit_columns()]
    if exact:  # the batch's exact sums, per group: every row's digits times its weight
        group_of = (
            align(group_values, [partial.column(g) for g in groups]).to_numpy(zero_copy_only=False)
            if groups
            else np.zeros(child.num_rows, np.int64)
        )
        weights = weight.to_numpy(zero_copy_only=False)
        for a, column, square in exact:
            at, slot, digit = (exact_sum.square_digits_np if square else exact_sum.digits_np)(
                values[a.argument]
            )
            partial = partial.append_column(
                column,
                exact_sum.maps_np(partial.num_rows, group_of[at].astype(np.int64), slot, digit * weights[at]),
            )

    # 2. The accumulators before the batch, for the affected groups only.
    if groups:
        found = batch.state.lookup(acc_name, partial, groups)
        assert found is not None  # its schema was found
        old = found.take(align([partial.column(g) for g in groups], [found.column(g) for g in groups]))
    else:
        old = batch.state.read_all(acc_name)
    old_exists = pc.is_valid(old.column(COUNT))
    new: dict[str, pa.ChunkedArray] = {g: partial.column(g) for g in groups}
    new[COUNT] = pc.add_checked(pc.fill_null(old.column(COUNT), 0), partial.column(COUNT))
    for a in aggs:
        new.update(a.merged_arrow(old, partial, schema))

    # 3. Values held in multisets (MIN/MAX that must survive deletes, DISTINCT aggregates).
    for j, argument in enumerate(multisets):
        found = _multiset_values_on_driver(
            batch, nid, j, groups, group_values, values[argument], weight, partial, aggs, schema
        )
        new.update(found)

    # 4. State: the new accumulators; a group whose count reached zero is deleted (a global one is kept).
    deleted = pc.equal(new[COUNT], 0) if groups else pa.repeat(pa.scalar(False), len(new[COUNT]))
    if set(schema.names) - set(new):
        raise NotOnDriver(f"state {acc_name} holds columns this rule does not compute")
    accumulators = pa.table([cast(new[f.name], f.type) for f in schema], schema=_nullable(schema))
    keep = pc.or_(pc.invert(deleted), old_exists)
    batch.state.stage(acc_name, accumulators.append_column(DELETE, deleted).filter(keep), groups, DELETE)

    # 5. Output: -old +new for groups whose output changed.
    new_exists = pc.greater(new[COUNT], 0) if groups else pa.repeat(pa.scalar(True), len(new[COUNT]))
    old_values = [_result_on_driver(a, old, schema) for a in aggs]
    new_values = [_result_on_driver(a, accumulators, schema) for a in aggs]
    same = None
    for o, n in zip(old_values, new_values):
        equal = _same(o, n)
        same = equal if same is None else pc.and_(same, equal)
    unchanged = pc.and_(old_exists, new_exists)
    changed = pc.invert(unchanged if same is None else pc.and_(unchanged, same))
    keys = [partial.column(g) for g in groups]
    at = partial.column(MTIME)
    gone = zset([*keys, *old_values], pa.repeat(pa.scalar(-1, pa.int64()), len(at)), at).filter(
        pc.and_(old_exists, changed)
    )
    come = zset([*keys, *new_values], pa.repeat(pa.scalar(1, pa.int64()), len(at)), at).filter(
        pc.and_(new_exists, changed)
    )
    return concat([gone, come])


def _multiset_values_on_driver(
    batch: DriverBatch,
    nid: int,
    j: int,
    groups: list[str],
    group_values: list[pa.ChunkedArray],
    x: pa.ChunkedArray,
    weight: pa.ChunkedArray,
    partial: pa.Table,
    aggs: list[Accumulator],
    acc_schema: pa.Schema,
) -> dict[str, pa.ChunkedArray]:
    """Apply the batch to multiset j and compute, per group of `partial`, the aggregates that read it."""
    name = f"n{nid}_ms{j}"
    schema = batch.state.schema(name)
    if schema is None:
        raise NotOnDriver(f"state {name} does not exist")
    keys = [*groups, "_value"]
    value = cast(normalized(x), schema.field("_value").type)
    counted = pa.table([*group_values, value, weight], names=[*keys, COUNT])
    counted = group_by(counted, keys).aggregate([(COUNT, "sum")])
    counted = pa.table(
        [counted.column(k) for k in keys] + [counted.column(f"{COUNT}_sum")], names=[*keys, COUNT]
    )
    counted = counted.filter(pc.not_equal(counted.column(COUNT), 0))
    old = batch.state.lookup(name, partial, groups) if groups else batch.state.read_all(name)
    assert old is not None  # its schema was found
    old = old.select(keys + [COUNT])
    di, oi = match(
        [counted.column(k) for k in keys], [old.column(k) for k in keys], "full outer", null_safe=True
    )
    d, o = counted.take(di), old.take(oi)
    merged_keys = [pc.if_else(pc.is_valid(di), d.column(k), o.column(k)) for k in keys]
    count = pc.add(pc.fill_null(o.column(COUNT), 0), pc.fill_null(d.column(COUNT), 0))
    touched, existed = pc.is_valid(di), pc.is_valid(oi)
    gone = pc.less_equal(count, 0)
    staged = pa.table([*merged_keys, count, gone], names=[*keys, COUNT, DELETE])
    batch.state.stage(name, staged.filter(pc.and_(touched, pc.or_(pc.invert(gone), existed))), keys, DELETE)

    present = staged.filter(pc.greater(count, 0))
    present = present.append_column(
        "_nan",
        pc.is_nan(present.column("_value"))
        if pa.types.is_floating(value.type)
        else pa.repeat(False, present.num_rows),
    )
    wanted = _of_multiset(aggs, j)
    if groups:
        per_group = group_by(present, groups).aggregate(
            [("_value", a.how) for a in wanted] + [("_nan", "any")]
        )
        found = per_group.take(
            align([partial.column(g) for g in groups], [per_group.column(g) for g in groups])
        )
        results = [found.column(f"_value_{a.how}") for a in wanted]
        nan = pc.fill_null(found.column("_nan_any"), False)
    else:
        results = [_whole(present.column("_value"), a.how) for a in wanted]
        nan = pa.array([pc.any(present.column("_nan")).as_py() or False])
    out = {}
    for a, result in zip(wanted, results):
        if a.how == "count":  # a group without values counts 0
            result = pc.fill_null(result, 0)
        elif a.how == "max" and pa.types.is_floating(result.type):  # NaN is above every number in Spark
            result = pc.if_else(nan, pa.scalar(float("nan"), result.type), result)
        out[a.value] = cast(result, acc_schema.field(a.value).type)
    return out


def _whole(values: pa.ChunkedArray, how: str) -> pa.Array:
    """A global aggregate's value over every present value, as a one-row column (MAX with NaN: see above)."""
    result = {"min": pc.min, "max": pc.max, "count": pc.count, "sum": pc.sum}[how](values)
    return pa.array([result.as_py()], result.type)


def _result_on_driver(a: Accumulator, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
    """The aggregate's output from its accumulators (the columns of `acc`, NULL where the group had none)."""
    return a.result_arrow(acc, schema)


def _same(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    """a <=> b, row by row, with NaN equal to NaN (as Spark compares rows)."""
    equal = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    if pa.types.is_floating(a.type):
        both_null = pc.or_(both_null, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    return pc.or_(equal, both_null)


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


def _no_change(node: Aggregate, schema: pa.Schema, aggs: list[Accumulator], child: pa.Table) -> pa.Table:
    """The empty change of a global aggregate whose input did not change (typed as its output)."""
    empty = schema.empty_table()
    return zset(
        [_result_on_driver(a, empty, schema) for a in aggs],
        pa.array([], pa.int64()),
        child.column(MTIME).slice(0, 0),
    )
