"""The accumulators' arithmetic in both engines' forms, side by side: each kind of partial, merge and result that
incremental/accumulators.py declares, and the two steps of a GROUP BY's rule (incremental/aggregate.py) that
compute with them: `partial` (what a batch adds to each affected group's accumulators) and `merged` (the
accumulators before and after the batch, and the aggregates' results from each). The engine operations
`accumulate` and `accumulators` call them (incremental/engine.py).

Both forms keep the same state table: a view's batches may take either. On the driver its schema, read from
the state, gives the types.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mvengine.incremental import exact_sum
from mvengine.incremental.accumulators import COUNT, Accumulator, StateColumn
from mvengine.incremental.batch import Batch
from mvengine.incremental.driver import DriverBatch, aggregated, align, extreme, normalized, same_values
from mvengine.incremental.driver_expressions import NotOnDriver, cast
from mvengine.incremental.exact_sum import arrow_udf
from mvengine.incremental.zset import MTIME, WEIGHT, null_safe_equal, quote

OLD_EXISTS = "_old_exists"  # whether the group had a row before the batch
SAME = "_same"  # whether each aggregate's result is the same before and after (as Spark compares rows)


def old_result(i: int) -> str:
    return f"_old{i}"


def new_result(i: int) -> str:
    return f"_new{i}"


def state_columns(aggs: Sequence[Accumulator]) -> list[str]:
    """The accumulator table's columns after the groups."""
    return [COUNT, *[c for a in aggs for c in a.state_names()]]


# -- Spark -----------------------------------------------------------------------------------------------------

Get = Callable[[str], Column]  # a column of the old accumulators ("o."), the partial ("d.") or the new ones

_TESTS: dict[str, Callable[[Column], Column]] = {  # which rows a ("rows", test) partial counts
    "not_null": lambda x: x.isNotNull(),
    "nan": lambda x: F.isnan(x.cast("double")),
    "pos_inf": lambda x: x.cast("double") == F.lit(float("inf")),
    "neg_inf": lambda x: x.cast("double") == F.lit(float("-inf")),
    "nonfinite": lambda x: F.isnan(x.cast("double")) | (F.abs(x.cast("double")) == F.lit(float("inf"))),
    "true": lambda x: F.coalesce(x == F.lit(True), F.lit(False)),
    "false": lambda x: F.coalesce(x == F.lit(False), F.lit(False)),
}


def _partial(c: StateColumn, x: Column, w: Column) -> Column:
    assert c.partial is not None  # (multiset values and exact sums are computed apart)
    how, *parameters = c.partial
    if how == "rows":
        return F.sum(F.when(_TESTS[str(parameters[0])](x), w).otherwise(0))
    if how == "sum":
        t = str(parameters[0])
        if t.startswith("decimal"):  # rows of weight ±1 (partial_in_spark): see _unit_weights
            return F.sum(F.when(w > 0, x.cast(t)).otherwise(-x.cast(t))).cast(t)
        return F.sum(x.cast(t) * w).cast(t)
    if how == "inserted":
        return (F.min if parameters[0] == "min" else F.max)(F.when(w > 0, x))
    first, ignore_nulls = parameters[0] == "first", parameters[1]
    order = F.when(x.isNotNull(), F.col(MTIME)) if ignore_nulls else F.col(MTIME)
    return (F.min_by if first else F.max_by)(x, order)


def _merge(c: StateColumn, o: Get, d: Get) -> Column:
    old, partial = o(c.name), d(c.name)
    if c.merge == "add" and _scale_lost(c.sql_type):
        return arrow_udf(_decimal_added, c.sql_type)(old, partial)
    if c.merge == "add":
        zero = F.lit(0).cast(c.sql_type)
        return (F.coalesce(old, zero) + F.coalesce(partial, zero)).cast(c.sql_type)
    if c.merge == "exact_add":
        return exact_sum.merged(old, partial)
    if c.merge in ("least", "greatest"):
        return (F.least if c.merge == "least" else F.greatest)(old, partial)
    if c.merge == "first_valid":
        return F.coalesce(old, partial)
    if c.merge == "last_valid":
        return F.coalesce(partial, old)
    kept, other, rows = (old, partial, o(COUNT)) if c.merge == "first" else (partial, old, d(COUNT))
    return F.when(F.coalesce(rows, F.lit(0)) > 0, kept).otherwise(other)


def _scale_lost(sql_type: str) -> bool:
    """Whether Spark's + of two values of a DECIMAL(38, s) type with s > 6 rounds (Spark keeps 38 digits and at
    least 6 places of a sum that needs 39: it rounds a place away)."""
    return sql_type.startswith("decimal(38,") and int(sql_type.split(",")[1].rstrip(")")) > 6


def _decimal_added(a: pa.Array, b: pa.Array) -> pa.Array:  # (Spark's Arrow UDFs take these type hints only)
    """The driver's exact decimal +, for Spark (an Arrow UDF)."""
    try:
        return _decimal_sum(a, b, a.type)
    except NotOnDriver as e:
        raise ArithmeticError(str(e)) from None


def _unit_weights(rows: DataFrame) -> DataFrame:
    """Each row of weight w as |w| rows of weight ±1. Spark keeps only 6 places of a decimal's product with a
    weight (its product of a DECIMAL(p, s) and a BIGINT needs p + 21 digits, and beyond 38 it rounds to 6
    places), while a sum of ±x keeps them all."""
    w = F.col(WEIGHT)
    unit = F.explode(F.array_repeat(F.signum(w).cast("long"), F.abs(w).cast("int")))
    return rows.select(*[quote(c) for c in rows.columns if c != WEIGHT], unit.alias(WEIGHT))


def _result(a: Accumulator, c: Get) -> Column:
    how, *p = a.result
    if how in ("count", "value"):
        return c(str(p[0])).cast(a.result_type)
    if how == "sum":
        return F.when(c(str(p[0])) > 0, c(str(p[1]))).cast(a.result_type)
    if how == "average":
        count, total = c(str(p[0])), c(str(p[1]))
        if a.result_type == "double":
            average = total.cast("double") / count.cast("double")
        else:
            average = decimal_average(total, count, a.result_type)
        return F.when(count > 0, average)
    if how == "decided":
        decided = (c(str(p[1])) > 0) if p[2] else (c(str(p[1])) == 0)
        return F.when(c(str(p[0])) > 0, decided)
    if how == "moments":
        return _moments_udf()(F.lit(p[0]), *[c(str(n)) for n in p[1:]])
    return _float_sum(a, c)


def _float_sum(a: Accumulator, c: Get) -> Column:
    count, total, nan, pinf, ninf = (c(str(n)) for n in a.result[1:6])

    def combined(finite: Column) -> Column:  # a finite sum past the double range counts as an infinity
        plus = pinf + F.when(finite == F.lit(float("inf")), 1).otherwise(0)
        minus = ninf + F.when(finite == F.lit(float("-inf")), 1).otherwise(0)
        return (
            F.when((nan > 0) | ((plus > 0) & (minus > 0)), F.lit(float("nan")))
            .when(plus > 0, F.lit(float("inf")))
            .when(minus > 0, F.lit(float("-inf")))
            .otherwise(finite)
        )

    value = exact_sum.bind(exact_sum.value(total), combined)
    if a.result[6]:  # the average
        value = value / count.cast("double")
    return F.when(count > 0, value).cast(a.result_type)


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


@functools.cache
def _moments_udf() -> Callable[..., Column]:
    """exact_sum.moments_result as a Spark UDF (Arrow-batched): the driver's very function, in Spark."""
    return F.udf(exact_sum.moments_result, "double", useArrow=True)


def partial_in_spark(
    rows: DataFrame, groups: Sequence[str], aggs: Sequence[Accumulator], arguments: Mapping[str, str]
) -> DataFrame:
    if any(
        c.partial[0] == "sum" and c.sql_type.startswith("decimal")
        for a in aggs
        for c in a.columns
        if c.partial
    ):
        rows = _unit_weights(rows)
    w = F.col(WEIGHT)
    columns = [F.sum(w).alias(COUNT), F.max(MTIME).alias(MTIME)]
    for a in aggs:
        x = F.col(arguments[a.argument]) if a.argument is not None else F.lit(1)  # COUNT(*): every row
        columns += [
            _partial(c, x, w).alias(c.name) for c in a.columns if c.partial and c.partial[0] != "exact"
        ]
    grouped = rows.groupBy(*[quote(g) for g in groups]) if groups else rows.groupBy()
    partial = grouped.agg(*columns)
    exact = [(a, column, square) for a in aggs for column, square in a.digit_columns()]
    return _with_exact_sums(rows, partial, groups, exact, arguments) if exact else partial


def _with_exact_sums(
    rows: DataFrame,
    partial: DataFrame,
    groups: Sequence[str],
    exact: list[tuple[Accumulator, str, bool]],
    arguments: Mapping[str, str],
) -> DataFrame:
    """The partial with, per group, the batch's exact sums (maps of digits, incremental/exact_sum.py) for each
    (accumulator, state column, of squares) of `exact`: every row's digits times its weight, summed per slot."""
    frame, tagged = rows, []
    for i, (a, _column, square) in enumerate(exact):
        assert a.argument is not None  # sums take an argument
        frame = exact_sum.with_digits(frame, arguments[a.argument], f"_dg{i}", square=square)
        tagged.append(F.transform(F.col(f"_dg{i}"), _tagged(i)))
    keys = [quote(g) for g in groups]
    digits = frame.select(*keys, F.explode(F.concat(*tagged)).alias("_e")).select(
        *keys, "_e.tag", "_e.slot", "_e.digit"
    )
    sums = digits.groupBy(*keys, "tag", "slot").agg(F.sum("digit").alias("digit")).where(F.col("digit") != 0)
    maps = sums.groupBy(*keys).agg(
        *[
            F.map_from_entries(F.collect_list(F.when(F.col("tag") == i, F.struct("slot", "digit")))).alias(
                column
            )
            for i, (_, column, _) in enumerate(exact)
        ]
    )
    p, m = partial.alias("p"), maps.alias("m")
    on = null_safe_equal(p, m, list(groups)) if groups else F.lit(True)
    return p.join(m, on, "left").select("p.*", *[F.col(f"m.{quote(column)}") for _, column, _ in exact])


def _tagged(tag: int) -> Callable[[Column], Column]:
    """A digit (slot, digit) as (tag, slot, digit times the row's weight). A function of one parameter: Spark's
    transform() takes a lambda of two as (element, position)."""
    return lambda e: F.struct(
        F.lit(tag).alias("tag"), e["slot"].alias("slot"), (e["digit"] * F.col(WEIGHT)).alias("digit")
    )


def merged_in_spark(
    partial: DataFrame,
    batch: Batch,
    table: str,
    groups: Sequence[str],
    aggs: Sequence[Accumulator],
    values: Sequence[DataFrame],
) -> DataFrame:
    groups = list(groups)
    template = partial.select(
        *[quote(g) for g in groups],
        F.col(COUNT).cast("long").alias(COUNT),
        *[F.lit(None).cast(c.sql_type).alias(c.name) for a in aggs for c in a.columns],
    ).limit(0)
    old = batch.state.read_candidates(table, template, partial, groups).alias("o")
    d = partial.alias("d")
    joined = d.join(old, null_safe_equal(d, old, groups), "left")  # every affected group has a row in d

    def o(c: str) -> Column:
        return F.col(f"o.{quote(c)}")

    def dd(c: str) -> Column:
        return F.col(f"d.{quote(c)}")

    keys = [F.coalesce(dd(g), o(g)).alias(g) for g in groups]
    merged = [_merge(c, o, dd).alias(c.name) for a in aggs for c in a.columns if c.merge is not None]
    new_count = F.coalesce(o(COUNT), F.lit(0)) + F.coalesce(dd(COUNT), F.lit(0))
    old_columns = [*keys, o(COUNT).alias(COUNT), *[o(c).alias(c) for a in aggs for c in a.state_names()]]
    new = joined.select(
        F.struct(*keys, new_count.alias(COUNT), *merged).alias("new"),
        F.struct(*old_columns).alias("old"),
        o(COUNT).isNotNull().alias(OLD_EXISTS),  # grouped: rows are deleted at zero; global: it always exists
        dd(MTIME).alias(MTIME),
    ).select("new.*", "old", OLD_EXISTS, MTIME)
    for v in values:  # the values of the aggregates over a multiset, NULL for a group without values
        n, found = new.alias("n"), v.alias("v")
        held = [a for a in aggs if a.how is not None and a.value in v.columns]
        new = n.join(found, null_safe_equal(n, found, groups), "left").select(
            "n.*", *[_or_when_none(a, F.col(f"v.{quote(a.value)}")).alias(a.value) for a in held]
        )
    olds = [_result(a, lambda c: F.col(f"old.{quote(c)}")).alias(old_result(i)) for i, a in enumerate(aggs)]
    news = [_result(a, lambda c: F.col(quote(c))).alias(new_result(i)) for i, a in enumerate(aggs)]
    same = F.struct(*[F.col(old_result(i)) for i in range(len(aggs))]).eqNullSafe(
        F.struct(*[F.col(new_result(i)) for i in range(len(aggs))])
    )
    # The results are columns of their own before they are compared: each use of an expression would otherwise
    # evaluate it again (an exact sum's value, a variance, are not cheap).
    new = new.select(*[quote(c) for c in [*groups, *state_columns(aggs)]], OLD_EXISTS, MTIME, *olds, *news)
    return new.withColumn(SAME, same)


def _or_when_none(a: Accumulator, value: Column) -> Column:
    """A multiset aggregate's value in its result type, or its value over no values: NULL, 0 for a count, []
    for a list."""
    value = value.cast(a.result_type)
    if a.how == "list":
        return F.coalesce(value, F.array().cast(a.result_type))
    return F.coalesce(value, F.lit(0).cast(a.result_type)) if a.how == "count" else value


# -- on the driver ---------------------------------------------------------------------------------------------

Contribution = tuple[pa.ChunkedArray, Any]  # a partial's column: per-row values, Arrow's aggregate of them

_ARROW_TESTS: dict[str, Callable[[pa.ChunkedArray], pa.ChunkedArray]] = {
    "not_null": pc.is_valid,
    "nan": lambda x: pc.is_nan(pc.cast(x, pa.float64(), safe=False)),
    "pos_inf": lambda x: pc.equal(pc.cast(x, pa.float64(), safe=False), pa.scalar(float("inf"))),
    "neg_inf": lambda x: pc.equal(pc.cast(x, pa.float64(), safe=False), pa.scalar(float("-inf"))),
    "nonfinite": lambda x: pc.or_(
        pc.is_nan(pc.cast(x, pa.float64(), safe=False)), pc.is_inf(pc.cast(x, pa.float64(), safe=False))
    ),
    "true": lambda x: pc.equal(x, pa.scalar(True)),
    "false": lambda x: pc.equal(x, pa.scalar(False)),
}


def _contribution(
    c: StateColumn, x: pa.ChunkedArray | None, w: pa.ChunkedArray, schema: pa.Schema
) -> Contribution:
    """What each row adds to state column `c`: (values, Arrow's grouped aggregate: its name, or its name and
    options)."""
    assert c.partial is not None and x is not None  # (COUNT(*) keeps no column)
    how, *parameters = c.partial
    if how == "rows":
        counted = pc.fill_null(_ARROW_TESTS[str(parameters[0])](x), False)
        return pc.if_else(counted, w, pa.scalar(0, pa.int64())), "sum"
    if how == "inserted":
        return pc.if_else(pc.greater(w, 0), x, pa.scalar(None, x.type)), parameters[0]
    if how == "arrival":
        options = pc.ScalarAggregateOptions(skip_nulls=bool(parameters[1]))
        return x, ("first" if parameters[0] == "first" else "last", options)
    sum_type = schema.field(c.name).type
    if pa.types.is_decimal(sum_type) and not pa.types.is_decimal(x.type):  # AVG of integers, summed exactly
        x = pc.cast(x, pa.decimal128(38, 0))
    return _weighted(x, w, sum_type), "sum"  # (aggregated's sums are checked)


def _weighted(x: pa.ChunkedArray, weight: pa.ChunkedArray, sum_type: pa.DataType) -> pa.ChunkedArray:
    """x * weight in the type of the running sum (exact, or NotOnDriver)."""
    if pa.types.is_decimal(sum_type):
        if pc.max(pc.abs(weight)).as_py() not in (None, 1):
            raise NotOnDriver("a decimal sum over rows of several copies")
        return pc.if_else(pc.greater(weight, 0), x, pc.negate(x))
    try:
        return pc.multiply_checked(cast(x, sum_type), cast(weight, sum_type))
    except pa.ArrowInvalid:
        raise NotOnDriver("a sum beyond the range of BIGINT") from None


def _merge_arrow(c: StateColumn, old: pa.Table, partial: pa.Table, schema: pa.Schema) -> pa.ChunkedArray:
    o, d = old.column(c.name), partial.column(c.name)
    if c.merge == "add":
        t = schema.field(c.name).type
        if pa.types.is_decimal(t):
            return _decimal_sum(o, d, t)
        try:
            return pc.add_checked(pc.fill_null(o, 0), pc.fill_null(d, 0))
        except pa.ArrowInvalid:
            raise NotOnDriver("a sum beyond the range of BIGINT") from None
    if c.merge == "exact_add":
        return exact_sum.merged_np(o, d)
    if c.merge in ("least", "greatest"):
        return extreme("min" if c.merge == "least" else "max", o, d)
    if c.merge == "first_valid":
        return pc.coalesce(o, d)
    if c.merge == "last_valid":
        return pc.coalesce(d, o)
    kept, other, rows = (o, d, old) if c.merge == "first" else (d, o, partial)
    return pc.if_else(pc.fill_null(pc.greater(rows.column(COUNT), 0), False), kept, other)


def _decimal_sum(old: pa.ChunkedArray, delta: pa.ChunkedArray, sum_type: pa.DataType) -> pa.ChunkedArray:
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


def _result_arrow(a: Accumulator, acc: pa.Table) -> pa.ChunkedArray:
    """The aggregate's output from its accumulators (the columns of `acc`, NULL where the group had none)."""
    how, *p = a.result
    if how in ("count", "value"):
        return acc.column(str(p[0]))
    if how == "moments":
        columns = [acc.column(str(n)).to_pylist() for n in p[1:]]
        return pa.array(
            [
                exact_sum.moments_result(str(p[0]), n, f, dict(s or ()), dict(q or ()))
                for n, f, s, q in zip(*columns)
            ],
            pa.float64(),
        )
    count = acc.column(str(p[0]))
    counted = pc.greater(count, 0)
    if how == "sum":
        total = acc.column(str(p[1]))
        return pc.if_else(counted, total, pa.scalar(None, total.type))
    if how == "average":
        return _average(a, count, acc.column(str(p[1])))
    if how == "decided":
        f = acc.column(str(p[1]))
        decided = pc.greater(f, 0) if p[2] else pc.equal(f, 0)
        return pc.if_else(counted, decided, pa.scalar(None, pa.bool_()))
    return _float_sum_arrow(a, acc)


def _average(a: Accumulator, count: pa.ChunkedArray, total: pa.ChunkedArray) -> pa.ChunkedArray:
    if a.result_type == "double":
        average = pc.divide(pc.cast(total, pa.float64()), pc.cast(count, pa.float64()))
        return pc.if_else(pc.greater(count, 0), average, pa.scalar(None, pa.float64()))
    precision, scale = (int(n) for n in a.result_type[len("decimal(") : -1].split(","))
    quantum = Decimal(1).scaleb(-scale)
    with localcontext() as exact:
        exact.prec = 80  # far more digits than a decimal(38) quotient needs: one rounding, at the quantum
        values = [
            None if not n or t is None else (t / n).quantize(quantum, ROUND_HALF_UP)
            for t, n in zip(total.to_pylist(), count.to_pylist())
        ]
    try:
        return pa.array(values, pa.decimal128(precision, scale))
    except pa.ArrowInvalid as e:  # beyond the result's precision: Spark's error, in Spark's own words
        raise NotOnDriver(str(e).splitlines()[0]) from None


def _float_sum_arrow(a: Accumulator, acc: pa.Table) -> pa.ChunkedArray:
    count_name, total_name, *special, average = a.result[1:]
    nan, pinf, ninf = (acc.column(str(n)).to_numpy(zero_copy_only=False) for n in special)
    total, _ = exact_sum.value_np(acc.column(str(total_name)))
    pinf, ninf = pinf + (total == np.inf), ninf + (total == -np.inf)  # a finite sum past the range
    count = acc.column(str(count_name)).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(
            (nan > 0) | ((pinf > 0) & (ninf > 0)),
            np.nan,
            np.where(pinf > 0, np.inf, np.where(ninf > 0, -np.inf, total)),
        )
        if average:
            total = total / count
    return pa.array(total, pa.float64(), mask=~(count > 0))


def _acc_schema(batch: DriverBatch, table: str) -> pa.Schema:
    schema = batch.state.schema(table)
    if schema is None:
        raise NotOnDriver(f"state {table} does not exist")
    return schema


def partial_on_driver(
    rows: pa.Table,
    groups: Sequence[str],
    aggs: Sequence[Accumulator],
    arguments: Mapping[str, str],
    batch: DriverBatch,
    table: str,
) -> pa.Table:
    schema = _acc_schema(batch, table)
    weight = rows.column(WEIGHT)
    group_values = [cast(normalized(rows.column(g)), schema.field(g).type) for g in groups]
    values: dict[str | None, pa.ChunkedArray] = {a: rows.column(column) for a, column in arguments.items()}
    columns: dict[str, pa.ChunkedArray] = {**dict(zip(groups, group_values)), COUNT: weight}
    columns[MTIME] = rows.column(MTIME)
    how: dict[str, Any] = {COUNT: "sum", MTIME: "max"}
    for a in aggs:
        for c in a.columns:
            if c.partial is None or c.partial[0] == "exact":
                continue
            columns[c.name], how[c.name] = _contribution(c, values.get(a.argument), weight, schema)
    contributions = pa.table(list(columns.values()), names=list(columns))
    if any(a.ordered for a in aggs):  # in arrival order (a stable sort keeps a commit's order)
        contributions = contributions.take(pc.sort_indices(contributions, [(MTIME, "ascending")]))
    partial = aggregated(contributions, groups, how)
    exact = [(a, column, square) for a in aggs for column, square in a.digit_columns()]
    if exact:  # the batch's exact sums, per group: every row's digits times its weight
        group_of = (
            align(group_values, [partial.column(g) for g in groups]).to_numpy(zero_copy_only=False)
            if groups
            else np.zeros(rows.num_rows, np.int64)
        ).astype(np.int64)
        weights = weight.to_numpy(zero_copy_only=False)
        for a, column, square in exact:
            digits_of = exact_sum.square_digits_np if square else exact_sum.digits_np
            at, slot, digit = digits_of(values[a.argument])
            maps = exact_sum.maps_np(partial.num_rows, group_of[at], slot, digit * weights[at])
            partial = partial.append_column(column, maps)
    return partial


def merged_on_driver(
    partial: pa.Table,
    batch: DriverBatch,
    table: str,
    groups: Sequence[str],
    aggs: Sequence[Accumulator],
    values: Sequence[pa.Table],
) -> pa.Table:
    schema = _acc_schema(batch, table)
    keys = [partial.column(g) for g in groups]
    if groups:
        found = batch.state.lookup(table, partial, list(groups))
        assert found is not None  # its schema was found
        old = found.take(align(keys, [found.column(g) for g in groups]))
    else:
        found = batch.state.read_all(table)
        assert found is not None  # its schema was found
        old = found.take(pa.array([0 if found.num_rows else None], pa.int64()))  # its one row (NULLs if none)
    new: dict[str, pa.ChunkedArray] = dict(zip(groups, keys))
    # (the partial of a global aggregate over no rows is NULL, as in Spark: it adds nothing)
    new[COUNT] = pc.add_checked(pc.fill_null(old.column(COUNT), 0), pc.fill_null(partial.column(COUNT), 0))
    for a in aggs:
        new.update({c.name: _merge_arrow(c, old, partial, schema) for c in a.columns if c.merge is not None})
    for v in values:  # the values of the aggregates over a multiset, NULL for a group without values
        at = align(keys, [cast(v.column(g), k.type) for g, k in zip(groups, keys)]) if groups else None
        found = v.take(at) if at is not None else v
        for a in aggs:
            if a.how is not None and a.value in v.column_names:
                value = found.column(a.value)
                new[a.value] = cast(
                    pc.fill_null(value, 0) if a.how == "count" else value, schema.field(a.value).type
                )
    if set(schema.names) - set(new):
        raise NotOnDriver(f"state {table} holds columns this rule does not compute")
    accumulators = pa.table([cast(new[f.name], f.type) for f in schema], schema=_nullable(schema))
    olds = [_result_arrow(a, old) for a in aggs]
    news = [_result_arrow(a, accumulators) for a in aggs]
    same = pa.chunked_array([pa.repeat(True, partial.num_rows)], pa.bool_())
    for o, n in zip(olds, news):
        same = pc.and_(same, same_values(o, n))
    columns = {
        **{c: accumulators.column(c) for c in [*groups, *state_columns(aggs)]},
        OLD_EXISTS: pc.is_valid(old.column(COUNT)),
        MTIME: partial.column(MTIME),
        **{old_result(i): o for i, o in enumerate(olds)},
        **{new_result(i): n for i, n in enumerate(news)},
        SAME: same,
    }
    return pa.table(list(columns.values()), names=list(columns))


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])
