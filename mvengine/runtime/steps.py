"""What a refresh does to each view, decided before anything runs: a step per view, as data.

`decide` looks only at what it is given (the view's plan facts, its last snapshot commit, the batch's cut), so
the same decision serves `mv refresh`, which runs the steps (runtime/view_runner.py), and `mv refresh
--dry-run`, which prints them and writes nothing. The executors never decide again whether to rebuild; the one
choice left to a running batch is the execution policy's (policy.py): on which engine it runs, and whether its
changes are so many that recomputing costs less, which needs the changes counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from mvengine.plan.operators import has_delta_rules
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.catalog import Catalog
from mvengine.project.layout import CommitRecord
from mvengine.runtime.freshness import sql_hash

FINISH = "finish"  # a batch whose snapshot committed but whose changelog did not: finish it
REBUILD = "rebuild"  # compute the view anew from its inputs, as a new generation
APPLY = "apply"  # apply the delta rule to the inputs' changes since the view's last batch
RECOMPUTE = "recompute"  # a full-refresh view whose inputs moved: run its SQL again
FIRE_TIMERS = "fire timers"  # no input moved, but rows its EMIT policy held (or its temporal filter) are due
SKIP = "skip"  # the view reflects the cut already
WAIT = "wait"  # the view cannot reach this cut: an input is not there, or the view was rebuilt past it
BLOCKED = "blocked"  # a source it reads no longer has a declared column (refresh_plan.blocked_by_drift)


@dataclass(frozen=True)
class ViewFacts:
    """What `decide` needs to know of a view, from its plan."""

    name: str
    incremental: bool  # planned incremental, with a delta rule for every operator
    sql_hash: str  # of the SQL as planned (runtime/freshness.sql_hash)
    inputs: tuple[str, ...]  # sources and views, in the order the plan reads them
    upstream: frozenset[str]  # the inputs that are views

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(n for n in self.inputs if n not in self.upstream)


def view_facts(plan: ViewPlan, catalog: Catalog) -> ViewFacts:
    return ViewFacts(
        plan.name,
        incremental=plan.strategy == "incremental" and has_delta_rules(plan.root),
        sql_hash=sql_hash(plan),
        inputs=tuple(plan.inputs),
        upstream=frozenset(n for n in plan.inputs if n in catalog.plans),
    )


@dataclass(frozen=True)
class Step:
    view: str
    action: str
    reason: str
    generation: int = 0
    batch_id: int = 0
    kind: str = ""  # what the snapshot commit will record: bootstrap, stream or full
    versions_before: Mapping[str, int] = field(default_factory=dict)  # the inputs' versions the view reflects
    targets: Mapping[str, int] = field(default_factory=dict)  # ...and those it will reflect after the step
    # a rebuild whose columns changed: its state starts empty; its snapshot and changelog take the new columns in
    # a new version, their history kept (runtime/recompute.py)
    new_columns: bool = False

    @property
    def note(self) -> str:
        """What the batch's line says of why it ran (nothing for the batches that follow their inputs)."""
        return "" if self.action in (APPLY, RECOMPUTE) else self.reason

    def line(self) -> str:
        """The step as `mv refresh --dry-run` prints it."""
        if self.action in (SKIP, WAIT, BLOCKED):
            return f"{self.view}: {self.action} ({self.reason})"
        moved = ", ".join(
            f"{n}@{self.versions_before[n]}→{v}" if n in self.versions_before else f"{n}@{v}"
            for n, v in self.targets.items()
        )
        return (
            f"{self.view}: {self.action}, batch {self.batch_id} [{self.kind}] inputs {moved} ({self.reason})"
        )


def decide(
    view: ViewFacts,
    last: CommitRecord | None,
    cut: Mapping[str, int],
    at_cut: Mapping[str, int],
    *,
    rebuild: bool = False,
    columns_changed: Callable[[], bool] = lambda: False,
    timers_due: Callable[[], str | None] = lambda: None,
) -> Step:
    """The step that brings `view` to a pipeline batch's `cut` of the sources, given `last`, its snapshot's
    latest commit (None: never refreshed), and `at_cut`, the snapshot versions of the views that already reflect
    the cut. `rebuild`: `mv refresh --full`. `columns_changed()` and `timers_due()` are asked only when they
    matter: whether the snapshot's columns differ from the plan's, and which rows are due with no input moved
    (None: none)."""
    waiting = waiting_for(view, cut, at_cut)
    if waiting:
        return Step(view.name, WAIT, f"{', '.join(waiting)} not at this batch's cut")
    targets = {n: cut[n] if n in cut else at_cut[n] for n in view.inputs}
    if not rebuild and last is not None and any(last.inputs.get(n, -1) > cut[n] for n in view.sources):
        return Step(view.name, WAIT, "rebuilt at a later cut: waits for its sources' versions to reach it")
    upstream_rebuilt = last is not None and any(last.inputs.get(n, -1) > at_cut[n] for n in view.upstream)
    if last is None or last.sql_hash != view.sql_hash or rebuild or upstream_rebuilt:
        reason = (
            "new view"
            if last is None
            else "SQL changed: rebuilt from the inputs"
            if last.sql_hash != view.sql_hash
            else "--full: recomputed from the inputs"
            if rebuild
            else "an upstream view started over: rebuilt from the inputs"
        )
        new_columns = last is not None and columns_changed()
        if new_columns:
            reason += "; its columns changed: its snapshot and changelog take them in a new version"
        return Step(
            view.name,
            REBUILD,
            reason,
            generation=0 if last is None else last.generation + 1,
            batch_id=0 if last is None else last.batch_id + 1,
            kind="bootstrap" if view.incremental else "full",
            targets=targets,
            new_columns=new_columns,
        )

    def after_last(action: str, reason: str, kind: str) -> Step:
        assert last is not None
        return Step(
            view.name,
            action,
            reason,
            generation=last.generation,
            batch_id=last.batch_id + 1,
            kind=kind,
            versions_before=last.inputs,
            targets=targets,
        )

    if any(last.inputs.get(n) != v for n, v in targets.items()):
        if view.incremental:
            return after_last(APPLY, "its inputs moved", "stream")
        return after_last(RECOMPUTE, "its inputs moved; it is refreshed in full", "full")
    due = timers_due() if view.incremental else None
    if due is not None:
        return after_last(FIRE_TIMERS, due, "stream")
    return Step(view.name, SKIP, "its inputs did not move")


def waiting_for(view: ViewFacts, cut: Mapping[str, int], at_cut: Mapping[str, int]) -> list[str]:
    """The view's inputs that are not at the batch's cut: upstream views that did not reach it, sources not
    in it."""
    return [n for n in view.inputs if n not in (at_cut if n in view.upstream else cut)]


def decide_interrupted(view: str, last: CommitRecord | None, changelog_committed: bool) -> Step | None:
    """The step that finishes the view's last batch, when a process stopped between its snapshot's commit and
    its changelog's (None when there is none to finish): to the versions the snapshot recorded."""
    if last is None or changelog_committed:
        return None
    return Step(
        view,
        FINISH,
        "finishing an interrupted batch",
        generation=last.generation,
        batch_id=last.batch_id,
        kind=last.kind,
        targets=last.inputs,
    )
