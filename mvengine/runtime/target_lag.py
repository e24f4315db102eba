"""Freshness per view under `mv refresh --continuous`: a view with a `target_lag` is refreshed in a batch only
when it must be to stay within it, or when a view that reads it is refreshed (DESIGN.md §4: a view and its
readers move to a cut together); `'downstream'` views only in the second case (as Snowflake's dynamic tables'
TARGET_LAG = DOWNSTREAM). A view without one is refreshed in every batch, as are the views it reads.

A view's lag is the age of the oldest source commit it does not reflect, through any path (the commit times
the sources' logs record), as `mv status` shows it."""

from __future__ import annotations

from collections.abc import Mapping

from mvengine.plan.view_plan import ViewPlan
from mvengine.project.catalog import Catalog
from mvengine.project.layout import CommitRecord, last_commit, recorded_at, source_table, view_tables
from mvengine.sql.views import DOWNSTREAM
from mvengine.storage.tables import commit_history


def due_views(
    plans: list[ViewPlan],
    catalog: Catalog,
    options: dict[str, str],
    *,
    now_ms: int,
    interval_ms: int,
) -> dict[str, bool]:
    """For each of `plans` (in DAG order), whether this batch refreshes it: a view without a target_lag always;
    one with a duration when its lag would pass the target before the next batch (its lag plus one interval);
    any when a view that reads it is refreshed. A view never refreshed is always due."""
    readers: dict[str, list[str]] = {}
    for plan in plans:
        for name in plan.inputs:
            readers.setdefault(name, []).append(plan.name)
    due: dict[str, bool] = {}
    for plan in reversed(plans):
        target = plan.view.target_lag
        needed = any(due.get(r, False) for r in readers.get(plan.name, []))
        if target is None or needed:
            due[plan.name] = True
        elif target == DOWNSTREAM:
            due[plan.name] = last_commit(view_tables(plan, options).snapshot) is None
        else:
            since = unreflected_since(plan, catalog, options)
            due[plan.name] = since is not None and now_ms - since + interval_ms >= int(target) // 1000
    return due


def becomes_due(plan: ViewPlan, catalog: Catalog, options: dict[str, str], *, interval_ms: int) -> int | None:
    """When (ms since the epoch) a view with a duration target_lag must next be refreshed, one interval before
    its lag passes the target (None: it reflects every source commit, or has no such target)."""
    target = plan.view.target_lag
    if target is None or target == DOWNSTREAM:
        return None
    since = unreflected_since(plan, catalog, options)
    return None if since is None else since + int(target) // 1000 - interval_ms


def unreflected_since(plan: ViewPlan, catalog: Catalog, options: dict[str, str]) -> int | None:
    """The commit time (ms) of the oldest source commit the view's snapshot does not reflect, through any path;
    None when it reflects every one (or was never refreshed: it is then due anyway)."""
    last = last_commit(view_tables(plan, options).snapshot)
    if last is None:
        return None
    times = []
    for source, version in _reflected(last, catalog, options).items():
        dt = source_table(catalog.sources[source], options).open()
        newer = [e for e in commit_history(dt, since=version + 1) if e.get("version", -1) > version]
        if newer:
            times.append(min(int(e["timestamp"]) for e in newer))
    return min(times) if times else None


def _reflected(record: CommitRecord, catalog: Catalog, options: dict[str, str]) -> Mapping[str, int]:
    """The oldest version of each source a view's commit reflects, directly or through the views it read."""
    found: dict[str, int] = {}
    for name, version in record.inputs.items():
        if name in catalog.sources:
            found[name] = min(found.get(name, version), version)
        elif name in catalog.plans:
            upstream = recorded_at(view_tables(catalog.plans[name], options).snapshot, version)
            for source, v in _reflected(upstream, catalog, options).items():
                found[source] = min(found.get(source, v), v)
    return found
