"""The input rows of the partitions a batch touches, kept in state, for rules that recompute a whole partition
from its rows (session windows, window functions): a partition's result depends on all of its rows, but only
on them.

State table `n<i>_rows`: the input rows with their multiplicity `_n`, keyed by all their columns; read back for
the touched partitions only (a partition is the value of the `partition` expressions; without any, the input is
one partition)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch
from mvengine.incremental.zset import MTIME, WEIGHT, null_safe_equal, quote

COUNT = "_n"


def partition_rows(
    batch: Batch, name: str, changed: DataFrame, columns: list[str], partition: list[Column]
) -> tuple[DataFrame, DataFrame]:
    """The rows (`columns`, `_n`) of the partitions that `changed` (a consolidated Z-set over `columns`)
    touches, before and after the batch; the change of state table `name` is staged."""
    parts = [p.alias(f"_p{i}") for i, p in enumerate(partition)]
    touched = batch.keep_small(changed.select(*parts).distinct())
    template = changed.select(*[quote(c) for c in columns], F.col(WEIGHT).alias(COUNT)).limit(0)
    old = batch.state.read(name, template)
    if partition:
        old = old.join(touched, _matches(old, touched, partition), "left_semi")
    old = batch.keep_small(old)
    d, o = changed.alias("d"), old.alias("o")
    merged = batch.keep_small(
        d.join(o, null_safe_equal(d, o, columns), "full").select(
            *[
                F.when(F.col(f"d.{WEIGHT}").isNotNull(), F.col(f"d.{quote(c)}"))
                .otherwise(F.col(f"o.{quote(c)}"))
                .alias(c)
                for c in columns
            ],
            F.coalesce(F.col(f"o.{COUNT}"), F.lit(0)).alias("_before"),
            (F.coalesce(F.col(f"o.{COUNT}"), F.lit(0)) + F.coalesce(F.col(f"d.{WEIGHT}"), F.lit(0))).alias(
                COUNT
            ),
        )
    )
    gone = F.col(COUNT) <= 0
    moved = merged.where(F.col(COUNT) != F.col("_before"))
    batch.state.stage(
        name, moved.select(*[quote(c) for c in columns], COUNT, gone.alias("_delete")), columns, "_delete"
    )
    return old, merged.where(~gone).select(*[quote(c) for c in columns], COUNT)


def copies(rows: DataFrame) -> DataFrame:
    """Each row (with its multiplicity `_n`) as that many rows, `_n` and `_copy` beside its columns."""
    return rows.select("*", F.explode(F.sequence(F.lit(1), F.col(COUNT).cast("int"))).alias("_copy"))


def batch_time(changed: DataFrame) -> Column:
    """The latest commit time among a batch's changes: the time of what a partition's recomputation emits."""
    return F.lit(changed.agg(F.max(MTIME)).collect()[0][0]).cast("timestamp")


def _matches(rows: DataFrame, touched: DataFrame, partition: list[Column]) -> Column:
    """Rows whose partition values are among those touched (NULL matching NULL)."""
    condition = F.lit(True)
    for i, p in enumerate(partition):
        condition = condition & p.eqNullSafe(touched[f"_p{i}"])
    return condition
