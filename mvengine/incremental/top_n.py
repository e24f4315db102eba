"""TopN (plan/operators/top_n.py): the first N rows of each partition in an order, maintained from a prefix.

State, per partition (its `PARTITION BY` values; one partition without): `n<i>_top`, a prefix of the partition's
rows in the total order — the ORDER BY, then every column ascending, so that ROW_NUMBER is deterministic — with
their multiplicity `_n`; and `n<i>_count`, the partition's row count. A prefix is *complete* when it holds the
whole partition.

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
Batches run in Spark (there is no driver rule).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import MapType
from sqlglot import exp

from mvengine.incremental.batch import Batch
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, quote
from mvengine.plan.analysis import is_append_only
from mvengine.plan.nodes import Node, TopN
from mvengine.plan.operators import operator_of
from mvengine.plan.operators.top_n import buffer_size

COUNT = "_n"
TIME = "_ct"  # the row's commit time, kept when the order reads PROCTIME()
DELETE = "_delete"


def delta(node: TopN, batch: Batch, child_delta) -> DataFrame:
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
    row_template = changed.select(*columns, F.lit(0).cast("long").alias(COUNT)).limit(0)
    old = with_partition(batch.state.read(rows_name, row_template))
    old = batch.keep_small(_join(old, touched, pcols, "left_semi")[0])
    count_template = touched.select(*pcols, F.lit(0).cast("long").alias(COUNT)).limit(0)
    old_counts = batch.state.read_for(counts_name, count_template, touched, pcols)

    # Per touched partition: whether the old prefix was complete, and the new row count.
    sizes = old.groupBy(*pcols).agg(F.sum(COUNT).alias("_size"))
    moved = changed.groupBy(*pcols).agg(F.sum(WEIGHT).alias("_moved"))
    info = touched
    for df, how in ((old_counts.withColumnRenamed(COUNT, "_old"), "_old"), (sizes, "_size"), (moved, "_moved")):
        info = _with_info(info, df, pcols, [how])
    old_count = F.coalesce(F.col("_old"), F.lit(0))
    info = batch.keep_small(info.select(
        *pcols, F.col("_old").isNotNull().alias("_existed"),
        (old_count == F.coalesce(F.col("_size"), F.lit(0))).alias("_complete"),
        (old_count + F.coalesce(F.col("_moved"), F.lit(0))).alias("_count")))

    # 1. The changes merged into the old prefix.
    joined, o = _join(changed.select(*columns, *pcols, WEIGHT), old.select(*columns, *pcols, COUNT), columns, "full")
    merged = joined.select(
        *[F.when(F.col(WEIGHT).isNotNull(), F.col(quote(c))).otherwise(o(c)).alias(c) for c in columns + pcols],
        o(COUNT).isNotNull().alias("_was"),
        (F.coalesce(o(COUNT), F.lit(0)) + F.coalesce(F.col(WEIGHT), F.lit(0))).alias(COUNT))
    merged = _with_info(merged, info, pcols, ["_complete"])
    order = _total_order(node, changed.schema, columns)
    position = F.row_number().over(Window.partitionBy(*pcols).orderBy(*order))
    merged = merged.select("*", position.alias("_pos"))
    boundary = F.max(F.when(F.col("_was"), F.col("_pos"))).over(Window.partitionBy(*pcols))
    prefix = merged.select("*", boundary.alias("_bound")) \
        .where((F.col("_complete") | (F.col("_pos") <= F.col("_bound"))) & (F.col(COUNT) > 0)) \
        .select(*columns, *pcols, COUNT)
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
            whole = with_partition(consolidate(
                old_rows.select(*columns, WEIGHT, MTIME).unionByName(changed.select(*columns, WEIGHT, MTIME)),
                columns))
            whole = _join(whole, unsure, pcols, "left_semi")[0]
            kept = _join(prefix, unsure, pcols, "left_anti")[0]
            prefix = batch.keep_small(kept.unionByName(
                whole.where(F.col(WEIGHT) > 0).select(*columns, *pcols, F.col(WEIGHT).alias(COUNT))))

    # 3. The first N + buffer rows of each partition, ties at rank N whole.
    copies = batch.keep_small(_ranked(node, prefix, order, pcols))
    if refillable:
        keep = node.limit + buffer_size(node, is_append_only(node.child))
        trimmed = copies.where((F.col("_rn") <= keep) | (F.col("_rank") <= node.limit))
    else:
        trimmed = copies
    new_state = trimmed.groupBy(*columns).agg(F.count(F.lit(1)).cast("long").alias(COUNT))
    gone = _join(old.select(*columns), new_state.select(*columns), columns, "left_anti")[0]
    batch.state.stage(rows_name, new_state.select(*columns, COUNT, F.lit(False).alias(DELETE)).unionByName(
        gone.select(*columns, F.lit(0).cast("long").alias(COUNT), F.lit(True).alias(DELETE))), columns, DELETE)
    counted = info.where((F.col("_count") != 0) | F.col("_existed"))
    batch.state.stage(counts_name, counted.select(*pcols, F.col("_count").alias(COUNT),
                                                  (F.col("_count") == 0).alias(DELETE)), pcols, DELETE)

    # 4. The old top N out, the new one in; rows that stay cancel out.
    outputs = names + (["_rank"] if node.ranked else [])
    new_top = copies.where(F.col("_rank") <= node.limit).select(*names, F.col("_rank"))
    old_top = _ranked(node, old, order, pcols).where(F.col("_rank") <= node.limit).select(*names, F.col("_rank"))
    mtime = changed.agg(F.max(MTIME)).collect()[0][0]
    emitted = (new_top.select(*outputs, F.lit(1).cast("long").alias(WEIGHT))
               .unionByName(old_top.select(*outputs, F.lit(-1).cast("long").alias(WEIGHT)))
               .withColumn(MTIME, F.lit(mtime).cast("timestamp")))
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


def _total_order(node: TopN, schema, columns: list[str]) -> list[Column]:
    """The ORDER BY, then every column ascending (maps cannot be ordered, and are left out)."""
    return _order_keys(node) + [F.col(quote(c)).asc_nulls_first() for c in columns
                                if not isinstance(schema[c].dataType, MapType)]


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
        (size >= node.limit) if node.function == "row_number" else (F.coalesce(F.col("_top"), F.lit(0)) > node.limit))
    return joined.where(~certain).select(*pcols)


def _with_info(rows: DataFrame, info: DataFrame, pcols: list[str], wanted: list[str]) -> DataFrame:
    """`rows` with the `wanted` columns of `info` for their partition (NULL where it has none)."""
    joined, i = _join(rows, info, pcols, "left")
    return joined.select(*[F.col(quote(c)) for c in rows.columns], *[i(c).alias(c) for c in wanted])


def _join(left: DataFrame, right: DataFrame, on: list[str], how: str) -> tuple[DataFrame, Callable[[str], Column]]:
    """`left` joined to `right` where the `on` columns are equal (NULL matching NULL), and how to name a column
    of `right` in the result (its columns are renamed apart: the two sides often share their lineage)."""
    index = {c: i for i, c in enumerate(right.columns)}
    renamed = right.select(*[F.col(quote(c)).alias(f"_r{i}") for c, i in index.items()])
    condition = reduce(lambda a, b: a & b, [F.col(quote(c)).eqNullSafe(F.col(f"_r{index[c]}")) for c in on],
                       F.lit(True))
    return left.join(renamed, condition, how), lambda c: F.col(f"_r{index[c]}")


def _refillable(child: Node) -> bool:
    """Whether the child's rows at the batch's version can be read again: no operator under it keeps state."""
    for n in child.walk():
        operator = operator_of(n)
        if operator is None or operator.state(n, is_append_only, False) is not None:
            return False
    return True
