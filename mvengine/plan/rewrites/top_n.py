"""Top-N in a bound plan: the two forms users write become a TopN node, which is maintained incrementally.

- `SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY p ORDER BY o) AS rn FROM t) WHERE rn <= N` (also
  `rn < N`, `rn = 1`, `N >= rn`, with RANK or DENSE_RANK): a Filter over the Project computing the rank. The
  Project becomes one over a TopN of its input, its rank a reference to the TopN's rank; the Filter keeps its
  other conjuncts.
- `ORDER BY o LIMIT N` over a whole query (a Limit whose order names output columns): a TopN of one partition.

The TopN's input is renamed apart (plan/rewrites/flat.py).
"""

from __future__ import annotations

from dataclasses import replace

import sqlglot
from sqlglot import exp

from mvengine.plan.nodes import (
    Field,
    Filter,
    Limit,
    Node,
    Project,
    TopN,
    conjunction,
    conjuncts,
    with_children,
)
from mvengine.plan.rewrites.flat import QUALIFIER, flat_input
from mvengine.plan.types import build


def top_n(node: Node) -> Node:
    """The plan with each top-N form (module docstring) made a TopN, bottom-up."""
    node = with_children(node, [top_n(c) for c in node.children])
    if isinstance(node, Filter) and isinstance(node.child, Project):
        return _rank_filter(node) or node
    if isinstance(node, Limit):
        return _order_limit(node) or node
    return node


def _ranking(e: exp.Expression) -> str | None:
    """row_number, rank or dense_rank, when `e` is that window function over a partition (no frame)."""
    if not isinstance(e, exp.Window) or e.args.get("spec") is not None or e.args.get("order") is None:
        return None
    return {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}.get(type(e.this))


def _bound(conjunct: exp.Expression, rank: Field) -> int | None:
    """N, when the conjunct keeps the ranks up to N of the `rank` field (rn <= N, rn < N, rn = 1, N >= rn)."""

    def is_rank(e: exp.Expression) -> bool:
        return isinstance(e, exp.Column) and e.name == rank.name and (e.table or None) == rank.qualifier

    def number(e: exp.Expression) -> int | None:
        return int(e.this) if isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit() else None

    pairs: dict[type[exp.Expr], int] = {exp.LTE: 0, exp.LT: -1, exp.EQ: 0}
    mirrored: dict[type[exp.Expr], type[exp.Expr]] = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ}
    kind: type[exp.Expr] = type(conjunct)
    left, right = conjunct.this, conjunct.expression
    if kind in mirrored and is_rank(right) and number(left) is not None:
        kind, left, right = mirrored[kind], right, left
    bound = number(right)
    if kind not in pairs or not is_rank(left) or bound is None:
        return None
    n = bound + pairs[kind]
    if kind is exp.EQ and n != 1:
        return None
    return n if n >= 1 else None


def _rank_filter(node: Filter) -> Node | None:
    project = node.child
    assert isinstance(project, Project)  # top_n's test
    windows = [
        i for i, e in enumerate(project.projections) if any(project.projections[i].find_all(exp.Window))
    ]
    ranking = _ranking(project.projections[windows[0]]) if len(windows) == 1 else None
    if ranking is None:
        return None
    at = windows[0]
    rank_field = project.fields[at]
    parts = conjuncts(node.predicate)
    found = [(i, _bound(c, rank_field)) for i, c in enumerate(parts)]
    hit = next(((i, n) for i, n in found if n is not None), None)
    if hit is None:
        return None
    window = project.projections[at]
    flat, rename = flat_input(project.child)
    rank = Field("_rank", build("INT"), False, QUALIFIER)
    topn = TopN(
        fields=flat.fields + (rank,),
        child=flat,
        partition=tuple(rename(p) for p in window.args.get("partition_by") or []),
        order=tuple(rename(o) for o in window.args["order"].expressions),
        function=ranking,
        limit=hit[1],
        ranked=True,
    )
    projections = tuple(rank.ref() if i == at else rename(e) for i, e in enumerate(project.projections))
    above: Node = replace(project, child=topn, projections=projections)
    rest = [c for i, c in enumerate(parts) if i != hit[0]]
    return replace(node, child=above, predicate=conjunction(rest)) if rest else above


def _order_limit(node: Limit) -> Node | None:
    """ORDER BY over output columns (by name or position) with an integer LIMIT and no OFFSET."""
    if node.offset is not None or node.limit is None or not node.order or not node.limit.isdigit():
        return None
    fields = node.child.fields
    order = []
    for text in node.order:
        ordered = sqlglot.parse_one(f"SELECT 1 ORDER BY {text}", read="spark").args["order"].expressions[0]
        key = ordered.this
        if (
            isinstance(key, exp.Literal)
            and not key.is_string
            and key.this.isdigit()
            and 1 <= int(key.this) <= len(fields)
        ):
            target = fields[int(key.this) - 1]
        elif isinstance(key, exp.Column) and not key.table:
            matches = [f for f in fields if f.name.lower() == key.name.lower()]
            if len(matches) != 1:
                return None
            target = matches[0]
        else:
            return None
        order.append(
            exp.Ordered(
                this=target.ref(), desc=ordered.args.get("desc"), nulls_first=ordered.args.get("nulls_first")
            )
        )
    if int(node.limit) < 1:
        return None
    flat, rename = flat_input(node.child)
    topn = TopN(
        fields=flat.fields,
        child=flat,
        partition=(),
        order=tuple(rename(o) for o in order),
        function="row_number",
        limit=int(node.limit),
        ranked=False,
    )
    return Project(fields=node.fields, child=topn, projections=tuple(f.ref() for f in flat.fields))
