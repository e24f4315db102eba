"""Over (plan/operators/over.py): window functions over partitions. A row's window values depend on the other
rows of its partition, but only on them: the rule evaluates the windows over the touched partitions' rows
before and after the batch (incremental/partition_rows.py keeps them) with Spark's own window functions, and
emits the difference — the rows whose values stayed cancel out, so a change re-emits only the rows whose frame
holds it (at most n+1 for `ROWS BETWEEN n PRECEDING AND CURRENT ROW`). With the view's state_ttl, a partition
untouched for that long leaves the view: its rows are retracted with their window values. Batches run in
Spark."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.partition_rows import batch_time, copies, partition_rows
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, quote
from mvengine.plan.nodes import Over

NODE = Over  # the plan node type this module maintains (plan/operators/over.py)


def delta(node: Over, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    names = [f.name for f in node.child.fields]
    changed = batch.keep_small(consolidate(child_delta(node.child, batch), names))
    parts = [F.expr(local(p)) for p in node.partition]

    def prior() -> DataFrame | None:
        before = batch.as_before()
        return None if before is None else child_delta(node.child, before)

    old, new, expired = partition_rows(batch, f"n{batch.node_id(node)}_rows", changed, names, parts, prior)
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
