"""The steps a refresh would run, read from the Delta logs alone (delta-rs, no Spark): what `mv refresh
--dry-run` prints, and whether `mv refresh` has anything to do before it starts a JVM."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import pyarrow as pa
from deltalake import DeltaTable

from mvengine.config import Config
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.catalog import Catalog
from mvengine.project.drift import source_drifts
from mvengine.project.layout import CommitRecord, ViewTables, app_id, last_commit, source_table, view_tables
from mvengine.runtime.clock_flips import next_flip
from mvengine.runtime.expiry import next_expiry
from mvengine.runtime.pipeline_files import CutRecord, pipeline_folder
from mvengine.runtime.steps import (
    BLOCKED,
    SKIP,
    WAIT,
    Step,
    ViewFacts,
    decide,
    decide_interrupted,
    view_facts,
)
from mvengine.storage.sources import SchemaDrift, ensure_source_table
from mvengine.storage.tables import is_committed
from mvengine.storage.types import spark_compatible_schema, spark_compatible_type


def prepare_sources(config: Config, catalog: Catalog, *, create: bool) -> None:
    """Check every source table, and create those missing (with `create`; without, a refresh could)."""
    for source in catalog.sources.values():
        ensure_source_table(
            source_table(source, config.storage_options),
            source.schema,
            declared_at=f"{source.file}:{source.line}",
            create=create,
            path_declared=source.path_declared,
        )


def blocked_by_drift(plan: ViewPlan, catalog: Catalog, drifts: Mapping[str, SchemaDrift]) -> str | None:
    """Why the view cannot be refreshed, located, when a source it reads no longer has a declared column, or
    has it with another type (None: it can; a column another writer only added is ignored)."""
    for name in plan.inputs:
        drift = drifts.get(name)
        if drift is not None and drift.breaks:
            source = catalog.sources[name]
            return (
                f"{plan.view.file}:{plan.view.line}: view {plan.name} reads source {name} "
                f"({source.file}:{source.line}), whose table at version {drift.version} no longer has its "
                f"declared columns: {drift.problem()}; nothing was written for {plan.name}"
            )
    return None


DRIFT_HINT = (
    "another writer dropped or retyped a column: make the CREATE TABLE match the table (a view that "
    "reads the column must stop reading it; the views over the source are rebuilt), or restore the "
    "column; views that do not read the source were refreshed"
)


def columns_changed(plan: ViewPlan, storage_options: dict[str, str]) -> bool:
    """Whether the view's snapshot has other columns than its plan (a rebuild then gives its tables the new
    columns)."""
    return snapshot_columns_differ(plan, view_tables(plan, storage_options).snapshot.open())


def snapshot_columns_differ(plan: ViewPlan, snapshot: DeltaTable) -> bool:
    """Whether the snapshot (at the version opened) has other column names or types than the view's plan."""
    have = spark_compatible_schema(pa.schema(snapshot.schema().to_arrow()))
    if have.names != [c.name for c in plan.columns]:
        return True
    want = plan.arrow_schema()
    return want is not None and [spark_compatible_type(f.type) for f in want] != have.types


def timers_due(
    plan: ViewPlan, catalog: Catalog, last: CommitRecord | None, storage_options: dict[str, str]
) -> str | None:
    """Which rows of the view are due now with no input moved, in words (None: none): rows its EMIT policy
    holds until a processing time, rows its temporal filters let in or out as the clock passes their time, or
    keys its state_ttl expires."""
    from mvengine.runtime.event_time import next_due, now_micros  # (Spark's Python modules: only when asked)

    now = now_micros()
    due = next_due(plan, view_tables(plan, storage_options).state, storage_options)
    if due is not None and due <= now:
        return "rows held by its EMIT policy are due"
    flip = _next_flip(plan, catalog, last, storage_options)
    if flip is not None and flip <= now:
        return "the clock passed the time of rows its temporal filter lets in or out"
    expiry = next_expiry(plan, view_tables(plan, storage_options).state, storage_options)
    if expiry is not None and expiry <= now:
        return "keys untouched for its state_ttl are due to leave it"
    return None


def next_wakeup(
    plan: ViewPlan, catalog: Catalog, last: CommitRecord | None, storage_options: dict[str, str]
) -> int | None:
    """When (µs since the epoch) the view next has rows due with no input moved (timers_due); None when none."""
    from mvengine.runtime.event_time import next_due

    dues = [
        next_due(plan, view_tables(plan, storage_options).state, storage_options),
        _next_flip(plan, catalog, last, storage_options),
        next_expiry(plan, view_tables(plan, storage_options).state, storage_options),
    ]
    return min((d for d in dues if d is not None), default=None)


def _next_flip(
    plan: ViewPlan, catalog: Catalog, last: CommitRecord | None, storage_options: dict[str, str]
) -> int | None:
    """When the clock next lets a row into the view's temporal filters or out, after its last batch."""
    if last is None or last.clock is None:
        return None
    inputs = {
        n: source_table(catalog.sources[n], storage_options)
        if n in catalog.sources
        else view_tables(catalog.plans[n], storage_options).snapshot
        for n in plan.inputs
    }
    return next_flip(plan, inputs, last.inputs, last.clock)


def interrupted(plan: ViewPlan, storage_options: dict[str, str]) -> Step | None:
    """The step that finishes the view's half-written last batch (None when there is none)."""
    tables = view_tables(plan, storage_options)
    return _interrupted(plan.name, tables, last_commit(tables.snapshot))


def _interrupted(view: str, tables: ViewTables, last: CommitRecord | None) -> Step | None:
    committed = last is not None and is_committed(
        tables.changelog, app_id(view, last.generation), last.batch_id
    )
    return decide_interrupted(view, last, committed)


def pending_cut(config: Config) -> dict[str, int] | None:
    """The cut of a pipeline batch a crash or a failure left half-done: the next refresh runs it first."""
    return CutRecord(pipeline_folder(config.warehouse), config.storage_options).pending()


def decide_view(
    plan: ViewPlan,
    catalog: Catalog,
    facts: ViewFacts,
    last: CommitRecord | None,
    cut: Mapping[str, int],
    at_cut: Mapping[str, int],
    *,
    rebuild: bool,
    options: dict[str, str],
) -> Step:
    """steps.decide for the view, whether its columns changed and its EMIT rows are due read from its tables
    when the decision asks."""
    return decide(
        facts,
        last,
        cut,
        at_cut,
        rebuild=rebuild,
        columns_changed=partial(columns_changed, plan, options),
        timers_due=partial(timers_due, plan, catalog, last, options),
    )


def planned_steps(
    config: Config, catalog: Catalog, plans: list[ViewPlan], *, full: bool = False
) -> list[Step]:
    """The steps a refresh of `plans` (in DAG order) to the sources' current versions would run, each view's
    decided as the refresh decides it (steps.decide): an upstream view that moves is taken to commit one new
    snapshot version. A batch left half-done is finished first; its steps are not listed."""
    options = config.storage_options
    cut = {  # (a source not created yet: the refresh creates it, at version 0)
        name: ref.open().version() if ref.exists() else 0
        for name, source in catalog.sources.items()
        if any(name in p.inputs for p in plans)
        for ref in [source_table(source, options)]
    }
    drifts = source_drifts(catalog, cut, options)
    at_cut: dict[str, int] = {}
    steps: list[Step] = []
    for plan in plans:
        problem = blocked_by_drift(plan, catalog, drifts)
        if problem is not None:
            steps.append(Step(plan.name, BLOCKED, problem.split(": ", 1)[1]))
            continue
        tables = view_tables(plan, options)
        last = last_commit(tables.snapshot)
        finish = _interrupted(plan.name, tables, last)
        if finish is not None:
            steps.append(finish)
        step = decide_view(
            plan, catalog, view_facts(plan, catalog), last, cut, at_cut, rebuild=full, options=options
        )
        steps.append(step)
        if step.action == WAIT:
            continue
        if step.action == SKIP:
            assert last is not None  # a view never refreshed is rebuilt
            at_cut[plan.name] = last.version
        else:
            at_cut[plan.name] = 0 if last is None else last.version + 1
    return steps


def stale_views(config: Config, catalog: Catalog, plans: list[ViewPlan]) -> list[str]:
    """The views (of `plans`, in DAG order) that a refresh would write: never refreshed, SQL changed, a batch
    left unfinished, an input at a newer version than the view reflects, or a view it reads stale."""
    steps = planned_steps(config, catalog, plans)
    return list(dict.fromkeys(s.view for s in steps if s.action not in (SKIP, WAIT)))
