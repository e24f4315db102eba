"""The accumulators of incremental aggregates, one class per aggregate: the state columns it keeps per group, what
a batch adds to them (its partial, from each change row's value x and weight w: +1 an insert, -1 a deletion),
how a partial merges into the old accumulators, and the result. Each in Spark (Columns) and on the driver
(Arrow). A group also keeps its row count n = Σw (incremental/aggregate.py); a group is gone when n reaches 0.

Aggregates that need the values themselves (MIN/MAX over an input that deletes, DISTINCT aggregates) keep them in
a multiset per group (value → count, a table of its own, shared by the aggregates of one argument): their result
is recomputed from the values whose count is positive (`Multiset` below).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental import exact_sum
from mvengine.incremental.driver import extreme
from mvengine.incremental.driver_expressions import NotOnDriver, cast
from mvengine.incremental.zset import MTIME
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
Get = Callable[[str], Column]  # an accumulator column of the old state ("o.") or the batch's partial ("d.")


# A state column's per-row contribution on the driver: (column, values, Arrow's grouped aggregate summing them:
# its name, or its name and options).
Contribution = tuple[str, pa.ChunkedArray, str | tuple[str, Any]]


class Accumulator:
    """An aggregate call `index` of a GROUP BY over `argument` (Spark SQL; None for *), of Spark type
    `result_type`."""

    ordered = False  # whether its partial depends on the order of a batch's rows (by MTIME)

    def __init__(
        self,
        index: int,
        argument: str | None,
        expression: exp.Expression | None,
        result_type: str,
        sum_type: str | None = None,
        multiset: int | None = None,
    ) -> None:
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

    def partial(self, x: Column, w: Column) -> list[Column]:
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

    def digit_columns(self) -> list[tuple[str, bool]]:
        """The state columns that are exact sums (incremental/exact_sum.py) of the argument (of its square, when
        true): the aggregate rule adds each batch's digits to them, beside the partial."""
        return []

    def result(self, c: Get) -> Column:
        raise NotImplementedError

    # -- on the driver ------------------------------------------------------------------------------------------

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
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

    def partial(self, x: Column, w: Column) -> list[Column]:
        return [F.sum(F.when(x.isNotNull(), w).otherwise(0)).alias(self.count)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        return [(F.coalesce(o(self.count), F.lit(0)) + F.coalesce(d(self.count), F.lit(0))).alias(self.count)]

    def result(self, c: Get) -> Column:
        return c(self.count).cast(self.result_type)

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        return [(self.count, pc.if_else(pc.is_valid(x), w, pa.scalar(0, pa.int64())), "sum")]

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        return {self.count: _add_counts(old.column(self.count), partial.column(self.count))}

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        return acc.column(self.count)


class Sum(Count):
    """SUM(x) = s when c > 0, else NULL; s' = s + Σ w·x (in the type Spark sums x in), c as for COUNT(x)."""

    def state_names(self) -> list[str]:
        return [self.count, self.sum]

    @property
    def summed_as(self) -> str:
        """The type Spark sums x in (accumulator() sets it for every SUM and AVG)."""
        assert self.sum_type is not None
        return self.sum_type

    def columns(self) -> list[Column]:
        return [*super().columns(), F.col(self.sum).cast(self.summed_as).alias(self.sum)]

    def partial(self, x: Column, w: Column) -> list[Column]:
        summed = F.sum(x.cast(self.summed_as) * w).cast(self.summed_as)
        return [*super().partial(x, w), summed.alias(self.sum)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        zero = F.lit(0).cast(self.summed_as)
        total = F.coalesce(o(self.sum), zero) + F.coalesce(d(self.sum), zero)
        return [*super().merged(o, d), total.cast(self.summed_as).alias(self.sum)]

    def result(self, c: Get) -> Column:
        return F.when(c(self.count) > 0, c(self.sum)).cast(self.result_type)

    @property
    def low(
        self,
    ) -> str:  # on the driver, an integer sum's partial in two halves: Σ high 32 bits, Σ low 32 bits
        return f"_sl{self.index}"

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        sum_type = schema.field(self.sum).type
        weighted = _weighted(x, w, sum_type)
        if not pa.types.is_integer(sum_type):
            return [*super().partial_arrow(x, w, schema), (self.sum, weighted, "sum")]
        # Arrow's grouped sum wraps around on overflow: halves of 32 bits sum without it, and their total is
        # checked when merged (an overflow goes to Spark, whose error it is).
        return [
            *super().partial_arrow(x, w, schema),
            (self.sum, pc.shift_right(weighted, pa.scalar(32, pa.int64())), "sum"),
            (self.low, pc.bit_wise_and(weighted, pa.scalar(2**32 - 1, pa.int64())), "sum"),
        ]

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        sum_type = schema.field(self.sum).type
        if not pa.types.is_integer(sum_type):
            total = _sum(old.column(self.sum), partial.column(self.sum), sum_type)
        else:
            wide = pa.decimal128(20, 0)  # every int64, and their products with 2^32 and sums within 38 digits
            high, low = (pc.cast(pc.fill_null(partial.column(n), 0), wide) for n in (self.sum, self.low))
            delta = pc.add(pc.multiply(high, pa.scalar(2**32, pa.decimal128(10, 0))), low)
            total = pc.add(pc.cast(pc.fill_null(old.column(self.sum), 0), wide), delta)
            try:
                total = pc.cast(total, sum_type)
            except pa.ArrowInvalid:
                raise NotOnDriver("a sum beyond the range of BIGINT") from None
        return {**super().merged_arrow(old, partial, schema), self.sum: total}

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        total = acc.column(self.sum)
        return pc.if_else(pc.greater(acc.column(self.count), 0), total, pa.scalar(None, total.type))


class Avg(Sum):
    """AVG(x) = s / c when c > 0, else NULL, with s and c as for SUM(x). Of decimals, in Spark's precision
    (decimal_average); of integers, s is exact (in 38 digits: the sum of BIGINTs may pass BIGINT's range, which
    Spark's AVG, summing doubles, allows) and the average its double rounded once, at least as close to the
    true average as Spark's, which rounds each value to a double and each partial sum (floating-point values
    are a FloatSum's)."""

    def result(self, c: Get) -> Column:
        if self.result_type == "double":
            average = c(self.sum).cast("double") / c(self.count).cast("double")
        else:
            average = decimal_average(c(self.sum), c(self.count), self.result_type)
        return F.when(c(self.count) > 0, average)

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        if self.result_type == "double":
            x = pc.cast(x, pa.decimal128(38, 0))
        return super().partial_arrow(x, w, schema)

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        count, total = acc.column(self.count), acc.column(self.sum)
        if self.result_type == "double":
            average = pc.divide(pc.cast(total, pa.float64()), pc.cast(count, pa.float64()))
            return pc.if_else(pc.greater(count, 0), average, pa.scalar(None, pa.float64()))
        precision, scale = (int(n) for n in self.result_type[len("decimal(") : -1].split(","))
        result = pa.decimal128(precision, scale)
        quantum = Decimal(1).scaleb(-scale)
        with localcontext() as exact:
            exact.prec = 80  # far more digits than a decimal(38) quotient needs: one rounding, at the quantum
            values = [
                None if not n or t is None else (t / n).quantize(quantum, ROUND_HALF_UP)
                for t, n in zip(total.to_pylist(), count.to_pylist())
            ]
        try:
            return pa.array(values, result)
        except pa.ArrowInvalid as e:  # beyond the result's precision: Spark's error, in Spark's own words
            raise NotOnDriver(str(e).splitlines()[0]) from None


def decimal_average(total: Column, count: Column, result_type: str) -> Column:
    """total / count rounded half up at the result's scale rs, as Spark's AVG divides (one rounding). Spark's
    `/` on decimals keeps 38 digits and so at least 6 decimals: with total cast to scale rs (rs >= 6), its
    quotient has exactly rs decimals; with rs < 6, the quotient of total / (count·10^k), k = 6 - rs, rounded at 6
    decimals and times 10^k is the quotient rounded at rs. A total too large for scale rs (beyond 10^(38-rs))
    is divided as it is, its quotient rounded at 6 decimals first (a rare double rounding)."""
    scale = int(result_type.split(",")[1].rstrip(")"))
    if scale >= 6:
        exact = total.cast(f"decimal(38,{scale})") / count.cast("decimal(20,0)")
        fits = F.abs(total) < F.lit(str(10 ** (38 - scale))).cast("decimal(38,0)")
        # (each branch cast first: CASE WHEN of two decimal types would round both to the wider's 6 decimals)
        return F.when(fits, exact.cast(result_type)).otherwise(
            (total / count.cast("decimal(20,0)")).cast(result_type)
        )
    shift = 10 ** (6 - scale)
    quotient = total.cast("decimal(38,6)") / (count * F.lit(shift)).cast("decimal(38,0)")
    return (quotient * F.lit(shift).cast(f"decimal({len(str(shift))},0)")).cast(result_type)


class FloatSum(Count):
    """SUM(x) and AVG(x) of floating-point x: c as for COUNT(x); s, the exact sum of the finite x
    (incremental/exact_sum.py: a map of digits, so deleting a value takes away exactly what inserting it added,
    and 1.5 + 1e17 - 1e17 is 1.5); and the counts of NaN, +inf and -inf apart (a NaN, or both infinities, make
    the sum NaN; one infinity makes it that infinity; a finite sum beyond the double range counts as an
    infinity of its sign: all as Spark sums). SUM = s rounded (within an ulp) when c > 0, else NULL;
    AVG = SUM / c. Spark's own sum rounds at every row, in the order it reads them, and is no closer."""

    def __init__(self, average: bool, *args: Any, **kwargs: Any) -> None:  # AVG, not SUM
        super().__init__(*args, **kwargs)
        self.average = average

    @property
    def special(self) -> list[str]:  # counts of NaN, +inf, -inf
        return [f"_nan{self.index}", f"_pinf{self.index}", f"_ninf{self.index}"]

    def state_names(self) -> list[str]:
        return [self.count, self.sum, *self.special]

    def digit_columns(self) -> list[tuple[str, bool]]:
        return [(self.sum, False)]

    def columns(self) -> list[Column]:
        return [
            *super().columns(),
            F.col(self.sum).cast(exact_sum.MAP_TYPE).alias(self.sum),
            *[F.col(n).cast("long").alias(n) for n in self.special],
        ]

    def partial(self, x: Column, w: Column) -> list[Column]:
        v = x.cast("double")
        return [
            *super().partial(x, w),
            *[F.sum(F.when(test, w).otherwise(0)).alias(n) for n, test in zip(self.special, _specials(v))],
        ]

    def merged(self, o: Get, d: Get) -> list[Column]:
        counts = [(F.coalesce(o(n), F.lit(0)) + F.coalesce(d(n), F.lit(0))).alias(n) for n in self.special]
        return [*super().merged(o, d), exact_sum.merged(o(self.sum), d(self.sum)).alias(self.sum), *counts]

    def result(self, c: Get) -> Column:
        def combined(finite: Column) -> Column:  # a finite sum past the double range counts as an infinity
            nan, pinf, ninf = (c(n) for n in self.special)
            pinf, ninf = (
                pinf + F.when(finite == F.lit(float("inf")), 1).otherwise(0),
                ninf + F.when(finite == F.lit(float("-inf")), 1).otherwise(0),
            )
            return (
                F.when((nan > 0) | ((pinf > 0) & (ninf > 0)), F.lit(float("nan")))
                .when(pinf > 0, F.lit(float("inf")))
                .when(ninf > 0, F.lit(float("-inf")))
                .otherwise(finite)
            )

        total = exact_sum.bind(exact_sum.value(c(self.sum))["hi"], combined)
        if self.average:
            total = total / c(self.count).cast("double")
        return F.when(c(self.count) > 0, total).cast(self.result_type)

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        v = pc.cast(x, pa.float64(), safe=False)
        zero = pa.scalar(0, pa.int64())
        return [
            *super().partial_arrow(x, w, schema),
            *[
                (n, pc.if_else(pc.fill_null(test, False), w, zero), "sum")
                for n, test in zip(self.special, _specials_arrow(v))
            ],
        ]

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        counts = {n: _add_counts(old.column(n), partial.column(n)) for n in self.special}
        return {
            **super().merged_arrow(old, partial, schema),
            **counts,
            self.sum: exact_sum.merged_np(old.column(self.sum), partial.column(self.sum)),
        }

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        nan, pinf, ninf = (acc.column(n).to_numpy(zero_copy_only=False) for n in self.special)
        total, _ = exact_sum.value_np(acc.column(self.sum))
        pinf, ninf = pinf + (total == np.inf), ninf + (total == -np.inf)  # a finite sum past the range
        with np.errstate(invalid="ignore", divide="ignore"):
            total = np.where(
                (nan > 0) | ((pinf > 0) & (ninf > 0)),
                np.nan,
                np.where(pinf > 0, np.inf, np.where(ninf > 0, -np.inf, total)),
            )
            count = acc.column(self.count).to_numpy(zero_copy_only=False)
            if self.average:
                total = total / count
        return pa.array(total, pa.float64(), mask=~(count > 0))


def _specials(v: Column) -> list[Column]:
    """Whether a double is NaN, +inf, -inf (Spark)."""
    return [F.isnan(v), v == F.lit(float("inf")), v == F.lit(float("-inf"))]


def _specials_arrow(v: pa.ChunkedArray) -> list[pa.ChunkedArray]:
    return [pc.is_nan(v), pc.equal(v, pa.scalar(float("inf"))), pc.equal(v, pa.scalar(float("-inf")))]


class Extreme(Accumulator):
    """MIN(x) or MAX(x) over an append-only input: v' = least(v, min of the batch's inserted x) (greatest for
    MAX); rows never go, so the extreme never has to be found again."""

    def __init__(self, kind: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind

    def state_names(self) -> list[str]:
        return [self.value]

    def columns(self) -> list[Column]:
        return [F.lit(None).cast(self.result_type).alias(self.value)]

    def partial(self, x: Column, w: Column) -> list[Column]:
        pick = F.min if self.kind == "min" else F.max
        return [pick(F.when(w > 0, x)).alias(self.value)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        pick = F.least if self.kind == "min" else F.greatest
        return [pick(o(self.value), d(self.value)).alias(self.value)]

    def result(self, c: Get) -> Column:
        return c(self.value).cast(self.result_type)

    @property
    def nan(self) -> str:  # a batch's partial: whether a NaN came (Arrow's MAX skips NaN, Spark's is NaN)
        return f"_nan{self.index}"

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        assert x is not None  # MIN and MAX take an argument
        inserted = pc.if_else(pc.greater(w, 0), x, pa.scalar(None, x.type))
        partial: list[Contribution] = [(self.value, inserted, self.kind)]
        if self.kind == "max" and pa.types.is_floating(x.type):
            partial.append((self.nan, pc.fill_null(pc.is_nan(inserted), False), "any"))
        return partial

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        value = extreme(self.kind, old.column(self.value), partial.column(self.value))
        if self.nan in partial.column_names:
            value = pc.if_else(partial.column(self.nan), pa.scalar(float("nan"), value.type), value)
        return {self.value: value}

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        return acc.column(self.value)


class Multiset(Accumulator):
    """An aggregate of the values in its argument's multiset (value → count; a value is present while its count
    is positive): MIN and MAX over an input that deletes (the least/greatest present value), COUNT(DISTINCT x)
    (how many are present; 0 for none), SUM(DISTINCT x) (their sum), COLLECT_LIST/ARRAY_AGG(x) (every present
    non-NULL value as often as its count, in ascending order — Spark's own order is that of the rows it happened
    to read; [] for none). The result is recomputed per affected group from the multiset (aggregate.py) and kept
    as v."""

    def __init__(self, how: str, *args: Any, **kwargs: Any) -> None:
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

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        return acc.column(self.value)


class Decisive(Count):
    """BOOL_AND(x) (EVERY) and BOOL_OR(x) (SOME, ANY): c as for COUNT(x), and f, the count of the x that decide
    (false for BOOL_AND, true for BOOL_OR): f' = f + Σ w·[x = decider]. The result is NULL when c = 0, else
    f = 0 for BOOL_AND and f > 0 for BOOL_OR."""

    def __init__(self, kind: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decider = kind == "bool_or"  # the value that decides the result

    @property
    def deciding(self) -> str:
        return f"_f{self.index}"

    def state_names(self) -> list[str]:
        return [self.count, self.deciding]

    def columns(self) -> list[Column]:
        return [*super().columns(), F.col(self.deciding).cast("long").alias(self.deciding)]

    def partial(self, x: Column, w: Column) -> list[Column]:
        decides = F.coalesce(x == F.lit(self.decider), F.lit(False))
        return [*super().partial(x, w), F.sum(F.when(decides, w).otherwise(0)).alias(self.deciding)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        total = F.coalesce(o(self.deciding), F.lit(0)) + F.coalesce(d(self.deciding), F.lit(0))
        return [*super().merged(o, d), total.alias(self.deciding)]

    def result(self, c: Get) -> Column:
        decided = (c(self.deciding) > 0) if self.decider else (c(self.deciding) == 0)
        return F.when(c(self.count) > 0, decided)

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        decides = pc.fill_null(pc.equal(x, pa.scalar(self.decider)), False)
        return [
            *super().partial_arrow(x, w, schema),
            (self.deciding, pc.if_else(decides, w, pa.scalar(0, pa.int64())), "sum"),
        ]

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        return {
            **super().merged_arrow(old, partial, schema),
            self.deciding: _add_counts(old.column(self.deciding), partial.column(self.deciding)),
        }

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        f = acc.column(self.deciding)
        decided = pc.greater(f, 0) if self.decider else pc.equal(f, 0)
        return pc.if_else(pc.greater(acc.column(self.count), 0), decided, pa.scalar(None, pa.bool_()))


class Moments(Count):
    """VAR_POP, VAR_SAMP (VARIANCE), STDDEV_POP, STDDEV_SAMP (STDDEV, STD) of x: c as for COUNT(x); s = Σ w·x and
    q = Σ w·x² over the finite x, both exact (incremental/exact_sum.py: deletions take away exactly what inserts
    added, and squares beyond the double range are still exact); f, the count of NaN and ±inf among x (they
    make the result NaN, as in Spark). With m = q - s²/c, the sum of squared deviations, computed from the exact
    sums in integers (exact_sum.moments_result, one Python function for both engines): VAR_POP = m/c (NULL when
    c = 0), VAR_SAMP = m/(c-1) (NULL when c ≤ 1), STDDEV_* their square roots, each rounded once. So the
    result is the exact variance of the rows, rounded: Spark's running update rounds at every row, and is no
    closer."""

    def __init__(self, kind: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind

    @property
    def squares(self) -> str:
        return f"_q{self.index}"

    @property
    def nonfinite(self) -> str:
        return f"_f{self.index}"

    def state_names(self) -> list[str]:
        return [self.count, self.sum, self.squares, self.nonfinite]

    def digit_columns(self) -> list[tuple[str, bool]]:
        return [(self.sum, False), (self.squares, True)]

    def columns(self) -> list[Column]:
        return [
            *super().columns(),
            F.col(self.sum).cast(exact_sum.MAP_TYPE).alias(self.sum),
            F.col(self.squares).cast(exact_sum.MAP_TYPE).alias(self.squares),
            F.col(self.nonfinite).cast("long").alias(self.nonfinite),
        ]

    def partial(self, x: Column, w: Column) -> list[Column]:
        v = x.cast("double")
        odd = F.isnan(v) | (F.abs(v) == F.lit(float("inf")))
        return [*super().partial(x, w), F.sum(F.when(odd, w).otherwise(0)).alias(self.nonfinite)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        total = F.coalesce(o(self.nonfinite), F.lit(0)) + F.coalesce(d(self.nonfinite), F.lit(0))
        return [
            *super().merged(o, d),
            exact_sum.merged(o(self.sum), d(self.sum)).alias(self.sum),
            exact_sum.merged(o(self.squares), d(self.squares)).alias(self.squares),
            total.alias(self.nonfinite),
        ]

    def result(self, c: Get) -> Column:
        moments = _moments_udf()
        return moments(F.lit(self.kind), c(self.count), c(self.nonfinite), c(self.sum), c(self.squares))

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        v = pc.cast(x, pa.float64(), safe=False)
        odd = pc.fill_null(pc.or_(pc.is_nan(v), pc.is_inf(v)), False)
        return [
            *super().partial_arrow(x, w, schema),
            (self.nonfinite, pc.if_else(odd, w, pa.scalar(0, pa.int64())), "sum"),
        ]

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        return {
            **super().merged_arrow(old, partial, schema),
            self.sum: exact_sum.merged_np(old.column(self.sum), partial.column(self.sum)),
            self.squares: exact_sum.merged_np(old.column(self.squares), partial.column(self.squares)),
            self.nonfinite: _add_counts(old.column(self.nonfinite), partial.column(self.nonfinite)),
        }

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        columns = [acc.column(n).to_pylist() for n in (self.count, self.nonfinite, self.sum, self.squares)]
        return pa.array(
            [
                exact_sum.moments_result(self.kind, n, f, dict(s or ()), dict(q or ()))
                for n, f, s, q in zip(*columns)
            ],
            pa.float64(),
        )


@functools.cache
def _moments_udf() -> Callable[..., Column]:
    """exact_sum.moments_result as a Spark UDF (Arrow-batched): the driver's very function, in Spark."""
    return F.udf(exact_sum.moments_result, "double", useArrow=True)


class Arrival(Accumulator):
    """FIRST(x) and LAST(x) over an append-only input (FIRST_VALUE, ANY_VALUE, LAST_VALUE alike), by the order
    rows arrived in, i.e. their commits' times (MTIME): v is the value of the group's first (last) row, or its
    first (last) non-NULL value with IGNORE NULLS. A batch's partial is the value of its first (last) row; FIRST
    keeps v once the group has a row (a non-NULL v, ignoring NULLs), LAST takes the batch's (a non-NULL one,
    ignoring NULLs). Rows of one commit tie, and any of them may be taken, as Spark's FIRST takes any row."""

    ordered = True  # the driver sorts a batch's rows by MTIME before grouping

    def __init__(self, kind: str, ignore_nulls: bool, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.first, self.ignore_nulls = kind == "first", ignore_nulls

    def state_names(self) -> list[str]:
        return [self.value]

    def columns(self) -> list[Column]:
        return [F.lit(None).cast(self.result_type).alias(self.value)]

    def partial(self, x: Column, w: Column) -> list[Column]:
        order = F.when(x.isNotNull(), F.col(MTIME)) if self.ignore_nulls else F.col(MTIME)
        return [(F.min_by if self.first else F.max_by)(x, order).alias(self.value)]

    def merged(self, o: Get, d: Get) -> list[Column]:
        kept, batch = (o, d) if self.first else (d, o)  # the value that wins, and the one it falls back to
        if self.ignore_nulls:
            return [F.coalesce(kept(self.value), batch(self.value)).alias(self.value)]
        return [
            F.when(F.coalesce(kept(COUNT), F.lit(0)) > 0, kept(self.value))
            .otherwise(batch(self.value))
            .alias(self.value)
        ]

    def result(self, c: Get) -> Column:
        return c(self.value).cast(self.result_type)

    def partial_arrow(
        self, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
    ) -> list[Contribution]:
        how = "first" if self.first else "last"
        return [(self.value, x, (how, pc.ScalarAggregateOptions(skip_nulls=self.ignore_nulls)))]

    def merged_arrow(self, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        kept, batch = (old, partial) if self.first else (partial, old)
        if self.ignore_nulls:
            return {self.value: pc.coalesce(kept.column(self.value), batch.column(self.value))}
        has_rows = pc.fill_null(pc.greater(kept.column(COUNT), 0), False)
        return {self.value: pc.if_else(has_rows, kept.column(self.value), batch.column(self.value))}

    def result_arrow(self, acc: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
        return acc.column(self.value)


# How each kind of accumulator (plan/operators/aggregate.py, ACCUMULATOR_KINDS) is built for a call: from the
# normalized call and the arguments every accumulator takes.
BUILDERS: dict[str, Callable[[AggregateCall, dict[str, Any]], Accumulator]] = {
    "count_star": lambda call, common: CountStar(**common),
    "count": lambda call, common: Count(**common),
    "sum": lambda call, common: Sum(**common),
    "avg": lambda call, common: Avg(**common),
    "avg_of_integers": lambda call, common: Avg(**common),
    "float_sum": lambda call, common: FloatSum(False, **common),
    "float_avg": lambda call, common: FloatSum(True, **common),
    "bool_and": lambda call, common: Decisive(call.kind, **common),
    "bool_or": lambda call, common: Decisive(call.kind, **common),
    "moments": lambda call, common: Moments(call.kind, **common),
    "first": lambda call, common: Arrival(call.kind, call.ignore_nulls, **common),
    "last": lambda call, common: Arrival(call.kind, call.ignore_nulls, **common),
    "min": lambda call, common: Extreme(call.kind, **common),
    "max": lambda call, common: Extreme(call.kind, **common),
    "min_max_multiset": lambda call, common: Multiset(call.kind, **common),
    "distinct": lambda call, common: Multiset(call.kind, **common),
    "list": lambda call, common: Multiset(call.kind, **common),
}


def accumulator(
    index: int, call: exp.Expression, result_type: str, append_only: bool, multisets: list[str]
) -> Accumulator:
    """The accumulator of aggregate call `index`; an argument that needs a multiset is added to `multisets` (one
    per distinct argument)."""
    normalized = incremental_call(call)
    kind, arg_expr = accumulator_kind(normalized, append_only), normalized.argument
    argument = None if arg_expr is None else arg_expr.sql("spark")
    common: dict[str, Any] = {
        "index": index,
        "argument": argument,
        "result_type": result_type,
        "expression": arg_expr,
    }
    if normalized.kind in ("sum", "avg"):
        assert arg_expr is not None  # SUM and AVG take an argument
        summed = aggregate_type(exp.Sum(this=arg_expr.copy()), arg_expr.type)
        assert summed is not None, arg_expr  # the binder typed the view
        sum_type = type_name(summed)
        # (an average of integers is summed exactly, beyond BIGINT's range)
        common["sum_type"] = (
            INTEGER_AVERAGE_SUM if normalized.kind == "avg" and sum_type == "bigint" else sum_type
        )
    if ACCUMULATOR_KINDS[kind].multiset:  # the values themselves, in a multiset per argument
        assert argument is not None  # COUNT(DISTINCT *) is no SQL
        if argument not in multisets:
            multisets.append(argument)
        common["multiset"] = multisets.index(argument)
    return BUILDERS[kind](normalized, common)


# -- Arrow arithmetic, as Spark does it ------------------------------------------------------------------------


def _weighted(x: pa.ChunkedArray, weight: pa.ChunkedArray, sum_type: pa.DataType) -> pa.ChunkedArray:
    """x * weight in the type of the running sum (exact, or NotOnDriver)."""
    if pa.types.is_decimal(sum_type):
        if not pa.types.is_decimal(x.type) or pc.max(pc.abs(weight)).as_py() not in (None, 1):
            raise NotOnDriver("a decimal sum over rows of several copies")
        return pc.if_else(pc.greater(weight, 0), x, pc.negate(x))
    try:
        return pc.multiply_checked(cast(x, sum_type), cast(weight, sum_type))
    except pa.ArrowInvalid:
        raise NotOnDriver("a sum beyond the range of BIGINT") from None


def _sum(old: pa.ChunkedArray, delta: pa.ChunkedArray, sum_type: pa.DataType) -> pa.ChunkedArray:
    """old + delta (NULL as 0) in a decimal sum's type: added in 60 digits (Arrow widens a sum of two
    decimal(38)s past what decimal128 holds), then brought back, or NotOnDriver where it overflows (Spark's
    error, which a batch in Spark gives)."""
    wide = pa.decimal256(60, sum_type.scale)
    zero = pa.scalar(0, wide)
    total = pc.add(pc.fill_null(pc.cast(old, wide), zero), pc.fill_null(pc.cast(delta, wide), zero))
    try:
        return pc.cast(total, sum_type)
    except pa.ArrowInvalid:
        raise NotOnDriver(f"a sum beyond the range of {sum_type}") from None
