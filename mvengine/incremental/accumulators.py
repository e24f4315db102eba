"""The accumulators of incremental aggregates, declared once, in Spark SQL: the state columns each keeps per group,
what a batch adds to each column (its partial, from each change row's value x and weight w: +1 an insert, -1 a
deletion), how a partial merges into the old column, and the result; and the two steps of a GROUP BY's rule
(incremental/aggregate.py) that compute with them, over the engine's operations (incremental/engine.py), so both
engines run the same algebra. What Spark SQL has no exact form for is one function each that both engines run
(incremental/functions.py): merging and rounding exact sums, the variances, the + of DECIMAL(38, s > 6). A group
also keeps its row count n = Σw; a group is gone when n reaches 0.

- COUNT(*) = n. COUNT(x) = c, the count of non-NULL x: c' = c + Σ w·[x IS NOT NULL].
- SUM(x) = s when c > 0, else NULL: s' = s + Σ w·x, in the type Spark sums x in. AVG(x) = s / c when c > 0:
  of decimals in Spark's precision (one rounding); of integers s is exact (in 38 digits: a sum of BIGINTs may pass
  BIGINT's range, which Spark's AVG, summing doubles, allows), the average its double, rounded once.
- SUM and AVG of floating-point x: c; s, the exact sum of the finite x (incremental/exact_sum.py: a map of digits,
  so deleting a value takes away exactly what inserting it added, and 1.5 + 1e17 - 1e17 is 1.5); the counts of
  NaN, +inf and -inf apart (a NaN, or both infinities, make the sum NaN; one infinity makes it that infinity; a
  finite sum beyond the double range counts as an infinity of its sign: all as Spark sums). Spark's own sum
  rounds at every row, in the order it reads them, and is no closer.
- BOOL_AND(x) (EVERY) and BOOL_OR(x) (SOME, ANY): c, and f, the count of the x that decide (false for BOOL_AND,
  true for BOOL_OR). NULL when c = 0, else f = 0 for BOOL_AND and f > 0 for BOOL_OR.
- VAR_POP, VAR_SAMP (VARIANCE), STDDEV_POP, STDDEV_SAMP (STDDEV, STD): c; s = Σ w·x and q = Σ w·x² over the finite
  x, both exact; f, the count of NaN and ±inf (they make the result NaN, as in Spark). The result is the exact
  variance of the rows, rounded once (exact_sum.moments_result, one Python function for both engines): Spark's
  running update rounds at every row, and is no closer.
- FIRST(x) and LAST(x) over an append-only input (FIRST_VALUE, ANY_VALUE, LAST_VALUE alike), by the order rows
  arrived in (their commits' times): v is the value of the group's first (last) row, or its first (last) non-NULL
  value with IGNORE NULLS. FIRST keeps v once the group has a row, LAST takes the batch's. Rows of one commit tie,
  and any of them may be taken, as Spark's FIRST takes any row.
- MIN(x) or MAX(x) over an append-only input: v' = least(v, min of the batch's inserted x) (greatest for MAX);
  rows never go, so the extreme never has to be found again.
- The aggregates of a multiset (value → count, a table of its own, shared by the aggregates of one argument; a
  value is present while its count is positive): MIN and MAX over an input that deletes, COUNT(DISTINCT x),
  SUM(DISTINCT x), COLLECT_LIST/ARRAY_AGG(x) (every present non-NULL value as often as its count, in ascending
  order — Spark's own order is that of the rows it happened to read). Their v is computed again per affected
  group from the present values (aggregate.py); but a multiset read by COUNT(DISTINCT x) alone needs only the
  values of the batch: v' = v + (the values whose count turns positive) - (those whose count leaves it), so
  that a batch reads its own values of the multiset, not every value of each group it touches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sqlglot import exp

from mvengine.incremental import exact_sum
from mvengine.incremental.engine import Engine
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.operators.aggregate import (
    ACCUMULATOR_KINDS,
    AggregateCall,
    accumulator_kind,
    incremental_call,
)
from mvengine.plan.types import aggregate_type, type_name

R = TypeVar("R")

COUNT = "_n"  # a group's row count
# AVG of integers: Spark sums doubles and cannot overflow; 38 digits cannot
INTEGER_AVERAGE_SUM = "decimal(38,0)"
OLD_EXISTS = "_old_exists"  # whether the group had a row before the batch
SAME = "_same"  # whether each aggregate's result is the same before and after (as Spark compares rows)
OLD = "_o"  # the prefix of the accumulators' columns as they were before the batch
DIGITS, SQUARE_DIGITS = "digits", "square digits"  # the partials of exact sums (engine.exact_sums)


@dataclass(frozen=True)
class StateColumn:
    """A state column of an accumulator: its Spark type; `partial`, what each change row adds to it (Spark SQL
    over its argument `{x}` and `_w`; DIGITS or SQUARE_DIGITS: the exact Σ w·x or Σ w·x²; None when the
    multiset gives it), summed per group by `aggregate` (a function of engine.aggregate); and `merge`, its new
    value (Spark SQL over the value before the batch `{old}`, the partial's `{new}`, and the group's row counts
    before `{old_n}` and in the batch `{n}`; None when the multiset gives it)."""

    name: str
    sql_type: str
    partial: str | None
    merge: str | None
    aggregate: str = "sum"


@dataclass
class Accumulator:
    """Aggregate call `index` of a GROUP BY over `argument` (Spark SQL, bound as `expression`; None for *), of
    Spark type `result_type`: its state columns, and its `result` (Spark SQL over its state columns, each named
    in braces). `how` and `multiset`: the aggregate over the present values of multiset `multiset` (min, max,
    count, sum, list)."""

    index: int
    argument: str | None
    expression: exp.Expression | None
    result_type: str
    columns: list[StateColumn] = field(default_factory=list)
    result: str = ""
    multiset: int | None = None
    how: str | None = None

    @property
    def value(self) -> str:  # the column of a multiset aggregate's value
        return f"_v{self.index}"

    def state_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def result_of(self, column: Callable[[str], str]) -> str:
        """The result over the state columns named by `column` (NULL where the group had none)."""
        return self.result.format(**{n: column(n) for n in [COUNT, *self.state_names()]})


# -- the declarations -------------------------------------------------------------------------------------------

_DOUBLE_MAX = "1.7976931348623157E308"
_DOUBLE = "CAST({x} AS DOUBLE)"


def _counted(i: int, name: str = "_c", test: str = "{x} IS NOT NULL") -> StateColumn:
    """Σ w over the rows whose argument passes `test`."""
    return StateColumn(f"{name}{i}", "bigint", f"CASE WHEN {test} THEN {WEIGHT} ELSE 0 END", _added("bigint"))


def _added(sql_type: str) -> str:
    if _scale(sql_type) > 6 and sql_type.startswith("decimal(38,"):  # Spark keeps 6 places of a 39-digit sum
        return f"mv_decimal_add_{_scale(sql_type)}({{old}}, {{new}})"  # (incremental/functions.py)
    return f"CAST(COALESCE({{old}}, 0) + COALESCE({{new}}, 0) AS {sql_type})"


def _scale(sql_type: str) -> int:
    return int(sql_type.split(",")[1].rstrip(")")) if sql_type.startswith("decimal(") else 0


def _exact(name: str, partial: str = DIGITS) -> StateColumn:
    return StateColumn(name, exact_sum.MAP_TYPE, partial, "mv_exact_merged({old}, {new})")


def _positive(count: str) -> str:
    """The count where it is positive, else NULL: a divisor (the driver evaluates every branch)."""
    return f"CASE WHEN {count} > 0 THEN {count} END"


def _sums(a: Accumulator, sum_type: str, average: bool) -> None:
    i = a.index
    if _scale(sum_type) > 6:  # over rows of weight ±1 (partial): Spark keeps 6 places of x·w past 38 digits
        weighted = (
            f"CASE WHEN {WEIGHT} > 0 THEN CAST({{x}} AS {sum_type}) ELSE -CAST({{x}} AS {sum_type}) END"
        )
    else:
        weighted = f"CAST({{x}} AS {sum_type}) * {WEIGHT}"
    a.columns = [_counted(i), StateColumn(f"_s{i}", sum_type, weighted, _added(sum_type))]
    if not average:
        a.result = f"CASE WHEN {{_c{i}}} > 0 THEN {{_s{i}}} END"
    elif a.result_type == "double":
        a.result = f"CAST({{_s{i}}} AS DOUBLE) / CAST({_positive(f'{{_c{i}}}')} AS DOUBLE)"
    else:
        average_sql = decimal_average(f"{{_s{i}}}", _positive(f"{{_c{i}}}"), a.result_type)
        a.result = f"CASE WHEN {{_c{i}}} > 0 THEN {average_sql} END"


def _float_sum(a: Accumulator, average: bool) -> None:
    i = a.index
    tests = {
        "_nan": f"isnan({_DOUBLE})",
        "_pinf": f"({_DOUBLE} > {_DOUBLE_MAX} AND NOT isnan({_DOUBLE}))",  # (NaN is above every number)
        "_ninf": f"{_DOUBLE} < -{_DOUBLE_MAX}",
    }
    a.columns = [_counted(i), _exact(f"_s{i}"), *[_counted(i, name, test) for name, test in tests.items()]]
    total = f"mv_float_sum({{_s{i}}}, {{_nan{i}}}, {{_pinf{i}}}, {{_ninf{i}}})"
    if average:
        a.result = f"{total} / CAST({_positive(f'{{_c{i}}}')} AS DOUBLE)"
    else:
        a.result = f"CASE WHEN {{_c{i}}} > 0 THEN {total} END"


def _moments(a: Accumulator, kind: str) -> None:
    i = a.index
    nonfinite = f"(isnan({_DOUBLE}) OR abs({_DOUBLE}) > {_DOUBLE_MAX})"
    a.columns = [
        _counted(i),
        _exact(f"_s{i}"),
        _exact(f"_q{i}", SQUARE_DIGITS),
        _counted(i, "_f", nonfinite),
    ]
    a.result = f"mv_moments('{kind}', {{_c{i}}}, {{_f{i}}}, {{_s{i}}}, {{_q{i}}})"


def _decisive(a: Accumulator, kind: str) -> None:
    i = a.index
    decider = kind == "bool_or"  # the value that decides the result
    a.columns = [_counted(i), _counted(i, "_f", f"{{x}} = {str(decider).upper()}")]
    a.result = f"CASE WHEN {{_c{i}}} > 0 THEN {{_f{i}}} {'> 0' if decider else '= 0'} END"


def _value(a: Accumulator, partial: str | None, merge: str | None, aggregate: str = "sum") -> None:
    a.columns = [StateColumn(a.value, a.result_type, partial, merge, aggregate)]
    a.result = f"{{{a.value}}}"


def _arrival(a: Accumulator, call: AggregateCall) -> None:
    """FIRST: the old value once the group had rows; LAST: the batch's, if it has rows."""
    if call.ignore_nulls:
        merge = "COALESCE({old}, {new})" if call.kind == "first" else "COALESCE({new}, {old})"
    elif call.kind == "first":
        merge = "CASE WHEN COALESCE({old_n}, 0) > 0 THEN {old} ELSE {new} END"
    else:
        merge = "CASE WHEN COALESCE({n}, 0) > 0 THEN {new} ELSE {old} END"
    _value(a, "{x}", merge, call.kind + ("_valid" if call.ignore_nulls else ""))


def _extreme(a: Accumulator, kind: str) -> None:
    merge = f"{'LEAST' if kind == 'min' else 'GREATEST'}({{old}}, {{new}})"
    _value(a, f"CASE WHEN {WEIGHT} > 0 THEN {{x}} END", merge, kind)


def _multiset(a: Accumulator, how: str) -> None:
    _value(a, None, None)
    a.how = how


def _count_of(a: Accumulator) -> None:
    a.columns = [_counted(a.index)]
    a.result = f"{{_c{a.index}}}"


# How each kind of accumulator (plan/operators/aggregate.py, ACCUMULATOR_KINDS) is declared for a call: from the
# normalized call and the type its sum takes (SUM and AVG).
BUILDERS: dict[str, Callable[[Accumulator, AggregateCall, str], None]] = {
    "count_star": lambda a, call, sum_type: setattr(a, "result", f"{{{COUNT}}}"),
    "count": lambda a, call, sum_type: _count_of(a),
    "sum": lambda a, call, sum_type: _sums(a, sum_type, average=False),
    "avg": lambda a, call, sum_type: _sums(a, sum_type, average=True),
    "avg_of_integers": lambda a, call, sum_type: _sums(a, sum_type, average=True),
    "float_sum": lambda a, call, sum_type: _float_sum(a, average=False),
    "float_avg": lambda a, call, sum_type: _float_sum(a, average=True),
    "bool_and": lambda a, call, sum_type: _decisive(a, call.kind),
    "bool_or": lambda a, call, sum_type: _decisive(a, call.kind),
    "moments": lambda a, call, sum_type: _moments(a, call.kind),
    "first": lambda a, call, sum_type: _arrival(a, call),
    "last": lambda a, call, sum_type: _arrival(a, call),
    "min": lambda a, call, sum_type: _extreme(a, call.kind),
    "max": lambda a, call, sum_type: _extreme(a, call.kind),
    "min_max_multiset": lambda a, call, sum_type: _multiset(a, call.kind),
    "distinct": lambda a, call, sum_type: _multiset(a, call.kind),
    "list": lambda a, call, sum_type: _multiset(a, call.kind),
}


def accumulator(
    index: int, call: exp.Expression, result_type: str, append_only: bool, multisets: list[str]
) -> Accumulator:
    """The accumulator of aggregate call `index`; an argument that needs a multiset is added to `multisets` (one
    per distinct argument)."""
    normalized = incremental_call(call)
    kind, arg_expr = accumulator_kind(normalized, append_only), normalized.argument
    argument = None if arg_expr is None else arg_expr.sql("spark")
    a = Accumulator(index, argument, arg_expr, result_type)
    sum_type = ""
    if normalized.kind in ("sum", "avg"):
        assert arg_expr is not None  # SUM and AVG take an argument
        summed = aggregate_type(exp.Sum(this=arg_expr.copy()), arg_expr.type)
        assert summed is not None, arg_expr  # the binder typed the view
        sum_type = type_name(summed)
        if normalized.kind == "avg" and sum_type == "bigint":  # summed exactly, beyond BIGINT's range
            sum_type = INTEGER_AVERAGE_SUM
    if ACCUMULATOR_KINDS[kind].multiset:  # the values themselves, in a multiset per argument
        assert argument is not None  # COUNT(DISTINCT *) is no SQL
        if argument not in multisets:
            multisets.append(argument)
        a.multiset = multisets.index(argument)
    BUILDERS[kind](a, normalized, sum_type)
    return a


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


# -- the two steps of a GROUP BY's rule ---------------------------------------------------------------------------


def state_columns(aggs: Sequence[Accumulator]) -> list[str]:
    """The accumulator table's columns after the groups."""
    return [COUNT, *[c for a in aggs for c in a.state_names()]]


def old_result(i: int) -> str:
    return f"_old{i}"


def new_result(i: int) -> str:
    return f"_new{i}"


def partial(
    engine: Engine[R], rows: R, groups: Sequence[str], aggs: Sequence[Accumulator], x: Mapping[str, str]
) -> R:
    """Per group of `groups` in `rows` (NULLs one group): `_n` (Σ `_w`), the latest `_mtime`, and what the rows
    add to each accumulator's state columns (the column of each argument's SQL: `x`)."""
    summed = [(a, c) for a in aggs for c in a.columns if c.partial not in (None, DIGITS, SQUARE_DIGITS)]
    if any(
        c.aggregate == "sum" and _scale(c.sql_type) > 6 for _, c in summed
    ):  # |w| copies of ±1 (see _sums)
        copies = engine.copies(engine.compute(rows, {"_copies": f"abs({WEIGHT})"}), "_copies")
        rows = engine.compute(copies, {WEIGHT: f"CAST(CASE WHEN {WEIGHT} > 0 THEN 1 ELSE -1 END AS BIGINT)"})
    contributions = {c.name: str(c.partial).format(x=x[str(a.argument)]) for a, c in summed}
    grouped = engine.aggregate(
        engine.compute(rows, contributions),
        {g: g for g in groups},
        {COUNT: ("sum", WEIGHT), MTIME: ("max", MTIME), **{c.name: (c.aggregate, c.name) for _, c in summed}},
    )
    grouped = _typed(engine, grouped, [c for _, c in summed])
    exact = [
        (c.name, x[str(a.argument)], c.partial == SQUARE_DIGITS)
        for a in aggs
        for c in a.columns
        if c.partial in (DIGITS, SQUARE_DIGITS)
    ]
    return engine.exact_sums(rows, grouped, groups, exact) if exact else grouped


def rolls_up(aggs: Sequence[Accumulator]) -> bool:
    """Whether partials by (group, value) add up by group to the partials by group, exactly, so that a GROUP BY
    with a multiset reads its rows once: every summed column is a count, a MIN or MAX, or a sum that no fewer
    than 10^10 rows can take past its type (BIGINT: as Spark's own partial aggregates per partition, an overflow
    depends on the order rows are added in; a DECIMAL whose sum has the argument's 10 more digits, at most 6
    places). Not exact sums (maps of digits, engine.exact_sums) nor FIRST and LAST (by arrival)."""
    summed = [c for a in aggs for c in a.columns if c.partial is not None]
    return all(c.partial not in (DIGITS, SQUARE_DIGITS) and _adds_up(c) for c in summed)


def _adds_up(c: StateColumn) -> bool:
    if c.aggregate in ("min", "max"):
        return True
    if c.aggregate != "sum":
        return False
    if c.sql_type == "bigint":
        return True
    if not c.sql_type.startswith("decimal("):
        return False
    precision = int(c.sql_type[len("decimal(") :].split(",")[0])
    return precision < 38 and _scale(c.sql_type) <= 6  # (38: Spark bounded the sum's digits)


def rolled_up(
    engine: Engine[R],
    fine: R,
    groups: Sequence[str],
    aggs: Sequence[Accumulator],
    more: Mapping[str, tuple[str, str]] | None = None,
) -> R:
    """The partials by `groups` (as `partial` gives them) from `partial`'s by a finer grouping (rolls_up); and
    `more` aggregates of `fine`'s columns (engine.aggregate's)."""
    summed = [c for a in aggs for c in a.columns if c.partial is not None]
    grouped = engine.aggregate(
        fine,
        {g: g for g in groups},
        {
            COUNT: ("sum", COUNT),
            MTIME: ("max", MTIME),
            **{c.name: (c.aggregate, c.name) for c in summed},
            **(more or {}),
        },
    )
    return _typed(engine, grouped, summed)


def _typed(engine: Engine[R], grouped: R, summed: Sequence[StateColumn]) -> R:
    """Summed columns in their state type (engine.aggregate's sums widen)."""
    typed = {c.name: f"CAST({c.name} AS {c.sql_type})" for c in summed if c.aggregate == "sum"}
    return engine.compute(grouped, typed) if typed else grouped


def merged(
    engine: Engine[R],
    partial: R,
    table: str,
    groups: Sequence[str],
    aggs: Sequence[Accumulator],
    values: Sequence[R | None],
) -> R:
    """Per row of `partial`: the group's new accumulators (the ones in `table` before the batch, NULL for a new
    group, plus the partial), `_old_exists`, `_mtime`, each aggregate's result before (`_old<i>`) and after
    (`_new<i>`), and `_same`, whether all are equal (NULL and NaN to their own). `values[j]` holds the values of
    the aggregates over multiset j per group (a group absent: it has none); None: `partial` has them."""
    state = {COUNT: "BIGINT", **{c.name: c.sql_type for a in aggs for c in a.columns}}
    new = engine.with_state(partial, table, list(groups), state, prefix=OLD)
    counts = {"old_n": OLD + COUNT, "n": COUNT}
    merges = {
        c.name: c.merge.format(old=OLD + c.name, new=c.name, **counts)
        for a in aggs
        for c in a.columns
        if c.merge is not None
    }
    new = engine.compute(
        new,
        {
            COUNT: f"COALESCE({OLD}{COUNT}, 0) + COALESCE({COUNT}, 0)",
            **merges,
            OLD_EXISTS: f"{OLD}{COUNT} IS NOT NULL",  # grouped: rows are deleted at zero; global: it always exists
        },
    )
    for j, v in enumerate(values):
        if v is not None:
            new = engine.lookup(new, [(g, g) for g in groups], v, "left", null_safe=True)
        changed_by = counts_values_only(aggs, j)
        new = engine.compute(
            new, {a.value: _or_when_none(a, changed_by) for a in aggs if a.how and a.multiset == j}
        )
    olds = {old_result(i): a.result_of(lambda c: OLD + c) for i, a in enumerate(aggs)}
    news = {new_result(i): a.result_of(lambda c: c) for i, a in enumerate(aggs)}
    # The results are columns of their own before they are compared: each use of an expression would otherwise
    # evaluate it again (an exact sum's value, a variance, are not cheap).
    new = engine.same(engine.compute(new, {**olds, **news}), list(olds), list(news), SAME)
    return engine.select(new, [*groups, *state_columns(aggs), OLD_EXISTS, MTIME, *olds, *news, SAME])


def counts_values_only(aggs: Sequence[Accumulator], j: int) -> bool:
    """Whether multiset j is read by COUNT(DISTINCT) alone: its aggregates then change by a count of the values
    the batch brings in and takes away, and keep their counts in the accumulators."""
    return all(a.how == "count" for a in aggs if a.multiset == j)


def _or_when_none(a: Accumulator, changed_by: bool) -> str:
    """A multiset aggregate's value in its result type, or its value over no values: NULL, 0 for a count, []
    for a list; `changed_by`: the value is a change of the count kept in its state."""
    if changed_by:
        return f"CAST(COALESCE({OLD}{a.value}, 0) + COALESCE({a.value}, 0) AS {a.result_type})"
    if a.how == "list":
        return f"COALESCE({a.value}, CAST(array() AS {a.result_type}))"
    if a.how == "count":
        return f"COALESCE(CAST({a.value} AS {a.result_type}), 0)"
    return f"CAST({a.value} AS {a.result_type})" if a.how == "sum" else a.value
