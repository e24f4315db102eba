"""Joins from FROM and WHERE: each JOIN of FROM is a step; an equality in WHERE between the relations of an inner
or cross join becomes that join's equi-condition (so that `FROM a, b WHERE a.k = b.k` is an equi-join, not a cross
join followed by a filter), unless a later RIGHT or FULL join could NULL-pad those relations; the steps then
become a left-deep tree of Join nodes. A FROM list of plain relations (commas or CROSS JOINs, no ON) is joined in
the order of its equalities' graph, not in written order: `FROM a, b, c WHERE a.k = c.k AND b.j = c.j` joins c
before b, so that no step is a cross join. A conjunct that every branch of an OR repeats is taken out of the OR
first (`(a.k = b.k AND x) OR (a.k = b.k AND y)`), so that it too can be a join's condition."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from sqlglot import exp

from mvengine.plan.functions import function_name
from mvengine.plan.nodes import (
    Filter,
    Join,
    LookupJoin,
    Node,
    TemporalJoin,
    conjunction,
    conjuncts,
    disjuncts,
)
from mvengine.plan.scope import Scope
from mvengine.plan.time_bounds import CLOCK, bounds_times


@dataclass
class JoinStep:
    kind: str
    alias: str
    node: Node
    equi: list[tuple[exp.Expression, exp.Expression]]
    residual: list[exp.Expression]
    # FOR SYSTEM_TIME AS OF: the time (over the relations before) and the relation's version column (None: the
    # time is PROCTIME(), a lookup join)
    as_of: tuple[exp.Expression, exp.Expression | None] | None = None


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


def constant_equality(e: exp.Expression, right: str) -> tuple[exp.Expression, exp.Expression] | None:
    """(constant, right expr) when `e` is `r = constant` (or `constant = r`) with r over the `right` alias: a join
    whose ON has no other equality keys every left row by the constant (a join with a one-row aggregate:
    project/scalar_subqueries.py)."""
    if not isinstance(e, exp.EQ):
        return None
    for a, b in ((e.this, e.expression), (e.expression, e.this)):
        if isinstance(a, exp.Literal) and qualifiers(b) == {right}:
            return a, b
    return None


def push_equalities(
    conjuncts: list[exp.Expression], scope: Scope, steps: list[JoinStep]
) -> list[exp.Expression]:
    """Move each WHERE equality between a join step's relation and those before it into that step's condition
    (when no later RIGHT or FULL join could NULL-pad them), and each comparison of their times (an interval
    join's bound); the conjuncts that stay in WHERE."""
    preserved = max((i for i, step in enumerate(steps) if step.kind in ("right", "full")), default=-1)
    remaining = []
    for conjunct in conjuncts:
        left = {scope.relations[0][0].lower()}
        for i, step in enumerate(steps):
            pushable = i > preserved and step.kind in ("inner", "cross") and step.as_of is None
            pair = equality(conjunct, left, step.alias.lower()) if pushable else None
            if pair:
                step.equi.append(pair)
                break
            if pushable and bounds_times(conjunct, left, step.alias.lower()):
                step.residual.append(conjunct)  # (an interval join's bound: plan/time_bounds.py)
                break
            left.add(step.alias.lower())
        else:
            remaining.append(conjunct)
    return remaining


def push_clock_filters(
    conjuncts: list[exp.Expression], first: tuple[str, Node], steps: list[JoinStep]
) -> tuple[Node, list[exp.Expression]]:
    """Move each WHERE comparison with the clock that reads one relation of an inner join (one no later RIGHT
    or FULL join NULL-pads) under the join, onto that relation: a temporal filter is maintained over one
    relation's rows (plan/time_bounds.py), not over a join's. The first relation (filtered, or not), and the
    conjuncts that stay in WHERE."""
    preserved = max((i for i, step in enumerate(steps) if step.kind in ("right", "full")), default=-1)
    alias, node = first
    remaining = []
    for conjunct in conjuncts:
        read = qualifiers(conjunct)
        if len(read) != 1 or not any(function_name(f) in CLOCK for f in conjunct.find_all(exp.Func)):
            remaining.append(conjunct)
        elif read == {alias.lower()} and preserved < 0:
            node = Filter(fields=node.fields, child=node, predicate=conjunct)
        else:
            found = [
                (i, step) for i, step in enumerate(steps) if read == {step.alias.lower()} and i > preserved
            ]
            if found and found[0][1].kind in ("inner", "cross") and found[0][1].as_of is None:
                step = found[0][1]
                step.node = Filter(fields=step.node.fields, child=step.node, predicate=conjunct)
            else:
                remaining.append(conjunct)
    return node, remaining


def factor_or(conjunct: exp.Expression) -> tuple[list[exp.Expression], exp.Expression | None]:
    """`(c AND r1) OR (c AND r2)` as `c AND (r1 OR r2)`: the conjuncts every branch of an OR repeats, taken out
    of it (so that a join equality written in each branch becomes the join's condition), and the OR of what
    remains of the branches. Distribution holds in SQL's three-valued logic; a branch that is only the common
    part makes the OR the common part (no OR remains). ([], None) when no branch repeats another's conjunct."""
    inner = conjunct.this if isinstance(conjunct, exp.Paren) else conjunct
    if not isinstance(inner, exp.Or):
        return [], None
    branches = [conjuncts(b) for b in disjuncts(inner)]
    common = {_same(p) for p in branches[0]}.intersection(*({_same(p) for p in b} for b in branches[1:]))
    taken: dict[str, exp.Expression] = {}
    for p in branches[0]:
        if _same(p) in common:
            taken.setdefault(_same(p), p.copy())
    rests = [[p for p in b if _same(p) not in common] for b in branches]
    if not taken or any(not rest for rest in rests):
        return list(taken.values()), None
    either: exp.Expression = _paren(conjunction([p.copy() for p in rests[0]]))
    for rest in rests[1:]:
        either = exp.Or(this=either, expression=_paren(conjunction([p.copy() for p in rest])))
        either.type = exp.DataType.build("BOOLEAN")
    return list(taken.values()), _paren(either)


def _same(e: exp.Expression) -> str:
    """A conjunct's text, the same for `a = b` and `b = a`."""
    if isinstance(e, exp.EQ):
        return " = ".join(sorted((e.this.sql("spark"), e.expression.sql("spark"))))
    return e.sql("spark")


def _paren(e: exp.Expression) -> exp.Expression:
    if not isinstance(e, (exp.And, exp.Or)):
        return e
    wrapped = exp.Paren(this=e)
    wrapped.type = exp.DataType.build("BOOLEAN")
    return wrapped


def connected_order(first: str, steps: list[JoinStep], conjuncts: list[exp.Expression]) -> list[JoinStep]:
    """The steps of a FROM list of plain relations reordered so that each joins those before it by an equality
    of `conjuncts`, where the written order leaves one without (the earliest written that connects comes next; a
    relation no equality reaches stays a cross join). Any order of inner joins gives the same rows, and the
    columns are found by name, so only the plan changes."""
    if any(s.kind not in ("inner", "cross") or s.equi or s.residual for s in steps):
        return steps  # an ON condition, or an outer, semi or anti join: the written order means something

    def connects(step: JoinStep, placed: set[str]) -> bool:
        return any(equality(c, placed, step.alias.lower()) for c in conjuncts)

    placed, pending, ordered = {first.lower()}, list(steps), []
    while pending:
        step = next((s for s in pending if connects(s, placed)), pending[0])
        pending.remove(step)
        ordered.append(step)
        placed.add(step.alias.lower())
    return ordered


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
        make: Callable[..., Join] = Join
        if step.as_of is not None:
            time, version = step.as_of
            make = (
                partial(LookupJoin, as_of=time)
                if version is None
                else partial(TemporalJoin, as_of=time, version=version)
            )
        node = make(
            fields=fields,
            left=node,
            right=step.node,
            kind=kind,
            equi=tuple(step.equi),
            residual=conjunction(step.residual) if step.residual else None,
        )
    return node
