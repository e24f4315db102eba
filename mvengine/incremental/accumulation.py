"""The accumulators' arithmetic, written once as Spark SQL over the engine's operations (incremental/engine.py),
so that both engines run the same algebra: each kind of partial, merge and result that
incremental/accumulators.py declares, and the two steps of a GROUP BY's rule (incremental/aggregate.py) that
compute with them. `partial`: what a batch adds to each affected group's accumulators; `merged`: the
accumulators before and after the batch, and the aggregates' results from each.

What Spark SQL has no exact form for is one function each, which both engines run (incremental/functions.py):
merging and rounding exact sums, the variances, the + of DECIMAL(38, s > 6). The exact sums' digits are an
engine operation. Both engines keep the same state table: a view's batches may take either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from mvengine.incremental.accumulators import COUNT, Accumulator, StateColumn
from mvengine.incremental.engine import Engine
from mvengine.incremental.functions import decimal_add
from mvengine.incremental.zset import MTIME, WEIGHT

R = TypeVar("R")

OLD_EXISTS = "_old_exists"  # whether the group had a row before the batch
SAME = "_same"  # whether each aggregate's result is the same before and after (as Spark compares rows)
OLD = "_o"  # the prefix of the accumulators' columns as they were before the batch


def old_result(i: int) -> str:
    return f"_old{i}"


def new_result(i: int) -> str:
    return f"_new{i}"


def state_columns(aggs: Sequence[Accumulator]) -> list[str]:
    """The accumulator table's columns after the groups."""
    return [COUNT, *[c for a in aggs for c in a.state_names()]]


_DOUBLE_MAX = "1.7976931348623157E308"
_TESTS = {  # which rows a ("rows", test) partial counts, of argument {x}
    "not_null": "{x} IS NOT NULL",
    "nan": "isnan(CAST({x} AS DOUBLE))",
    "pos_inf": f"(CAST({{x}} AS DOUBLE) > {_DOUBLE_MAX} AND NOT isnan(CAST({{x}} AS DOUBLE)))",  # (NaN is above)
    "neg_inf": f"CAST({{x}} AS DOUBLE) < -{_DOUBLE_MAX}",
    "nonfinite": f"(isnan(CAST({{x}} AS DOUBLE)) OR abs(CAST({{x}} AS DOUBLE)) > {_DOUBLE_MAX})",
    "true": "{x} = TRUE",
    "false": "{x} = FALSE",
}


def partial(
    engine: Engine[R], rows: R, groups: Sequence[str], aggs: Sequence[Accumulator], x: Mapping[str, str]
) -> R:
    """Per group of `groups` in `rows` (NULLs one group): `_n` (Σ `_w`), the latest `_mtime`, and what the rows
    add to each accumulator's state columns (the column of each argument's SQL: `x`)."""
    summed = [(a, c) for a in aggs for c in a.columns if c.partial is not None and c.partial[0] != "exact"]
    if any(c.partial[0] == "sum" and c.sql_type.startswith("decimal") for _, c in summed):  # type: ignore[index]
        rows = engine.unit_weights(rows)  # (a decimal times a weight may lose places in Spark)
    contributions = {c.name: _contribution(c, x[str(a.argument)]) for a, c in summed}
    aggregates = {name: (how, name) for name, (_, how) in contributions.items()}
    grouped = engine.aggregate(
        engine.compute(rows, {name: sql for name, (sql, _) in contributions.items()}),
        {g: g for g in groups},
        {COUNT: ("sum", WEIGHT), MTIME: ("max", MTIME), **aggregates},
    )
    typed = {c.name: f"CAST({c.name} AS {c.sql_type})" for _, c in summed if c.partial[0] == "sum"}  # type: ignore[index]
    grouped = engine.compute(grouped, typed) if typed else grouped
    exact = [(name, x[str(a.argument)], square) for a in aggs for name, square in a.digit_columns()]
    return engine.exact_sums(rows, grouped, groups, exact) if exact else grouped


def _contribution(c: StateColumn, x: str) -> tuple[str, str]:
    """What each row adds to state column `c` (SQL over its argument `x` and `_w`), and the aggregate that sums
    it up per group."""
    assert c.partial is not None  # (the caller's choice)
    how, *p = c.partial
    if how == "rows":
        return f"CASE WHEN {_TESTS[str(p[0])].format(x=x)} THEN {WEIGHT} ELSE 0 END", "sum"
    if how == "sum" and c.sql_type.startswith("decimal"):  # rows of weight ±1
        return (
            f"CASE WHEN {WEIGHT} > 0 THEN CAST({x} AS {c.sql_type}) ELSE -CAST({x} AS {c.sql_type}) END",
            "sum",
        )
    if how == "sum":
        return f"CAST({x} AS {c.sql_type}) * {WEIGHT}", "sum"
    if how == "inserted":
        return f"CASE WHEN {WEIGHT} > 0 THEN {x} END", str(p[0])
    return x, f"{p[0]}_valid" if p[1] else str(p[0])  # arrival: the first or last (non-NULL) value


def merged(
    engine: Engine[R],
    partial: R,
    table: str,
    groups: Sequence[str],
    aggs: Sequence[Accumulator],
    values: Sequence[R],
) -> R:
    """Per row of `partial`: the group's new accumulators (the ones in `table` before the batch, NULL for a new
    group, plus the partial), `_old_exists`, `_mtime`, each aggregate's result before (`_old<i>`) and after
    (`_new<i>`), and `_same`, whether all are equal (NULL and NaN to their own). `values[j]` holds the values of
    the aggregates over multiset j per group (a group absent: it has none)."""
    state = {COUNT: "BIGINT", **{c.name: c.sql_type for a in aggs for c in a.columns}}
    new = engine.with_state(partial, table, list(groups), state, prefix=OLD)
    merges = {c.name: _merge(c) for a in aggs for c in a.columns if c.merge is not None}
    new = engine.compute(
        new,
        {
            COUNT: f"COALESCE({OLD}{COUNT}, 0) + COALESCE({COUNT}, 0)",
            **merges,
            OLD_EXISTS: f"{OLD}{COUNT} IS NOT NULL",  # grouped: rows are deleted at zero; global: it always exists
        },
    )
    for j, v in enumerate(values):
        new = engine.lookup(new, [(g, g) for g in groups], v, "left", null_safe=True)
        new = engine.compute(new, {a.value: _or_when_none(a) for a in aggs if a.how and a.multiset == j})
    olds = {old_result(i): _result(a, lambda c: OLD + c) for i, a in enumerate(aggs)}
    news = {new_result(i): _result(a, lambda c: c) for i, a in enumerate(aggs)}
    # The results are columns of their own before they are compared: each use of an expression would otherwise
    # evaluate it again (an exact sum's value, a variance, are not cheap).
    new = engine.same(engine.compute(new, {**olds, **news}), list(olds), list(news), SAME)
    return engine.select(new, [*groups, *state_columns(aggs), OLD_EXISTS, MTIME, *olds, *news, SAME])


def _merge(c: StateColumn) -> str:
    """State column `c` after the batch, from its value before (`_o<name>`) and the partial's (`<name>`)."""
    old, part = OLD + c.name, c.name
    if c.merge == "add" and _scale(c.sql_type) > 6 and c.sql_type.startswith("decimal(38,"):
        return f"{decimal_add(_scale(c.sql_type))}({old}, {part})"
    if c.merge == "add":
        return f"CAST(COALESCE({old}, 0) + COALESCE({part}, 0) AS {c.sql_type})"
    if c.merge == "exact_add":
        return f"mv_exact_merged({old}, {part})"
    if c.merge in ("least", "greatest"):
        return f"{c.merge.upper()}({old}, {part})"
    if c.merge == "first_valid":
        return f"COALESCE({old}, {part})"
    if c.merge == "last_valid":
        return f"COALESCE({part}, {old})"
    if c.merge == "first":  # the old value once the group had rows
        return f"CASE WHEN COALESCE({OLD}{COUNT}, 0) > 0 THEN {old} ELSE {part} END"
    return (
        f"CASE WHEN COALESCE({COUNT}, 0) > 0 THEN {part} ELSE {old} END"  # last: the batch's, if it has rows
    )


def _scale(sql_type: str) -> int:
    return int(sql_type.split(",")[1].rstrip(")")) if sql_type.startswith("decimal(") else 0


def _or_when_none(a: Accumulator) -> str:
    """A multiset aggregate's value in its result type, or its value over no values: NULL, 0 for a count, []
    for a list."""
    if a.how == "list":
        return f"COALESCE({a.value}, CAST(array() AS {a.result_type}))"
    if a.how == "count":
        return f"COALESCE(CAST({a.value} AS {a.result_type}), 0)"
    return f"CAST({a.value} AS {a.result_type})" if a.how == "sum" else a.value


def _result(a: Accumulator, column: Callable[[str], str]) -> str:
    """The aggregate's output from its accumulators' columns (NULL where the group had none)."""
    how, *p = a.result
    c = column(str(p[0]))
    if how in ("count", "value"):
        return c
    if how == "moments":
        return f"mv_moments('{p[0]}', {', '.join(column(str(n)) for n in p[1:])})"
    rows = f"CASE WHEN {c} > 0 THEN {c} END"  # the count, where positive (a divisor evaluated eagerly)
    if how == "sum":
        return f"CASE WHEN {c} > 0 THEN {column(str(p[1]))} END"
    if how == "average" and a.result_type == "double":
        return f"CAST({column(str(p[1]))} AS DOUBLE) / CAST({rows} AS DOUBLE)"
    if how == "average":
        return f"CASE WHEN {c} > 0 THEN {decimal_average(column(str(p[1])), rows, a.result_type)} END"
    if how == "decided":
        decided = f"{column(str(p[1]))} {'> 0' if p[2] else '= 0'}"
        return f"CASE WHEN {c} > 0 THEN {decided} END"
    total = f"mv_float_sum({', '.join(column(str(n)) for n in p[1:5])})"
    if p[5]:  # the average
        return f"{total} / CAST({rows} AS DOUBLE)"
    return f"CASE WHEN {c} > 0 THEN {total} END"


def decimal_average(total: str, count: str, result_type: str) -> str:
    """total / count rounded half up at the result's scale rs, as Spark's AVG divides (one rounding). Spark's
    `/` on decimals keeps 38 digits and so at least 6 decimals: with total cast to scale rs (rs >= 6), its
    quotient has exactly rs decimals; with rs < 6, the quotient of total / (count·10^k), k = 6 - rs, rounded at 6
    decimals and times 10^k is the quotient rounded at rs. A total too large for scale rs (beyond 10^(38-rs))
    is divided as it is, its quotient rounded at 6 decimals first (a rare double rounding). Each branch is cast
    first: CASE WHEN of two decimal types would round both to the wider's 6 decimals."""
    scale = _scale(result_type)
    if scale >= 6:
        exact = (
            f"CAST(CAST({total} AS DECIMAL(38,{scale})) / CAST({count} AS DECIMAL(20,0)) AS {result_type})"
        )
        rough = f"CAST({total} / CAST({count} AS DECIMAL(20,0)) AS {result_type})"
        return f"CASE WHEN abs({total}) < {10 ** (38 - scale)} THEN {exact} ELSE {rough} END"
    shift = 10 ** (6 - scale)
    quotient = f"CAST({total} AS DECIMAL(38,6)) / CAST({count} * {shift} AS DECIMAL(38,0))"
    return f"CAST({quotient} * CAST({shift} AS DECIMAL({len(str(shift))},0)) AS {result_type})"
