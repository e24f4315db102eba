"""A view's plan explained: the text `mv plan` prints and `mv ui` shows, and the stable JSON of `mv plan --json`."""

from __future__ import annotations

from collections.abc import Mapping

from mvengine.incremental.driver_support import not_on_driver
from mvengine.plan.nodes import Node, show_name
from mvengine.plan.types import type_name
from mvengine.plan.view_plan import ViewPlan
from mvengine.plan.windows import duration
from mvengine.project.catalog import Catalog
from mvengine.storage.sources import SchemaDrift

# The fields of `mv plan --json`, with their meaning (docs/reference/json.md is made from it; tests check that
# the document has exactly these).
PLAN_FIELDS = {
    "order": "every source and view, in the order a refresh takes them (dependencies first)",
    "sources[].name": "the source's name",
    "sources[].path": "its Delta table",
    "sources[].table": "the table of Spark's catalog it reads (WITH ('table' = ...), or named in a view's FROM as "
    "schema.table), or null",
    "sources[].key": "its PRIMARY KEY columns, or null",
    "sources[].append_only": "whether it was declared 'append_only'",
    "sources[].watermark": "its WATERMARK, as declared (`ts AS ts - INTERVAL '5' SECOND`), or null",
    "sources[].ignored_columns": "columns its table has that another writer added and the CREATE TABLE does "
    "not declare: no view reads them (null: none, or no table yet)",
    "sources[].problem": "a declared column its table no longer has, or has with another type: the views over "
    "it stop until the CREATE TABLE matches (null: none)",
    "views[].name": "the view's name",
    "views[].file": "the file that declares it, relative to the project",
    "views[].line": "the line of its CREATE statement",
    "views[].inputs": "the sources and views it reads",
    "views[].columns": "its columns: [{name, type (a Spark SQL type name), nullable}]",
    "views[].key": "its unique key: a list of columns, [] for one row, null for a bag",
    "views[].target_lag": "its target_lag: seconds, 'downstream', or null (refreshed in every batch)",
    "views[].event_time": "the columns that carry a source's event time unchanged",
    "views[].window": "its event-time window (`TUMBLE(ts, 1 hour)`, ...), or null",
    "views[].emit": "its EMIT clause, or null",
    "views[].changelog": "append-only, upsert (changes by key) or retract (whole rows)",
    "views[].strategy": "incremental or full",
    "views[].reason": "why it is recomputed in full (null when incremental)",
    "views[].refresh_policy": "auto, incremental, incremental_strict or full",
    "views[].state": "what its delta rule keeps, in words",
    "views[].bounded_state": "whether that state stays bounded",
    "views[].driver": "whether its small batches are computed on the driver, without Spark",
    "views[].driver_reason": "why not (null when they are)",
    "views[].watermarks": "the watermarks its event time follows (`source: ts AS ...`)",
    "views[].notes": "what else to know about how it is kept, in sentences",
    "views[].plan": "the operator tree the incremental compiler works on, one line per node",
}


def plan_document(
    catalog: Catalog, views: list[str], drifts: Mapping[str, SchemaDrift] | None = None
) -> dict:
    """The stable JSON form of `mv plan --json`; `drifts`: how the sources' tables differ from their CREATE
    TABLE (runtime/refresh_plan.source_drifts)."""
    drifts = drifts or {}
    return {
        "order": catalog.order,
        "sources": [
            {
                "name": s.name,
                "path": s.path,
                "table": s.catalog_table,
                "key": list(s.key) if s.key else None,
                "append_only": s.append_only,
                "watermark": s.watermark_sql(),
                "ignored_columns": list(drifts[s.name].added)
                if s.name in drifts and drifts[s.name].added
                else None,
                "problem": drifts[s.name].problem() if s.name in drifts and drifts[s.name].breaks else None,
            }
            for s in catalog.sources.values()
        ],
        "views": [
            dict(
                catalog.plans[name].to_json(),
                **driver_fields(catalog.plans[name]),
                watermarks=watermarks(catalog, catalog.plans[name]),
                notes=list(catalog.plans[name].notes),
                plan=tree_lines(catalog.plans[name].root),
            )
            for name in views
        ],
    }


POLICY_MEANING = {
    "auto": "by cost, per batch: the delta rule, or a recomputation when a batch changes much of the inputs",
    "incremental": "the delta rule in every batch, whatever it changes",
    "incremental_strict": "the delta rule in every batch; a view without one is an error",
    "full": "recomputed in every batch where an input moved",
}


def policy_meaning(plan: ViewPlan) -> str:
    """The view's refresh policy and what it does for this view: `auto` never recomputes by cost a view whose
    rows depend on when they arrived or on its state_ttl (a recomputation could not give them), nor a batch
    that only inserts into a view whose rows each come of one input row (appending them costs less)."""
    policy = plan.view.refresh_policy
    if policy == "auto" and plan.by_arrival:
        return "auto: the delta rule in every batch (never recomputed by cost; the notes say why)"
    if policy == "auto" and plan.row_by_row:
        return (
            "auto: the delta rule in every batch that only inserts (each row comes of one input row: appending "
            "them beats recomputing); a recomputation when a batch that deletes changes much of the inputs"
        )
    return f"{policy}: {POLICY_MEANING[policy]}"


def driver_fields(plan: ViewPlan) -> dict:
    """Whether the view's small batches are computed on the driver, without Spark, and if not, why."""
    reason = (
        "recomputed by Spark"
        if plan.strategy == "full"
        else not_on_driver(plan.root, plan.view.state_ttl is not None)
    )
    return {"driver": reason is None, "driver_reason": reason}


def watermarks(catalog: Catalog, plan: ViewPlan) -> list[str]:
    """The watermarks the view's event time follows: those of the sources it reads, however far up."""
    found: list[str] = []
    for name in plan.inputs:
        source = catalog.sources.get(name)
        if source is not None and source.watermark is not None:
            found.append(f"{name}: {source.watermark_shown()}")
        elif name in catalog.plans:
            found += [m for m in watermarks(catalog, catalog.plans[name]) if m not in found]
    return found


EMIT_DEFAULT = "every batch's changes (per record); a windowed row is early, on_time or late in _emit_timing"


def target_lag_meaning(plan: ViewPlan) -> str:
    """What the view's target_lag makes `mv refresh --continuous` do, in words."""
    target = plan.view.target_lag
    if isinstance(target, int):
        return (
            f"{duration(target)}: --continuous refreshes it when its oldest unreflected input commit is about "
            "that old, or when a view that reads it is refreshed"
        )
    return "downstream: --continuous refreshes it only when a view that reads it is refreshed"


def describe(plan: ViewPlan, catalog: Catalog | None = None) -> list[str]:
    """The text form of one view's plan."""
    columns = ", ".join(
        f"{show_name(f.name)} {type_name(f.type)}{'' if f.nullable else ' not null'}" for f in plan.columns
    )
    key = (
        ", ".join(show_name(k) for k in plan.key)
        if plan.key
        else ("() (one row)" if plan.key == () else "none (bag)")
    )
    strategy = plan.strategy if plan.strategy == "incremental" else f"full: {plan.reason}"
    bounded = "bounded" if plan.bounded_state else "unbounded: grows with the number of groups or rows"
    rows = [
        ("inputs", ", ".join(plan.inputs) or "-"),
        ("columns", columns),
        ("key", key),
        ("event time", ", ".join(show_name(f.name) for f in plan.columns if f.time_attr) or "-"),
        *([("watermark", "; ".join(watermarks(catalog, plan)) or "-")] if catalog and plan.window() else []),
        *([("window", plan.window())] if plan.window() else []),
        *([("emit", plan.view.emit.text if plan.view.emit else EMIT_DEFAULT)] if plan.window() else []),
        ("changelog", plan.changelog),
        ("strategy", strategy),
        ("policy", policy_meaning(plan)),
        *([("target_lag", target_lag_meaning(plan))] if plan.view.target_lag is not None else []),
        (
            "driver",
            "small batches ([refresh] driver_max_changes) are computed on the driver, without Spark"
            if driver_fields(plan)["driver"]
            else f"no: {driver_fields(plan)['driver_reason']}",
        ),
        ("state", f"{plan.state} [{bounded}]"),
        *[
            (
                "expects",
                f"{e.name}: {' '.join(e.text.split()[3:])}"
                + ("" if "ON VIOLATION" in e.text else " (ON VIOLATION WARN)"),
            )
            for e in plan.view.expectations
        ],
    ]
    lines = [f"view {plan.name}  ({plan.view.file}:{plan.view.line})"]
    lines += [f"  {label:<10} {value}" for label, value in rows]
    tree = tree_lines(plan.root)
    lines.append(f"  {'plan':<10} {tree[0]}")
    lines += [f"  {'':<10} {t}" for t in tree[1:]]
    lines += [f"  {'note':<10} {n}" for n in plan.notes]
    return lines


def tree_lines(root: Node, depth: int = 0) -> list[str]:
    lines = ["  " * depth + root.describe()]
    for child in root.children:
        lines += tree_lines(child, depth + 1)
    return lines
