"""Aggregate (GROUP BY, and aggregates without it): per group, accumulators that a change adds to (+1) or takes
from (-1), so a group's new value comes from its old accumulators and the batch's changes alone:

- COUNT(*) and COUNT(x): a count of rows (of non-NULL x); SUM(x): the sum of x·w and the count of non-NULL x (the
  sum is NULL when that count is 0); AVG(x): the same sum and count, divided;
- MIN/MAX(x) over an append-only input: the extreme itself (rows never go); over an input that deletes, a
  multiset of the values per group (value → count), whose least/greatest value with a positive count is the
  result;
- COUNT(DISTINCT x) and SUM(DISTINCT x): a multiset of x per group; a value counts while its count is positive;
- BOOL_AND/EVERY and BOOL_OR/SOME/ANY(x): the count of non-NULL x and of the x that decide (false; true);
- VARIANCE/VAR_SAMP/VAR_POP and STDDEV/STD/STDDEV_SAMP/STDDEV_POP(x): the count, sum and sum of squares of x
  (in doubles: equal to Spark's results up to floating-point rounding);
- COLLECT_LIST/ARRAY_AGG(x): the multiset of x per group; the list holds its values in ascending order;
- FIRST/FIRST_VALUE/ANY_VALUE(x) and LAST/LAST_VALUE(x) over an append-only input, with or without IGNORE NULLS:
  the value itself, of the row that arrived first (last) by its commit's time; a later batch never changes a
  FIRST and replaces a LAST (rows of one commit tie: any of them may be taken, as Spark's FIRST takes any);
- `agg(x) FILTER (WHERE c)` is agg(CASE WHEN c THEN x END), and COUNT_IF(c) is COUNT(CASE WHEN c THEN 1 END).

A group is deleted when its row count reaches zero. The output changes by -old +new per group whose result
changed, so it is never append-only. The state grows with the groups (bounded without GROUP BY, or with an
allowed lateness past which windows leave it) and with the distinct values of the multisets.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from mvengine.plan.functions import aggregate_function, function_name
from mvengine.plan.nodes import Aggregate, Node, WindowAssign, show
from mvengine.plan.operators.base import Claim, Operator, never_append_only

# sqlglot's class of each incremental aggregate → its kind (COUNT_IF is COUNT of a CASE, below).
_KINDS: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.Stddev: "stddev_samp",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
    exp.ArrayAgg: "list",
    exp.First: "first",
    exp.FirstValue: "first",
    exp.AnyValue: "first",
    exp.Last: "last",
    exp.LastValue: "last",
}
MOMENTS = ("stddev_samp", "stddev_pop", "var_samp", "var_pop")
ARRIVAL = ("first", "last")  # by the order rows arrived in: over append-only inputs only


@dataclass(frozen=True)
class AggregateCall:
    """An incremental aggregate call, normalized: `kind` over the values of `argument` (None for COUNT(*)), each
    counted once when `distinct`. A FILTER (WHERE c) is folded into the argument as CASE WHEN c THEN x END (every
    incremental aggregate skips NULLs, so a row the condition rejects adds nothing); COUNT_IF(c) is
    COUNT(CASE WHEN c THEN 1 END). `ignore_nulls`: FIRST/LAST(x) IGNORE NULLS (the others skip NULLs anyway)."""

    kind: str
    argument: exp.Expression | None
    distinct: bool = False
    ignore_nulls: bool = False


def aggregate_call(call: exp.Expression) -> AggregateCall | str:
    """The normalized call, or why it is not maintained incrementally."""
    condition = call.expression.this if isinstance(call, exp.Filter) else None
    ignore_nulls = isinstance(call.this if condition is not None else call, exp.IgnoreNulls)
    call = aggregate_function(call)
    argument: exp.Expression | None
    if isinstance(call, exp.CountIf):
        condition, argument, kind, distinct = call.this, None, "count", False
        one = exp.Literal.number(1)
        one.type = exp.DataType.build("INT")
        argument = one
    else:
        found = _KINDS.get(type(call))
        if found is None:
            return f"aggregate {function_name(call)}() is not maintained incrementally"
        kind = found
        distinct = isinstance(call.this, exp.Distinct)
        if distinct:
            if kind not in ("count", "sum"):
                return f"{function_name(call).upper()}(DISTINCT ...) is not maintained incrementally"
            if len(call.this.expressions) != 1:
                return "COUNT(DISTINCT ...) of several columns is not maintained incrementally"
        argument = call.this.expressions[0] if distinct else call.this
        if not isinstance(argument, exp.Expression) or isinstance(argument, exp.Star):
            argument = None
    if kind in ARRIVAL and condition is not None and not ignore_nulls:
        return (
            f"{function_name(call).upper()}(...) FILTER (WHERE ...) without IGNORE NULLS is not maintained "
            "incrementally"
        )
    if condition is not None:
        if argument is None:  # COUNT(*) FILTER (WHERE c): count the rows where c holds
            argument = exp.Literal.number(1)
            argument.type = exp.DataType.build("INT")
        filtered = exp.Case(ifs=[exp.If(this=condition.copy(), true=argument.copy())])
        filtered.type = argument.type
        argument = filtered
    return AggregateCall(kind, argument, distinct, ignore_nulls)


def incremental_call(call: exp.Expression) -> AggregateCall:
    """The normalized call of a view planned incremental (aggregate_reasons found no reason against it)."""
    found = aggregate_call(call)
    assert not isinstance(found, str), found
    return found


def aggregate_reasons(node: Aggregate, claim: Claim) -> list[str]:
    reasons = []
    for agg in node.aggregates:
        found = aggregate_call(agg)
        if not isinstance(found, str) and found.kind in ARRIVAL and not claim(node.child):
            found = (
                f"{function_name(aggregate_function(agg)).upper()}() over an input that updates or deletes "
                "is not maintained incrementally (which row came first is not kept)"
            )
        if isinstance(found, str) and found not in reasons:
            reasons.append(found)
    return reasons


def _of_integers(argument: exp.Expression | None) -> bool:
    """Whether an AVG's argument is not DECIMAL (nor floating-point, tested before): its sum is exact."""
    return (
        argument is not None and argument.type is not None and argument.type.this != exp.DataType.Type.DECIMAL
    )


def float_sum(kind: str, argument_type: exp.DataType | None) -> bool:
    """Whether a SUM or AVG is of floating-point values: its state is then an exact sum and counts of NaN and
    ±inf (incremental/accumulators.py, _float_sum)."""
    return (
        kind in ("sum", "avg")
        and argument_type is not None
        and argument_type.this in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)
    )


def windowed(node: Node) -> WindowAssign | None:
    """The fixed-size window (tumbling or hopping) an aggregate groups by, directly over it; None otherwise."""
    if type(node) is Aggregate and isinstance(node.child, WindowAssign) and node.child.spec.kind != "session":
        return node.child
    return None


@dataclass(frozen=True)
class AccumulatorKind:
    """What the accumulator of one kind of call keeps per group, as `mv plan` shows it (`{}` is the argument),
    whether it keeps the values themselves (a multiset per group: it grows with the distinct values), and
    whether the driver computes it. The runtime declares each kind's accumulator (incremental/accumulators.py,
    BUILDERS: the same kinds, tests/unit/test_operators.py holds the two to each other)."""

    state: tuple[str, ...]
    multiset: bool = False
    on_driver: bool = True


# Every kind of accumulator, chosen for a call by accumulator_kind.
ACCUMULATOR_KINDS: dict[str, AccumulatorKind] = {
    "count_star": AccumulatorKind(()),
    "count": AccumulatorKind(("count({})",)),
    "sum": AccumulatorKind(("sum({})", "count({})")),
    "avg": AccumulatorKind(("sum({})", "count({})")),
    "avg_of_integers": AccumulatorKind(("exact sum({})", "count({})")),
    "float_sum": AccumulatorKind(("exact sum({})", "count({})", "counts of NaN, +inf, -inf in {}")),
    "float_avg": AccumulatorKind(("exact sum({})", "count({})", "counts of NaN, +inf, -inf in {}")),
    "bool_and": AccumulatorKind(("count({})", "count({} = false)")),
    "bool_or": AccumulatorKind(("count({})", "count({} = true)")),
    "moments": AccumulatorKind(("count({})", "exact sum({})", "exact sum({}²)", "count of NaN, ±inf in {}")),
    "first": AccumulatorKind(("first({})",)),
    "last": AccumulatorKind(("last({})",)),
    "min": AccumulatorKind(("min({})",)),
    "max": AccumulatorKind(("max({})",)),
    "min_max_multiset": AccumulatorKind(("min/max multiset of {}",), multiset=True),
    "distinct": AccumulatorKind(("count per distinct {}",), multiset=True),
    "list": AccumulatorKind(("multiset of {}",), multiset=True, on_driver=False),
}


def accumulator_kind(call: AggregateCall, append_only: bool) -> str:
    """The kind of accumulator that maintains `call` (a key of ACCUMULATOR_KINDS), over an input that only
    inserts (`append_only`) or not."""
    if call.distinct:
        return "distinct"
    if call.kind in ("min", "max"):
        return call.kind if append_only else "min_max_multiset"  # a deleted extreme is found again
    if call.kind == "count":
        return "count_star" if call.argument is None else "count"
    if call.kind in ("sum", "avg"):
        if call.argument is not None and float_sum(call.kind, call.argument.type):
            return f"float_{call.kind}"
        return "avg_of_integers" if call.kind == "avg" and _of_integers(call.argument) else call.kind
    if call.kind in MOMENTS:
        return "moments"
    return call.kind  # bool_and, bool_or, first, last, list


def state(node: Aggregate, claim: Claim, purged: bool) -> tuple[str, bool]:
    append_only = claim(node.child)
    items: list[str] = ["count"]
    bounded = not node.groups
    for agg in node.aggregates:
        call = aggregate_call(agg)
        if isinstance(call, str):  # a full view has no state
            continue
        value = "*" if call.argument is None else show(call.argument, node.child.fields)
        kind = ACCUMULATOR_KINDS[accumulator_kind(call, append_only)]
        bounded = bounded and not kind.multiset
        items.extend(i for i in (item.format(value) for item in kind.state) if i not in items)
    where = (
        f"per group ({', '.join(show(g, node.child.fields) for g in node.groups)})"
        if node.groups
        else "one row"
    )
    text = f"{where}: {', '.join(items)}"
    if purged and windowed(node) is not None:
        return f"{text}, dropped once the watermark is past a window's end and the lateness", True
    return text, bounded


OPERATOR = Operator(Aggregate, True, True, never_append_only, state, aggregate_reasons)
