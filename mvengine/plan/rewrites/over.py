"""Window functions in a bound plan (`... OVER (PARTITION BY p ...)` in a SELECT list, not a top-N filter, which
plan/rewrites/top_n.py takes first): a Project computing windows that all share one PARTITION BY becomes a
Project over an Over node of its input, which is maintained per partition. Windows with different PARTITION BYs
stay in the Project, and the view is recomputed in full; so do windows without one (one partition: the whole
input), unless they are running windows ordered by event time (plan/operators/over.running), which a view with
an allowed_lateness maintains from the rows since its late cutoff (plan/view_plan.py says so otherwise)."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from mvengine.plan.nodes import Field, Node, Over, Project, with_children
from mvengine.plan.operators.over import event_time_order, running
from mvengine.plan.rewrites.flat import QUALIFIER, Rename, flat_input
from mvengine.plan.types import infer_type


def over_windows(node: Node) -> Node:
    """The plan with each Project whose windows share one PARTITION BY split into a Project over an Over."""
    node = with_children(node, [over_windows(c) for c in node.children])
    if not isinstance(node, Project):
        return node
    windows = [w for e in node.projections for w in e.find_all(exp.Window)]
    if not windows or any(len(list(w.find_all(exp.Window))) > 1 for w in windows):
        return node  # (no windows, or a window inside a window's arguments)
    partitions = {tuple(p.sql("spark") for p in w.args.get("partition_by") or ()) for w in windows}
    if len(partitions) != 1:
        return node
    flat, rename = flat_input(node.child)
    fields = [Field(f"_w{i}", _typed(w), True, QUALIFIER) for i, w in enumerate(windows)]
    over = Over(fields=flat.fields + tuple(fields), child=flat, windows=tuple(rename(w) for w in windows))
    if partitions == {()} and not (running(over) and event_time_order(over) is not None):
        return node
    at = {id(w): f for w, f in zip(windows, fields)}
    projections = tuple(_onto(e, at, rename) for e in node.projections)
    return replace(node, child=over, projections=projections)


def _onto(e: exp.Expression, at: dict[int, Field], rename: Rename) -> exp.Expression:
    """`e` over the Over node: its columns moved onto the renamed input, each window a reference to its field."""
    if isinstance(e, exp.Window):
        return at[id(e)].ref()
    moved = rename(e)
    for original, twin in zip(list(e.find_all(exp.Window)), list(moved.find_all(exp.Window))):
        twin.replace(at[id(original)].ref())
    return moved


def _typed(window: exp.Window) -> exp.DataType:
    return infer_type(window.copy())
