"""Event time at refresh (seeds 002 and 004): each view's watermark per batch, the `_emit_timing` of its changelog
rows, and the EMIT policies that hold a window's row back until the watermark passes it.

A source's watermark is the largest event time it holds (its `WATERMARK FOR` column) less the declared delay; a
view's is the least of its inputs' (a view input's is the one its snapshot commit records), never moving back. A
source with `WITH ('idle_timeout' = '1 minute')` whose newest commit read is older than that (processing time) is
idle and left out of the least, so one quiet source does not hold back every view that reads it (unless all of a
view's inputs are idle); its next commit counts again, and its rows behind the view's watermark are then late.
Every snapshot commit records the view's watermark after the batch (`mvengine.watermark`, microseconds since the
epoch), so views of views, `mv describe` and the next batch read it from the log.

A changelog row of a windowed view is `early` while the watermark has not reached its window's end, `on_time`
in the batch the watermark passes the end, `late` after that. With `EMIT WHEN WATERMARK PAST <bound>` a window's
changes wait in the view's state (`_state/emit_pending`) until the watermark reaches the bound, then come out as
one row; later (late) changes are dropped, or with `AND THEN AFTER <interval>` emitted once that much processing
time has passed since the window's first late change (0: in the batch they arrive). `EMIT AFTER <interval>`
holds each window's changes that long after its first pending change, whatever the watermark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mvengine.incremental.batch import Batch
from mvengine.incremental.clock import Clock, reads_clock
from mvengine.incremental.driver import DriverBatch
from mvengine.incremental.driver_expressions import NotOnDriver, predicate_mask
from mvengine.incremental.engine import ArrowEngine, Engine, SparkEngine
from mvengine.incremental.partition_rows import NEEDED_UNTIL
from mvengine.incremental.purge import Purge
from mvengine.incremental.zset import MTIME, WEIGHT, quote
from mvengine.plan.nodes import Aggregate, Node, Over, SessionAggregate, WindowAssign
from mvengine.plan.operators.aggregate import windowed
from mvengine.plan.operators.over import rows_back
from mvengine.plan.scope import Relation
from mvengine.plan.view_plan import ViewPlan, event_time_windows
from mvengine.project.catalog import Catalog, source_relation
from mvengine.project.layout import recorded_at
from mvengine.runtime.emit import EMIT_STATE
from mvengine.sql.sources import SourceDef
from mvengine.storage.api import read_arrow
from mvengine.storage.tables import TableRef, arrow_dataset, commit_metadata, has_column_mapping

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

R = TypeVar("R")
PENDING = "emit_pending"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DUE = "_due"  # when a held row is due in processing time (µs), NULL: when the watermark reaches its bound


@dataclass(frozen=True)
class Watermarks:
    """A view's watermark before and after one batch (microseconds since the epoch; None: no event time yet)."""

    before: int | None
    after: int | None


def source_watermark(source: SourceDef, ref: TableRef, version: int) -> int | None:
    """The source's largest event time at `version` less its delay, over the rows its readers see (a row its
    DROP ROW / QUARANTINE expectations refuse does not move it). Found once per table version in a process:
    the views of a pipeline batch that read one source ask for the same version."""
    assert source.watermark is not None, source.name  # a source with event time
    relation = source_relation(source)
    kept = None if relation.kept is None else relation.kept.sql()
    key = (ref.uri, str(ref.open().metadata().id), version, source.watermark_sql(), kept)
    if key not in _WATERMARKS:
        if len(_WATERMARKS) >= 1024:
            _WATERMARKS.clear()
        _WATERMARKS[key] = _read_watermark(source, relation, ref, version)
    return _WATERMARKS[key]


_WATERMARKS: dict[tuple, int | None] = {}  # (table, its id, version, watermark, expectations) -> watermark


def _read_watermark(source: SourceDef, relation: Relation, ref: TableRef, version: int) -> int | None:
    """The files' statistics say which files hold the largest time (they are rounded to milliseconds), and
    those files' column says it exactly; only when every such row is refused are all the rows read."""
    assert source.watermark is not None  # (the caller's)
    column = source.watermark.column
    dt = ref.open(version=version)
    actions = pa.table(dt.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return None
    kept = relation.kept
    read = (
        [column]
        if kept is None
        else [f.name for f in source.schema if f.name == column or f.name in _column_names(kept)]
    )
    if "deletionVectors" in (dt.protocol().reader_features or []) or has_column_mapping(dt):
        # (delta-rs's pyarrow dataset refuses them; its scan applies them)
        rows = _seen(read_arrow(ref, version=version, columns=read), relation)
        return _less_delay(rows, column, source.watermark.delay)
    stat = f"max.{column}"
    highest = pc.max(actions.column(stat)) if stat in actions.column_names else None
    rows = None
    if highest is not None and highest.is_valid and actions.column(stat).null_count == 0:
        # Only the files whose statistic is the highest can hold a row at or past it (a statistic is the
        # file's largest time, rounded down): delta-rs makes a fragment of those alone.
        latest = arrow_dataset(dt, file_pruning_predicate=[(column, ">=", highest.as_py())])
        at_least = pc.field(column) >= pa.scalar(highest.as_py(), latest.schema.field(column).type)
        rows = _seen(latest.to_table(columns=read, filter=at_least), relation)
    if rows is None or rows.num_rows == 0:
        rows = _seen(arrow_dataset(dt).to_table(columns=read), relation)
    return _less_delay(rows, column, source.watermark.delay)


def _less_delay(rows: pa.Table, column: str, delay: int) -> int | None:
    """The largest time of `column` in µs, less `delay` (None when there is none)."""
    latest = pc.max(rows.column(column)) if rows.num_rows else pa.scalar(None)
    return None if not latest.is_valid else latest.cast(pa.int64()).as_py() - delay


def _column_names(e) -> set[str]:
    return {c.name for c in e.find_all(exp.Column)}


def _seen(rows: pa.Table, relation: Relation) -> pa.Table:
    """The rows a source's readers see: without those its dropping expectations refuse. An expectation the
    driver cannot evaluate (NotOnDriver: a function only Spark has) leaves them all, as before expectations."""
    if relation.kept is None:
        return rows
    declared = {f.name: f for f in relation.fields}
    try:
        return rows.filter(
            predicate_mask(relation.kept, rows, [declared[name] for name in rows.column_names])
        )
    except NotOnDriver:
        return rows


def has_event_time(plan: ViewPlan, catalog: Catalog) -> bool:
    """Whether any input of the view, however far up, declares a watermark."""
    for name in plan.inputs:
        if name in catalog.sources:
            if catalog.sources[name].watermark is not None:
                return True
        elif has_event_time(catalog.plans[name], catalog):
            return True
    return False


def input_watermark(
    plan: ViewPlan, catalog: Catalog, refs: dict[str, TableRef], versions: dict[str, int]
) -> int | None:
    """The least watermark of the view's inputs at these versions (inputs without event time aside, and idle
    sources: those with an `idle_timeout` whose version read was committed longer than that ago, unless every
    input is idle)."""
    marks: list[tuple[int | None, bool]] = []  # (watermark, idle)
    for name in plan.inputs:
        if name in catalog.sources:
            source = catalog.sources[name]
            if source.watermark is not None:
                mark = source_watermark(source, refs[name], versions[name])
                marks.append((mark, _idle(source, refs[name], versions[name])))
        elif has_event_time(catalog.plans[name], catalog):
            marks.append((recorded_watermark(refs[name], versions[name]), False))
    counted = [m for m, idle in marks if not idle] or [m for m, _ in marks]
    known = [m for m in counted if m is not None]
    if not known or len(known) < len(counted):
        return None
    return min(known)


def _idle(source: SourceDef, ref: TableRef, version: int) -> bool:
    """Whether the source's commit `version` is older than its idle timeout (processing time)."""
    if source.idle_timeout is None or version < 0:
        return False
    committed = commit_metadata(ref.open(), version).get("timestamp")  # (milliseconds since the epoch)
    return committed is not None and now_micros() - int(committed) * 1000 > source.idle_timeout


def recorded_watermark(snapshot: TableRef, version: int | None) -> int | None:
    """The watermark a view's snapshot commit records (None for none, or no such version)."""
    if version is None or version < 0:
        return None
    return recorded_at(snapshot, version).watermark


def batch_watermarks(
    plan: ViewPlan,
    catalog: Catalog,
    refs: dict[str, TableRef],
    versions: dict[str, int],
    snapshot: TableRef,
    snapshot_before: int | None,
) -> Watermarks | None:
    """The view's watermark before and after the batch; None for a view without event time."""
    if not has_event_time(plan, catalog):
        return None
    before = recorded_watermark(snapshot, snapshot_before)
    now = input_watermark(plan, catalog, refs, versions)
    after = now if before is None else before if now is None else max(before, now)
    return Watermarks(before, after)


# -- allowed lateness --------------------------------------------------------------------------------------------


def late_cutoff(plan: ViewPlan, marks: Watermarks | None) -> int | None:
    """Input rows whose event time is before this (µs) are later than the view's allowed lateness."""
    lateness = plan.view.allowed_lateness
    if lateness is None or marks is None or marks.before is None:
        return None
    return marks.before - lateness


def late_rows(rows, inputs: dict[str, int], marks: Watermarks, batch_id: int):
    """The `late` table's rows of a batch (Arrow or Spark): the input row (JSON), its event time and weight
    (+1 an insert, -1 a retraction), the input versions and the watermark of the batch; None when none."""
    columns = {"inputs": json.dumps(inputs, sort_keys=True), "batch_id": batch_id}
    assert marks.before is not None  # rows are late only against a watermark
    watermark = EPOCH + timedelta(microseconds=marks.before)
    if isinstance(rows, pa.Table):
        if rows.num_rows == 0:
            return None
        n = rows.num_rows
        return (
            rows.append_column("inputs", pa.array([columns["inputs"]] * n, pa.string()))
            .append_column("watermark", pa.array([watermark] * n, pa.timestamp("us", tz="UTC")))
            .append_column("batch_id", pa.array([batch_id] * n, pa.int64()))
        )
    from pyspark.sql import functions as F

    if rows.isEmpty():
        return None
    return rows.select(
        "*",
        F.lit(columns["inputs"]).alias("inputs"),
        F.lit(watermark).cast("timestamp").alias("watermark"),
        F.lit(batch_id).cast("long").alias("batch_id"),
    )


def purge_conditions(plan: ViewPlan, cutoff: int | None) -> dict[str, Purge]:
    """The state rows of windows that ended by `cutoff` (no row can change them any more), per state table
    (name prefix, as StateStore.purge takes them): each windowed aggregate's accumulators and multisets, each
    session window's rows of the sessions that ended before it (a row at the cutoff would still join one that
    ends there) and those without a time (in no session), the rows of window functions reading n rows back
    whose n-th row after is before it, and the emit revisions of the view's keys."""
    if cutoff is None:
        return {}
    conditions: dict[str, Purge] = {}
    for i, node in enumerate(plan.root.walk()):
        if isinstance(node, SessionAggregate) and node.window.time.meta.get("time_attr"):
            conditions[f"n{i}_rows"] = Purge(NEEDED_UNTIL, cutoff - 1, nulls=True)
        if isinstance(node, Over) and rows_back(node) is not None:
            conditions[f"n{i}_rows"] = Purge(NEEDED_UNTIL, cutoff - 1)
        window = windowed(node)
        if window is None or not isinstance(node, Aggregate):
            continue
        groups = node.fields[: len(node.groups)]
        bound = _bound_condition(groups, cutoff, window.spec.size)
        if bound is not None:
            conditions[f"n{i}_acc"] = conditions[f"n{i}_ms"] = bound
    end = window_end(plan)
    if end is not None and plan.key is not None and end[0] in plan.key:
        conditions[EMIT_STATE] = Purge(end[0], cutoff - end[1])
    session_end = next((c.name for c in plan.columns if c.window_bound == "session end"), None)
    if end is None and session_end is not None and plan.key is not None and session_end in plan.key:
        conditions[EMIT_STATE] = Purge(session_end, cutoff - 1)
    return conditions


def _bound_condition(fields, cutoff: int, size: int) -> Purge | None:
    for f in fields:
        if f.window_bound == "end":
            return Purge(f.name, cutoff)
    for f in fields:
        if f.window_bound == "start":
            return Purge(f.name, cutoff - size)
    return None


# -- which column says when a row's window ends ----------------------------------------------------------------


def window_end(plan: ViewPlan) -> tuple[str, int] | None:
    """The view column that tells its row's window end, and what to add to it: a window_end column (0), else a
    window start (+ the window's size); None for a view without window bounds, or whose windows are not over an
    event-time attribute (no watermark passes them)."""
    if not event_time_windows(plan.root):
        return None
    ends = [c.name for c in plan.columns if c.window_bound == "end"]
    if ends:
        return ends[0], 0
    starts = [c.name for c in plan.columns if c.window_bound == "start"]
    sizes = [n.spec.size for n in plan.root.walk() if isinstance(n, WindowAssign)]
    if starts and sizes:
        return starts[0], sizes[0]
    return None


def emit_bound(plan: ViewPlan) -> str:
    """The column EMIT WHEN WATERMARK PAST waits for (a view's window bound), as the view's columns spell it."""
    emit = plan.view.emit
    assert emit is not None and emit.watermark_past is not None, plan.name  # callers check the clause
    past = emit.watermark_past.lower()
    return next(c.name for c in plan.columns if c.name.lower() == past)


def _micros(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    return pc.cast(values, pa.int64())


def timing(ends: pa.ChunkedArray | pa.Array, marks: Watermarks, plus: int = 0) -> pa.Array:
    """`early`, `on_time` or `late` for rows whose window ends at `ends` (+ `plus` µs)."""
    if marks.after is None:
        return pa.array(["early"] * len(ends), pa.string())
    end = pc.add(_micros(ends), plus)
    passed = pc.less_equal(end, marks.after)
    was_passed = pc.less_equal(end, marks.before) if marks.before is not None else pa.repeat(False, len(ends))
    return pc.if_else(was_passed, "late", pc.if_else(passed, "on_time", "early"))


def with_emit_timing(changelog, plan: ViewPlan, marks: Watermarks | None):
    """The changelog (Arrow or Spark) with `_emit_timing` filled in for a windowed view."""
    end = window_end(plan)
    if marks is None or end is None:
        return changelog
    column, plus = end
    if isinstance(changelog, pa.Table):
        i = changelog.schema.get_field_index("_emit_timing")
        return changelog.set_column(i, "_emit_timing", timing(changelog.column(column), marks, plus))
    from pyspark.sql import functions as F

    from mvengine.incremental.zset import quote

    ends = F.unix_micros(F.col(quote(column)).cast("timestamp")) + F.lit(plus)
    after = F.lit(marks.after)
    value = (
        F.lit("early")
        if marks.after is None
        else (
            F.when(ends <= F.lit(marks.before), "late")
            if marks.before is not None
            else F.when(F.lit(False), "late")
        )
        .when(ends <= after, "on_time")
        .otherwise("early")
    )
    return changelog.withColumn("_emit_timing", value)


def watermark_passed(plan: ViewPlan, marks: Watermarks | None):
    """For a view recomputed in full: the rows EMIT WHEN WATERMARK PAST lets into its snapshot (a Spark
    condition): those whose bound the watermark has reached. Late changes of a recomputed view are applied."""
    from pyspark.sql import functions as F

    from mvengine.incremental.zset import quote

    if marks is None or marks.after is None:
        return F.lit(False)
    column = emit_bound(plan)
    return F.unix_micros(F.col(quote(column)).cast("timestamp")) <= F.lit(marks.after)


# -- EMIT: holding rows back ------------------------------------------------------------------------------------


def hold_back(
    plan: ViewPlan,
    zset: DataFrame | pa.Table,
    batch: Batch | DriverBatch,
    marks: Watermarks | None,
    now_us: int | None = None,
) -> DataFrame | pa.Table:
    """The part of the batch's Z-set (view columns, _w, _mtime) the view's EMIT policy lets out now, with what
    waits staged in the batch's state; the Z-set unchanged for a view without EMIT. Computed where the Z-set is:
    by the driver for an Arrow one, by Spark for a DataFrame, the rows never collected."""
    if plan.view.emit is None:
        return zset
    now = now_micros() if now_us is None else now_us
    if isinstance(zset, pa.Table):
        driver = batch if isinstance(batch, DriverBatch) else DriverBatch({}, batch.state)
        return _held(plan, zset, ArrowEngine(driver, _no_child), marks, now)
    assert isinstance(batch, Batch)  # (Spark's changes come with Spark's batch)
    return _held(plan, zset, SparkEngine(batch, _no_child), marks, now)


def _held(plan: ViewPlan, zset: R, engine: Engine[R], marks: Watermarks | None, now: int) -> R:
    """`hold_back` on either engine. A row that arrives waits with its due time (`_due`, µs of processing time;
    NULL: until the watermark passes its bound) beside the rows held before; a key's rows all take the key's
    earliest due time (a window comes out whole, not in parts); the rows due, or whose bound the watermark
    passed, come out consolidated, the others are held again."""
    emit = plan.view.emit
    assert emit is not None  # (the caller's check)
    columns = [c.name for c in plan.columns]
    key = list(plan.key or columns)
    arriving = engine.compute(zset, {DUE: "CAST(NULL AS BIGINT)"})
    bound = quote(emit_bound(plan)) if emit.watermark_past is not None else None
    if bound is not None:
        if marks is not None and marks.before is not None:
            late = f"coalesce({bound} <= timestamp_micros({marks.before}), false)"
            if emit.late_after is None:
                arriving = engine.where(arriving, f"NOT {late}")
            else:
                due = f"CAST({now + emit.late_after} AS BIGINT)"
                arriving = engine.compute(arriving, {DUE: f"CASE WHEN {late} THEN {due} END"})
    else:
        arriving = engine.compute(arriving, {DUE: f"CAST({now + (emit.after or 0)} AS BIGINT)"})
    names = [*columns, WEIGHT, MTIME, DUE]
    arriving = engine.select(arriving, names)
    held = engine.read_state(PENDING, engine.empty(arriving), [], arriving)
    waiting = engine.concat([engine.select(held, names), arriving])
    keys = {f"_k{i}": k for i, k in enumerate(key)}
    earliest = engine.aggregate(waiting, keys, {"_earliest": ("min", DUE)})
    waiting = engine.lookup(
        waiting, [(k, name) for name, k in keys.items()], earliest, "left", null_safe=True
    )
    ready = f"coalesce({DUE} <= {now}, false)"
    if bound is not None and marks is not None and marks.after is not None:
        ready += f" OR ({DUE} IS NULL AND coalesce({bound} <= timestamp_micros({marks.after}), false))"
    waiting = engine.keep(engine.compute(engine.compute(waiting, {DUE: "_earliest"}), {"_ready": ready}))
    engine.stage(PENDING, engine.where(waiting, "NOT _ready"), [], names)
    return engine.consolidate(
        engine.select(engine.where(waiting, "_ready"), [*columns, WEIGHT, MTIME]), columns
    )


def _no_child(node: Node, batch: Any) -> Any:
    raise AssertionError("an EMIT policy reads no node's changes")


def has_timers(plan: ViewPlan) -> bool:
    """Whether the view's EMIT policy holds rows until a processing time (AND THEN AFTER, EMIT AFTER)."""
    emit = plan.view.emit
    return emit is not None and (emit.late_after is not None or emit.after is not None)


def next_due(plan: ViewPlan, state_folder: str, storage_options: dict[str, str]) -> int | None:
    """When (µs since the epoch) the earliest row the view holds until a processing time is due; None if none."""
    if not has_timers(plan):
        return None
    from mvengine.config import join_uri
    from mvengine.storage.api import read_arrow

    ref = TableRef(join_uri(state_folder, PENDING), storage_options, PENDING)
    if not ref.exists():
        return None
    due = pc.min(read_arrow(ref).column(DUE))
    return due.as_py() if due.is_valid else None


def now_micros() -> int:
    return int(time.time() * 1_000_000)


def batch_clock(
    plan: ViewPlan,
    snapshot: TableRef,
    *,
    before: int | None,
    finishing: bool,
    committed: int | None = None,
) -> Clock | None:
    """The clock of a batch of a view with a temporal filter or a state_ttl (None without): NOW() reads the
    time the batch starts, or, in a batch that finishes one whose snapshot committed, the time that commit
    recorded, or the time its state's commit recorded (`committed`: a state_ttl's); the batch before read what
    its snapshot version `before` recorded (None: the view starts from nothing)."""
    ttl = plan.view.state_ttl
    if not reads_clock(plan.root) and ttl is None:
        return None
    earlier = None if before is None else recorded_at(snapshot, before).clock
    now = recorded_at(snapshot, snapshot.open().version()).clock if finishing else committed
    return Clock(now_micros() if now is None else now, earlier, ttl)
