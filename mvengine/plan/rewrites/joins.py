"""Joins from FROM and WHERE: each JOIN of FROM is a step; an equality in WHERE between the relations of an inner
or cross join becomes that join's equi-condition (so that `FROM a, b WHERE a.k = b.k` is an equi-join, not a cross
join followed by a filter), unless a later RIGHT or FULL join could NULL-pad those relations; the steps then
become a left-deep tree of Join nodes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from mvengine.plan.nodes import Join, Node, conjunction
from mvengine.plan.scope import Scope


@dataclass
class JoinStep:
    kind: str
    alias: str
    node: Node
    equi: list[tuple[exp.Expression, exp.Expression]]
    residual: list[exp.Expression]


def join_kind(j: exp.Join) -> str | None:
    side = (j.side or "").upper()
    kind = (j.kind or "").upper()
    if j.args.get("method") or kind == "NATURAL":
        return None
    if kind == "SEMI":
        return "semi"
    if kind == "ANTI":
        return "anti"
    if kind == "CROSS":
        return "cross"
    if side in ("LEFT", "RIGHT", "FULL"):
        return side.lower()
    if kind in ("", "INNER", "OUTER"):
        return "inner"
    return None


def qualifiers(e: exp.Expression) -> set[str]:
    return {c.table.lower() for c in e.find_all(exp.Column) if c.table and not c.meta.get("outer")}


def equality(e: exp.Expression, left: set[str], right: str) -> tuple[exp.Expression, exp.Expression] | None:
    """(left expr, right expr) when `e` is `l = r` with l over the `left` aliases and r over `right`."""
    if not isinstance(e, exp.EQ):
        return None
    a, b = e.this, e.expression
    qa, qb = qualifiers(a), qualifiers(b)
    if qa and qb and qa <= left and qb == {right}:
        return a, b
    if qa and qb and qb <= left and qa == {right}:
        return b, a
    return None


def push_equalities(
    conjuncts: list[exp.Expression], scope: Scope, steps: list[JoinStep]
) -> list[exp.Expression]:
    """Move each WHERE equality between a join step's relation and those before it into that step's condition
    (when no later RIGHT or FULL join could NULL-pad them); the conjuncts that stay in WHERE."""
    preserved = max((i for i, step in enumerate(steps) if step.kind in ("right", "full")), default=-1)
    remaining = []
    for conjunct in conjuncts:
        left = {scope.relations[0][0].lower()}
        for i, step in enumerate(steps):
            pushable = i > preserved and step.kind in ("inner", "cross")
            pair = equality(conjunct, left, step.alias.lower()) if pushable else None
            if pair:
                step.equi.append(pair)
                break
            left.add(step.alias.lower())
        else:
            remaining.append(conjunct)
    return remaining


def build_joins(first: Node, steps: list[JoinStep]) -> Node:
    node = first
    for step in steps:
        left_fields, right_fields = node.fields, step.node.fields
        if step.kind in ("right", "full"):
            left_fields = tuple(replace(f, nullable=True) for f in left_fields)
        if step.kind in ("left", "full"):
            right_fields = tuple(replace(f, nullable=True) for f in right_fields)
        fields = left_fields if step.kind in ("semi", "anti") else left_fields + right_fields
        fields = (
            tuple(replace(f, time_attr=False) for f in fields)
            if step.kind not in ("semi", "anti")
            else fields
        )
        kind = "inner" if step.kind == "cross" and step.equi else step.kind
        node = Join(
            fields=fields,
            left=node,
            right=step.node,
            kind=kind,
            equi=tuple(step.equi),
            residual=conjunction(step.residual) if step.residual else None,
        )
    return node
