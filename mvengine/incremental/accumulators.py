"""The accumulators of incremental aggregates, one class per aggregate: the state columns it keeps per group, what
a batch adds to them (its partial, from each change row's value x and weight w: +1 an insert, -1 a deletion),
how a partial merges into the old accumulators, and the result. Each in Spark (Columns) and on the driver
(Arrow). A group also keeps its row count n = Σw (incremental/aggregate.py); a group is gone when n reaches 0.

Aggregates that need the values themselves (MIN/MAX over an input that deletes, DISTINCT aggregates) keep them in
a multiset per group (value → count, a table of its own, shared by the aggregates of one argument): their result
is recomputed from the values whose count is positive (`Multiset` below).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.driver import extreme
from mvengine.incremental.driver_expressions import NotOnDriver, cast
from mvengine.incremental.zset import MTIME

COUNT = "_n"  # a group's row count
Get = Callable[[str], Column]  # an accumulator column of the old state ("o.") or the batch's partial ("d.")


class Accumulator:
    """An aggregate call `index` of a GROUP BY over `argument` (Spark SQL; None for *), of Spark type
    `result_type`."""

    ordered = False  # whether its partial depends on the order of a batch's rows (by MTIME)

    def __init__(self, index: int, argument: str | None, expression: exp.Expression | None, result_type: str,
                 sum_type: str | None = None, multiset: int | None = None) -> None:
        self.index, self.argument, self.expression = index, argument, expression
        self.result_type, self.sum_type, self.multiset = result_type, sum_type, multiset

    @property
    def value(self) -> str:  # the accumulator holding the current value (MIN, MAX, DISTINCT)
        return f"_v{self.index}"

    @property
    def count(self) -> str:  # non-NULL values
        return f"_c{self.index}"

    @property
    def sum(self) -> str:
        return f"_s{self.index}"

    # -- Spark ----------------------------------------------------------------------------------------------------

    def columns(self) -> list[Column]:
        """The state columns, typed, over a DataFrame that has them (for the state's empty template)."""
        return []

    def partial(self, x: Column | None, w: Column) -> list[Column]:
        """Aggregate expressions over a batch's rows of a group: what it adds to each state column."""
        return []

    def merged(self, o: Get, d: Get) -> list[Column]:
        """The new state columns, from the old (`o`, NULL for a new group) and the partial (`d`)."""
        return []

    def old(self, o: Get) -> list[Column]:
        """The old state columns, as they were (for the old result)."""
        return [o(c).alias(c) for c in self.state_names()]

    def state_names(self) -> list[str]:
        return []

    def result(self, c: Get) -> Column:
        raise NotImplementedError

    # -- on the driver ------------------------------------------------------------------------------------------

    def partial_arrow(self, x: pa.ChunkedArray | None, w: pa.ChunkedArray,
                      schema: pa.Schema) -> list[tuple[str, pa.ChunkedArray, str]]:
        """(state column, per-row contribution, Arrow's grouped aggregate summing it: its name, or its name and
        options) for each state column."""
        return []

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        return {}

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        raise NotImplementedError


def _add_counts(o: pa.ChunkedArray, d: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.add_checked(pc.fill_null(o, 0), d)


class CountStar(Accumulator):
    """COUNT(*) = n, the group's row count: no state of its own."""

    def result(self, c: Get) -> Column:
        return c(COUNT).cast(self.result_type)

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        return acc.column(COUNT)


class Count(Accumulator):
    """COUNT(x) = c, the count of non-NULL x: c' = c + Σ w·[x IS NOT NULL]."""

    def state_names(self) -> list[str]:
        return [self.count]

    def columns(self) -> list[Column]:
        return [F.col(self.count).cast("long").alias(self.count)]

    def partial(self, x: Column | None, w: Column) -> list[Column]:
        return [F.sum(F.when(x.isNotNull(), w).otherwise(0)).alias(self.count)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        return [(F.coalesce(o(self.count), F.lit(0)) + F.coalesce(d(self.count), F.lit(0))).alias(self.count)]

    def result(self, c: Get) -> Column:
        return c(self.count).cast(self.result_type)

    def partial_arrow(self, x, w, schema):
        return [(self.count, pc.if_else(pc.is_valid(x), w, pa.scalar(0, pa.int64())), "sum")]

    def merged_arrow(self, old, partial, schema):
        return {self.count: _add_counts(old.column(self.count), partial.column(self.count))}

    def result_arrow(self, acc, schema):
        return acc.column(self.count)


class Sum(Count):
    """SUM(x) = s when c > 0, else NULL; s' = s + Σ w·x (in the type Spark sums x in), c as for COUNT(x)."""

    def state_names(self) -> list[str]:
        return [self.count, self.sum]

    def columns(self) -> list[Column]:
        return [*super().columns(), F.col(self.sum).cast(self.sum_type).alias(self.sum)]

    def partial(self, x: Column | None, w: Column) -> list[Column]:
        return [*super().partial(x, w), F.sum(x.cast(self.sum_type) * w).cast(self.sum_type).alias(self.sum)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        zero = F.lit(0).cast(self.sum_type)
        total = F.coalesce(o(self.sum), zero) + F.coalesce(d(self.sum), zero)
        return [*super().merged(o, d), total.cast(self.sum_type).alias(self.sum)]

    def result(self, c: Get) -> Column:
        return F.when(c(self.count) > 0, c(self.sum)).cast(self.result_type)

    def partial_arrow(self, x, w, schema):
        return [*super().partial_arrow(x, w, schema), (self.sum, _weighted(x, w, schema.field(self.sum).type), "sum")]

    def merged_arrow(self, old, partial, schema):
        return {**super().merged_arrow(old, partial, schema),
                self.sum: _sum(old.column(self.sum), partial.column(self.sum), schema.field(self.sum).type)}

    def result_arrow(self, acc, schema):
        total = acc.column(self.sum)
        return pc.if_else(pc.greater(acc.column(self.count), 0), total, pa.scalar(None, total.type))


class Avg(Sum):
    """AVG(x) = s / c when c > 0, else NULL, with s and c as for SUM(x) (a decimal average in Spark's
    precision)."""

    def result(self, c: Get) -> Column:
        if self.result_type.startswith("decimal"):
            average = c(self.sum) / c(self.count).cast("decimal(20,0)")
        else:
            average = c(self.sum).cast("double") / c(self.count).cast("double")
        return F.when(c(self.count) > 0, average).cast(self.result_type)

    def result_arrow(self, acc, schema):
        total = acc.column(self.sum)
        if pa.types.is_decimal(total.type):
            raise NotOnDriver("AVG of decimals")
        average = pc.divide(pc.cast(total, pa.float64(), safe=False), pc.cast(acc.column(self.count), pa.float64()))
        return pc.if_else(pc.greater(acc.column(self.count), 0), average, pa.scalar(None, pa.float64()))


class Extreme(Accumulator):
    """MIN(x) or MAX(x) over an append-only input: v' = least(v, min of the batch's inserted x) (greatest for
    MAX); rows never go, so the extreme never has to be found again."""

    def __init__(self, kind: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind

    def state_names(self) -> list[str]:
        return [self.value]

    def columns(self) -> list[Column]:
        return [F.lit(None).cast(self.result_type).alias(self.value)]

    def partial(self, x: Column | None, w: Column) -> list[Column]:
        pick = F.min if self.kind == "min" else F.max
        return [pick(F.when(w > 0, x)).alias(self.value)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        pick = F.least if self.kind == "min" else F.greatest
        return [pick(o(self.value), d(self.value)).alias(self.value)]

    def result(self, c: Get) -> Column:
        return c(self.value).cast(self.result_type)

    def partial_arrow(self, x, w, schema):
        no_nan(x)
        return [(self.value, pc.if_else(pc.greater(w, 0), x, pa.scalar(None, x.type)), self.kind)]

    def merged_arrow(self, old, partial, schema):
        return {self.value: extreme(self.kind, old.column(self.value), partial.column(self.value))}

    def result_arrow(self, acc, schema):
        return acc.column(self.value)


class Multiset(Accumulator):
    """An aggregate of the values in its argument's multiset (value → count; a value is present while its count
    is positive): MIN and MAX over an input that deletes (the least/greatest present value), COUNT(DISTINCT x)
    (how many are present; 0 for none), SUM(DISTINCT x) (their sum), COLLECT_LIST/ARRAY_AGG(x) (every present
    non-NULL value as often as its count, in ascending order — Spark's own order is that of the rows it happened
    to read; [] for none). The result is recomputed per affected group from the multiset (aggregate.py) and kept
    as v."""

    def __init__(self, how: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.how = how  # min, max, count, sum, list: the aggregate over the present values

    def state_names(self) -> list[str]:
        return [self.value]

    def columns(self) -> list[Column]:
        return [F.lit(None).cast(self.result_type).alias(self.value)]

    def over_values(self, value: Column, count: Column) -> Column:
        """The result over a group's present values and their counts (a Spark aggregate expression)."""
        if self.how == "list":
            copies = F.when(value.isNotNull(), F.array_repeat(value, count.cast("int")))
            result = F.sort_array(F.flatten(F.collect_list(copies)))
        else:
            result = {"min": F.min, "max": F.max, "count": F.count, "sum": F.sum}[self.how](value)
        return result.cast(self.result_type).alias(self.value)

    def when_none(self) -> Column | None:
        """The result of a group without values (NULL, 0 for a count, [] for a list)."""
        if self.how == "list":
            return F.array().cast(self.result_type)
        return F.lit(0).cast(self.result_type) if self.how == "count" else None

    def result(self, c: Get) -> Column:
        return c(self.value).cast(self.result_type)

    def result_arrow(self, acc, schema):
        return acc.column(self.value)


class Decisive(Count):
    """BOOL_AND(x) (EVERY) and BOOL_OR(x) (SOME, ANY): c as for COUNT(x), and f, the count of the x that decide
    (false for BOOL_AND, true for BOOL_OR): f' = f + Σ w·[x = decider]. The result is NULL when c = 0, else
    f = 0 for BOOL_AND and f > 0 for BOOL_OR."""

    def __init__(self, kind: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decider = kind == "bool_or"  # the value that decides the result

    @property
    def deciding(self) -> str:
        return f"_f{self.index}"

    def state_names(self) -> list[str]:
        return [self.count, self.deciding]

    def columns(self) -> list[Column]:
        return [*super().columns(), F.col(self.deciding).cast("long").alias(self.deciding)]

    def partial(self, x: Column | None, w: Column) -> list[Column]:
        decides = F.coalesce(x == F.lit(self.decider), F.lit(False))
        return [*super().partial(x, w), F.sum(F.when(decides, w).otherwise(0)).alias(self.deciding)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        total = F.coalesce(o(self.deciding), F.lit(0)) + F.coalesce(d(self.deciding), F.lit(0))
        return [*super().merged(o, d), total.alias(self.deciding)]

    def result(self, c: Get) -> Column:
        decided = (c(self.deciding) > 0) if self.decider else (c(self.deciding) == 0)
        return F.when(c(self.count) > 0, decided)

    def partial_arrow(self, x, w, schema):
        decides = pc.fill_null(pc.equal(x, pa.scalar(self.decider)), False)
        return [*super().partial_arrow(x, w, schema),
                (self.deciding, pc.if_else(decides, w, pa.scalar(0, pa.int64())), "sum")]

    def merged_arrow(self, old, partial, schema):
        return {**super().merged_arrow(old, partial, schema),
                self.deciding: _add_counts(old.column(self.deciding), partial.column(self.deciding))}

    def result_arrow(self, acc, schema):
        f = acc.column(self.deciding)
        decided = pc.greater(f, 0) if self.decider else pc.equal(f, 0)
        return pc.if_else(pc.greater(acc.column(self.count), 0), decided, pa.scalar(None, pa.bool_()))


class Moments(Count):
    """VAR_POP, VAR_SAMP (VARIANCE), STDDEV_POP, STDDEV_SAMP (STDDEV, STD) of x: c as for COUNT(x), s = Σ w·x and
    q = Σ w·x² in doubles. With m = q - s²/c (the sum of squared deviations, clamped at 0 against rounding):
    VAR_POP = m/c (NULL when c = 0), VAR_SAMP = m/(c-1) (NULL when c ≤ 1), STDDEV_* their square roots. Equal to
    Spark's (which updates the moments one row at a time) up to floating-point rounding."""

    def __init__(self, kind: str, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind

    @property
    def squares(self) -> str:
        return f"_q{self.index}"

    def state_names(self) -> list[str]:
        return [self.count, self.sum, self.squares]

    def columns(self) -> list[Column]:
        return [*super().columns(), F.col(self.sum).cast("double").alias(self.sum),
                F.col(self.squares).cast("double").alias(self.squares)]

    def partial(self, x: Column | None, w: Column) -> list[Column]:
        v = x.cast("double")
        return [*super().partial(x, w), F.sum(v * w).alias(self.sum), F.sum(v * v * w).alias(self.squares)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        def add(name: str) -> Column:
            return (F.coalesce(o(name), F.lit(0.0)) + F.coalesce(d(name), F.lit(0.0))).alias(name)
        return [*super().merged(o, d), add(self.sum), add(self.squares)]

    def result(self, c: Get) -> Column:
        n = c(self.count).cast("double")
        m = F.greatest(c(self.squares) - c(self.sum) * c(self.sum) / n, F.lit(0.0))
        population = self.kind.endswith("_pop")
        variance = m / n if population else m / (n - 1)
        value = F.sqrt(variance) if self.kind.startswith("stddev") else variance
        return F.when(c(self.count) > (0 if population else 1), value)

    def partial_arrow(self, x, w, schema):
        v = pc.cast(x, pa.float64())
        weight = pc.cast(w, pa.float64())
        return [*super().partial_arrow(x, w, schema), (self.sum, pc.multiply(v, weight), "sum"),
                (self.squares, pc.multiply(pc.multiply(v, v), weight), "sum")]

    def merged_arrow(self, old, partial, schema):
        def add(name: str) -> pa.ChunkedArray:
            return pc.add(pc.fill_null(old.column(name), 0.0), pc.fill_null(partial.column(name), 0.0))
        return {**super().merged_arrow(old, partial, schema), self.sum: add(self.sum),
                self.squares: add(self.squares)}

    def result_arrow(self, acc, schema):
        n = pc.cast(acc.column(self.count), pa.float64())
        s, q = acc.column(self.sum), acc.column(self.squares)
        m = pc.max_element_wise(pc.subtract(q, pc.divide(pc.multiply(s, s), n)), pa.scalar(0.0))
        population = self.kind.endswith("_pop")
        variance = pc.divide(m, n) if population else pc.divide(m, pc.subtract(n, 1.0))
        value = pc.sqrt(variance) if self.kind.startswith("stddev") else variance
        enough = pc.greater(acc.column(self.count), 0 if population else 1)
        return pc.if_else(enough, value, pa.scalar(None, pa.float64()))


class Arrival(Accumulator):
    """FIRST(x) and LAST(x) over an append-only input (FIRST_VALUE, ANY_VALUE, LAST_VALUE alike), by the order
    rows arrived in, i.e. their commits' times (MTIME): v is the value of the group's first (last) row, or its
    first (last) non-NULL value with IGNORE NULLS. A batch's partial is the value of its first (last) row; FIRST
    keeps v once the group has a row (a non-NULL v, ignoring NULLs), LAST takes the batch's (a non-NULL one,
    ignoring NULLs). Rows of one commit tie, and any of them may be taken, as Spark's FIRST takes any row."""

    ordered = True  # the driver sorts a batch's rows by MTIME before grouping

    def __init__(self, kind: str, ignore_nulls: bool, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.first, self.ignore_nulls = kind == "first", ignore_nulls

    def state_names(self) -> list[str]:
        return [self.value]

    def columns(self) -> list[Column]:
        return [F.lit(None).cast(self.result_type).alias(self.value)]

    def partial(self, x: Column | None, w: Column) -> list[Column]:
        order = F.when(x.isNotNull(), F.col(MTIME)) if self.ignore_nulls else F.col(MTIME)
        return [(F.min_by if self.first else F.max_by)(x, order).alias(self.value)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        kept, batch = (o, d) if self.first else (d, o)  # the value that wins, and the one it falls back to
        if self.ignore_nulls:
            return [F.coalesce(kept(self.value), batch(self.value)).alias(self.value)]
        return [F.when(F.coalesce(kept(COUNT), F.lit(0)) > 0, kept(self.value)).otherwise(batch(self.value))
                .alias(self.value)]

    def result(self, c: Get) -> Column:
        return c(self.value).cast(self.result_type)

    def partial_arrow(self, x, w, schema):
        how = "first" if self.first else "last"
        return [(self.value, x, (how, pc.ScalarAggregateOptions(skip_nulls=self.ignore_nulls)))]

    def merged_arrow(self, old, partial, schema):
        kept, batch = (old, partial) if self.first else (partial, old)
        if self.ignore_nulls:
            return {self.value: pc.coalesce(kept.column(self.value), batch.column(self.value))}
        has_rows = pc.fill_null(pc.greater(kept.column(COUNT), 0), False)
        return {self.value: pc.if_else(has_rows, kept.column(self.value), batch.column(self.value))}

    def result_arrow(self, acc, schema):
        return acc.column(self.value)


def accumulator(index: int, call: exp.Expression, result_type: str, append_only: bool,
                multisets: list[str]) -> Accumulator:
    """The accumulator of aggregate call `index` (plan/operators/aggregate.py lists the kinds); an argument that
    needs a multiset is added to `multisets` (one per distinct argument)."""
    from mvengine.plan.operators.aggregate import ARRIVAL, MOMENTS, aggregate_call
    from mvengine.plan.types import aggregate_type, type_name

    normalized = aggregate_call(call)
    kind, arg_expr = normalized.kind, normalized.argument
    argument = None if arg_expr is None else arg_expr.sql("spark")
    sum_type = type_name(aggregate_type(exp.Sum(this=arg_expr.copy()), arg_expr.type)) \
        if kind in ("sum", "avg") else None
    common = {"index": index, "argument": argument, "result_type": result_type, "expression": arg_expr}
    if normalized.distinct or kind == "list" or (kind in ("min", "max") and not append_only):
        if argument not in multisets:
            multisets.append(argument)
        return Multiset(kind, **common, multiset=multisets.index(argument))
    if kind == "count":
        return CountStar(**common) if argument is None else Count(**common)
    if kind in ("min", "max"):
        return Extreme(kind, **common)
    if kind in ("bool_and", "bool_or"):
        return Decisive(kind, **common)
    if kind in MOMENTS:
        return Moments(kind, **common)
    if kind in ARRIVAL:
        return Arrival(kind, normalized.ignore_nulls, **common)
    return (Sum if kind == "sum" else Avg)(**common, sum_type=sum_type)


# -- Arrow arithmetic, as Spark does it ------------------------------------------------------------------------

def _weighted(x: pa.ChunkedArray, weight: pa.ChunkedArray, sum_type: pa.DataType) -> pa.ChunkedArray:
    """x * weight in the type of the running sum (exact, or NotOnDriver: a sum Arrow could overflow)."""
    if pa.types.is_decimal(sum_type):
        if not pa.types.is_decimal(x.type) or pc.max(pc.abs(weight)).as_py() not in (None, 1):
            raise NotOnDriver("a decimal sum over rows of several copies")
        return pc.if_else(pc.greater(weight, 0), x, pc.negate(x))
    product = pc.multiply_checked(cast(x, sum_type), cast(weight, sum_type)) if pa.types.is_integer(sum_type) \
        else pc.multiply(cast(x, sum_type), cast(weight, sum_type))
    if pa.types.is_integer(sum_type):
        bound = pc.sum(pc.abs(pc.cast(product, pa.float64()))).as_py() or 0
        if bound >= 2**62:  # Arrow's grouped sum does not check overflow; Spark's does
            raise NotOnDriver("a sum near the range of BIGINT")
    return product


def _sum(old: pa.ChunkedArray, delta: pa.ChunkedArray, sum_type: pa.DataType) -> pa.ChunkedArray:
    zero = pa.scalar(0, sum_type) if not pa.types.is_floating(sum_type) else pa.scalar(0.0, sum_type)
    total = (pc.add_checked if not pa.types.is_floating(sum_type) else pc.add)(
        pc.fill_null(cast(old, sum_type), zero), pc.fill_null(cast(delta, sum_type), zero))
    return cast(total, sum_type)


def no_nan(x: pa.ChunkedArray) -> None:
    """Spark orders NaN above every number; Arrow's MIN/MAX skip it."""
    if pa.types.is_floating(x.type) and pc.any(pc.is_nan(x)).as_py():
        raise NotOnDriver("a NaN under MIN/MAX")
