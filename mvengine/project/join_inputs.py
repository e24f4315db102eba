"""Join inputs that keep state, made views of their own.

A join reads each side at the batch's input versions, so its inputs must be sources, views, or subqueries
without state (filters, projections, other joins). A subquery in FROM that aggregates, deduplicates or ranks
(`JOIN (SELECT auction, COUNT(*) ... GROUP BY ...) AS b`) keeps state, and its rows before a batch are in that
state, not in the inputs. So each such subquery becomes a view of its own, named `<view>__<alias>`, which the
join reads as it reads any view: both are then maintained incrementally, as a user would write them by hand.
A subquery that reads a CTE of its query stays where it is (the view is then recomputed in full, with the
reason).
"""

from __future__ import annotations

import re
from dataclasses import replace

from sqlglot import exp

from mvengine.config import join_uri
from mvengine.sql.views import ViewDef


def extract_join_inputs(views: dict[str, ViewDef], taken: set[str], warehouse: str) -> dict[str, ViewDef]:
    """The views, each extracted join input (and, in turn, the ones inside it) placed before its view."""
    names = {n.lower() for n in taken}
    out: dict[str, ViewDef] = {}

    def visit(view: ViewDef) -> None:
        query = view.query.copy()
        extracted: list[ViewDef] = []
        ctes = {c.alias.lower() for w in query.find_all(exp.With) for c in w.expressions}
        for select in list(query.find_all(exp.Select)):
            if not select.args.get("joins"):
                continue
            from_ = select.args.get("from_") or select.args.get("from")
            sides = ([from_.this] if from_ is not None else []) + [j.this for j in select.args["joins"]]
            for side in sides:
                if not isinstance(side, exp.Subquery) or not side.alias or not _keeps_state(side.this):
                    continue
                if any(t.name.lower() in ctes for t in side.this.find_all(exp.Table)):
                    continue
                name = _name(f"{view.name}__{side.alias}", names)
                names.add(name.lower())
                extracted.append(
                    ViewDef(
                        name,
                        view.file,
                        view.line,
                        side.this.copy(),
                        None,
                        join_uri(warehouse, name),
                        side.this.sql("spark"),
                        view.refresh_policy,
                        origin=f"{side.alias} of view {view.name}",
                    )
                )
                alias = side.args["alias"].copy()
                side.replace(exp.Table(this=exp.to_identifier(name, quoted=True), alias=alias))
        for inner in extracted:
            visit(inner)
        out[view.name] = replace(view, query=query) if extracted else view

    for view in views.values():
        visit(view)
    return out


def _keeps_state(query: exp.Expression) -> bool:
    """Whether the query groups, deduplicates, ranks or windows (anywhere inside)."""
    for node in query.walk():
        if isinstance(node, (exp.Group, exp.AggFunc, exp.Window)):
            return True
        if isinstance(node, exp.Select) and node.args.get("distinct"):
            return True
        if isinstance(node, exp.Union) and node.args.get("distinct"):
            return True
    return False


def _name(wanted: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", wanted)
    name, n = base, 2
    while name.lower() in taken:
        name, n = f"{base}_{n}", n + 1
    return name
