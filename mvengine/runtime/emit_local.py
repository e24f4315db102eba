"""A small batch's changelog, computed on the driver: the keyed half of `emit.py` (same rules, same output) over
the batch's changes collected once as Arrow, instead of the five Spark jobs its DataFrame form runs (the
consolidation checkpoint, the key revisions' read and pairing, the count with its uniqueness check). A Spark job
costs ~150 ms here whatever its size (benchmarks/README.md, the chain's phases); pairing a few thousand rows in
Python costs a few milliseconds. The results are Arrow tables, which the driver writes with delta-rs and the
views downstream take as local DataFrames.

Equality follows Spark's: NULL matches NULL, NaN matches NaN, -0.0 matches 0.0 (Python's own for the last).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.errors import MvError
from mvengine.incremental.state import StateStore
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.storage.api import DELETE_MARK
from mvengine.storage.tables import version_before
from mvengine.storage.types import spark_compatible_type

# The changelog's own columns after the view's (DESIGN.md §5); _mtime takes the type of the changes' _mtime.
CHANGELOG_COLUMNS = (("_op", pa.string()), ("_undo", pa.bool_()), ("_mtime", None), ("_version", pa.int64()),
                     ("_batch_id", pa.int64()), ("_emit_index", pa.int64()), ("_emit_timing", pa.string()))


@dataclass
class LocalChanges:
    """A batch's changes of a keyed view as Arrow tables (the fields of emit.ViewChanges, in Arrow)."""

    changelog: pa.Table
    upserts: pa.Table  # one row per changed key: its new row, or (DELETE_MARK true) its removal
    inserts: pa.Table
    revisions: pa.Table  # the changed keys' revisions, for the state table `emit`
    zset: pa.Table  # the view's columns, _w, _mtime
    rows: int
    retractions: int


def keyed_changes(view: str, changes: pa.Table, columns: Sequence[str], key: Sequence[str], state: StateStore,
                  emit_state: str, revision: str, *, consolidated: bool, version: int,
                  batch_id: int) -> LocalChanges:
    """Per key, `-D` (its row went), `+I` (a first row), `-U`/`+U` (old and new values); nothing for a key
    whose row is unchanged. `_emit_index` continues the key's revisions kept in `emit_state`."""
    rows = changes.select([*columns, WEIGHT, MTIME]).to_pylist()
    if not consolidated:
        rows = _consolidated(rows, columns)
    old: dict[tuple, dict[str, Any]] = {}
    new: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        k = tuple(_comparable(row[c]) for c in key)
        side = new if row[WEIGHT] > 0 else old
        if abs(row[WEIGHT]) != 1 or k in side:
            shown = ", ".join(f"{c}={row[c]!r}" for c in key)
            raise MvError(f"view {view}: its key ({', '.join(key)}) is not unique in this batch ({shown})",
                          hint="a source's PRIMARY KEY is NOT ENFORCED: remove the duplicate rows from the source, "
                               "or drop the PRIMARY KEY from its CREATE TABLE")
        side[k] = row
    changed = [k for k in {**old, **new}
               if not (k in old and k in new and _same_row(old[k], new[k], columns))]
    last = _revisions(state, emit_state, revision, key, [(old.get(k) or new[k]) for k in changed])

    value_fields = [changes.schema.field(c) for c in columns]
    out_log, upserts, inserts, revisions, zset = [], [], [], [], []
    retractions = 0
    for k in changed:
        before, after = old.get(k), new.get(k)
        previous = last.get(k)
        following = 0 if previous is None else previous + 1
        mtime = (after or before)[MTIME]
        if before is not None and after is not None:
            out_log += [_logged(before, "-U", True, mtime, previous), _logged(after, "+U", False, mtime, following)]
        elif before is not None:
            out_log.append(_logged(before, "-D", True, mtime, previous))
        else:
            out_log.append(_logged(after, "+I", False, mtime, following))
        if before is not None:
            retractions += 1
            zset.append({**{c: before[c] for c in columns}, WEIGHT: -1, MTIME: mtime})
        if after is not None:
            inserts.append({c: after[c] for c in columns})
            upserts.append({**{c: after[c] for c in columns}, DELETE_MARK: False})
            zset.append({**{c: after[c] for c in columns}, WEIGHT: 1, MTIME: mtime})
        else:
            upserts.append({**{c: (before[c] if c in key else None) for c in columns}, DELETE_MARK: True})
        source = after or before
        revisions.append({**{c: source[c] for c in key}, revision: following if after is not None else previous})
    for row in out_log:
        row.update(_version=version, _batch_id=batch_id, _emit_timing=None)
    mtime_type = changes.schema.field(MTIME).type
    key_fields = [changes.schema.field(c) for c in key]
    return LocalChanges(
        changelog=_table(out_log, [*value_fields, *[pa.field(n, t or mtime_type) for n, t in CHANGELOG_COLUMNS]]),
        upserts=_table(upserts, [*value_fields, pa.field(DELETE_MARK, pa.bool_())]),
        inserts=_table(inserts, value_fields),
        revisions=_table(revisions, [*key_fields, pa.field(revision, pa.int64())]),
        zset=_table(zset, [*value_fields, pa.field(WEIGHT, pa.int64()), pa.field(MTIME, mtime_type)]),
        rows=len(out_log), retractions=retractions)


def _consolidated(rows: list[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """Equal rows summed into one with their net weight and latest _mtime; rows that cancel out are gone."""
    merged: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        k = tuple(_comparable(row[c]) for c in columns)
        found = merged.get(k)
        if found is None:
            merged[k] = dict(row)
        else:
            found[WEIGHT] += row[WEIGHT]
            if row[MTIME] is not None and (found[MTIME] is None or row[MTIME] > found[MTIME]):
                found[MTIME] = row[MTIME]
    return [row for row in merged.values() if row[WEIGHT] != 0]


def _revisions(state: StateStore, name: str, revision: str, key: Sequence[str],
               rows: list[dict[str, Any]]) -> dict[tuple, int]:
    """The last revision of each of the rows' keys, as the state table held it before the batch."""
    ref = state.ref(name)
    if not rows or not ref.exists():
        return {}
    dataset = ref.open(version=version_before(ref, state.app_id, state.batch_id)).to_pyarrow_dataset()
    first = [row[key[0]] for row in rows]
    values = [v for v in first if v is not None]
    # Files written by delta-rs's MERGE hold strings as string_view, which compares with string only by a cast.
    column_type = spark_compatible_type(dataset.schema.field(key[0]).type)
    column = pc.field(key[0]).cast(column_type)
    wanted = column.isin(pa.array(values, type=column_type)) if values else None
    if len(values) < len(first):
        wanted = column.is_null() if wanted is None else wanted | column.is_null()
    found = dataset.to_table(columns=[*key, revision], filter=wanted).to_pylist()
    return {tuple(_comparable(r[c]) for c in key): r[revision] for r in found}


def _same_row(a: dict[str, Any], b: dict[str, Any], columns: Sequence[str]) -> bool:
    return all(_comparable(a[c]) == _comparable(b[c]) for c in columns)


_NAN = ("NaN",)


def _comparable(value: Any) -> Any:
    """A value that compares and hashes as Spark's `<=>` compares (nested values made hashable)."""
    if isinstance(value, float):
        return _NAN if math.isnan(value) else value
    if isinstance(value, dict):
        return tuple((k, _comparable(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_comparable(v) for v in value)
    return value


def _logged(row: dict[str, Any], op: str, undo: bool, mtime: Any, index: int | None) -> dict[str, Any]:
    return {**{c: v for c, v in row.items() if c not in (WEIGHT, MTIME)}, "_op": op, "_undo": undo, "_mtime": mtime,
            "_emit_index": index}


def _table(rows: list[dict[str, Any]], fields: list[pa.Field]) -> pa.Table:
    """The rows with the given columns, every one nullable (as Spark's outer-join form has them)."""
    return pa.Table.from_pylist(rows, schema=pa.schema([f.with_nullable(True) for f in fields]))
