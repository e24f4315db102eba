"""SELECT DISTINCT: each distinct row's multiplicity in state (`n<i>_rows`); a row enters the output when its
count rises from zero and leaves it when its count falls back to zero."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverChildDelta, align, consolidated, data, zset
from mvengine.incremental.driver_expressions import NotOnDriver, cast
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, null_safe_equal, quote
from mvengine.plan.nodes import Distinct

COUNT = "_n"


def delta(node: Distinct, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    columns = [f.name for f in node.fields]
    child = child_delta(node.child, batch)
    child = child.select(*[F.col(quote(c)) for c in [f.name for f in node.child.fields]], WEIGHT, MTIME)
    changed = batch.keep_small(consolidate(child.toDF(*columns, WEIGHT, MTIME), columns))
    name = f"n{batch.node_id(node)}_rows"
    template = changed.select(*[quote(c) for c in columns], F.col(WEIGHT).alias(COUNT)).limit(0)
    old = batch.state.read_candidates(name, template, changed, columns).alias("o")
    d = changed.alias("d")
    merged = batch.keep_small(
        d.join(old, null_safe_equal(d, old, columns), "left").select(
            *[F.col(f"d.{quote(c)}").alias(c) for c in columns],
            F.coalesce(F.col(f"o.{COUNT}"), F.lit(0)).alias("_before"),
            (F.coalesce(F.col(f"o.{COUNT}"), F.lit(0)) + F.col(f"d.{WEIGHT}")).alias(COUNT),
            F.col(f"d.{MTIME}").alias(MTIME),
        )
    )
    gone = F.col(COUNT) <= 0
    batch.state.stage(
        name,
        merged.where(~gone | (F.col("_before") > 0)).select(
            *[quote(c) for c in columns], COUNT, gone.alias("_delete")
        ),
        columns,
        "_delete",
    )
    appeared = (F.col("_before") <= 0) & (F.col(COUNT) > 0)
    vanished = (F.col("_before") > 0) & (F.col(COUNT) <= 0)
    weight = F.when(appeared, F.lit(1)).when(vanished, F.lit(-1)).otherwise(F.lit(0)).cast("long")
    return merged.select(*[quote(c) for c in columns], weight.alias(WEIGHT), MTIME).where(F.col(WEIGHT) != 0)


def driver_delta(node: Distinct, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    columns = [f.name for f in node.fields]
    name = f"n{batch.node_id(node)}_rows"
    schema = batch.state.schema(name)
    if schema is None:
        raise NotOnDriver(f"state {name} does not exist")
    changed = consolidated(child_delta(node.child, batch))
    rows = pa.table([cast(c, schema.field(n).type) for c, n in zip(data(changed), columns)], names=columns)
    found = batch.state.lookup(name, rows, columns)
    assert found is not None  # its schema was found
    old = found.take(align([rows.column(c) for c in columns], [found.column(c) for c in columns]))
    before = pc.fill_null(old.column(COUNT), 0)
    count = pc.add_checked(before, changed.column(WEIGHT))
    gone = pc.less_equal(count, 0)
    staged = rows.append_column(COUNT, count).append_column("_delete", gone)
    batch.state.stage(name, staged.filter(pc.or_(pc.invert(gone), pc.greater(before, 0))), columns, "_delete")
    appeared = pc.and_(pc.less_equal(before, 0), pc.greater(count, 0))
    vanished = pc.and_(pc.greater(before, 0), gone)
    weight = pc.case_when(
        pc.make_struct(appeared, vanished, field_names=["in", "out"]),
        pa.scalar(1, pa.int64()),
        pa.scalar(-1, pa.int64()),
    )
    return zset(data(changed), weight, changed.column(MTIME)).filter(pc.is_valid(weight))
