"""A batch's changelog and snapshot edit computed on the driver, in Arrow: the rules of `emit.py` (same rows,
same `_emit_index`es) over the view's changes when the batch was computed on the driver (or collected there),
instead of the Spark jobs of the DataFrame form (the consolidation, the key revisions' read and pairing, the
count with its uniqueness check). A Spark job costs ~150 ms here whatever its size; pairing a few thousand
rows in Arrow costs a millisecond.

Equality follows Spark's: NULL matches NULL, NaN matches NaN, -0.0 matches 0.0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.errors import DuplicateKeyError
from mvengine.incremental.driver import align, consolidated, data, match, same_values, zset
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.storage.api import DELETE_MARK

# The changelog's own columns after the view's (DESIGN.md §5); _mtime takes the type of the changes' _mtime.
CHANGELOG_COLUMNS = (
    ("_op", pa.string()),
    ("_undo", pa.bool_()),
    ("_mtime", None),
    ("_version", pa.int64()),
    ("_batch_id", pa.int64()),
    ("_emit_index", pa.int64()),
    ("_emit_timing", pa.string()),
)


@dataclass
class DriverChanges:
    """A batch's changes of a view as Arrow tables (the fields of emit.ViewChanges)."""

    changelog: pa.Table
    inserts: pa.Table  # rows the snapshot gains
    deletes: pa.Table | None  # rows whose `keys` columns name what the snapshot loses (all copies)
    keys: list[str]
    upserts: pa.Table | None  # keyed views: one row per changed key, its new row or (DELETE_MARK) its removal
    revisions: pa.Table | None  # keyed views: the changed keys' last revision, for the state table `emit`
    zset: pa.Table  # the view's columns, _w, _mtime: for the views downstream
    rows: int
    retractions: int


def keyed_changes(
    view: str,
    changes: pa.Table,
    columns: Sequence[str],
    key: Sequence[str],
    last_revisions: Callable[[pa.Table], pa.Table | None],
    revision: str,
    *,
    consolidated: bool,
    version: int,
    batch_id: int,
) -> DriverChanges:
    """Per key, `-D` (its row went), `+I` (a first row), `-U`/`+U` (old and new values); nothing for a key
    whose row is unchanged. `_emit_index` continues the key's revisions (`last_revisions` reads them: the keys'
    rows of the state table, with `revision`)."""
    changes = _consolidated(changes, columns) if not consolidated else changes
    weight = changes.column(WEIGHT)
    old, new = changes.filter(pc.less(weight, 0)), changes.filter(pc.greater(weight, 0))
    for side in (old, new):
        _require_unique(view, side, key)
    if key:
        oi, ni = match(
            [old.column(k) for k in key], [new.column(k) for k in key], "full outer", null_safe=True
        )
    else:  # a view of one row: its old and new row pair up
        oi = pa.chunked_array([pa.array([0] if old.num_rows else [None], pa.int64())])
        ni = pa.chunked_array([pa.array([0] if new.num_rows else [None], pa.int64())])
        if not (old.num_rows or new.num_rows):
            oi, ni = oi.slice(0, 0), ni.slice(0, 0)
    before, after = old.take(oi), new.take(ni)
    had, has = pc.is_valid(oi), pc.is_valid(ni)
    same = pc.and_(had, has)
    for c in columns:
        same = pc.and_(same, same_values(before.column(c), after.column(c)))
    changed = pc.invert(same)
    before, after, had, has = (
        before.filter(changed),
        after.filter(changed),
        had.filter(changed),
        has.filter(changed),
    )
    keys = pa.table([pc.if_else(has, after.column(k), before.column(k)) for k in key], names=list(key))
    mtime = pc.if_else(has, after.column(MTIME), before.column(MTIME))

    found = last_revisions(keys) if key else None
    last = (
        found.column(revision).take(align([keys.column(k) for k in key], [found.column(k) for k in key]))
        if found is not None
        else pa.nulls(len(mtime), pa.int64())
    )
    following = pc.if_else(pc.is_valid(last), pc.add(last, 1), pa.scalar(0, pa.int64()))

    # The changelog: each changed key's undo row (-D, -U) before its new row (+I, +U).
    both = pc.and_(had, has)
    undo_op = pc.if_else(both, pa.scalar("-U"), pa.scalar("-D"))
    new_op = pc.if_else(both, pa.scalar("+U"), pa.scalar("+I"))
    position = pa.array(range(len(mtime)), pa.int64())
    undo = _logged(before, columns, undo_op, True, mtime, last, position, 0).filter(had)
    done = _logged(after, columns, new_op, False, mtime, following, position, 1).filter(has)
    log = pa.concat_tables([undo, done])
    log = log.take(pc.sort_indices(log, [("_pair", "ascending"), ("_side", "ascending")])).drop_columns(
        ["_pair", "_side"]
    )
    n = log.num_rows
    log = (
        log.append_column("_version", pa.repeat(pa.scalar(version, pa.int64()), n))
        .append_column("_batch_id", pa.repeat(pa.scalar(batch_id, pa.int64()), n))
        .append_column("_emit_index", log.column("_index"))
        .drop_columns(["_index"])
        .append_column("_emit_timing", pa.nulls(n, pa.string()))
    )

    values = [f for f in changes.schema if f.name in columns]
    inserts = after.filter(has).select(list(columns))
    upserts = (
        pa.table(
            [
                *[
                    pc.if_else(has, after.column(c), keys.column(c) if c in key else pa.scalar(None, f.type))
                    for c, f in zip(columns, values)
                ],
                pc.invert(has),
            ],
            names=[*columns, DELETE_MARK],
        )
        if key
        else None
    )
    revisions = (
        pa.table([*keys.columns, pc.if_else(has, following, last)], names=[*key, revision]) if key else None
    )
    out = pa.concat_tables(
        [
            zset(
                [before.column(c) for c in columns], pa.repeat(pa.scalar(-1, pa.int64()), len(mtime)), mtime
            ).filter(had),
            zset(
                [after.column(c) for c in columns], pa.repeat(pa.scalar(1, pa.int64()), len(mtime)), mtime
            ).filter(has),
        ]
    )
    out = out.rename_columns([*columns, WEIGHT, MTIME])
    deletes = before.filter(had).select(list(columns)) if not key and before.num_rows else None
    return DriverChanges(
        log,
        inserts,
        deletes,
        list(key),
        upserts,
        revisions,
        out,
        n,
        pc.sum(pc.cast(had, pa.int64())).as_py() or 0,
    )


def bag_changes(
    changes: pa.Table,
    columns: Sequence[str],
    copies_before: Callable[[pa.Table], pa.Table] | None,
    *,
    version: int,
    batch_id: int,
) -> DriverChanges:
    """A view without a key changes by whole rows, one `+I` or `-D` per copy. A row that loses copies is
    removed from the snapshot entirely and put back as many times as it still occurs (`copies_before` counts
    a row's copies in the snapshot before the batch, `_n`; None: the snapshot starts here)."""
    changes = _consolidated(changes, columns)
    weight = changes.column(WEIGHT)
    copies = pc.abs(weight)
    repeated = changes.take(_repeat(copies))
    gained = pc.greater(repeated.column(WEIGHT), 0)
    n = repeated.num_rows
    log = (
        repeated.select(list(columns))
        .append_column("_op", pc.if_else(gained, pa.scalar("+I"), pa.scalar("-D")))
        .append_column("_undo", pc.invert(gained))
        .append_column("_mtime", repeated.column(MTIME))
        .append_column("_version", pa.repeat(pa.scalar(version, pa.int64()), n))
        .append_column("_batch_id", pa.repeat(pa.scalar(batch_id, pa.int64()), n))
        .append_column("_emit_index", pa.repeat(pa.scalar(0, pa.int64()), n))
        .append_column("_emit_timing", pa.nulls(n, pa.string()))
    )
    added = repeated.filter(gained).select(list(columns))
    removed = changes.filter(pc.less(weight, 0))
    retractions = pc.sum(pc.abs(removed.column(WEIGHT))).as_py() or 0
    deletes = None
    if copies_before is not None and removed.num_rows:
        counted = copies_before(removed.select(list(columns)))
        found = counted.column("_n").take(
            align([removed.column(c) for c in columns], [counted.column(c) for c in columns])
        )
        left = pc.add(pc.fill_null(found, 0), removed.column(WEIGHT))
        kept = removed.filter(pc.greater(left, 0))
        added = pa.concat_tables(
            [added, kept.take(_repeat(left.filter(pc.greater(left, 0)))).select(list(columns))]
        )
        deletes = removed.select(list(columns))
    return DriverChanges(log, added, deletes, list(columns), None, None, changes, n, retractions)


def _consolidated(changes: pa.Table, columns: Sequence[str]) -> pa.Table:
    names = list(changes.column_names)
    merged = consolidated(
        changes.rename_columns([f"c{i}" for i in range(len(columns))] + names[len(columns) :])
    )
    return merged.rename_columns([*columns, WEIGHT, MTIME])


def _require_unique(view: str, side: pa.Table, key: Sequence[str]) -> None:
    """A batch holds at most one old and one new row per key, unless an input broke its declared PRIMARY KEY
    (NOT ENFORCED): the snapshot cannot then be updated by key."""
    weight = side.column(WEIGHT)
    several = pc.greater(pc.abs(weight), 1)
    repeated = None
    if pc.any(several).as_py():
        repeated = side.filter(several).slice(0, 1)
    elif key:
        counts = side.group_by(list(key), use_threads=False).aggregate([(WEIGHT, "count")])
        twice = counts.filter(pc.greater(counts.column(f"{WEIGHT}_count"), 1))
        repeated = twice.slice(0, 1) if twice.num_rows else None
    elif side.num_rows > 1:
        repeated = side.slice(0, 1)
    if repeated is not None:
        shown = ", ".join(f"{c}={repeated.column(c)[0].as_py()!r}" for c in key)
        raise DuplicateKeyError(view, shown)


def _logged(
    rows: pa.Table, columns: Sequence[str], op, undo: bool, mtime, index, pair, side: int
) -> pa.Table:
    n = rows.num_rows
    return pa.table(
        [
            *[rows.column(c) for c in columns],
            op,
            pa.repeat(pa.scalar(undo), n),
            mtime,
            index,
            pair,
            pa.repeat(pa.scalar(side, pa.int8()), n),
        ],
        names=[*columns, "_op", "_undo", "_mtime", "_index", "_pair", "_side"],
    )


def _repeat(counts: pa.ChunkedArray) -> pa.Array:
    """Row indices, each row's index as many times as its count."""
    import numpy as np

    values = (counts.combine_chunks() if isinstance(counts, pa.ChunkedArray) else counts).to_numpy()
    return pa.array(np.repeat(np.arange(len(values), dtype=np.int64), values.astype(np.int64)))


def count_rows(rows: pa.Table) -> pa.Table:
    """Each distinct row of `rows` once, with its number of copies `_n` (rows equal as Spark groups them)."""
    n = rows.num_rows
    merged = consolidated(
        zset(rows.columns, pa.repeat(pa.scalar(1, pa.int64()), n), pa.nulls(n, pa.timestamp("us", tz="UTC")))
    )
    return pa.table([*data(merged), merged.column(WEIGHT)], names=[*rows.column_names, "_n"])
