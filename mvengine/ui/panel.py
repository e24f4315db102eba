"""What the page shows, as JSON: the DAG laid out in layers, every node's status (reading/status.py), and one
view's panel (its recent batches, changelog tail, plan and expectations). Delta logs only, never a write."""

from __future__ import annotations

import json
from typing import Any

import networkx as nx
import pyarrow.compute as pc
import pyarrow.dataset as ds

from mvengine.project.catalog import Catalog
from mvengine.project.layout import CommitRecord
from mvengine.reading.explain import describe as plan_text
from mvengine.reading.status import status
from mvengine.reading.versions import Versions, show_time
from mvengine.storage.tables import arrow_dataset

BATCHES = 50  # the batches a view's plots cover
TAIL = 20  # changelog rows in the tail


def graph(catalog: Catalog) -> dict[str, Any]:
    """Nodes in layers (a node one layer right of the deepest thing it reads), and the edges between them."""
    layers = list(nx.topological_generations(catalog.graph))
    nodes = []
    for x, layer in enumerate(layers):
        for y, name in enumerate(sorted(layer, key=catalog.order.index)):
            kind = "source" if name in catalog.sources else "view"
            nodes.append(
                {
                    "name": name,
                    "kind": kind,
                    "layer": x,
                    "row": y,
                    "strategy": None if kind == "source" else catalog.plans[name].strategy,
                }
            )
    return {"nodes": nodes, "edges": [{"from": a, "to": b} for a, b in catalog.graph.edges]}


def statuses(versions: Versions) -> list[dict[str, Any]]:
    return [s.to_json() | {"stale": s.stale} for s in status(versions)]


def view_panel(versions: Versions, name: str) -> dict[str, Any]:
    name = versions.view(name)
    plan = versions.catalog.plans[name]
    commits = list(versions.snapshot_commits(name).values())[-BATCHES - 1 :]
    batches = [
        {
            "version": c.version,
            "batch_id": c.batch_id,
            "kind": c.kind,
            "time": show_time(c.timestamp_ms),
            "ms": c.batch_ms,
            "rows_in": c.rows_in,
            "rows_out": c.changes,
            "engine": c.engine,
            "lag_s": None if before is None else _lag_before(versions, name, before, c),
        }
        for before, c in zip([None, *commits[:-1]], commits)
    ][-BATCHES:]
    return {
        "name": name,
        "strategy": plan.strategy,
        "reason": plan.reason,
        "plan": plan_text(plan, versions.catalog),
        "batches": batches,
        "changelog": _tail(versions, name),
        "expectations": commits[-1].expectations if commits else [],
        "declared": [{"name": e.name, "on_violation": e.on_violation} for e in plan.view.expectations],
    }


def _lag_before(versions: Versions, view: str, before: CommitRecord, batch: CommitRecord) -> float:
    """How stale the view was just before this batch landed: seconds from the oldest source commit it brought
    in (one the version before did not reflect) to its commit."""
    now, then = versions.source_versions(view, batch.version), versions.source_versions(view, before.version)
    times = [
        c.timestamp_ms
        for source, seen in now.items()
        for c in versions.commits(source)
        if min(then.get(source, [-1])) < c.version <= max(seen)
    ]
    return round((batch.timestamp_ms - min(times)) / 1000, 3) if times else 0.0


def _tail(versions: Versions, view: str) -> dict[str, Any]:
    """The changelog's last rows (of its last few versions, read by delta-rs), newest last."""
    ref = versions.changelog(view)
    if not ref.exists():
        return {"columns": [], "rows": []}
    dataset = arrow_dataset(ref.open())
    latest = versions.latest(view)
    rows = dataset.to_table(filter=ds.field("_version") >= max(latest - 5, 0))
    if rows.num_rows:
        order = [("_version", "ascending"), ("_batch_id", "ascending"), ("_emit_index", "ascending")]
        rows = rows.take(pc.sort_indices(rows, sort_keys=[k for k in order if k[0] in rows.column_names]))
        rows = rows.slice(max(rows.num_rows - TAIL, 0))
    return {
        "columns": rows.column_names,
        "rows": json.loads(json.dumps([list(r.values()) for r in rows.to_pylist()], default=str)),
    }
