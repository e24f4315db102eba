"""The writes of one batch of a view, in their order: operator state, snapshot, emit revisions, changelog, late
rows. Each carries the batch's application transaction (view generation, batch id) and is skipped when a first
attempt of the batch already committed it (DESIGN.md §4)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from mvengine.errors import DuplicateKeyError, KeyWrittenTwice
from mvengine.incremental.clock import Clock
from mvengine.incremental.state import StateStore
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.layout import CommitRecord, ViewTables, app_id
from mvengine.runtime.context import RefreshContext
from mvengine.runtime.crash_points import boundary
from mvengine.runtime.emit import EMIT_STATE, ViewChanges
from mvengine.runtime.event_time import Watermarks, late_rows
from mvengine.runtime.expectations import Outcome
from mvengine.runtime.freshness import sql_hash
from mvengine.runtime.profile import Profile
from mvengine.storage.api import DELETE_MARK, merge_into, replace_rows, write_table


def commit_batch(
    ctx: RefreshContext,
    plan: ViewPlan,
    tables: ViewTables,
    state: StateStore,
    changes: ViewChanges,
    *,
    generation: int,
    batch_id: int,
    kind: str,
    inputs: dict[str, int],
    profile: Profile,
    spark: bool = True,
    marks: Watermarks | None = None,
    outcomes: Sequence[Outcome] = (),
    started: float,
    rows_in: int | None = None,
    clock: Clock | None = None,
    expired: int = 0,
) -> None:
    """Commit the batch. The snapshot commit records it for readers (`mv status`, `mv ui`): its rows in (None
    for a recomputation), where it ran, and its time from `started` to that commit. The emit revisions come
    after the snapshot: a batch whose snapshot is not committed is recomputed (possibly from newer input
    versions, for a bootstrap), and must find the revisions as they were. `spark`: whether the writes may run
    Spark jobs (not when the batch was computed on the driver). `expired`: the keys the view's state_ttl
    expired in its generation, up to this batch."""
    ctx.writing.add(plan.name)
    with _commit_phase(plan, "state", profile, spark):
        state.commit(state.staged - {EMIT_STATE})
    ctx.batch_ms[plan.name] = ctx.millis_since(started)
    record = CommitRecord(
        batch_id=batch_id,
        generation=generation,
        sql_hash=sql_hash(plan),
        kind=kind,
        inputs=inputs,
        changes=changes.rows,
        input_ids={
            n: str(ctx.source_ref(n).open().metadata().id) for n in inputs if n in ctx.catalog.sources
        },
        watermark=marks.after if marks is not None else None,
        expectations=[o.to_json() for o in outcomes],
        rows_in=rows_in,
        batch_ms=ctx.batch_ms[plan.name],
        engine="spark" if spark else "driver",
        clock=None if clock is None else clock.now,
        expired=expired if plan.view.state_ttl is not None else None,
    )
    txn = (app_id(plan.name, generation), batch_id)
    on_driver = state.on_driver and changes.rows <= ctx.policy.write_from_driver
    with _commit_phase(plan, "snapshot", profile, spark):
        if changes.history is not None:  # the view's columns changed: a new version with the new ones
            write_table(
                changes.inserts,
                tables.snapshot,
                mode="overwrite",
                new_schema=True,
                metadata=record.metadata(),
                txn=txn,
                on_driver=on_driver,
                cluster_by=changes.keys,
            )
        elif changes.upserts is not None and tables.snapshot.exists():
            merge_into(
                changes.upserts,
                tables.snapshot,
                changes.keys,
                delete_column=DELETE_MARK,
                metadata=record.metadata(),
                txn=txn,
                on_driver=on_driver,
            )
        else:
            # (a key checked by the snapshot's first write, the first of the batch's: nothing is written)
            try:
                replace_rows(
                    changes.inserts,
                    tables.snapshot,
                    changes.keys,
                    changes.deletes,
                    metadata=record.metadata(),
                    txn=txn,
                    on_driver=on_driver,
                    unique=changes.unique_on_write,
                )
            except KeyWrittenTwice as e:
                raise DuplicateKeyError(plan.name, e.shown) from None
    with _commit_phase(plan, "key revisions", profile, spark):
        state.commit()
    with _commit_phase(plan, "changelog", profile, spark):
        history = changes.history  # (a redefinition: written anew, its earlier rows and this batch's)
        renewed = history is not None
        write_table(
            history.unionByName(_in_spark(ctx, changes.changelog))
            if history is not None
            else changes.changelog,
            tables.changelog,
            mode="overwrite" if renewed else "append",
            new_schema=renewed,
            metadata={"mvengine.batch_id": str(batch_id)},
            txn=txn,
            on_driver=on_driver,
        )
    if changes.late is not None:
        with _commit_phase(plan, "late rows", profile, spark):
            assert marks is not None  # rows are late only against a watermark
            late = late_rows(changes.late, inputs, marks, batch_id)
            if late is not None:
                write_table(late, tables.late, txn=txn, on_driver=on_driver)


def _in_spark(ctx: RefreshContext, rows: DataFrame | pa.Table) -> DataFrame:
    return rows if isinstance(rows, DataFrame) else ctx.spark.createDataFrame(rows)


@contextlib.contextmanager
def _commit_phase(plan: ViewPlan, commit: str, profile: Profile, spark: bool) -> Iterator[None]:
    """One of a batch's commits: a phase of its profile, between two crash points (crash_points.py)."""
    boundary(plan.name, commit, "before")
    with profile.phase(f"commit {commit}", spark=spark):
        yield
    boundary(plan.name, commit, "after")
