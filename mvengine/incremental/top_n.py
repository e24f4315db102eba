"""TopN (plan/operators/top_n.py): the first N rows of each partition in an order, maintained from a prefix.

State, per partition (its `PARTITION BY` values `_p0, _p1, ...`; one partition without): `n<i>_top`, a prefix of
the partition's rows in the total order — the ORDER BY, then every column ascending, so that ROW_NUMBER is
deterministic — with their partition and multiplicity `_n`; and `n<i>_count`, the partition's row count. A
prefix is *complete* when it holds the whole partition.

A batch, for the partitions its changes touch:
1. merges the changes into the old prefix: a deleted row leaves it; an inserted row joins it when the prefix is
   complete, or when it sorts before the prefix's last row (after it, it is among rows the prefix never held);
2. where the result no longer shows the top N for sure (fewer than N rows left, or for RANK/DENSE_RANK no row
   ranked beyond N), reads the partition again from the input at the batch's version (the input before the batch
   plus its changes) — only possible when the input keeps no state of its own; otherwise the prefix is the whole
   partition;
3. keeps the first N + buffer rows (plan/operators/top_n.buffer_size; ties at rank N are kept whole);
4. emits the old top N of those partitions retracted and the new one inserted: rows that stay as they were
   cancel out, so only rows entering, leaving or moving are emitted.
The driver rule (`driver_delta`) does the same in Python over the touched partitions' rows, for small batches;
a partition to read again from the input sends the batch to Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cmp_to_key, reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StructType
from sqlglot import exp

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverChildDelta, data
from mvengine.incremental.driver_expressions import NotOnDriver, evaluate
from mvengine.incremental.partition_rows import batch_time
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, quote
from mvengine.plan.analysis import is_append_only
from mvengine.plan.nodes import Node, TopN
from mvengine.plan.operators import operator_of
from mvengine.plan.operators.top_n import buffer_size

NODE = TopN  # the plan node type this module maintains (plan/operators/top_n.py)

COUNT = "_n"
TIME = "_ct"  # the row's commit time, kept when the order reads PROCTIME()
DELETE = "_delete"

Row = tuple[Any, ...]  # a row's (or a key's) values, in Python


def delta(node: TopN, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    nid = batch.node_id(node)
    names = [f.name for f in node.child.fields]
    uses_time = any(c.meta.get("proctime") for e in node.expressions() for c in e.find_all(exp.Column))
    columns = names + ([TIME] if uses_time else [])
    parts = _partition_columns(node)
    pcols = [f"_p{i}" for i in range(len(parts))]

    def with_partition(df: DataFrame) -> DataFrame:
        return df.select("*", *parts)

    child = child_delta(node.child, batch)
    if uses_time:
        child = child.select(*names, F.col(MTIME).alias(TIME), WEIGHT, MTIME)
    changed = batch.keep_small(with_partition(consolidate(child, columns)))
    touched = batch.keep_small(changed.select(*pcols).distinct())
    rows_name, counts_name = f"n{nid}_top", f"n{nid}_count"
    row_template = changed.select(*columns, *pcols, F.lit(0).cast("long").alias(COUNT)).limit(0)
    old = batch.state.read(rows_name, row_template)
    old = batch.keep_small(_join(old, touched, pcols, "left_semi")[0])
    count_template = touched.select(*pcols, F.lit(0).cast("long").alias(COUNT)).limit(0)
    old_counts = batch.state.read_for(counts_name, count_template, touched, pcols)

    # Per touched partition: whether the old prefix was complete, and the new row count.
    sizes = old.groupBy(*pcols).agg(F.sum(COUNT).alias("_size"))
    moved = changed.groupBy(*pcols).agg(F.sum(WEIGHT).alias("_moved"))
    info = touched
    for df, how in (
        (old_counts.withColumnRenamed(COUNT, "_old"), "_old"),
        (sizes, "_size"),
        (moved, "_moved"),
    ):
        info = _with_info(info, df, pcols, [how])
    old_count = F.coalesce(F.col("_old"), F.lit(0))
    info = batch.keep_small(
        info.select(
            *pcols,
            F.col("_old").isNotNull().alias("_existed"),
            (old_count == F.coalesce(F.col("_size"), F.lit(0))).alias("_complete"),
            (old_count + F.coalesce(F.col("_moved"), F.lit(0))).alias("_count"),
        )
    )

    # 1. The changes merged into the old prefix.
    joined, o = _join(
        changed.select(*columns, *pcols, WEIGHT), old.select(*columns, *pcols, COUNT), columns, "full"
    )
    merged = joined.select(
        *[
            F.when(F.col(WEIGHT).isNotNull(), F.col(quote(c))).otherwise(o(c)).alias(c)
            for c in columns + pcols
        ],
        o(COUNT).isNotNull().alias("_was"),
        (F.coalesce(o(COUNT), F.lit(0)) + F.coalesce(F.col(WEIGHT), F.lit(0))).alias(COUNT),
    )
    merged = _with_info(merged, info, pcols, ["_complete"])
    order = _total_order(node, changed.schema, columns)
    position = F.row_number().over(Window.partitionBy(*pcols).orderBy(*order))
    merged = merged.select("*", position.alias("_pos"))
    boundary = F.max(F.when(F.col("_was"), F.col("_pos"))).over(Window.partitionBy(*pcols))
    prefix = (
        merged.select("*", boundary.alias("_bound"))
        .where((F.col("_complete") | (F.col("_pos") <= F.col("_bound"))) & (F.col(COUNT) > 0))
        .select(*columns, *pcols, COUNT)
    )
    prefix = batch.keep_small(prefix)

    # 2. Partitions whose prefix no longer shows the top N for sure: read again from the input.
    refillable = _refillable(node.child)
    if refillable:
        unsure = _unsure(node, _ranked(node, prefix, order, pcols), info, pcols)
        if not unsure.isEmpty():
            before = batch.as_before()
            if before is None:
                raise RuntimeError(f"TopN n{nid}: a partition to read again in a batch without a before")
            old_rows = child_delta(node.child, before)
            if uses_time:
                old_rows = old_rows.select(*names, F.col(MTIME).alias(TIME), WEIGHT, MTIME)
            whole = with_partition(
                consolidate(
                    old_rows.select(*columns, WEIGHT, MTIME).unionByName(
                        changed.select(*columns, WEIGHT, MTIME)
                    ),
                    columns,
                )
            )
            whole = _join(whole, unsure, pcols, "left_semi")[0]
            kept = _join(prefix, unsure, pcols, "left_anti")[0]
            prefix = batch.keep_small(
                kept.unionByName(
                    whole.where(F.col(WEIGHT) > 0).select(*columns, *pcols, F.col(WEIGHT).alias(COUNT))
                )
            )

    # 3. The first N + buffer rows of each partition, ties at rank N whole.
    copies = batch.keep_small(_ranked(node, prefix, order, pcols))
    if refillable:
        keep = node.limit + buffer_size(node, is_append_only(node.child))
        trimmed = copies.where((F.col("_rn") <= keep) | (F.col("_rank") <= node.limit))
    else:
        trimmed = copies
    new_state = trimmed.groupBy(*columns, *pcols).agg(F.count(F.lit(1)).cast("long").alias(COUNT))
    gone = _join(old.select(*columns, *pcols), new_state.select(*columns), columns, "left_anti")[0]
    batch.state.stage(
        rows_name,
        new_state.select(*columns, *pcols, COUNT, F.lit(False).alias(DELETE)).unionByName(
            gone.select(*columns, *pcols, F.lit(0).cast("long").alias(COUNT), F.lit(True).alias(DELETE))
        ),
        columns,
        DELETE,
    )
    counted = info.where((F.col("_count") != 0) | F.col("_existed"))
    batch.state.stage(
        counts_name,
        counted.select(*pcols, F.col("_count").alias(COUNT), (F.col("_count") == 0).alias(DELETE)),
        pcols,
        DELETE,
    )

    # 4. The old top N out, the new one in; rows that stay cancel out.
    outputs = names + (["_rank"] if node.ranked else [])
    new_top = copies.where(F.col("_rank") <= node.limit).select(*names, F.col("_rank"))
    old_top = (
        _ranked(node, old, order, pcols).where(F.col("_rank") <= node.limit).select(*names, F.col("_rank"))
    )
    emitted = (
        new_top.select(*outputs, F.lit(1).cast("long").alias(WEIGHT))
        .unionByName(old_top.select(*outputs, F.lit(-1).cast("long").alias(WEIGHT)))
        .withColumn(MTIME, batch_time(changed))
    )
    return consolidate(emitted, outputs)


def _local(e: exp.Expression) -> str:
    """`e` as Spark SQL over the rule's unqualified columns (PROCTIME() is the kept commit time)."""

    def strip(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.meta.get("proctime"):
            return exp.column(TIME, quoted=True)
        if isinstance(n, exp.Column):
            return exp.column(n.name, quoted=True)
        return n

    return e.copy().transform(strip).sql("spark")


def _partition_columns(node: TopN) -> list[Column]:
    if not node.partition:
        return [F.lit(0).alias("_p0")]
    return [F.expr(_local(p)).alias(f"_p{i}") for i, p in enumerate(node.partition)]


def _order_keys(node: TopN) -> list[Column]:
    keys = []
    for o in node.order:
        c = F.expr(_local(o.this))
        first = o.args.get("nulls_first")
        if o.args.get("desc"):
            keys.append(c.desc_nulls_first() if first else c.desc_nulls_last())
        else:
            keys.append(c.asc_nulls_first() if first or first is None else c.asc_nulls_last())
    return keys


def _total_order(node: TopN, schema: StructType, columns: list[str]) -> list[Column]:
    """The ORDER BY, then every column ascending (maps cannot be ordered, and are left out)."""
    return _order_keys(node) + [
        F.col(quote(c)).asc_nulls_first() for c in columns if not isinstance(schema[c].dataType, MapType)
    ]


def _ranked(node: TopN, rows: DataFrame, order: list[Column], pcols: list[str]) -> DataFrame:
    """One row per copy of each row (`_n` of them), with `_rn`, its place in the total order, and `_rank`, the
    value of the node's function."""
    copies = rows.select("*", F.explode(F.sequence(F.lit(1), F.col(COUNT).cast("int"))).alias("_copy"))
    place = F.row_number().over(Window.partitionBy(*pcols).orderBy(*order))
    if node.function == "row_number":
        rank = place
    else:
        function = F.rank() if node.function == "rank" else F.dense_rank()
        rank = function.over(Window.partitionBy(*pcols).orderBy(*_order_keys(node)))
    return copies.select("*", place.alias("_rn"), rank.alias("_rank"))


def _unsure(node: TopN, copies: DataFrame, info: DataFrame, pcols: list[str]) -> DataFrame:
    """The touched partitions, with rows, whose prefix may not hold all of their top N."""
    stats = copies.groupBy(*pcols).agg(F.count(F.lit(1)).alias("_size"), F.max("_rank").alias("_top"))
    joined = _with_info(info.where(F.col("_count") > 0), stats, pcols, ["_size", "_top"])
    size = F.coalesce(F.col("_size"), F.lit(0))
    certain = (size == F.col("_count")) | (
        (size >= node.limit)
        if node.function == "row_number"
        else (F.coalesce(F.col("_top"), F.lit(0)) > node.limit)
    )
    return joined.where(~certain).select(*pcols)


def _with_info(rows: DataFrame, info: DataFrame, pcols: list[str], wanted: list[str]) -> DataFrame:
    """`rows` with the `wanted` columns of `info` for their partition (NULL where it has none)."""
    joined, i = _join(rows, info, pcols, "left")
    return joined.select(*[F.col(quote(c)) for c in rows.columns], *[i(c).alias(c) for c in wanted])


def _join(
    left: DataFrame, right: DataFrame, on: list[str], how: str
) -> tuple[DataFrame, Callable[[str], Column]]:
    """`left` joined to `right` where the `on` columns are equal (NULL matching NULL), and how to name a column
    of `right` in the result (its columns are renamed apart: the two sides often share their lineage)."""
    index = {c: i for i, c in enumerate(right.columns)}
    renamed = right.select(*[F.col(quote(c)).alias(f"_r{i}") for c, i in index.items()])
    condition = reduce(
        lambda a, b: a & b, [F.col(quote(c)).eqNullSafe(F.col(f"_r{index[c]}")) for c in on], F.lit(True)
    )
    return left.join(renamed, condition, how), lambda c: F.col(f"_r{index[c]}")


def _refillable(child: Node) -> bool:
    """Whether the child's rows at the batch's version can be read again: no operator under it keeps state."""
    for n in child.walk():
        operator = operator_of(n)
        if operator is None or operator.state(n, is_append_only, False) is not None:
            return False
    return True


# -- on the driver ---------------------------------------------------------------------------------------------
# The same four steps in Python, partition by partition: a batch touches few partitions, each with a prefix of
# N + buffer rows, so sorting them row by row costs milliseconds. The values are compared as Spark orders them:
# NULLs first or last per key, strings by code point (UTF-8 byte order), NaN refused (NotOnDriver).


def driver_delta(node: TopN, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    nid = batch.node_id(node)
    names = [f.name for f in node.child.fields]
    if any(c.meta.get("proctime") for e in node.expressions() for c in e.find_all(exp.Column)):
        raise NotOnDriver("a top-N ordered by PROCTIME()")
    rows_name, counts_name = f"n{nid}_top", f"n{nid}_count"
    rows_schema, counts_schema = batch.state.schema(rows_name), batch.state.schema(counts_name)
    if rows_schema is None or counts_schema is None:
        raise NotOnDriver(f"state {rows_name} does not exist")
    child = child_delta(node.child, batch)
    outputs = _output_schema(node, child)
    if child.num_rows == 0:
        return outputs.empty_table()
    pcols = [f"_p{i}" for i in range(max(1, len(node.partition)))]

    changed = _keyed(node, data(child), names, counts_schema, pcols)
    weights = child.column(WEIGHT).to_pylist()
    mtime = pc.max(child.column(MTIME))
    parts = list(dict.fromkeys(changed.partition))
    touched = pa.table(
        [pa.array([p[j] for p in parts], counts_schema.field(c).type) for j, c in enumerate(pcols)],
        names=pcols,
    )
    old_rows = batch.state.lookup(rows_name, touched, pcols)
    old_counts = batch.state.lookup(counts_name, touched, pcols)
    old = (
        _keyed(
            node,
            [old_rows.column(n).cast(child.column(i).type) for i, n in enumerate(names)],
            names,
            counts_schema,
            pcols,
        )
        if old_rows is not None and old_rows.num_rows
        else None
    )
    counts = (
        {tuple(r[c] for c in pcols): r[COUNT] for r in old_counts.to_pylist()}
        if old_counts is not None
        else {}
    )

    prefix: dict[Row, dict[Row, int]] = {}  # partition → row → multiplicity, before the batch
    if old is not None and old_rows is not None:
        for i, n in enumerate(old_rows.column(COUNT).to_pylist()):
            prefix.setdefault(old.partition[i], {})[old.rows[i]] = n
    moved: dict[Row, dict[Row, int]] = {}
    for i, w in enumerate(weights):
        rows = moved.setdefault(changed.partition[i], {})
        rows[changed.rows[i]] = rows.get(changed.rows[i], 0) + w
    order = {**(old.order if old is not None else {}), **changed.order}
    keep = node.limit + buffer_size(node, is_append_only(node.child))

    emitted: dict[Row, int] = {}
    staged_rows, staged_counts = [], []
    for part, deltas in moved.items():
        before = prefix.get(part, {})
        count = counts.get(part, 0)
        complete = count == sum(before.values())
        merged = dict(before)
        for row, w in deltas.items():
            merged[row] = merged.get(row, 0) + w
        ranked_before = _ranked_rows(node, before, order)
        boundary = ranked_before[-1][0] if ranked_before else None
        after = {
            row: n
            for row, n in merged.items()
            if n > 0 and (complete or (boundary is not None and _compare(node, order, row, boundary) <= 0))
        }
        new_count = count + sum(deltas.values())
        ranked = _ranked_rows(node, after, order)
        size = len(ranked)
        certain = size == new_count or (
            size >= node.limit
            if node.function == "row_number"
            else any(rank > node.limit for _, rank in ranked)
        )
        if new_count > 0 and not certain:
            raise NotOnDriver("a top-N partition drained by deletes is read again from the input")
        for row, rank in ranked:
            if rank <= node.limit:
                key = row + ((rank,) if node.ranked else ())
                emitted[key] = emitted.get(key, 0) + 1
        for row, rank in ranked_before:
            if rank <= node.limit:
                key = row + ((rank,) if node.ranked else ())
                emitted[key] = emitted.get(key, 0) - 1
        kept: dict[Row, int] = {}
        for place, (row, rank) in enumerate(ranked, start=1):
            if place <= keep or rank <= node.limit:
                kept[row] = kept.get(row, 0) + 1
        staged_rows += [(*row, *part, n, False) for row, n in kept.items()]
        staged_rows += [(*row, *part, 0, True) for row in before if row not in kept]
        if new_count != 0 or part in counts:
            staged_counts.append((*part, new_count, new_count == 0))

    batch.state.stage(rows_name, _table(staged_rows, rows_schema), names, DELETE)
    batch.state.stage(counts_name, _table(staged_counts, counts_schema), pcols, DELETE)
    out = [(*key, w) for key, w in emitted.items() if w != 0]
    result = pa.Table.from_pylist(
        [dict(zip(outputs.names, (*row, mtime.as_py()))) for row in out], schema=outputs
    )
    return result


class _Keyed:
    """Rows as Python tuples, with each row's partition and order values."""

    def __init__(self, rows: list[Row], partition: list[Row], order: dict[Row, Row]) -> None:
        self.rows, self.partition, self.order = rows, partition, order


def _keyed(
    node: TopN, columns: list[Any], names: list[str], counts_schema: pa.Schema, pcols: list[str]
) -> _Keyed:
    for c in columns:
        if pa.types.is_nested(c.type):
            raise NotOnDriver(f"a top-N over a column of type {c.type}")
        if pa.types.is_floating(c.type) and pc.any(pc.is_nan(c)).as_py():
            raise NotOnDriver("a NaN in a top-N's input")
    table = pa.table(columns, names=[f"c{i}" for i in range(len(columns))])
    fields = node.child.fields
    rows = list(zip(*[c.to_pylist() for c in columns])) if columns else []
    if node.partition:
        parts = [
            evaluate(p, table, fields).cast(counts_schema.field(c).type).to_pylist()
            for p, c in zip(node.partition, pcols)
        ]
        partition = list(zip(*parts))
    else:
        partition = [(0,)] * len(rows)
    keys = [evaluate(o.this, table, fields) for o in node.order]
    for k in keys:
        if pa.types.is_floating(k.type) and pc.any(pc.is_nan(k)).as_py():
            raise NotOnDriver("a NaN in a top-N's order")
    order = dict(zip(rows, zip(*[k.to_pylist() for k in keys]))) if keys else {r: () for r in rows}
    return _Keyed(rows, partition, order)


def _compare(node: TopN, order: dict[Row, Row], a: Row, b: Row) -> int:
    """The total order: the ORDER BY keys (with their directions and NULL placement), then every column
    ascending with NULLs first."""
    for o, x, y in zip(node.order, order[a], order[b]):
        c = _values(
            x,
            y,
            bool(o.args.get("nulls_first"))
            if o.args.get("nulls_first") is not None
            else not o.args.get("desc"),
            bool(o.args.get("desc")),
        )
        if c:
            return c
    for x, y in zip(a, b):
        c = _values(x, y, True, False)
        if c:
            return c
    return 0


def _values(x: Any, y: Any, nulls_first: bool, desc: bool) -> int:
    if x is None or y is None:
        if x is None and y is None:
            return 0
        return (-1 if x is None else 1) * (1 if nulls_first else -1)
    if x == y:
        return 0
    return (-1 if x < y else 1) * (-1 if desc else 1)


def _ranked_rows(node: TopN, rows: dict[Row, int], order: dict[Row, Row]) -> list[tuple[Row, int]]:
    """Each copy of the rows in the total order, with the node's function's value."""

    def compare(a: Row, b: Row) -> int:
        return _compare(node, order, a, b)

    ordered = sorted(rows, key=cmp_to_key(compare))
    ranked: list[tuple[Row, int]] = []
    place, rank, dense, previous = 0, 0, 0, object()
    for row in ordered:
        for _ in range(rows[row]):
            place += 1
            if order[row] != previous:
                rank, dense, previous = place, dense + 1, order[row]
            ranked.append((row, {"row_number": place, "rank": rank, "dense_rank": dense}[node.function]))
    return ranked


def _output_schema(node: TopN, child: pa.Table) -> pa.Schema:
    fields = [pa.field(f"c{i}", t) for i, t in enumerate(child.schema.types[: len(node.child.fields)])]
    if node.ranked:
        fields.append(pa.field(f"c{len(fields)}", pa.int32()))
    return pa.schema([*fields, pa.field(WEIGHT, pa.int64()), pa.field(MTIME, child.schema.field(MTIME).type)])


def _table(rows: list[Row], schema: pa.Schema) -> pa.Table:
    target = pa.schema([f.with_nullable(True) for f in schema] + [pa.field(DELETE, pa.bool_())])
    return pa.Table.from_pylist([dict(zip(target.names, r)) for r in rows], schema=target)
