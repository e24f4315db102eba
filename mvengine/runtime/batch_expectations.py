"""The expectations a batch checks (runtime/expectations.py checks them): those of the sources a view reads, over
the rows their versions in the batch inserted, and the view's own, over the rows the batch inserts into it.
FAIL UPDATE raises before anything of the batch is written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.zset import WEIGHT
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.layout import ViewTables, last_commit, source_quarantine, view_tables
from mvengine.runtime.changes import BatchChanges, InputChanges
from mvengine.runtime.context import RefreshContext
from mvengine.runtime.expectations import Checks, ExpectationFailed, Outcome, inserted
from mvengine.storage.api import read_table


@dataclass
class BatchExpectations:
    ctx: RefreshContext
    _checks: Checks | None = field(default=None, init=False)  # one GX context per refresh

    @property
    def checks(self) -> Checks:
        if self._checks is None:
            self._checks = Checks(self.ctx.spark)
        return self._checks

    def before_batch(self, plans: list[ViewPlan], cut: dict[str, int], changes: BatchChanges) -> None:
        """Before a pipeline batch moves any view: the FAIL UPDATE expectations of the sources it reads, over
        every change a view will read (from the oldest version one reflects to the cut), so that a failing row
        stops the whole batch before anything is written, not only the views that read it."""
        for name in self.ctx.sources_of(plans):
            failing = tuple(
                e for e in self.ctx.catalog.sources[name].expectations if e.on_violation == "FAIL UPDATE"
            )
            if not failing:
                continue
            seen = [
                last.inputs[name]
                for plan in plans
                if name in plan.inputs
                if (last := last_commit(view_tables(plan, self.ctx.config.storage_options).snapshot))
                is not None
                and name in last.inputs
            ]
            if not seen or cut.get(name, -1) <= min(seen):
                continue  # (a new view's first computation checks the whole table)
            lo, hi = min(seen), cut[name]
            if any(not e.row_level for e in failing):
                self.ctx.start_spark()
            found = changes.read({name: (self.ctx.source_ref(name), lo, hi)})[name]
            try:
                self.checks.check(
                    name,
                    failing,
                    inserted(found.arrow if found.arrow is not None else found.frame()),
                    quarantine=None,
                    version=hi,
                    batch_id=-1,
                    what=f"source {name} (versions {lo + 1} to {hi})",
                    whole=read_table(self.ctx.spark, self.ctx.source_ref(name), version=hi)
                    if any(not e.row_level for e in failing)
                    else None,
                )
            except ExpectationFailed as e:
                e.view = next(p.name for p in plans if name in p.inputs)  # the first view it stopped
                raise

    def expected(self, plan: ViewPlan) -> bool:
        """Whether the view or a source it reads declares expectations."""
        return bool(plan.view.expectations) or any(
            self.ctx.catalog.sources[n].expectations for n in plan.inputs if n in self.ctx.catalog.sources
        )

    def of_sources(
        self,
        plan: ViewPlan,
        ranges: dict[str, tuple[int, int]],
        batch_id: int,
        changes: BatchChanges | None = None,
        inputs: dict[str, InputChanges] | None = None,
    ) -> list[Outcome]:
        """The outcomes of the expectations of the sources the view reads, over the rows their versions in
        `ranges` (from exclusive, to inclusive; from -1: the whole table) inserted. Checked once per pipeline
        batch and range, whichever views read it (`changes.checked`); FAIL UPDATE raises before any write."""
        outcomes: list[Outcome] = []
        for name in plan.inputs:
            source = self.ctx.catalog.sources.get(name)
            if source is None or not source.expectations or ranges[name][1] == ranges[name][0]:
                continue
            lo, hi = ranges[name]
            key = (name, lo, hi)
            if changes is not None and key in changes.checked:
                outcomes += changes.checked[key]
                continue
            ref = self.ctx.source_ref(name)
            quarantine = source_quarantine(self.ctx.config.warehouse, name, self.ctx.config.storage_options)
            table_level = any(not e.row_level for e in source.expectations)
            if table_level or lo < 0:
                self.ctx.start_spark()
            what = f"source {name} (versions {lo + 1} to {hi})"
            whole = read_table(self.ctx.spark, ref, version=hi) if table_level or lo < 0 else None
            if lo < 0:
                # The whole table, counted; its refused rows are quarantined but for those that already are:
                # the versions up to the last that refused any were checked (and their rows written) before.
                last = (
                    quarantine.open().transaction_version(Checks.app(quarantine))
                    if quarantine.exists()
                    else None
                )
                found_outcomes = self.checks.check(
                    name,
                    source.expectations,
                    whole,
                    quarantine=None,
                    version=hi,
                    batch_id=batch_id,
                    what=what,
                    whole=whole,
                )
                if last is not None and last < hi:
                    recent = BatchChanges(self.ctx.spark, self.ctx.policy)
                    try:
                        found = recent.read({name: (ref, last, hi)})[name]
                        rows = inserted(found.arrow if found.arrow is not None else found.frame())
                        self.checks.check(
                            name,
                            source.expectations,
                            rows,
                            quarantine=quarantine,
                            version=hi,
                            batch_id=batch_id,
                            what=what,
                        )
                    finally:
                        recent.release()
                elif last is None:
                    self.checks.quarantine(
                        name, source.expectations, whole, found_outcomes, quarantine, hi, batch_id
                    )
            else:
                if inputs is not None and name in inputs:
                    found = inputs[name]
                else:
                    assert changes is not None, (
                        name
                    )  # a caller without the inputs' changes passes the batch's
                    found = changes.read({name: (ref, lo, hi)})[name]
                rows = inserted(found.arrow if found.arrow is not None else found.frame())
                found_outcomes = self.checks.check(
                    name,
                    source.expectations,
                    rows,
                    quarantine=quarantine,
                    version=hi,
                    batch_id=batch_id,
                    what=what,
                    whole=whole,
                )
            if changes is not None:
                changes.checked[key] = found_outcomes
            outcomes += found_outcomes
        return outcomes

    def of_view(
        self,
        plan: ViewPlan,
        tables: ViewTables,
        batch_id: int,
        zset,
        *,
        recomputed: bool = False,
        after: Callable[[], DataFrame],
    ) -> list[Outcome]:
        """The outcomes of the view's own expectations over the rows the batch inserts into it (before its
        DROP ROW / QUARANTINE filter; `recomputed`: all its rows), and of its table-level ones over `after()`,
        its table as the batch leaves it; FAIL UPDATE raises before any write."""
        if not plan.view.expectations:
            return []
        whole = None
        if any(not e.row_level for e in plan.view.expectations) and _holds_rows(zset):
            self.ctx.start_spark()
            whole = after()
        return self.checks.check(
            plan.name,
            plan.view.expectations,
            inserted(zset),
            quarantine=tables.quarantine,
            version=batch_id,
            batch_id=batch_id,
            what=f"view {plan.name} (batch {batch_id})",
            recomputed=recomputed,
            whole=whole,
        )

    def table_after(self, tables: ViewTables, snapshot_before: int | None, zset) -> DataFrame:
        """The view's snapshot as the batch's changes (`zset`, as committed) leave it, before they are committed:
        its rows before, with the rows the batch inserts and without those it retracts (as bags)."""
        frame = zset if isinstance(zset, DataFrame) else self.ctx.spark.createDataFrame(zset)
        gained = inserted(frame)
        lost = inserted(frame.withColumn(WEIGHT, -F.col(WEIGHT)))
        if snapshot_before is None:
            return gained.exceptAll(lost)
        before = read_table(self.ctx.spark, tables.snapshot, version=snapshot_before).select(*gained.columns)
        return before.unionByName(gained).exceptAll(lost)


def _holds_rows(zset) -> bool:
    """Whether a batch's changes (Arrow or Spark) hold any row."""
    return zset.num_rows > 0 if isinstance(zset, pa.Table) else not zset.isEmpty()
