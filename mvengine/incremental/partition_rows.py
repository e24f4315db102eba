"""The input rows of the partitions a batch touches, kept in state, for rules that recompute a whole partition
from its rows (session windows, window functions): a partition's result depends on all of its rows, but only
on them.

State table `n<i>_rows`: the input rows with their multiplicity `_n`, keyed by all their columns; read back for
the touched partitions only (a partition is the value of the `partition` expressions; without any, the input is
one partition).

With the view's state_ttl, every row also holds `_touched` (the clock of the batch that last changed its
partition; a touched partition's rows are all written again with it): a partition untouched for the TTL leaves
state, and its rows go back to the rule to retract what it gave; a touched partition without state is read
from the input's rows before the batch as well, so that one coming back after it expired is exact.

With the view's allowed_lateness (session windows, window functions that read a bounded number of rows back),
every row also holds `_end` (NEEDED_UNTIL, µs): an event time from which no row still to come can need it, at or
after the exact one (its session's end; the time of the n-th row after it, for windows that read n rows back).
The rule keeps it so: a row of a touched partition whose exact time passed its `_end` is written again, with the
exact time plus a slack (a session's gap: a session that goes on rewrites its rows once a gap, not every
batch), and an untouched partition's rows do not move. Once the batch's late cutoff is past a row's `_end`, the
rows it would serve are late, so it leaves state by that column alone (runtime/event_time.purge_conditions),
whether or not its partition is touched.

Window functions that fold the rows before a row (running sums, ranks: incremental/over_carry.py) take the
rows behind the late cutoff out of state instead, those of the touched partitions (`fold`) and of the others
(`swept`): the rule folds them into one row per partition, and evaluates the rest after it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch
from mvengine.incremental.driver import DriverBatch, align, consolidated, group_by, normalized, zset
from mvengine.incremental.driver_expressions import NotOnDriver, cast, evaluate_all
from mvengine.incremental.state import TOUCHED
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, null_safe_equal, quote
from mvengine.plan.nodes import Field

COUNT = "_n"
DELETE = "_delete"
NEEDED_UNTIL = "_end"


class Partitions(NamedTuple):
    """The rows (`columns`, `_n`) of the partitions a batch touches, before and after it; the rows the
    partitions that the view's state_ttl expires held (None: none expires); and the rows folded out of state
    (`partition_rows`'s `fold`: in neither `old` nor `new`; None without one)."""

    old: DataFrame
    new: DataFrame
    expired: DataFrame | None
    folded: DataFrame | None = None


def partition_rows(
    batch: Batch,
    name: str,
    changed: DataFrame,
    columns: list[str],
    partition: list[Column],
    prior: Callable[[], DataFrame | None],
    ends: Callable[[DataFrame], DataFrame] | None = None,
    slack: int = 0,
    fold: Column | None = None,
    swept: DataFrame | None = None,
) -> Partitions:
    """The partitions that `changed` (a consolidated Z-set over `columns`) touches, before and after the batch;
    the change of state table `name` is staged. `prior` gives the input's rows before the batch (`columns`,
    `_w`, `_mtime`; None when the view starts), read only when the view has a state_ttl and a touched
    partition has no state. `ends` (when the view allows a lateness) adds each row's exact NEEDED_UNTIL to rows
    of the partitions (their columns and more), which the state keeps beside them with `slack` µs added. The
    touched partitions' rows that `fold` holds for leave state, and come back as `folded`; so do `swept`, rows of
    the state table that `fold` holds for, whatever their partition."""
    clock = batch.clock
    now = None if clock is None or clock.state_ttl is None else clock.now
    parts = [p.alias(f"_p{i}") for i, p in enumerate(partition)]
    touched = batch.keep_small(changed.select(*parts).distinct())
    held = [COUNT] if ends is None else [COUNT, NEEDED_UNTIL]
    template = changed.select(
        *[quote(c) for c in columns],
        F.col(WEIGHT).alias(COUNT),
        *([] if ends is None else [F.lit(None).cast("long").alias(NEEDED_UNTIL)]),
    ).limit(0)
    old = batch.state.read(name, template)
    if partition:
        old = old.join(touched, _matches(old, touched, partition), "left_semi")
    if swept is not None:  # (those of untouched partitions: the others are read above)
        swept = swept.join(touched, _matches(swept, touched, partition), "left_anti") if partition else None
        old = old if swept is None else old.unionByName(swept.select(*old.columns))
    old = batch.keep_small(old.select(*[quote(c) for c in columns], *held))
    folded = None
    if fold is not None:  # (their removal, as a change: none of the batch's rows is among them)
        folded = batch.keep_small(old.where(fold))
        changed = changed.select(*[quote(c) for c in columns], WEIGHT, MTIME).unionByName(
            folded.select(
                *[quote(c) for c in columns],
                (-F.col(COUNT)).alias(WEIGHT),
                F.lit(None).cast("timestamp").alias(MTIME),
            )
        )
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
            *([] if ends is None else [F.col(f"o.{NEEDED_UNTIL}").alias("_end_before")]),
        )
    )
    gone = F.col(COUNT) <= 0
    data = [quote(c) for c in columns]
    new = merged.where(~gone).select(*data, COUNT)
    if ends is not None:
        _stage_ends(batch, name, merged, columns, ends, slack)
        return Partitions(old.select(*data, COUNT), new, None)
    if now is None:
        moved = merged.where(
            (F.col(COUNT) != F.col("_before")) & ((F.col(COUNT) > 0) | (F.col("_before") > 0))
        )
        batch.state.stage(name, moved.select(*data, COUNT, gone.alias(DELETE)), columns, DELETE)
        return Partitions(old if fold is None else old.where(~fold), new, None, folded)
    # Every row of a touched partition is written again with the batch's clock: it tells when they expire.
    kept = merged.where((F.col(COUNT) > 0) | (F.col("_before") > 0))
    staged = kept.select(*data, COUNT, F.lit(now).cast("long").alias(TOUCHED), gone.alias(DELETE))
    expired = _expired(batch, name, touched, partition)
    if expired is not None:
        staged = staged.unionByName(expired.select(*data, COUNT, TOUCHED, F.lit(True).alias(DELETE)))
        expired = expired.select(*data, COUNT)
    batch.state.stage(name, staged, columns, DELETE)
    return Partitions(old, new, expired)


def _stage_ends(
    batch: Batch,
    name: str,
    merged: DataFrame,
    columns: list[str],
    ends: Callable[[DataFrame], DataFrame],
    slack: int,
) -> None:
    """Stage the rows whose count moved or whose exact NEEDED_UNTIL passed the one held, with it and the slack
    (a row gone, its removal). Nothing expires: a view with a lateness has no state_ttl."""
    data = [quote(c) for c in columns]
    alive = ends(merged.where(F.col(COUNT) > 0))
    exact, held = F.col(NEEDED_UNTIL), F.col("_end_before")
    passed = exact.isNull() != held.isNull()
    moved = alive.where((F.col(COUNT) != F.col("_before")) | passed | F.coalesce(exact > held, F.lit(False)))
    gone = merged.where((F.col(COUNT) <= 0) & (F.col("_before") > 0))
    staged = moved.select(
        *data, COUNT, (exact + slack).alias(NEEDED_UNTIL), F.lit(False).alias(DELETE)
    ).unionByName(
        gone.select(*data, COUNT, F.lit(None).cast("long").alias(NEEDED_UNTIL), F.lit(True).alias(DELETE))
    )
    batch.state.stage(name, staged, columns, DELETE)


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


# -- on the driver -----------------------------------------------------------------------------------------------


def partition_rows_on_driver(
    batch: DriverBatch,
    name: str,
    changed: pa.Table,
    columns: list[str],
    partition: Sequence[exp.Expression],
    fields: Sequence[Field],
    ends: Callable[[pa.Table], pa.Array] | None = None,
    slack: int = 0,
    fold: Callable[[pa.Table], pa.Array] | None = None,
    swept: pa.Table | None = None,
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """`partition_rows` on the driver: the rows of the partitions that `changed` (a consolidated Z-set whose
    columns are state table `name`'s `columns`, of `fields`) touches, before and after the batch, as Z-sets
    weighted by multiplicity (at no time); the change of the state table is staged. `ends` gives the exact
    NEEDED_UNTIL of each row of such a Z-set, held with `slack` added, as `partition_rows`'s. The rows of the
    touched partitions that `fold` (a mask over such a Z-set) holds for leave state: they are returned third
    (empty without `fold`), and in neither of the others. So do `swept`, rows of the state table (as read) that
    `fold` holds for, whatever their partition."""
    if batch.clock is not None and batch.clock.state_ttl is not None:
        raise NotOnDriver("partitions expiring (state_ttl)")
    old, old_ends = _held_rows(batch, name, changed, columns, partition, fields, ends is not None)
    remaining = old
    # The swept rows of untouched partitions (the others are held already) only leave state: they take no part
    # in the partitions' rows before and after.
    elsewhere = changed.slice(0, 0)
    if swept is not None and swept.num_rows and partition:
        elsewhere = _as_zset(swept, columns, changed)
        theirs = evaluate_all(partition, elsewhere, fields)
        at = align([normalized(c) for c in theirs], distinct_values(evaluate_all(partition, changed, fields)))
        elsewhere = elsewhere.filter(pc.is_null(at))
    if fold is not None:  # (their removal, as a change: none of the batch's rows is among them)
        folding = fold(old)
        remaining = old.filter(pc.invert(folding))
        folded = old.filter(folding)
        changed = pa.concat_tables(
            [changed, folded.set_column(len(columns), WEIGHT, pc.negate(folded.column(WEIGHT)))]
        )
    index = align([normalized(c) for c in changed.columns[:-2]], [normalized(c) for c in old.columns[:-2]])
    before = pc.fill_null(old.column(WEIGHT).take(index), 0)
    count = pc.add(before, changed.column(WEIGHT))
    # (a row neither held nor kept, a retraction of one that left state, is not staged: nothing to delete)
    held = pc.or_(pc.greater(count, 0), pc.greater(before, 0))
    new = consolidated(pa.concat_tables([old, changed]))
    new = new.filter(pc.greater(new.column(WEIGHT), 0))
    if ends is None:
        staged = pa.concat_tables(
            [
                pa.table(
                    [*changed.columns[:-2], count, pc.less_equal(count, 0)], names=[*columns, COUNT, DELETE]
                ).filter(held),
                pa.table(
                    [
                        *elsewhere.columns[:-2],
                        pa.repeat(pa.scalar(0, count.type), elsewhere.num_rows),
                        pa.repeat(True, elsewhere.num_rows),
                    ],
                    names=[*columns, COUNT, DELETE],
                ),
            ]
        )
    else:
        assert old_ends is not None
        # The rows whose count moved or whose exact NEEDED_UNTIL passed the one held (as _stage_ends), and the
        # removal of those gone.
        at = align(
            [normalized(c) for c in new.columns[:-2]], [normalized(c) for c in old.columns[:-2]]
        ).combine_chunks()
        exact, held_end = ends(new), old_ends.take(at)
        moved = pc.or_(
            pc.or_(
                pc.not_equal(new.column(WEIGHT), pc.fill_null(old.column(WEIGHT).take(at), 0)),
                pc.not_equal(pc.is_null(exact), pc.is_null(held_end)),
            ),
            pc.fill_null(pc.greater(exact, held_end), False),
        ).combine_chunks()
        end = pc.add(exact, slack)
        gone = pc.and_(pc.less_equal(count, 0), held).combine_chunks()
        kept, n_gone = new.filter(moved), pc.sum(gone).as_py() or 0
        names = [*columns, COUNT, NEEDED_UNTIL, DELETE]
        staged = pa.concat_tables(
            [
                pa.table(
                    [
                        *kept.columns[:-2],
                        kept.column(WEIGHT),
                        end.filter(moved),
                        pa.repeat(False, kept.num_rows),
                    ],
                    names=names,
                ),
                pa.table(
                    [
                        *[c.filter(gone) for c in changed.columns[:-2]],
                        count.filter(gone),
                        pa.nulls(n_gone, pa.int64()),
                        pa.repeat(True, n_gone),
                    ],
                    names=names,
                ),
            ],
            promote_options="permissive",
        )
    schema = batch.state.schema(name)
    if schema is not None:
        staged = pa.table(
            [cast(staged.column(n), schema.field(n).type) for n in schema.names] + [staged[DELETE]],
            names=[*schema.names, DELETE],
        )
    batch.state.stage(name, staged, columns, DELETE)
    return remaining, new, pa.concat_tables([old.slice(0, 0) if fold is None else folded, elsewhere])


def _held_rows(
    batch: DriverBatch,
    name: str,
    changed: pa.Table,
    columns: list[str],
    partition: Sequence[exp.Expression],
    fields: Sequence[Field],
    with_ends: bool,
) -> tuple[pa.Table, pa.Array | None]:
    """The state's rows of the partitions `changed` touches, as a Z-set like `changed`, weighted by their
    multiplicity (at no time), and (`with_ends`) their NEEDED_UNTIL. Partitions by plain columns are looked up
    by their values; by expressions, the whole state is read and its rows matched by their partitions'
    values."""
    schema = batch.state.schema(name)
    if schema is None:
        return changed.slice(0, 0), pa.array([], pa.int64()) if with_ends else None
    if set(schema.names) != {*columns, COUNT, *([NEEDED_UNTIL] if with_ends else [])}:
        raise NotOnDriver(f"state {name} holds other columns than this rule keeps")
    keys = [columns[_position(p, fields)] for p in partition if isinstance(p, exp.Column)]
    if partition and len(keys) == len(partition):
        touched = pa.table(
            [cast(changed.column(columns.index(k)), schema.field(k).type) for k in keys], names=keys
        )
        found = batch.state.lookup(name, touched, keys)
    else:
        found = batch.state.read_all(name)
    assert found is not None  # (its schema was found)
    most = batch.state.policy.driver_read_rows
    if found.num_rows > most:
        raise NotOnDriver(f"the batch's partitions hold more than {most} rows of state {name}")
    rows = _as_zset(found, columns, changed)
    ends = pc.cast(found.column(NEEDED_UNTIL), pa.int64()).combine_chunks() if with_ends else None
    if partition and len(keys) < len(partition):  # (the partitions `changed` touches, by their values)
        mine = evaluate_all(partition, rows, fields)
        theirs = evaluate_all(partition, changed, fields)
        at = align([normalized(c) for c in mine], [normalized(c) for c in distinct_values(theirs)])
        rows = rows.filter(pc.is_valid(at))
        ends = None if ends is None else ends.filter(pc.is_valid(at))
    return rows, ends


def _as_zset(found: pa.Table, columns: list[str], changed: pa.Table) -> pa.Table:
    """State rows (`columns`, `_n`, ...) as a Z-set of `changed`'s types, weighted by multiplicity (at no time)."""
    return zset(
        [cast(found.column(c), changed.schema.field(j).type) for j, c in enumerate(columns)],
        found.column(COUNT),
        pa.nulls(found.num_rows, changed.schema.field(MTIME).type),
    )


def _position(column: exp.Column, fields: Sequence[Field]) -> int:
    return next(
        i for i, f in enumerate(fields) if f.name == column.name and f.qualifier == (column.table or None)
    )


def distinct_values(columns: Sequence[pa.ChunkedArray]) -> list[pa.ChunkedArray]:
    """The distinct rows of `columns` (NULL with NULL, -0.0 with 0.0), as columns."""
    table = pa.table([normalized(c) for c in columns], names=[f"k{i}" for i in range(len(columns))])
    distinct = group_by(table, table.column_names).aggregate([])
    return [distinct.column(n) for n in table.column_names]


def partition_ids(parts: Sequence[pa.ChunkedArray], n: int) -> np.ndarray:
    """Each of `n` rows' partition (the values of `parts`), as a number: rows of equal partition values (NULL
    with NULL) share one."""
    if not parts:
        return np.zeros(n, np.int64)
    at = align([normalized(c) for c in parts], distinct_values(parts))
    ids: np.ndarray = at.to_numpy(zero_copy_only=False)
    return ids


def expanded(rows: pa.Table) -> pa.Table:
    """A Z-set weighted by multiplicity as one row per copy (`copies` on the driver)."""
    counts = rows.column(WEIGHT).to_numpy()
    if len(counts) and counts.max() > 1:
        return rows.take(pa.array(np.repeat(np.arange(len(counts)), counts)))
    return rows
