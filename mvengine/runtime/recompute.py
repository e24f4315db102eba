"""Recomputing a view from its inputs: the bootstrap of an incremental view (a new generation, its state built
by its delta rules over every input row as an insert), and every batch of a full-refresh view (its SQL run by
Spark, diffed against its snapshot).

A bootstrap over small inputs is computed on the driver, in Arrow, as a small incremental batch is: the same
delta rules, from nothing, over every input row read by delta-rs, and no Spark job (a Spark bootstrap of a few
rows costs a second or more of jobs, and Spark's start when it is the refresh's first). It writes the snapshot
in the types the plan gives the view's columns (plan/types.py, which are Spark's), and goes to Spark when the
driver computes another type, when an input or the view declares expectations (they are checked on whole
tables by Spark) or when the inputs hold more than `[refresh] driver_max_changes` rows (0: always Spark). A
larger bootstrap Spark starts, and the driver finishes where the view's top rule keeps few rows
(incremental/hand_off.py)."""

from __future__ import annotations

import time

import pyarrow as pa
from deltalake.exceptions import DeltaError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from mvengine.config import join_uri
from mvengine.errors import StorageError
from mvengine.incremental.batch import Batch, HandOff
from mvengine.incremental.clock import Clock
from mvengine.incremental.compiler import view_delta, view_delta_on_driver
from mvengine.incremental.driver import DriverBatch, conform
from mvengine.incremental.driver_expressions import NotOnDriver
from mvengine.incremental.state import StateStore
from mvengine.incremental.zset import MTIME, WEIGHT, inserts
from mvengine.names import CHANGELOG_COLUMNS, quote_identifier
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.layout import ViewTables, app_id, view_tables
from mvengine.runtime.batch_expectations import BatchExpectations
from mvengine.runtime.batch_report import BatchReport
from mvengine.runtime.commit import commit_batch
from mvengine.runtime.context import RefreshContext
from mvengine.runtime.emit import EMIT_STATE, ViewChanges, view_changes
from mvengine.runtime.event_time import (
    Watermarks,
    batch_clock,
    batch_watermarks,
    hold_back,
    watermark_passed,
    with_emit_timing,
)
from mvengine.runtime.expectations import Outcome, inserted
from mvengine.runtime.expiry import clock_metadata, committed_clock
from mvengine.runtime.profile import Profile
from mvengine.runtime.refresh_plan import snapshot_columns_differ
from mvengine.runtime.steps import Step
from mvengine.sql.expectations import kept_rows
from mvengine.storage.api import read_arrow, read_table, remove_folder
from mvengine.storage.objects import list_folders
from mvengine.storage.tables import TableRef, commit_metadata, read_by_driver, table_rows, version_before


def recompute(
    ctx: RefreshContext,
    expectations: BatchExpectations,
    plan: ViewPlan,
    step: Step,
    *,
    resuming: bool = False,
    checked: list[Outcome] | None = None,
) -> None:
    """Compute the view anew from its inputs at the step's targets, and commit it as the step's batch: of kind
    `bootstrap` (an incremental view's new generation, its state built by its delta rules) or `full` (a
    full-refresh view's SQL, run by Spark). `resuming`: the batch's first attempt was interrupted, and its
    state is kept. Its sources' expectations are checked on their whole tables, unless `checked` holds their
    outcomes over the batch's changes (a batch that recomputes instead of applying them)."""
    started = time.monotonic()
    tables = view_tables(plan, ctx.config.storage_options)
    generation, batch_id, kind, note = step.generation, step.batch_id, step.kind, step.note
    incremental = kind == "bootstrap"
    versions = dict(step.targets)
    refs = ctx.input_refs(plan)
    application = app_id(plan.name, generation)
    options = ctx.config.storage_options
    if kind == "bootstrap" and not resuming:
        # A new generation starts from no operator state (the emit revisions of the view's keys stay).
        for name in list_folders(tables.state, options):
            if name != EMIT_STATE:
                remove_folder(TableRef(join_uri(tables.state, name), options))

    def state_store(on_driver: bool) -> StateStore:
        return StateStore(
            ctx.spark,
            tables.state,
            options,
            application,
            batch_id,
            fresh=incremental,
            persistent=frozenset({EMIT_STATE}),
            on_driver=on_driver,
            policy=ctx.policy,
            allows_lateness=plan.view.allowed_lateness is not None,
            metadata=clock_metadata(plan, None if clock is None else clock.now),
        )

    def finish(
        out: ViewChanges, state: StateStore, marks: Watermarks | None, outcomes: list[Outcome], *, spark: bool
    ) -> None:
        """Commit the batch's changes, and report its line."""
        commit_batch(
            ctx,
            plan,
            tables,
            state,
            out,
            batch_id=batch_id,
            generation=generation,
            kind=kind,
            inputs=versions,
            profile=profile,
            spark=spark,
            marks=marks,
            outcomes=outcomes,
            started=started,
            clock=clock,
        )
        millis = ctx.recorded_ms(plan, started)
        engine = "spark" if spark else "driver"
        ctx.report(
            BatchReport(
                plan.name,
                batch_id,
                kind,
                versions,
                None,
                out.rows,
                millis,
                "; ".join(n for n in (note, *profile.notes) if n),  # (why Spark computed it, and how)
                profile.phases,
                engine,
                outcomes,
            )
        )

    committed = committed_clock(plan, tables.state, options, application, batch_id) if resuming else None
    clock = (
        batch_clock(plan, tables.snapshot, before=None, finishing=resuming, committed=committed)
        if incremental
        else None
    )
    profile = Profile(ctx.spark)
    snapshot_before = version_before_batch(tables.snapshot, application, batch_id)
    # A redefinition that changed the view's columns: its tables take the new ones in a new version (Spark's).
    renewed = snapshot_before is not None and snapshot_columns_differ(
        plan, tables.snapshot.open(version=snapshot_before)
    )
    if incremental and not renewed and _bootstrap_on_driver(ctx, expectations, plan, refs, versions):
        state = state_store(on_driver=True)
        with profile.phase("plan inputs", spark=False):
            marks = batch_watermarks(plan, ctx.catalog, refs, versions, tables.snapshot, snapshot_before)
        out = _bootstrap_rows_on_driver(
            plan, tables, refs, versions, state, clock, marks, snapshot_before, profile
        )
        if out is not None:
            out.changelog = with_emit_timing(out.changelog, plan, marks)
            finish(out, state, marks, [], spark=False)
            return
    ctx.start_spark()
    mtime = F.lit(_latest_commit_time(refs, versions)).cast("timestamp")
    schema = plan.arrow_schema()
    # A bootstrap Spark starts may be finished on the driver, from where its rules keep few rows.
    finishing = ctx.finishing_nodes(plan) if incremental and not renewed else frozenset()

    def in_spark(hand_off: bool) -> tuple[Batch, StateStore, ViewChanges, Watermarks | None, list[Outcome]]:
        """The batch computed by Spark (`hand_off`: finished on the driver where it may be)."""
        state = state_store(on_driver=_rows_within(refs, versions, ctx.policy.write_from_driver))
        batch = Batch(ctx.spark, {}, state, clock=clock)
        if hand_off:
            driver = DriverBatch({}, state, clock=clock)
            batch.hand_off = HandOff(finishing, driver, ctx.policy.hand_off_rows)
        try:
            with profile.phase("plan inputs"):
                marks = batch_watermarks(plan, ctx.catalog, refs, versions, tables.snapshot, snapshot_before)
                outcomes = (
                    list(checked)
                    if checked is not None
                    else expectations.of_sources(plan, {n: (-1, v) for n, v in versions.items()}, batch_id)
                )
                unfiltered: list[DataFrame] = []
                new_rows: DataFrame | pa.Table
                if incremental:
                    batch.changes = {
                        n: inserts(read_table(ctx.spark, r, version=versions[n]), mtime)
                        for n, r in refs.items()
                    }
                    new_rows = view_delta(
                        plan.root, batch, unfiltered=unfiltered.append if plan.drops_own else None
                    )
                    if isinstance(new_rows, pa.Table):  # (handed to the driver: the view has Arrow types)
                        assert schema is not None
                        new_rows = conform(new_rows, schema)
                        if snapshot_before is not None:  # (a rebuild: diffed against the old rows by Spark)
                            new_rows = ctx.spark.createDataFrame(new_rows)
                else:
                    computed = _compute(ctx, plan, refs, versions)
                    unfiltered.append(inserts(computed, mtime))
                    new_rows = inserts(_kept(plan, computed), mtime)
                if isinstance(new_rows, DataFrame):  # (a view handed to the driver declares no expectations)
                    outcomes += expectations.of_view(
                        plan,
                        tables,
                        batch_id,
                        unfiltered[0] if unfiltered else new_rows,
                        recomputed=True,
                        after=lambda: inserted(new_rows),
                    )
                if plan.view.emit is not None and incremental:  # (re)built: nothing of it is late yet
                    fresh = Watermarks(None, marks.after if marks else None)
                    new_rows = hold_back(plan, new_rows, batch, fresh)
                elif plan.view.emit is not None:
                    assert isinstance(new_rows, DataFrame)
                    new_rows = new_rows.where(watermark_passed(plan, marks))
                changes = new_rows
                if snapshot_before is not None and not renewed:
                    assert isinstance(changes, DataFrame)
                    old = read_table(ctx.spark, tables.snapshot, version=snapshot_before)
                    changes = changes.unionByName(
                        old.select("*", F.lit(-1).cast("long").alias(WEIGHT), mtime.alias(MTIME))
                    )
            with profile.phase("compute changes"):
                out = view_changes(
                    plan,
                    changes,
                    batch,
                    snapshot=tables.snapshot,
                    snapshot_before=None if renewed else snapshot_before,
                    batch_id=batch_id,
                    version=None if snapshot_before is None else snapshot_before + 1,
                )
                out.changelog = with_emit_timing(out.changelog, plan, marks)
                if renewed:
                    assert snapshot_before is not None
                    _renew(ctx.spark, plan, tables, out, snapshot_before, batch_id, mtime)
        except BaseException:
            batch.release()
            raise
        if batch.hand_off is not None and batch.hand_off.handed:
            profile.notes.append(
                f"finished on the driver from {', '.join(batch.hand_off.handed)} Spark computed"
            )
        return batch, state, out, marks, outcomes

    try:
        batch, state, out, marks, outcomes = in_spark(hand_off=bool(finishing))
    except NotOnDriver as e:  # (handing off stages nothing it does not then commit: the state starts anew)
        if not finishing:
            raise
        profile.notes.append(f"computed by Spark alone: {e}")
        batch, state, out, marks, outcomes = in_spark(hand_off=False)
    try:
        finish(out, state, marks, outcomes, spark=True)
    finally:
        batch.release()


def _renew(
    spark: SparkSession,
    plan: ViewPlan,
    tables: ViewTables,
    out: ViewChanges,
    snapshot_before: int,
    batch_id: int,
    mtime: Column,
) -> None:
    """The changes of a redefinition that changed the view's columns (`out`: its new rows, all `+I`), made the
    difference from its old result: a `-D` for every old row, in the new columns (a column the view no longer
    has is left out, a new one is NULL, one of another type is cast, NULL where it does not fit), before them;
    and the changelog's earlier rows in the same columns (`out.history`): the changelog and the snapshot are
    written anew with them, as new versions of the same tables, so their earlier versions stay readable."""
    old = in_columns(read_table(spark, tables.snapshot, version=snapshot_before), plan)
    retracted = old.select(
        "*",
        F.lit("-D").alias("_op"),
        F.lit(True).alias("_undo"),
        mtime.alias(MTIME),
        F.lit(snapshot_before + 1).cast("long").alias("_version"),
        F.lit(batch_id).cast("long").alias("_batch_id"),
        F.lit(None).cast("long").alias("_emit_index"),
        F.lit(None).cast("string").alias("_emit_timing"),
    )
    new = out.changelog if isinstance(out.changelog, DataFrame) else spark.createDataFrame(out.changelog)
    retractions = retracted.count()
    out.changelog = retracted.unionByName(new)
    out.rows += retractions
    out.retractions += retractions
    out.history = in_columns(read_table(spark, tables.changelog), plan, keep=list(CHANGELOG_COLUMNS))


def in_columns(rows: DataFrame, plan: ViewPlan, *, keep: list[str] | None = None) -> DataFrame:
    """`rows` of the view's earlier definition in its columns now (see _renew), then the `keep` columns."""
    have = set(rows.columns)
    columns = [
        F.expr(
            f"try_cast({quote_identifier(c.name) if c.name in have else 'NULL'} AS {c.type.sql('spark')})"
        ).alias(c.name)
        for c in plan.columns
    ]
    return rows.select(*columns, *[F.col(quote_identifier(k)) for k in keep or []])


def _bootstrap_on_driver(
    ctx: RefreshContext,
    expectations: BatchExpectations,
    plan: ViewPlan,
    refs: dict[str, TableRef],
    versions: dict[str, int],
) -> bool:
    """Whether the view's bootstrap is computed on the driver: the driver computes its plan, its inputs are
    few rows that delta-rs reads, and nothing of it needs Spark (expectations, a column type without an Arrow
    form)."""
    most = ctx.policy.driver_max_changes
    return (
        most > 0
        and ctx.driver_reason(plan) is None
        and not expectations.expected(plan)
        and plan.arrow_schema() is not None
        and _rows_within(refs, versions, most)
        and all(read_by_driver(ref, ref.open(version=versions[n])) for n, ref in refs.items())
    )


def _bootstrap_rows_on_driver(
    plan: ViewPlan,
    tables: ViewTables,
    refs: dict[str, TableRef],
    versions: dict[str, int],
    state: StateStore,
    clock: Clock | None,
    marks: Watermarks | None,
    snapshot_before: int | None,
    profile: Profile,
) -> ViewChanges | None:
    """The bootstrap's changes computed on the driver: the view's delta rules from nothing over every input row
    as an insert, less the snapshot's rows before (a rebuild); None (nothing staged) when the driver meets what it
    does not compute as Spark does."""
    schema = plan.arrow_schema()
    assert schema is not None  # _bootstrap_on_driver checked it
    mtime = pa.scalar(_latest_commit_ms(refs, versions) * 1000, pa.timestamp("us", tz="UTC"))
    try:
        with profile.phase("plan inputs", spark=False):
            changes = {n: _weighted(read_arrow(r, version=versions[n]), 1, mtime) for n, r in refs.items()}
        with profile.phase("delta rule", spark=False):
            batch = DriverBatch(changes, state, clock=clock)
            zset = conform(view_delta_on_driver(plan.root, batch), schema)
            zset = hold_back(plan, zset, batch, Watermarks(None, marks.after if marks else None))
            if snapshot_before is not None:  # a rebuild: the rows it had go
                old = read_arrow(tables.snapshot, version=snapshot_before).select(schema.names)
                zset = pa.concat_tables([zset, conform(_weighted(old, -1, mtime), schema)])
        with profile.phase("compute changes", spark=False):
            return view_changes(
                plan,
                zset,
                batch,
                snapshot=tables.snapshot,
                snapshot_before=snapshot_before,
                batch_id=state.batch_id,
            )
    except NotOnDriver as e:
        profile.notes.append(f"computed by Spark: {e}")
        return None


def _weighted(rows: pa.Table, weight: int, mtime: pa.Scalar) -> pa.Table:
    """Every row with weight `weight`, at time `mtime`: a Z-set."""
    n = rows.num_rows
    return rows.append_column(WEIGHT, pa.repeat(pa.scalar(weight, pa.int64()), n)).append_column(
        MTIME, pa.repeat(mtime, n)
    )


def _compute(
    ctx: RefreshContext, plan: ViewPlan, refs: dict[str, TableRef], versions: dict[str, int]
) -> DataFrame:
    """The view's query run by Spark over its inputs at the given versions (a source without the rows its
    DROP ROW / QUARANTINE expectations fail, as the plan's filters over it say)."""
    for name, ref in refs.items():
        rows = read_table(ctx.spark, ref, version=versions[name])
        source = ctx.catalog.sources.get(name)
        kept = kept_rows(source.expectations) if source is not None else None
        (rows if kept is None else rows.where(kept.sql("spark"))).createOrReplaceTempView(name)
    return ctx.spark.sql(plan.spark_sql).toDF(*[c.name for c in plan.columns])


def _kept(plan: ViewPlan, rows: DataFrame) -> DataFrame:
    """The view's rows its own DROP ROW / QUARANTINE expectations leave (as its plan's root filter does)."""
    kept = kept_rows(plan.view.expectations)
    return rows if kept is None else rows.where(kept.sql("spark"))


def _rows_within(refs: dict[str, TableRef], versions: dict[str, int], most: int) -> bool:
    """Whether the inputs hold at most `most` rows in all at these versions, by their logs' row counts: a
    recomputation over so few writes its results from the driver, as a small incremental batch does (a Spark
    write job costs about ten times as much as collecting a few rows and writing them with delta-rs)."""
    total = 0
    for name, ref in refs.items():
        try:
            total += table_rows(ref, versions[name])
        except (DeltaError, StorageError):  # a table delta-rs cannot read: Spark writes
            return False
    return total <= most


def version_before_batch(ref: TableRef, app_id: str, batch_id: int) -> int | None:
    """The snapshot's version before this batch (None when the batch creates it)."""
    if not ref.exists():
        return None
    version = version_before(ref, app_id, batch_id)
    return version if version >= 0 else None


def _latest_commit_time(refs: dict[str, TableRef], versions: dict[str, int]) -> str:
    """The commit time of the newest input version a recomputation reads (its rows' _mtime), as Spark SQL text."""
    millis = _latest_commit_ms(refs, versions)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(millis / 1000)) + f".{millis % 1000:03d}"


def _latest_commit_ms(refs: dict[str, TableRef], versions: dict[str, int]) -> int:
    """The commit time of the newest input version a recomputation reads, ms since the epoch."""
    times = [int(commit_metadata(ref.open(), versions[name])["timestamp"]) for name, ref in refs.items()]
    return max(times) if times else int(time.time() * 1000)
