"""The accumulators of incremental aggregates, declared once as data: the state columns each keeps per group,
what a batch adds to each column (its partial, from each change row's value x and weight w: +1 an insert, -1 a
deletion), how a partial merges into the old column, and the result. Both engines compute them
(incremental/accumulation.py holds each kind's Spark and Arrow forms, side by side). A group also keeps its row
count n = Σw (incremental/aggregate.py); a group is gone when n reaches 0.

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
  group from the present values (aggregate.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from mvengine.incremental import exact_sum
from mvengine.plan.operators.aggregate import (
    ACCUMULATOR_KINDS,
    AggregateCall,
    accumulator_kind,
    incremental_call,
)
from mvengine.plan.types import aggregate_type, type_name

COUNT = "_n"  # a group's row count
INTEGER_AVERAGE_SUM = (
    "decimal(38,0)"  # AVG of integers: Spark sums doubles and cannot overflow; 38 digits cannot
)


@dataclass(frozen=True)
class StateColumn:
    """A state column of an accumulator: its Spark type; `partial`, what a batch adds to it, as (how, *its
    parameters): ("rows", test) Σ w over the rows whose x passes `test`, ("sum", type) Σ w·x in that type,
    ("inserted", "min" | "max") the extreme of the inserted x, ("arrival", "first" | "last", ignore_nulls),
    ("exact", of_squares) the exact Σ w·x (or w·x²) as digits; or None when the multiset gives it; and `merge`,
    how old and partial make the new value: "add", "exact_add", "least", "greatest", "first", "last",
    "first_valid", "last_valid" (the partial's value once the group has rows, or a non-NULL one), or None."""

    name: str
    sql_type: str
    partial: tuple[object, ...] | None
    merge: str | None


@dataclass
class Accumulator:
    """Aggregate call `index` of a GROUP BY over `argument` (Spark SQL, bound as `expression`; None for *), of
    Spark type `result_type`: its state columns, and its result as (how, *state columns or parameters), a kind
    of accumulation.RESULTS. `how` and `multiset`: the aggregate over the present values of multiset `multiset`
    (min, max, count, sum, list)."""

    index: int
    argument: str | None
    expression: exp.Expression | None
    result_type: str
    columns: list[StateColumn] = field(default_factory=list)
    result: tuple[object, ...] = ()
    multiset: int | None = None
    how: str | None = None

    @property
    def ordered(self) -> bool:
        """Whether its partial depends on the order of a batch's rows (by `_mtime`)."""
        return any(c.partial is not None and c.partial[0] == "arrival" for c in self.columns)

    @property
    def value(self) -> str:  # the column of a multiset aggregate's value
        return f"_v{self.index}"

    def state_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def digit_columns(self) -> list[tuple[str, bool]]:
        """The state columns that are exact sums of the argument (of its square, when true)."""
        return [(c.name, bool(c.partial[1])) for c in self.columns if c.partial and c.partial[0] == "exact"]


def _count(i: int, test: str = "not_null") -> StateColumn:
    return StateColumn(f"_c{i}", "bigint", ("rows", test), "add")


def _counted(i: int, name: str, test: str) -> StateColumn:
    return StateColumn(f"{name}{i}", "bigint", ("rows", test), "add")


def _exact(name: str, squares: bool = False) -> StateColumn:
    return StateColumn(name, exact_sum.MAP_TYPE, ("exact", squares), "exact_add")


def _sums(a: Accumulator, sum_type: str) -> list[StateColumn]:
    return [_count(a.index), StateColumn(f"_s{a.index}", sum_type, ("sum", sum_type), "add")]


def _float_sum(a: Accumulator, average: bool) -> None:
    i = a.index
    specials = [
        _counted(i, name, test)
        for name, test in (("_nan", "nan"), ("_pinf", "pos_inf"), ("_ninf", "neg_inf"))
    ]
    a.columns = [_count(i), _exact(f"_s{i}"), *specials]
    a.result = ("float_sum", f"_c{i}", f"_s{i}", *[c.name for c in specials], average)


def _moments(a: Accumulator, kind: str) -> None:
    i = a.index
    a.columns = [_count(i), _exact(f"_s{i}"), _exact(f"_q{i}", squares=True), _counted(i, "_f", "nonfinite")]
    a.result = ("moments", kind, f"_c{i}", f"_f{i}", f"_s{i}", f"_q{i}")


def _decisive(a: Accumulator, kind: str) -> None:
    decider = kind == "bool_or"  # the value that decides the result
    a.columns = [_count(a.index), _counted(a.index, "_f", "true" if decider else "false")]
    a.result = ("decided", f"_c{a.index}", f"_f{a.index}", decider)


def _value(a: Accumulator, partial: tuple[object, ...] | None, merge: str | None) -> None:
    a.columns = [StateColumn(a.value, a.result_type, partial, merge)]
    a.result = ("value", a.value)


def _arrival(a: Accumulator, call: AggregateCall) -> None:
    merge = call.kind + ("_valid" if call.ignore_nulls else "")
    _value(a, ("arrival", call.kind, call.ignore_nulls), merge)


def _extreme(a: Accumulator, kind: str) -> None:
    _value(a, ("inserted", kind), "least" if kind == "min" else "greatest")


def _multiset(a: Accumulator, how: str) -> None:
    _value(a, None, None)
    a.how = how


def _sum(a: Accumulator, sum_type: str) -> None:
    a.columns = _sums(a, sum_type)
    a.result = ("sum", f"_c{a.index}", f"_s{a.index}")


def _avg(a: Accumulator, sum_type: str) -> None:
    a.columns = _sums(a, sum_type)
    a.result = ("average", f"_c{a.index}", f"_s{a.index}")


def _count_of(a: Accumulator) -> None:
    a.columns = [_count(a.index)]
    a.result = ("count", f"_c{a.index}")


# How each kind of accumulator (plan/operators/aggregate.py, ACCUMULATOR_KINDS) is declared for a call: from the
# normalized call and the type its sum takes (SUM and AVG).
BUILDERS: dict[str, Callable[[Accumulator, AggregateCall, str], None]] = {
    "count_star": lambda a, call, sum_type: setattr(a, "result", ("count", COUNT)),
    "count": lambda a, call, sum_type: _count_of(a),
    "sum": lambda a, call, sum_type: _sum(a, sum_type),
    "avg": lambda a, call, sum_type: _avg(a, sum_type),
    "avg_of_integers": lambda a, call, sum_type: _avg(a, sum_type),
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
