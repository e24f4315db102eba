"""Runs the steps of a refresh (runtime/steps.py), one view at a time: each step goes to its executor
(recompute.py, apply_changes.py), and the view's failures are attributed to it. Before a view's step is decided,
its sources are checked to be the tables it last read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mvengine.errors import MvError
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.layout import CommitRecord, recorded_at, view_tables
from mvengine.runtime.apply_changes import apply_changes
from mvengine.runtime.batch_expectations import BatchExpectations
from mvengine.runtime.changes import BatchChanges
from mvengine.runtime.context import RefreshContext
from mvengine.runtime.recompute import recompute
from mvengine.runtime.steps import APPLY, FINISH, FIRE_TIMERS, REBUILD, RECOMPUTE, Step, ViewFacts, view_facts
from mvengine.storage.api import remove_folder
from mvengine.storage.tables import TableRef


@dataclass
class ViewRunner:
    ctx: RefreshContext

    def __post_init__(self) -> None:
        self.expectations = BatchExpectations(self.ctx)

    # -- what a decision reads ------------------------------------------------------------------------------

    def facts(self, plan: ViewPlan) -> ViewFacts:
        return view_facts(plan, self.ctx.catalog)

    def check_same_sources(self, plan: ViewPlan, last: CommitRecord | None) -> None:
        """A source deleted and created anew since the view last read it (another table id, or fewer versions
        than the view reflects) is another table: its versions cannot be diffed against the view's."""
        if last is None:
            return
        for name in plan.inputs:
            if name not in self.ctx.catalog.sources or name not in last.inputs:
                continue
            ref = self.ctx.source_ref(name)
            dt = ref.open()
            recorded, now = last.input_ids.get(name), dt.metadata().id
            if (recorded is not None and recorded != now) or last.inputs[name] > dt.version():
                raise MvError(
                    f"source {name} ({ref.uri}) was deleted and created again since view {plan.name} last read it "
                    f"at version {last.inputs[name]} (table id {recorded or 'not recorded'}, now {now}, at version "
                    f"{dt.version()}): the view describes the old table, so nothing was written",
                    hint=f"mv refresh --full {plan.name} recomputes the view (and the views over it) from the new "
                    "table; if the table was replaced by mistake, restore the old one at that path",
                )

    # -- running a step -------------------------------------------------------------------------------------

    def guarded(
        self, plan: ViewPlan, work: Callable[..., object], *args: object, during: str = "", **kwargs: object
    ) -> None:
        """Run a view's work, its failures attributed to it and to the batch it was `during` (attributed)."""
        try:
            work(*args, **kwargs)
        except Exception as e:
            error = self.attributed(plan, e, during)
            if error is e:
                raise
            raise error from e

    def attributed(self, plan: ViewPlan, e: Exception, during: str = "") -> Exception:
        """The error a failure of the view's work becomes (_view_error); an MvError stays itself."""
        return e if isinstance(e, MvError) else _view_error(plan, e, during)

    def run(self, plan: ViewPlan, step: Step, changes: BatchChanges) -> None:
        """Run the view's step (any but SKIP and WAIT) in a pipeline batch whose changes are `changes`."""
        ctx, tables = self.ctx, view_tables(plan, self.ctx.config.storage_options)
        if step.action == FINISH and step.kind != "stream":
            recompute(ctx, self.expectations, plan, step, resuming=True)
        elif step.action == FINISH:  # from the versions the snapshot's commit before it records
            before = recorded_at(tables.snapshot, tables.snapshot.open().version() - 1)
            apply_changes(ctx, self.expectations, plan, replace(step, versions_before=before.inputs), changes)
        elif step.action == REBUILD:
            if step.new_columns:  # (the key revisions too: the key's columns may be others now)
                remove_folder(TableRef(tables.state, ctx.config.storage_options))
            recompute(ctx, self.expectations, plan, step)
        elif step.action in (APPLY, FIRE_TIMERS):
            apply_changes(ctx, self.expectations, plan, step, changes)
        elif step.action == RECOMPUTE:
            moved = {n: (step.versions_before.get(n, -1), v) for n, v in step.targets.items()}
            checked = self.expectations.of_sources(plan, moved, step.batch_id, changes)
            recompute(ctx, self.expectations, plan, step, checked=checked)
        else:
            raise ValueError(f"no executor for step {step.action!r}")


def _view_error(plan: ViewPlan, e: Exception, during: str = "") -> Exception:
    """A failure while refreshing a view, attributed to it. Spark's own errors about the query or its data
    (an unknown function, a division by zero under ANSI mode, a bad cast) are the user's to fix and become an
    MvError naming the view's file and line; anything else (Spark's INTERNAL_ERROR classes included) is a bug:
    `e` itself, with a note saying which view it stopped."""
    from pyspark.errors import PySparkException

    condition = (e.getCondition() or "") if isinstance(e, PySparkException) else ""
    if isinstance(e, PySparkException) and condition and not condition.startswith("INTERNAL_ERROR"):
        message = (e.getMessage() or str(e)).strip().splitlines()[0]
        return MvError(
            f"{plan.view.file}:{plan.view.line}: view {plan.name}: {during + ': ' if during else ''}"
            f"Spark cannot compute it: {message}",
            hint="fix the view's SQL, or the input rows it fails on (mv plan checks names and types, "
            "not every function or value), then run mv refresh again: the batch is planned anew "
            f"up to the inputs' newest versions; as a last resort, mv refresh --full {plan.name} "
            "recomputes the view from its inputs",
        )
    e.add_note(f"refreshing view {plan.name}" + (f", {during}" if during else ""))
    return e
