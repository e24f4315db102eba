"""The input rows of the partitions a batch touches, kept in state, for rules that recompute a whole partition
from its rows (session windows, window functions): a partition's result depends on all of its rows, but only
on them.

State table `n<i>_rows`: the input rows with their multiplicity `_n`, keyed by all their columns; read back for
the touched partitions only (a partition is the value of the `partition` expressions; without any, the input is
one partition).

With the view's state_ttl, every row also holds `_touched` (the clock of the batch that last changed its
partition; a touched partition's rows are all written again with it): a partition untouched for the TTL leaves
state, and its rows go back to the rule to retract what it gave; a touched partition without state is read
from the input's rows before the batch as well, so that one coming back after it expired is exact."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch
from mvengine.incremental.state import TOUCHED
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, null_safe_equal, quote

COUNT = "_n"
DELETE = "_delete"


class Partitions(NamedTuple):
    """The rows (`columns`, `_n`) of the partitions a batch touches, before and after it; and the rows the
    partitions that the view's state_ttl expires held (None: none expires)."""

    old: DataFrame
    new: DataFrame
    expired: DataFrame | None


def partition_rows(
    batch: Batch,
    name: str,
    changed: DataFrame,
    columns: list[str],
    partition: list[Column],
    prior: Callable[[], DataFrame | None],
) -> Partitions:
    """The partitions that `changed` (a consolidated Z-set over `columns`) touches, before and after the batch;
    the change of state table `name` is staged. `prior` gives the input's rows before the batch (`columns`,
    `_w`, `_mtime`; None when the view starts), read only when the view has a state_ttl and a touched
    partition has no state."""
    clock = batch.clock
    now = None if clock is None or clock.state_ttl is None else clock.now
    parts = [p.alias(f"_p{i}") for i, p in enumerate(partition)]
    touched = batch.keep_small(changed.select(*parts).distinct())
    template = changed.select(*[quote(c) for c in columns], F.col(WEIGHT).alias(COUNT)).limit(0)
    old = batch.state.read(name, template)
    if partition:
        old = old.join(touched, _matches(old, touched, partition), "left_semi")
    old = batch.keep_small(old.select(*[quote(c) for c in columns], COUNT))
    if now is not None:
        changed = _with_returning_partitions(batch, changed, old, touched, columns, partition, prior)
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
    data = [quote(c) for c in columns]
    new = merged.where(~gone).select(*data, COUNT)
    if now is None:
        moved = merged.where(F.col(COUNT) != F.col("_before"))
        batch.state.stage(name, moved.select(*data, COUNT, gone.alias(DELETE)), columns, DELETE)
        return Partitions(old, new, None)
    # Every row of a touched partition is written again with the batch's clock: it tells when they expire.
    kept = merged.where((F.col(COUNT) > 0) | (F.col("_before") > 0))
    staged = kept.select(*data, COUNT, F.lit(now).cast("long").alias(TOUCHED), gone.alias(DELETE))
    expired = _expired(batch, name, touched, partition)
    if expired is not None:
        staged = staged.unionByName(expired.select(*data, COUNT, TOUCHED, F.lit(True).alias(DELETE)))
        expired = expired.select(*data, COUNT)
    batch.state.stage(name, staged, columns, DELETE)
    return Partitions(old, new, expired)


def _with_returning_partitions(
    batch: Batch,
    changed: DataFrame,
    old: DataFrame,
    touched: DataFrame,
    columns: list[str],
    partition: list[Column],
    prior: Callable[[], DataFrame | None],
) -> DataFrame:
    """`changed` and, for each partition it touches that has no state (new, or back after the view's state_ttl
    expired it), the input's rows of that partition before the batch, as inserts: such a partition is
    computed from all its rows, as a recomputation computes it, not from this batch's alone."""
    held = old.select(*[p.alias(f"_p{i}") for i, p in enumerate(partition)]).distinct()
    keys = [f"_p{i}" for i in range(len(partition))]
    missing = batch.keep_small(touched.join(held, null_safe_equal(touched, held, keys), "left_anti"))
    if missing.isEmpty():
        return changed
    before = prior()
    if before is None:
        return changed
    rows = before.join(missing, _matches(before, missing, partition), "left_semi")
    names = [*map(quote, columns), WEIGHT, MTIME]
    return batch.keep_small(consolidate(changed.select(*names).unionByName(rows.select(*names)), columns))


def _expired(batch: Batch, name: str, touched: DataFrame, partition: list[Column]) -> DataFrame | None:
    """The state rows of the partitions the view's state_ttl expires in this batch (untouched for that long,
    and not touched by it); counted, by partition, in the batch's `expired`."""
    clock = batch.clock
    through = None if clock is None else clock.expire_through
    rows = None if through is None else batch.state.expired(name, through)
    if rows is None:
        return None
    rows = batch.keep_small(rows.join(touched, _matches(rows, touched, partition), "left_anti"))
    count = rows.select(*partition).distinct().count()
    batch.expired += count
    return rows if count else None


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
