"""Subqueries decorrelated into semi and anti joins: `[NOT] EXISTS (SELECT ... WHERE inner = outer AND p)` and
`x [NOT] IN (SELECT ...)` become a join of the outer query with the subquery on those equalities (an
uncorrelated EXISTS on one constant key); any other correlation is left to a full refresh."""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.nodes import Filter, Node, Project, conjunction, conjuncts
from mvengine.plan.types import build


def correlated(node: Node) -> bool:
    return any(has_outer(e) for n in node.walk() for e in n.expressions())


def has_outer(e: exp.Expression) -> bool:
    return any(c.meta.get("outer") for c in e.find_all(exp.Column))


def split_correlation(sub: Node) -> tuple[Node, list[tuple[exp.Expression, exp.Expression]]] | None:
    """For a subquery `SELECT ... FROM x WHERE inner = outer AND p`: (Filter(x, p), [(outer, inner), ...]).

    None when the correlation is anything else (the caller plans the view in full).
    """
    project = sub if isinstance(sub, Project) else None
    body = project.child if project is not None else sub
    if not isinstance(body, Filter):
        return None if correlated(sub) else (sub, [])
    if project is not None and any(has_outer(p) for p in project.projections):
        return None
    pairs, rest = [], []
    for conjunct in conjuncts(body.predicate):
        if not has_outer(conjunct):
            rest.append(conjunct)
            continue
        if not isinstance(conjunct, exp.EQ):
            return None
        a, b = conjunct.this, conjunct.expression
        if has_outer(a) and not has_outer(b) and all(c.meta.get("outer") for c in a.find_all(exp.Column)):
            pairs.append((strip_outer(a), b))
        elif has_outer(b) and not has_outer(a) and all(c.meta.get("outer") for c in b.find_all(exp.Column)):
            pairs.append((strip_outer(b), a))
        else:
            return None
    if correlated(body.child):
        return None
    right = (
        Filter(fields=body.child.fields, child=body.child, predicate=conjunction(rest))
        if rest
        else body.child
    )
    if project is not None and not pairs:
        return sub, []
    return right, pairs


def strip_outer(e: exp.Expression) -> exp.Expression:
    e = e.copy()
    for c in e.find_all(exp.Column):
        c.meta.pop("outer", None)
    return e


def constant_key() -> exp.Expression:
    key = exp.Literal.number(1)
    key.type = build("INT")
    key.meta["nullable"] = False
    return key
