"""From a batch's changes of a view (a Z-set) to its changelog rows and the edit of its snapshot (DESIGN.md §5).

Keyed views (seed 003): per key, a first row is `+I`, a changed row `-U` (the old values) then `+U` (the new),
a row that goes away `-D`; a key whose row did not change emits nothing. `_emit_index` counts the revisions of
each key's row (0 for its first), kept in the view's state table `emit`. Bags: `+I` and `-D` rows, one per unit
of multiplicity, with `_emit_index` 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from mvengine.errors import DuplicateKeyError
from mvengine.incremental.batch import Batch, collect_small
from mvengine.incremental.driver import read_before
from mvengine.incremental.driver_expressions import NotOnDriver
from mvengine.incremental.state import StateStore
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, null_safe_equal, quote
from mvengine.plan.analysis import changes_once_per_key, key_is_guaranteed
from mvengine.plan.view_plan import ViewPlan
from mvengine.runtime.emit_driver import bag_changes, count_rows, keyed_changes
from mvengine.storage.api import DELETE_MARK, read_table
from mvengine.storage.tables import TableRef

EMIT_STATE = "emit"
REVISION = "_rev"


@dataclass
class ViewChanges:
    """A batch's changes of a view: DataFrames, or Arrow tables when they were computed on the driver
    (emit_driver.py)."""

    changelog: DataFrame | pa.Table  # the view's columns, then _op, _undo, _mtime, _version, _batch_id,
    #                                  _emit_index, _emit_timing
    deletes: DataFrame | pa.Table | None  # rows whose key columns name what the snapshot loses (all copies)
    inserts: DataFrame | pa.Table  # rows the snapshot gains
    keys: list[str]  # the columns `deletes` matches on
    rows: int  # changelog rows
    # The snapshot's change as a Z-set (the view's columns, _w, _mtime), for the views downstream to take in
    # memory, and how many of its rows retract (weigh -1).
    zset: DataFrame | pa.Table
    retractions: int
    # Keyed views: the same edit as one row per changed key, its new row or (DELETE_MARK true) its removal,
    # for an upsert by key; None for bags, views of one row, and batches that change nothing.
    upserts: DataFrame | pa.Table | None = None
    # allowed_lateness: the input rows not applied (row JSON, event_time, _w), for the view's `late` table
    late: DataFrame | pa.Table | None = None


def view_changes(
    plan: ViewPlan,
    zset: DataFrame,
    batch: Batch,
    *,
    snapshot: TableRef,
    snapshot_before: int | None,
    batch_id: int,
) -> ViewChanges:
    """The changes of a batch computed by Spark; when the batch is small, its Z-set is collected once and the
    rest is done on the driver."""
    if batch.state.on_driver:
        collected = collect_small(zset, batch.state.policy.collect_to_driver)
        if collected is not None:
            try:
                return changes_on_driver(
                    plan,
                    collected,
                    batch.state,
                    snapshot=snapshot,
                    snapshot_before=snapshot_before,
                    batch_id=batch_id,
                )
            except NotOnDriver:  # (before anything is staged) a type the driver does not compare: Spark does
                pass
    columns = [c.name for c in plan.columns]
    version = (snapshot_before + 1) if snapshot_before is not None else 0
    # Computed once here: everything below reads these rows several times. (Changes that hold one old and one
    # new row per key at most need no consolidation: _keyed drops a key whose old and new rows are equal.)
    if not changes_once_per_key(plan.root):
        zset = consolidate(zset, columns)
    changes = batch.keep(zset)
    if plan.key is not None:
        return _keyed(plan, changes, columns, batch, version, batch_id)
    return _bag(batch.spark, changes, columns, snapshot, snapshot_before, version, batch_id)


def changes_on_driver(
    plan: ViewPlan,
    zset: pa.Table,
    state: StateStore,
    *,
    snapshot: TableRef,
    snapshot_before: int | None,
    batch_id: int,
) -> ViewChanges:
    """`view_changes` over a Z-set on the driver (emit_driver.py); the key revisions are staged in `state`."""
    columns = [c.name for c in plan.columns]
    version = (snapshot_before + 1) if snapshot_before is not None else 0
    if plan.key is not None:
        key = list(plan.key)
        found = keyed_changes(
            plan.name,
            zset,
            columns,
            key,
            lambda keys: state.lookup(EMIT_STATE, keys, key),
            REVISION,
            consolidated=changes_once_per_key(plan.root),
            version=version,
            batch_id=batch_id,
        )
        if found.revisions is not None and found.rows:
            state.stage(EMIT_STATE, found.revisions, key)
    else:

        def copies_before(rows: pa.Table) -> pa.Table:
            assert snapshot_before is not None  # asked only when there is a snapshot
            return count_rows(
                read_before(
                    snapshot,
                    snapshot_before,
                    (columns[0], rows.column(columns[0])),
                    state.policy.driver_read_rows,
                )
            )

        found = bag_changes(
            zset,
            columns,
            copies_before if snapshot_before is not None else None,
            version=version,
            batch_id=batch_id,
        )
    return ViewChanges(
        found.changelog,
        found.deletes,
        found.inserts,
        found.keys,
        found.rows,
        found.zset,
        found.retractions,
        found.upserts if found.rows else None,
    )


def _keyed(
    plan: ViewPlan, changes: DataFrame, columns: list[str], batch: Batch, version: int, batch_id: int
) -> ViewChanges:
    key = list(plan.key or ())
    copies = F.abs(F.col(WEIGHT)).alias("_n")  # more than 1: the key occurs twice (checked in _count_keyed)
    old = changes.where(F.col(WEIGHT) < 0).select(
        *[quote(c) for c in columns], MTIME, F.lit(True).alias("_in"), copies
    )
    new = changes.where(F.col(WEIGHT) > 0).select(
        *[quote(c) for c in columns], MTIME, F.lit(True).alias("_in"), copies
    )
    o, n = old.alias("o"), new.alias("n")
    pairs = o.join(n, null_safe_equal(o, n, key), "full_outer").select(
        F.struct(*[F.col(f"o.{quote(c)}").alias(c) for c in columns]).alias("old"),
        F.struct(*[F.col(f"n.{quote(c)}").alias(c) for c in columns]).alias("new"),
        F.coalesce(F.col("o._in"), F.lit(False)).alias("_had"),
        F.coalesce(F.col("n._in"), F.lit(False)).alias("_has"),
        F.coalesce(F.col(f"n.{MTIME}"), F.col(f"o.{MTIME}")).alias(MTIME),
        F.greatest(F.coalesce(F.col("o._n"), F.lit(0)), F.coalesce(F.col("n._n"), F.lit(0))).alias("_copies"),
        *[
            F.coalesce(F.col(f"n.{quote(k)}"), F.col(f"o.{quote(k)}")).alias(f"_k{i}")
            for i, k in enumerate(key)
        ],
    )
    pairs = pairs.where(~(F.col("_had") & F.col("_has") & F.col("old").eqNullSafe(F.col("new"))))
    key_columns = [F.col(f"_k{i}").alias(k) for i, k in enumerate(key)]
    affected = pairs.select(*key_columns)
    template = affected.select("*", F.lit(0).cast("long").alias(REVISION)).limit(0)
    revisions = batch.state.read_candidates(EMIT_STATE, template, affected, key).alias("r")
    p = pairs.alias("p")
    joined = p.join(revisions, _key_match(key, "p", "r"), "left")
    last = F.col(f"r.{REVISION}")
    next_revision = F.when(last.isNull(), F.lit(0)).otherwise(last + 1)
    rows = batch.keep(joined.select("p.*", last.alias("_last"), next_revision.alias("_next")))
    had, has = F.col("_had"), F.col("_has")

    def side(which: str, op: str, undo: bool, index: Column, condition: Column) -> DataFrame:
        return rows.where(condition).select(
            *[F.col(f"{which}.{quote(c)}").alias(c) for c in columns],
            F.lit(op).alias("_op"),
            F.lit(undo).alias("_undo"),
            F.col(MTIME).alias("_mtime"),
            index.cast("long").alias("_emit_index"),
        )

    changelog = (
        side("old", "-D", True, F.col("_last"), had & ~has)
        .unionByName(side("new", "+I", False, F.col("_next"), ~had & has))
        .unionByName(side("old", "-U", True, F.col("_last"), had & has))
        .unionByName(side("new", "+U", False, F.col("_next"), had & has))
    )
    kept_revision = F.when(has, F.col("_next")).otherwise(F.col("_last"))
    batch.state.stage(
        EMIT_STATE,
        rows.select(
            *[F.col(f"_k{i}").alias(k) for i, k in enumerate(key)], kept_revision.cast("long").alias(REVISION)
        ),
        key,
    )
    deletes = rows.select(*[F.col(f"_k{i}").alias(k) for i, k in enumerate(key)])
    inserts = rows.where(has).select(*[F.col(f"new.{quote(c)}").alias(c) for c in columns])
    key_column = {k: F.col(f"_k{i}") for i, k in enumerate(key)}
    upserts = rows.select(
        *[key_column.get(c, F.col(f"new.{quote(c)}")).alias(c) for c in columns], (~has).alias(DELETE_MARK)
    )
    zset = (
        rows.where(had)
        .select(
            *[F.col(f"old.{quote(c)}").alias(c) for c in columns], F.lit(-1).cast("long").alias(WEIGHT), MTIME
        )
        .unionByName(
            rows.where(has).select(
                *[F.col(f"new.{quote(c)}").alias(c) for c in columns],
                F.lit(1).cast("long").alias(WEIGHT),
                MTIME,
            )
        )
    )
    count, retractions = _count_keyed(plan, rows, key)
    return ViewChanges(
        _finish(changelog, version, batch_id),
        deletes if count else None,
        inserts,
        key,
        count,
        zset,
        retractions,
        upserts if count and key else None,
    )


def _key_match(key: list[str], left: str, right: str) -> Column:
    condition = F.lit(True)
    for i, k in enumerate(key):
        condition = condition & F.col(f"{left}._k{i}").eqNullSafe(F.col(f"{right}.{quote(k)}"))
    return condition


def _bag(
    spark: SparkSession,
    changes: DataFrame,
    columns: list[str],
    snapshot: TableRef,
    snapshot_before: int | None,
    version: int,
    batch_id: int,
) -> ViewChanges:
    w = F.col(WEIGHT)
    copies = F.explode(F.sequence(F.lit(1), F.abs(w).cast("int")))
    changelog = changes.select(
        *[quote(c) for c in columns],
        F.when(w > 0, "+I").otherwise("-D").alias("_op"),
        (w < 0).alias("_undo"),
        F.col(MTIME).alias("_mtime"),
        F.lit(0).cast("long").alias("_emit_index"),
        copies.alias("_copy"),
    ).drop("_copy")
    removed = changes.where(w < 0)
    totals = changes.agg(
        F.sum(F.abs(w)).alias("rows"), F.sum(F.when(w < 0, -w).otherwise(0)).alias("removed")
    )
    total = totals.collect()[0]
    count, removed_rows = int(total["rows"] or 0), int(total["removed"] or 0)
    zset = changes.select(*[quote(c) for c in columns], WEIGHT, MTIME)
    if snapshot_before is None:
        inserts = (
            changes.where(w > 0).select(*[quote(c) for c in columns], copies.alias("_copy")).drop("_copy")
        )
        return ViewChanges(
            _finish(changelog, version, batch_id), None, inserts, columns, count, zset, removed_rows
        )
    # A bag row that loses copies is removed entirely and put back as many times as it still occurs.
    before = read_table(spark, snapshot, version=snapshot_before).alias("s")
    r = removed.alias("r")
    counts = (
        before.join(r, null_safe_equal(before, r, columns), "left_semi")
        .groupBy(*[quote(c) for c in columns])
        .agg(F.count(F.lit(1)).alias("_before"))
        .alias("b")
    )
    remaining = r.join(counts, null_safe_equal(r, counts, columns), "left").select(
        *[F.col(f"r.{quote(c)}").alias(c) for c in columns],
        (F.coalesce(F.col("b._before"), F.lit(0)) + F.col(f"r.{WEIGHT}")).alias("_left"),
    )
    kept = (
        remaining.where(F.col("_left") > 0)
        .select(
            *[quote(c) for c in columns],
            F.explode(F.sequence(F.lit(1), F.col("_left").cast("int"))).alias("_copy"),
        )
        .drop("_copy")
    )
    added = changes.where(w > 0).select(*[quote(c) for c in columns], copies.alias("_copy")).drop("_copy")
    return ViewChanges(
        _finish(changelog, version, batch_id),
        removed.select(*[quote(c) for c in columns]) if removed_rows else None,
        added.unionByName(kept),
        columns,
        count,
        zset,
        removed_rows,
    )


def _finish(changelog: DataFrame, version: int, batch_id: int) -> DataFrame:
    columns = [c for c in changelog.columns if c not in ("_op", "_undo", "_mtime", "_emit_index")]
    return changelog.select(
        *[quote(c) for c in columns],
        "_op",
        "_undo",
        "_mtime",
        F.lit(version).cast("long").alias("_version"),
        F.lit(batch_id).cast("long").alias("_batch_id"),
        "_emit_index",
        F.lit(None).cast("string").alias("_emit_timing"),
    )


def _count_keyed(plan: ViewPlan, pairs: DataFrame, key: list[str]) -> tuple[int, int]:
    """The number of changelog rows and of old rows among them, checking (in the same Spark job) that no key
    occurs twice: a batch holds at most one old and one new row per key, unless an input broke its declared
    PRIMARY KEY (which is NOT ENFORCED) — then the snapshot cannot be updated by key. Keys unique by construction
    need no check."""
    rows = F.when(F.col("_had") & F.col("_has"), 2).otherwise(1)  # changelog rows of one pair
    old = F.col("_had").cast("long")
    if key_is_guaranteed(plan.root):
        total = pairs.agg(F.sum(rows).alias("rows"), F.sum(old).alias("old")).collect()[0]
        return int(total["rows"] or 0), int(total["old"] or 0)
    per_key = pairs.groupBy(*[f"_k{i}" for i in range(len(key))]).agg(
        F.sum("_copies").alias("_pairs"),
        F.sum(rows).alias("_rows"),
        F.sum(old).alias("_old"),
        F.first(F.struct(*[F.col(f"_k{i}") for i in range(len(key))])).alias("_key"),
    )
    total = per_key.agg(
        F.sum("_rows").alias("rows"),
        F.sum("_old").alias("old"),
        F.max("_pairs").alias("most"),
        F.max_by("_key", "_pairs").alias("key"),
    ).collect()[0]
    if total["most"] is not None and total["most"] > 1:
        shown = ", ".join(f"{c}={v!r}" for c, v in zip(key, total["key"]))
        raise DuplicateKeyError(plan.name, shown)
    return int(total["rows"] or 0), int(total["old"] or 0)
