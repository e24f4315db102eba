"""An incremental batch of a view: its delta rule over its inputs' changes, computed on the driver (Arrow,
incremental/driver.py) or by Spark, as the execution policy chooses (policy.py); or, when the policy finds the
changes too many for it to pay, the view recomputed instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from mvengine.config import join_uri
from mvengine.errors import MvError
from mvengine.incremental.batch import Batch, HandOff
from mvengine.incremental.clock import Clock
from mvengine.incremental.compiler import view_delta, view_delta_on_driver
from mvengine.incremental.driver import DriverBatch, KeyFilter, conform, read_before
from mvengine.incremental.driver_expressions import NotOnDriver
from mvengine.incremental.state import StateStore
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.layout import ViewTables, app_id, recorded_at, view_tables
from mvengine.runtime.batch_expectations import BatchExpectations
from mvengine.runtime.batch_report import BatchReport
from mvengine.runtime.changes import BatchChanges, InputChanges, ViewOutput
from mvengine.runtime.commit import commit_batch
from mvengine.runtime.context import RefreshContext
from mvengine.runtime.emit import ViewChanges, view_changes
from mvengine.runtime.event_time import (
    Watermarks,
    batch_clock,
    batch_watermarks,
    has_event_time,
    hold_back,
    late_cutoff,
    purge_conditions,
    with_emit_timing,
)
from mvengine.runtime.expectations import Outcome
from mvengine.runtime.expiry import clock_metadata, committed_clock
from mvengine.runtime.profile import Profile
from mvengine.runtime.recompute import recompute, version_before_batch
from mvengine.runtime.steps import FINISH, REBUILD, Step
from mvengine.storage.api import Bounds, arrow_schema, read_table
from mvengine.storage.objects import list_folders
from mvengine.storage.tables import TableRef, table_rows


def apply_changes(
    ctx: RefreshContext, expectations: BatchExpectations, plan: ViewPlan, step: Step, changes: BatchChanges
) -> None:
    """One incremental batch of the view: its delta rule over its inputs' changes from the step's
    `versions_before` to its `targets`, computed on the driver when it is small and the driver computes it
    exactly (incremental/driver.py), else by Spark; or the view recomputed instead, when the policy finds that
    cheaper (never for a FINISH step: its snapshot is committed). Its own changes join `changes.outputs`, for
    the views downstream; the batch's DataFrames live until the pipeline batch ends (`changes.release`)."""
    started = time.monotonic()
    tables = view_tables(plan, ctx.config.storage_options)
    generation, batch_id, note = step.generation, step.batch_id, step.note
    versions_before, targets = dict(step.versions_before), dict(step.targets)
    finishing = step.action == FINISH
    refs = ctx.input_refs(plan)
    application = app_id(plan.name, generation)
    profile = Profile(ctx.spark)
    ranges = {n: (versions_before[n], targets[n]) for n in plan.inputs}
    with profile.phase("read changes"):
        inputs = changes.read(
            {n: (refs[n], lo, hi) for n, (lo, hi) in ranges.items()},
            driver_rows=ctx.policy.feed_rows_on_driver(ctx.driver_reason(plan)),
        )
        _check_claims(ctx, plan, inputs, ranges)
    outcomes: list[Outcome] = []
    if expectations.expected(plan):
        with profile.phase("expectations", spark=False):
            outcomes = expectations.of_sources(plan, ranges, batch_id, changes, inputs)
    rows_in = sum(c.rows for c in inputs.values())
    choice = ctx.engine(plan, rows_in)
    reason = (
        ""
        if finishing
        else ctx.policy.recompute_instead(
            changes=rows_in,
            input_rows=lambda: sum(table_rows(refs[n], targets[n]) for n in plan.inputs),
            choice=choice,
            refresh_policy=plan.view.refresh_policy,
            by_arrival=plan.by_arrival,
            appends=plan.row_by_row and not any(c.retractions for c in inputs.values()),
        )
    )
    if reason:
        instead = Step(
            plan.name, REBUILD, reason, generation + 1, batch_id, "bootstrap", versions_before, targets
        )
        recompute(ctx, expectations, plan, instead, checked=outcomes)
        return
    snapshot_before = version_before_batch(tables.snapshot, application, batch_id)
    # Inputs with changes: a version that changed no row (a view's batch that committed nothing new) moves
    # nothing, so the join terms over the other inputs' rows before it are not read.
    moved = frozenset(n for n, (lo, hi) in ranges.items() if hi > lo and inputs[n].rows)
    marks = None
    if has_event_time(plan, ctx.catalog):
        with profile.phase("watermark", spark=False):
            marks = batch_watermarks(plan, ctx.catalog, refs, targets, tables.snapshot, snapshot_before)
    committed = committed_clock(plan, tables.state, ctx.config.storage_options, application, batch_id)
    clock = batch_clock(
        plan, tables.snapshot, before=snapshot_before, finishing=finishing, committed=committed
    )
    work = _Work(
        ctx,
        plan,
        tables,
        inputs,
        refs,
        ranges,
        moved,
        application,
        batch_id,
        snapshot_before,
        profile,
        marks,
        clock,
    )
    computed = _on_driver(work) if choice.on_driver else None
    engine = "spark" if computed is None else "driver"
    if computed is None:
        if not choice.on_driver:  # (else the driver met a value it does not compute exactly: noted)
            profile.notes.append(f"computed by Spark: {choice.reason}")
        nodes = _hand_off_nodes(work)
        try:
            computed = _in_spark(work, changes, nodes)
        except NotOnDriver as e:  # (a hand-off staged nothing it commits: the state starts anew)
            if not nodes:
                raise
            profile.notes.append(f"computed by Spark alone: {e}")
            computed = _in_spark(work, changes, frozenset())
    out, state, unfiltered = computed
    if plan.view.expectations:
        with profile.phase("expectations", spark=engine == "spark"):
            outcomes += expectations.of_view(
                plan,
                tables,
                batch_id,
                unfiltered,
                after=lambda: expectations.table_after(tables, snapshot_before, out.zset),
            )
    out.changelog = with_emit_timing(out.changelog, plan, marks)

    def commit() -> None:
        commit_batch(
            ctx,
            plan,
            tables,
            state,
            out,
            batch_id=batch_id,
            generation=generation,
            kind="stream",
            inputs=targets,
            profile=profile,
            spark=engine == "spark",
            marks=marks,
            outcomes=outcomes,
            started=started,
            rows_in=rows_in,
            clock=clock,
            expired=out.expired + _expired_before(plan, tables, snapshot_before),
        )

    def report() -> None:
        ctx.report(
            BatchReport(
                plan.name,
                batch_id,
                "stream",
                targets,
                rows_in,
                out.rows,
                ctx.recorded_ms(plan, started),
                "; ".join(n for n in (note, *profile.notes) if n),
                profile.phases,
                engine,
                expectations=outcomes,
                rows_read=out.rows_read,
                expired=out.expired,
            )
        )

    # (only Arrow tables are written off the main thread: no Spark job runs there)
    in_arrow = engine == "driver" and out.in_arrow and state.staged_in_arrow
    commits = ctx.commits if in_arrow else None
    if commits is not None:
        ctx.writing.add(plan.name)  # (before its thread starts: a failure from here on may have written)
        commits.submit(plan.name, commit, report)
    else:
        commit()
    version_before = -1 if snapshot_before is None else snapshot_before
    zset = out.zset
    output = (
        InputChanges(ctx.spark, out.rows, out.retractions, arrow=zset)
        if isinstance(zset, pa.Table)
        else InputChanges(ctx.spark, out.rows, out.retractions, _frame=zset)
    )
    changes.outputs[plan.name] = ViewOutput(version_before, version_before + 1, output)
    if commits is None:
        report()


def _expired_before(plan: ViewPlan, tables: ViewTables, snapshot_before: int | None) -> int:
    """The keys the view's state_ttl expired in its generation before this batch."""
    if plan.view.state_ttl is None or snapshot_before is None:
        return 0
    return recorded_at(tables.snapshot, snapshot_before).expired or 0


@dataclass(frozen=True)
class _Work:
    """What computing an incremental batch takes, on either engine."""

    ctx: RefreshContext
    plan: ViewPlan
    tables: ViewTables
    inputs: dict[str, InputChanges]
    refs: dict[str, TableRef]
    ranges: dict[str, tuple[int, int]]  # input -> (version before the batch, version after)
    moved: frozenset[str]  # the inputs with changes
    application: str  # the view generation's Delta application id
    batch_id: int
    snapshot_before: int | None
    profile: Profile
    marks: Watermarks | None
    clock: Clock | None  # what NOW() reads in the batch (a temporal filter's)

    def state(self, *, on_driver: bool) -> StateStore:
        """The view's state as the batch reads and stages it (`on_driver`: written from the driver)."""
        ctx = self.ctx
        return StateStore(
            ctx.spark,
            self.tables.state,
            ctx.config.storage_options,
            self.application,
            self.batch_id,
            fresh=False,
            on_driver=on_driver,
            policy=ctx.policy,
            allows_lateness=self.plan.view.allowed_lateness is not None,
            metadata=clock_metadata(self.plan, None if self.clock is None else self.clock.now),
        )


def _on_driver(work: _Work) -> tuple[ViewChanges, StateStore, pa.Table] | None:
    """The batch computed on the driver, and the view's changes before its own expectations' filter; None
    (nothing staged) when it must go to Spark."""
    ctx, plan, tables, profile, marks = work.ctx, work.plan, work.tables, work.profile, work.marks
    arrows = {n: c.on_driver(ctx.policy.driver_max_changes) for n, c in work.inputs.items()}
    if any(a is None for a in arrows.values()):
        return None
    state = work.state(on_driver=True)
    refs, ranges, most = work.refs, work.ranges, ctx.policy.driver_read_rows
    read: list[int] = []

    def before(name: str, where: KeyFilter | None, within: Bounds | None) -> pa.Table:
        rows = read_before(refs[name], ranges[name][0], where, most, within)
        read.append(rows.num_rows)
        return rows

    batch = DriverBatch(
        arrows,
        state,
        before=before,
        moved=work.moved,
        late_before=late_cutoff(plan, marks),
        clock=work.clock,
    )
    state.purge = purge_conditions(plan, batch.late_before)
    try:
        with profile.phase("delta rule", spark=False):
            unfiltered: list[pa.Table] = []
            zset = view_delta_on_driver(
                plan.root, batch, unfiltered=unfiltered.append if plan.drops_own else None
            )
            zset = conform(zset, arrow_schema(tables.snapshot.open()))
            zset = hold_back(plan, zset, batch, marks)
        with profile.phase("compute changes", spark=False):
            out = view_changes(
                plan,
                zset,
                batch,
                snapshot=tables.snapshot,
                snapshot_before=work.snapshot_before,
                batch_id=work.batch_id,
                inserts_only=plan.changelog == "append-only",
            )
            out.late = pa.concat_tables(batch.late) if batch.late else None
            out.rows_read = sum(read)
            out.expired = batch.expired
    except NotOnDriver as e:
        profile.notes.append(f"computed by Spark: {e}")
        return None
    return out, state, unfiltered[0] if unfiltered else zset


def _hand_off_nodes(work: _Work) -> frozenset[int]:
    """Where the batch Spark computes may be finished on the driver (RefreshContext.finishing_nodes), when the
    driver can read what it then reads: every state table of the view at most `driver_read_rows` rows (read
    whole, at worst), no row late (the late rows are Spark's to set apart) and no state_ttl (a group back after
    it expired is counted from the input's rows before the batch, which Spark reads)."""
    ctx, plan = work.ctx, work.plan
    if plan.view.state_ttl is not None or late_cutoff(plan, work.marks) is not None:
        return frozenset()
    nodes = ctx.finishing_nodes(plan)
    options = ctx.config.storage_options
    for name in list_folders(work.tables.state, options) if nodes else []:
        ref = TableRef(join_uri(work.tables.state, name), options)
        if ref.exists() and table_rows(ref, ref.open().version()) > ctx.policy.driver_read_rows:
            return frozenset()
    return nodes


def _in_spark(
    work: _Work, changes: BatchChanges, hand_off: frozenset[int]
) -> tuple[ViewChanges, StateStore, DataFrame | pa.Table]:
    """The batch computed by Spark (and finished on the driver from the `hand_off` nodes, where one of them keeps
    few rows: incremental/hand_off.py), and the view's changes before its own expectations' filter."""
    ctx, plan, tables, profile, marks = work.ctx, work.plan, work.tables, work.profile, work.marks
    rows_in = sum(c.rows for c in work.inputs.values())
    state = work.state(on_driver=rows_in <= ctx.policy.write_from_driver)
    before = {n: _reader(ctx.spark, work.refs[n], lo) for n, (lo, hi) in work.ranges.items()}
    batch = Batch(
        ctx.spark,
        {n: c.frame() for n, c in work.inputs.items()},
        state,
        before=before,
        moved=work.moved,
        late_before=late_cutoff(plan, marks),
        clock=work.clock,
    )
    handing = None
    if hand_off:
        driver = DriverBatch({}, state, moved=work.moved, clock=work.clock)
        handing = batch.hand_off = HandOff(hand_off, driver, ctx.policy.hand_off_rows)
    state.purge = purge_conditions(plan, batch.late_before)
    changes.keep_until_released(batch)
    with profile.phase("plan delta rule"):
        unfiltered: list[DataFrame] = []
        zset = view_delta(plan.root, batch, unfiltered=unfiltered.append if plan.drops_own else None)
        if isinstance(zset, pa.Table) and handing is not None:  # (handed to the driver)
            zset = conform(zset, arrow_schema(tables.snapshot.open()))
            profile.notes.append(f"finished on the driver from {', '.join(handing.handed)} Spark computed")
    if plan.view.emit is not None:
        with profile.phase("emit policy"):
            zset = hold_back(plan, zset, batch, marks)
    with profile.phase("compute changes"):
        out = view_changes(
            plan,
            zset,
            batch,
            snapshot=tables.snapshot,
            snapshot_before=work.snapshot_before,
            batch_id=work.batch_id,
            inserts_only=plan.changelog == "append-only",
        )
        out.late = reduce(DataFrame.unionAll, batch.late) if batch.late else None
        out.expired = batch.expired
    return out, state, unfiltered[0] if unfiltered else zset


def _check_claims(
    ctx: RefreshContext, plan: ViewPlan, inputs: dict[str, InputChanges], ranges: dict[str, tuple[int, int]]
) -> None:
    """No input that claims append-only (a source declared so, or a view planned so) may delete or update
    a row: the view trusts the claim (a MIN/MAX keeps only the current extreme), so a retraction would
    make it silently wrong."""
    for name, found in inputs.items():
        if found.retractions and _claims_append_only(ctx, name):
            lo, hi = ranges[name]
            raise MvError(
                f"{_kind(ctx, name)} {name} is {'declared' if name in ctx.catalog.sources else 'planned'} "
                f"append-only, but its versions {lo + 1}..{hi} delete or update {found.retractions} rows; "
                f"view {plan.name} would go wrong, so nothing was written",
                hint=_append_only_hint(ctx, name, lo),
            )


def _claims_append_only(ctx: RefreshContext, name: str) -> bool:
    if name in ctx.catalog.sources:
        return ctx.catalog.sources[name].append_only
    return ctx.catalog.plans[name].changelog == "append-only"


def _kind(ctx: RefreshContext, name: str) -> str:
    return "source" if name in ctx.catalog.sources else "view"


def _append_only_hint(ctx: RefreshContext, name: str, lo: int) -> str:
    if name not in ctx.catalog.sources:
        return (
            f"a source that view {name} reads is declared append-only but deleted or updated rows: find "
            f"it with mv history, then fix its declaration or its data"
        )
    source = ctx.catalog.sources[name]
    return (
        f"if the source does change rows, drop 'append_only' = 'true' from its CREATE TABLE "
        f"({source.file}:{source.line}): the views over it are then rebuilt to keep what deletes need; "
        f"otherwise undo those commits (restore the table to version {lo}) and refresh"
    )


def _reader(spark: SparkSession, ref: TableRef, version: int) -> Callable[[], DataFrame]:
    """A reader of the table at `version`, for a rule that reads an input as it was before the batch."""
    return lambda: read_table(spark, ref, version=version)
