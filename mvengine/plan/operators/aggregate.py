"""Aggregate (GROUP BY, and aggregates without it): per group, accumulators that a change adds to (+1) or takes
from (-1), so a group's new value comes from its old accumulators and the batch's changes alone:

- COUNT(*) and COUNT(x): a count of rows (of non-NULL x); SUM(x): the sum of x·w and the count of non-NULL x (the
  sum is NULL when that count is 0); AVG(x): the same sum and count, divided;
- MIN/MAX(x) over an append-only input: the extreme itself (rows never go); over an input that deletes, a
  multiset of the values per group (value → count), whose least/greatest value with a positive count is the
  result;
- COUNT(DISTINCT x) and SUM(DISTINCT x): a multiset of x per group; a value counts while its count is positive.

A group is deleted when its row count reaches zero. The output changes by -old +new per group whose result
changed, so it is never append-only. The state grows with the groups (bounded without GROUP BY, or with an
allowed lateness past which windows leave it) and with the distinct values of the multisets.
"""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.functions import function_name
from mvengine.plan.nodes import Aggregate, Node, WindowAssign, show
from mvengine.plan.operators import Claim, Operator, never_append_only

# Aggregates maintained incrementally (with or without DISTINCT for COUNT and SUM).
INCREMENTAL_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def aggregate_reasons(node: Aggregate) -> list[str]:
    reasons = []
    for agg in node.aggregates:
        reason = _aggregate_reason(agg, node.child.fields)
        if reason and reason not in reasons:
            reasons.append(reason)
    return reasons


def _aggregate_reason(agg: exp.Expression, inputs) -> str | None:
    if isinstance(agg, exp.Filter):
        return f"aggregate with a FILTER clause ({show(agg, inputs)})"
    if not isinstance(agg, INCREMENTAL_AGGREGATES):
        return f"aggregate {function_name(agg)}() is not maintained incrementally"
    if isinstance(agg.this, exp.Distinct):
        if not isinstance(agg, (exp.Count, exp.Sum)):
            return f"{function_name(agg).upper()}(DISTINCT ...) is not maintained incrementally"
        if len(agg.this.expressions) != 1:
            return "COUNT(DISTINCT ...) of several columns is not maintained incrementally"
    return None


def windowed(node: Node) -> WindowAssign | None:
    """The fixed-size window (tumbling or hopping) an aggregate groups by, directly over it; None otherwise."""
    if type(node) is Aggregate and isinstance(node.child, WindowAssign) and node.child.spec.kind != "session":
        return node.child
    return None


def state(node: Aggregate, claim: Claim, purged: bool) -> tuple[str, bool]:
    append_only = claim(node.child)
    items: list[str] = ["count"]
    bounded = not node.groups
    for agg in node.aggregates:
        inner = agg.this if isinstance(agg, exp.Filter) else agg
        arg = inner.this
        distinct = isinstance(arg, exp.Distinct)
        inputs = node.child.fields
        value = show(arg.expressions[0], inputs) if distinct and arg.expressions else (
            show(arg, inputs) if isinstance(arg, exp.Expression) else "*")
        if distinct:
            new = [f"count per distinct {value}"]
            bounded = False
        elif isinstance(inner, exp.Count):
            new = [] if value == "*" or isinstance(arg, exp.Star) else [f"count({value})"]
        elif isinstance(inner, (exp.Sum, exp.Avg)):
            new = [f"sum({value})", f"count({value})"]
        elif isinstance(inner, (exp.Min, exp.Max)):
            if append_only:
                new = [f"{function_name(inner)}({value})"]
            else:
                new = [f"min/max multiset of {value}"]
                bounded = False
        else:
            new = [show(inner, inputs)]
        items.extend(i for i in new if i not in items)
    where = f"per group ({', '.join(show(g, node.child.fields) for g in node.groups)})" if node.groups else "one row"
    text = f"{where}: {', '.join(items)}"
    if purged and windowed(node) is not None:
        return f"{text}, dropped once the watermark is past a window's end and the lateness", True
    return text, bounded


OPERATOR = Operator(Aggregate, "mvengine.incremental.aggregate", True, never_append_only, state, aggregate_reasons)
