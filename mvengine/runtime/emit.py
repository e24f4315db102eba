"""From a batch's changes of a view (a Z-set) to its changelog rows and the edit of its snapshot (DESIGN.md §5),
written once against the engine interface (incremental/engine.py): Spark computes a large batch, the driver a
small one in Arrow (a Spark job costs ~150 ms here whatever its size; pairing a few thousand rows in Arrow
costs a millisecond).

Keyed views (seed 003): per key, a first row is `+I`, a changed row `-U` (the old values) then `+U` (the new),
a row that goes away `-D`; a key whose row did not change emits nothing. `_emit_index` counts the revisions of
each key's row (0 for its first), kept in the view's state table `emit` for the keys that have been revised or
removed: a key the table does not hold is at revision 0 when the snapshot has its row (so a key's first row,
most of what a batch of new keys or a bootstrap writes, costs the table nothing). A view of one row (no key)
has one. Bags: `+I` and `-D` rows, one per unit of multiplicity, with `_emit_index` 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from sqlglot import exp

from mvengine.errors import DuplicateKeyError
from mvengine.incremental.batch import Batch
from mvengine.incremental.collected import collect_small
from mvengine.incremental.driver import DriverBatch
from mvengine.incremental.driver_expressions import NotOnDriver
from mvengine.incremental.engine import ArrowEngine, Engine, SparkEngine
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.names import CHANGELOG_COLUMNS
from mvengine.plan.analysis import changes_once_per_key, key_is_guaranteed, row_by_row
from mvengine.plan.nodes import Node
from mvengine.plan.view_plan import ViewPlan
from mvengine.storage.api import DELETE_MARK
from mvengine.storage.tables import TableRef

EMIT_STATE = "emit"
REVISION = "_rev"
# The keys whose revision the state table keeps: every one a batch changes but a new key's first row.
_REVISED = "NOT (_has AND _next = 0)"


@dataclass
class ViewChanges:
    """A batch's changes of a view: DataFrames, or Arrow tables when they were computed on the driver."""

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
    # On the driver: the input rows the rules read as they were before the batch (a join's other side, the
    # facts a temporal filter or join re-reads): what the batch had to touch beyond its changes. None in Spark.
    rows_read: int | None = None
    expired: int = 0  # the keys the view's state_ttl expired in the batch
    # A redefinition that changed the view's columns: the changelog's earlier rows in the new columns. The
    # snapshot is then written anew with `inserts` (all its rows), the changelog with these and `changelog`.
    history: DataFrame | None = None
    # The key's uniqueness is left to the snapshot's first write, which sorts the rows by it (a first batch
    # in Spark, whose rows are too many to shuffle once more only to count each key).
    unique_on_write: bool = False

    @property
    def in_arrow(self) -> bool:
        """Whether every table the batch writes is an Arrow table (its writes run no Spark job)."""
        written = (self.changelog, self.deletes, self.inserts, self.upserts, self.late)
        return self.history is None and all(t is None or isinstance(t, pa.Table) for t in written)


def view_changes(
    plan: ViewPlan,
    zset: DataFrame | pa.Table,
    batch: Batch | DriverBatch,
    *,
    snapshot: TableRef,
    snapshot_before: int | None,
    batch_id: int,
    inserts_only: bool = False,
    version: int | None = None,
) -> ViewChanges:
    """The changes of a batch: on the driver when it was computed there (`zset` in Arrow), or when Spark
    computed it but its Z-set is small (collected once); else by Spark. `inserts_only`: `zset` holds no
    retraction (an append-only view's incremental batch). `version`: the snapshot version the changes make
    (default: the one after `snapshot_before`, or 0)."""
    # The view's first rows (a bootstrap of a view without a snapshot or key revisions): every key's row is its
    # first, with nothing to pair it with or revise.
    first = snapshot_before is None and batch.state.schema(EMIT_STATE) is None
    # A view with an allowed_lateness: the batch's MERGE into the revisions drops those of windows past it,
    # so every changed key is written (the MERGE then runs whenever the view changes, as it drops them).
    purging = EMIT_STATE in batch.state.purge
    emit = _Emit(plan, snapshot, snapshot_before, batch_id, inserts_only, version, first, purging)
    if isinstance(zset, pa.Table):  # the driver's rules give Arrow (Spark's, when they handed off to it)
        driver = batch if isinstance(batch, DriverBatch) else DriverBatch({}, batch.state)
        return emit.changes(ArrowEngine(driver, _no_child), zset)
    assert isinstance(batch, Batch)  # Spark's rules give DataFrames
    collected = collect_small(zset, batch.state.policy.collect_to_driver) if batch.state.on_driver else None
    if collected is not None:
        try:
            return emit.changes(ArrowEngine(DriverBatch({}, batch.state), _no_child), collected)
        except NotOnDriver:  # (before anything is staged) a type the driver does not compare: Spark does
            pass
    # Too many changes to collect: so are the rows computed from them, which Spark keeps where it computed them.
    emit.check_on_write = _checked_on_write(plan)
    return emit.changes(SparkEngine(batch, _no_child, collect_small=collected is not None), zset)


def _checked_on_write(plan: ViewPlan) -> bool:
    """Whether the snapshot's first write may check the view's key (storage.api.write_table's `unique`): the
    batch writes nothing before the snapshot (a row-by-row view keeps no operator state), and its key's
    equality is the same in Arrow and in Spark (no floating point: Spark groups NaN with NaN, -0.0 with 0.0;
    nothing nested)."""
    key = plan.key or ()
    types = {c.name: c.type for c in plan.columns}
    return (
        bool(key)
        and row_by_row(plan.root)
        and not key_is_guaranteed(plan.root)
        and not plan.view.expectations
        and not any(types[k].is_type(*exp.DataType.FLOAT_TYPES, *exp.DataType.NESTED_TYPES) for k in key)
    )


def _no_child(node: Node, batch: Any) -> Any:
    raise AssertionError("a view's changelog reads no node's changes")


@dataclass
class _Emit:
    plan: ViewPlan
    snapshot: TableRef
    snapshot_before: int | None
    batch_id: int
    inserts_only: bool
    version: int | None
    first: bool
    purging: bool
    check_on_write: bool = False  # a first batch's key checked by the snapshot's write (_checked_on_write)
    columns: list[str] = field(init=False)  # the view's
    values: list[str] = field(init=False)  # the same inside the rule: the engine's SQL names them

    def __post_init__(self) -> None:
        self.columns = [c.name for c in self.plan.columns]
        self.values = [f"_v{i}" for i in range(len(self.columns))]

    def changes(self, engine: Engine[Any], zset: Any) -> ViewChanges:
        """The rule. The view's columns are named `_v<i>` inside it, `_o<i>` and `_n<i>` as a key's old and new
        row."""
        changes = engine.rename(zset, dict(zip(self.columns, self.values)))
        # (Changes that hold one old and one new row per key at most need no consolidation: a key whose old
        # and new rows are equal is dropped. Nor do a bag's inserts alone: each copy is logged as it comes, nor
        # the first rows of a view each of whose rows comes of one input row: they are all inserts.)
        if not (
            changes_once_per_key(self.plan.root)
            or (self.inserts_only and self.plan.key is None)
            or (self.first and row_by_row(self.plan.root))
        ):
            changes = engine.consolidate(changes, self.values)
        changes = engine.keep(changes)  # read several times below
        if self.plan.key and self.first:
            return self._first_keyed(engine, changes, list(self.plan.key))
        if self.plan.key is not None:
            return self._keyed(engine, changes, list(self.plan.key))
        return self._bag(engine, changes)

    def _keyed(self, engine: Engine[Any], changes: Any, key: list[str]) -> ViewChanges:
        n = len(self.values)
        olds, news = [f"_o{i}" for i in range(n)], [f"_n{i}" for i in range(n)]
        at = [self.columns.index(k) for k in key]
        keys = {f"_k{i}": k for i, k in enumerate(key)}

        def side(sign: str, names: list[str], present: str) -> Any:
            rows = engine.where(changes, f"{WEIGHT} {sign} 0")
            renamed = dict(zip(self.values, names)) | {WEIGHT: f"{present}_w", MTIME: f"{present}_t"}
            return engine.compute(engine.rename(rows, renamed), {present: "true"})

        pairs = engine.outer(
            side("<", olds, "_had"), side(">", news, "_has"), [(olds[p], news[p]) for p in at]
        )
        pairs = engine.same(pairs, olds, news, "_same")
        copies = "CASE WHEN abs(coalesce(_had_w, 0)) > abs(coalesce(_has_w, 0)) THEN abs(_had_w) ELSE abs(_has_w) END"
        pairs = engine.compute(
            pairs,
            {
                "_had": "coalesce(_had, false)",
                "_has": "coalesce(_has, false)",
                MTIME: "coalesce(_has_t, _had_t)",
                "_copies": copies,  # more than 1 (summed by key): the key occurs twice
                **{k: f"coalesce({news[p]}, {olds[p]})" for k, p in zip(keys, at)},
            },
        )
        pairs = engine.where(pairs, "NOT (_had AND _has AND _same)")

        rows = engine.with_state(pairs, EMIT_STATE, list(keys), {REVISION: "BIGINT"}, named=key)
        rows = engine.compute(
            rows,
            {
                # (a key the table does not hold is at revision 0 if it had a row)
                "_was": f"coalesce({REVISION}, CAST(0 AS BIGINT))",
                "_next": f"CASE WHEN {REVISION} IS NOT NULL THEN {REVISION} + 1 "
                "WHEN _had THEN CAST(1 AS BIGINT) ELSE CAST(0 AS BIGINT) END",
                "_both": "_had AND _has",
                "_rows": "CASE WHEN _had AND _has THEN 2 ELSE 1 END",
            },
        )
        rows = engine.keep(rows)
        count, retractions, revised = self._count(engine, rows, keys)

        logged = engine.updates(
            rows,
            [*olds, "_both", "_was"],
            [*news, "_both", "_next"],
            [*self.values, "_both", "_index"],
            "_had",
            "_has",
        )
        zset = self._named(engine, engine.select(logged, [*self.values, WEIGHT, MTIME]))
        op = (
            f"CASE WHEN {WEIGHT} < 0 THEN (CASE WHEN _both THEN '-U' ELSE '-D' END) "
            "ELSE (CASE WHEN _both THEN '+U' ELSE '+I' END) END"
        )
        changelog = self._changelog(engine, logged, op, "_index")
        inserts = engine.rename(
            engine.select(engine.where(rows, "_has"), news), dict(zip(news, self.columns))
        )
        deletes = engine.rename(engine.select(rows, list(keys)), keys)
        if not key:  # a view of one row: its old row goes
            deletes = engine.rename(
                engine.select(engine.where(rows, "_had"), olds), dict(zip(olds, self.columns))
            )
        upserts = None
        if count and key:
            sources = [f"_k{key.index(c)}" if c in key else new for c, new in zip(self.columns, news)]
            upserts = engine.rename(
                engine.select(engine.compute(rows, {DELETE_MARK: "NOT _has"}), [*sources, DELETE_MARK]),
                dict(zip(sources, self.columns)),
            )
        if revised or (count and self.purging):  # (last: a NotOnDriver above leaves nothing staged)
            # A view with a state_ttl keeps no revision of a key that left it (its state ends with its row):
            # one that comes back starts again at revision 0. A key's first row needs no revision kept.
            gone = "NOT _has" if self.plan.view.state_ttl is not None else "false"
            kept = engine.compute(
                rows if self.purging else engine.where(rows, _REVISED),
                {REVISION: "CASE WHEN _has THEN _next ELSE _was END", "_gone": gone},
            )
            engine.stage(
                EMIT_STATE,
                engine.rename(engine.select(kept, [*keys, REVISION, "_gone"]), keys),
                key,
                [REVISION],
                "_gone",
            )
        return ViewChanges(
            changelog,
            deletes if count else None,
            inserts,
            key,
            count,
            zset,
            retractions,
            upserts,
        )

    def _first_keyed(self, engine: Engine[Any], changes: Any, key: list[str]) -> ViewChanges:
        """A keyed view's first rows: each a `+I` at revision 0, kept by no state table; no old row to pair it
        with (what a bootstrap of 100M rows would otherwise join them against), the keys still checked."""
        keys = {f"_k{i}": k for i, k in enumerate(key)}
        rows = engine.where(changes, f"{WEIGHT} > 0")
        rows = engine.compute(
            rows,
            {
                "_had": "false",
                "_has": "true",
                "_next": "CAST(0 AS BIGINT)",
                "_rows": "1",
                "_copies": WEIGHT,  # more than 1: the key occurs twice
                **{k: self.values[self.columns.index(c)] for k, c in keys.items()},
            },
        )
        if self.check_on_write:  # (each row of weight 1: a first batch of a row-by-row view, unconsolidated)
            count = int(engine.one_row(engine.aggregate(rows, {}, {"rows": ("sum", "_rows")}))["rows"] or 0)
        else:
            count, _, _ = self._count(engine, rows, keys)
        logged = engine.compute(rows, {WEIGHT: "CAST(1 AS BIGINT)", "_index": "CAST(0 AS BIGINT)"})
        zset = self._named(engine, engine.select(logged, [*self.values, WEIGHT, MTIME]))
        changelog = self._changelog(engine, logged, "'+I'", "_index")
        inserts = self._named(engine, engine.select(rows, self.values))
        return ViewChanges(changelog, None, inserts, key, count, zset, 0, unique_on_write=self.check_on_write)

    def _count(self, engine: Engine[Any], rows: Any, keys: dict[str, str]) -> tuple[int, int, int]:
        """The number of changelog rows, of old rows among them and of keys whose revision the state keeps,
        checking (in the same Spark job) that no key occurs twice: a batch holds at most one old and one new
        row per key, unless an input broke its declared PRIMARY KEY (which is NOT ENFORCED) — then the snapshot
        cannot be updated by key. Keys unique by construction need no check."""
        rows = engine.compute(
            rows,
            {
                "_old": "CASE WHEN _had THEN 1 ELSE 0 END",
                "_revised": f"CASE WHEN {_REVISED} THEN 1 ELSE 0 END",
            },
        )
        counted = {"rows": ("sum", "_rows"), "old": ("sum", "_old"), "revised": ("sum", "_revised")}
        if key_is_guaranteed(self.plan.root):
            total = engine.one_row(engine.aggregate(rows, {}, counted))
            return int(total["rows"] or 0), int(total["old"] or 0), int(total["revised"] or 0)
        sums = {"_pairs": ("sum", "_copies"), **{f"_{k}": (f, c) for k, (f, c) in counted.items()}}
        per_key = engine.aggregate(rows, {k: k for k in keys}, sums)
        total = engine.one_row(
            engine.aggregate(
                per_key,
                {},
                {**{k: ("sum", f"_{k}") for k in counted}, "most": ("max", "_pairs")},
            )
        )
        if total["most"] is not None and total["most"] > 1:
            twice = engine.one_row(engine.where(per_key, "_pairs > 1"))
            shown = ", ".join(f"{c}={twice[k]!r}" for k, c in keys.items())
            raise DuplicateKeyError(self.plan.name, shown)
        return int(total["rows"] or 0), int(total["old"] or 0), int(total["revised"] or 0)

    def _bag(self, engine: Engine[Any], changes: Any) -> ViewChanges:
        """A view without a key changes by whole rows, one `+I` or `-D` per copy. A row that loses copies is
        removed from the snapshot entirely and put back as many times as it still occurs."""
        values = self.values
        changes = engine.compute(
            changes, {"_n": f"abs({WEIGHT})", "_removed": f"CASE WHEN {WEIGHT} < 0 THEN -{WEIGHT} ELSE 0 END"}
        )
        total = engine.one_row(
            engine.aggregate(changes, {}, {"rows": ("sum", "_n"), "removed": ("sum", "_removed")})
        )
        count, retractions = int(total["rows"] or 0), int(total["removed"] or 0)
        op = f"CASE WHEN {WEIGHT} > 0 THEN '+I' ELSE '-D' END"
        logged = engine.compute(engine.copies(changes, "_n"), {"_index": "CAST(0 AS BIGINT)"})
        changelog = self._changelog(engine, logged, op, "_index")
        zset = self._named(engine, engine.select(changes, [*values, WEIGHT, MTIME]))
        added = engine.select(engine.copies(engine.where(changes, f"{WEIGHT} > 0"), "_n"), values)
        if self.snapshot_before is None or not retractions:  # (no row loses copies: the snapshot only gains)
            return ViewChanges(
                changelog, None, self._named(engine, added), self.columns, count, zset, retractions
            )
        removed = engine.where(changes, f"{WEIGHT} < 0")
        first = engine.rename(engine.select(removed, values[:1]), {values[0]: self.columns[0]})
        before = engine.table(self.snapshot, self.snapshot_before, first, self.columns[0])
        before = engine.rename(before, dict(zip(self.columns, values)))
        on = [(v, v) for v in values]
        present = engine.lookup(before, on, engine.select(removed, values), "semi", null_safe=True)
        copies = engine.aggregate(
            engine.compute(present, {"_one": "CAST(1 AS BIGINT)"}),
            {v: v for v in values},
            {"_before": ("sum", "_one")},
        )
        left = engine.lookup(removed, on, copies, "left", null_safe=True)
        left = engine.where(engine.compute(left, {"_left": f"coalesce(_before, 0) + {WEIGHT}"}), "_left > 0")
        kept = engine.select(engine.copies(left, "_left"), values)
        inserts = self._named(engine, engine.concat([added, kept]))
        deletes = self._named(engine, engine.select(removed, values))
        return ViewChanges(changelog, deletes, inserts, self.columns, count, zset, retractions)

    def _changelog(self, engine: Engine[Any], logged: Any, op: str, index: str) -> Any:
        """Change rows (the view's columns, `_w`, `_mtime`, `index`) as the changelog's rows: `op` gives `_op`."""
        version = (
            self.version
            if self.version is not None
            else (self.snapshot_before + 1)
            if self.snapshot_before is not None
            else 0
        )
        logged = engine.compute(
            logged,
            {
                "_op": op,
                "_undo": f"{WEIGHT} < 0",
                "_version": _bigint(version),
                "_batch_id": _bigint(self.batch_id),
                "_emit_index": index,
                "_emit_timing": "CAST(NULL AS STRING)",
            },
        )
        return self._named(engine, engine.select(logged, [*self.values, *CHANGELOG_COLUMNS]))

    def _named(self, engine: Engine[Any], rel: Any) -> Any:
        """The view's columns by their own names again."""
        return engine.rename(rel, dict(zip(self.values, self.columns)))


def _bigint(n: int) -> exp.Expression:
    """`CAST(n AS BIGINT)`, built (its text differs every batch: the driver would parse it each time)."""
    return exp.cast(exp.Literal.number(n), exp.DataType.build("BIGINT"))
