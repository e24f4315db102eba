"""Join inputs that keep state, made views of their own.

A join reads each side at the batch's input versions, so its inputs must be sources, views, or subqueries
without state (filters, projections, other joins). A subquery in FROM that aggregates, deduplicates or ranks
(`JOIN (SELECT auction, COUNT(*) ... GROUP BY ...) AS b`) keeps state, and its rows before a batch are in that
state, not in the inputs. So each such subquery becomes a view of its own, named `<view>__<alias>`, which the
join reads as it reads any view: both are then maintained incrementally, as a user would write them by hand.
The FROM of an `EXISTS` subquery is a join input too (of the semi or anti join it becomes): its distinct keys
(project/exists_keys.py) become `<view>__exists_N`. A CTE that keeps state and is joined
(`WITH b AS (SELECT ... GROUP BY ...) SELECT ... FROM a JOIN b ...`) is made a view the same way,
`<view>__<cte>` (with the CTE's column list, if it has one), and dropped from the WITH when nothing else reads
it. A subquery or CTE that reads a CTE of its query stays where it is (the view is then recomputed in full,
with the reason).
"""

from __future__ import annotations

import re
from dataclasses import replace

from sqlglot import exp

from mvengine.config import join_uri
from mvengine.sql.views import DOWNSTREAM, ViewDef


def extract_join_inputs(views: dict[str, ViewDef], taken: set[str], warehouse: str) -> dict[str, ViewDef]:
    """The views, each extracted join input (and, in turn, the ones inside it) placed before its view."""
    names = {n.lower() for n in taken}
    out: dict[str, ViewDef] = {}

    def visit(view: ViewDef) -> None:
        query = view.query.copy()
        extracted: list[ViewDef] = []
        ctes = {c.alias.lower() for w in query.find_all(exp.With) for c in w.expressions}
        made: dict[int, str] = {}  # id of a CTE → the view made of it

        def extract(body: exp.Query, alias: str, columns: tuple[str, ...] | None = None) -> str:
            name = _name(f"{view.name}__{alias}", names)
            names.add(name.lower())
            extracted.append(
                ViewDef(
                    name,
                    view.file,
                    view.line,
                    body.copy(),
                    columns,
                    join_uri(warehouse, name),
                    body.sql("spark"),
                    view.refresh_policy,
                    # (refreshed when its view is, under that view's target_lag)
                    target_lag=DOWNSTREAM if view.target_lag is not None else None,
                    origin=f"{alias} of view {view.name}",
                )
            )
            return name

        for select in list(query.find_all(exp.Select)):
            if not select.args.get("joins") and not isinstance(select.parent, exp.Exists):
                continue  # (an EXISTS's FROM is the other side of a semi or anti join)
            from_ = select.args.get("from_") or select.args.get("from")
            sides = ([from_.this] if from_ is not None else []) + [
                j.this for j in select.args.get("joins") or []
            ]
            visible = visible_ctes(select)
            for side in sides:
                if isinstance(side, exp.Table) and not side.db and side.name.lower() in visible:
                    cte = visible[side.name.lower()]
                    if not _extractable(cte.this, ctes):
                        continue
                    if id(cte) not in made:
                        made[id(cte)] = extract(cte.this, cte.alias, tuple(cte.alias_column_names) or None)
                    alias = side.args.get("alias") or exp.TableAlias(this=exp.to_identifier(side.name))
                    side.replace(
                        exp.Table(this=exp.to_identifier(made[id(cte)], quoted=True), alias=alias.copy())
                    )
                elif isinstance(side, exp.Subquery) and side.alias and _extractable(side.this, ctes):
                    name = extract(side.this, side.alias)
                    alias = side.args["alias"].copy()
                    side.replace(exp.Table(this=exp.to_identifier(name, quoted=True), alias=alias))
        _drop_unread(query, set(made))
        for inner in extracted:
            visit(inner)
        out[view.name] = replace(view, query=query) if extracted else view

    for view in views.values():
        visit(view)
    return out


def _extractable(query: exp.Expression, ctes: set[str]) -> bool:
    """A query that keeps state and reads no CTE of the view's query (a view of its own could not see it)."""
    return _keeps_state(query) and not any(t.name.lower() in ctes for t in query.find_all(exp.Table))


def visible_ctes(node: exp.Expr | None) -> dict[str, exp.CTE]:
    """The CTEs a SELECT sees, by lower-case name: those of the WITHs around it, the innermost first."""
    found: dict[str, exp.CTE] = {}
    while node is not None:
        with_ = node.args.get("with_") or node.args.get("with")
        for cte in with_.expressions if with_ is not None else []:
            found.setdefault(cte.alias.lower(), cte)
        node = node.parent
    return found


def _drop_unread(query: exp.Query, made: set[int]) -> None:
    """Remove the CTEs made views (`made`: their ids) that no table of the query reads any more (then an empty
    WITH)."""
    read = {t.name.lower() for t in query.find_all(exp.Table) if not t.db}
    for with_ in list(query.find_all(exp.With)):
        for cte in list(with_.expressions):
            if id(cte) in made and cte.alias.lower() not in read:
                cte.pop()
        if not with_.expressions:
            with_.pop()


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
