"""Filter (WHERE, HAVING): linear, stateless; monotone, so append-only over an append-only input. A temporal
filter (one that compares a row's time with NOW(), plan/time_bounds.py) is not: rows leave it as the clock
passes them."""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.functions import function_name
from mvengine.plan.nodes import Filter, show
from mvengine.plan.operators.base import Claim, Operator
from mvengine.plan.time_bounds import CLOCK, clock_bounds


def append_only(node: Filter, claim: Claim) -> bool:
    return claim(node.child)


def state(node: Filter, claim: Claim, purged: bool) -> tuple[str, bool] | None:
    bounds = clock_bounds(node)
    if bounds is None:
        return None
    times = ", ".join(dict.fromkeys(show(b.column, node.child.fields) for b in bounds))
    return (
        f"temporal filter (NOW() is the batch's time): none (a batch reads the rows whose {times} the clock "
        "passed since the last batch)",
        True,
    )


def full_reasons(node: Filter, claim: Claim) -> list[str]:
    """A temporal filter over a join's rows is not maintained (its rows that the clock passes would lose the
    sides' names); the planner moves one that reads one side of an inner join onto that side
    (plan/rewrites/joins.push_clock_filters), so what stays is one over a side an outer join pads, or over two
    sides at once."""
    reads_clock = any(function_name(f) in CLOCK for f in node.predicate.find_all(exp.Func))
    if reads_clock and len({f.qualifier for f in node.child.fields}) > 1:
        return [
            "a comparison with NOW() over a join's rows (of a side an outer join pads, or of two sides): "
            "filter the stream in a subquery in FROM (FROM (SELECT * FROM s WHERE ts > NOW() - INTERVAL ...) "
            "s JOIN ...), which is maintained"
        ]
    return []


OPERATOR = Operator(Filter, True, True, append_only, state, full_reasons)
