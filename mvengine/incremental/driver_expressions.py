"""Spark SQL expressions evaluated over Arrow tables on the driver, for the subset where Arrow computes exactly
what Spark computes.

A small batch costs Spark ~150 ms per job whatever its size; Arrow evaluates the same expressions over a few
thousand rows in microseconds. Exactness comes first: each construct here follows Spark's semantics (types as
Spark's analyzer widens them, three-valued logic, checked integer arithmetic, NULL for a failed CASE, NaN
equal to itself and above every number), and where the two engines could disagree on a batch's values (an
overflow, a division by zero, a non-ASCII string in UPPER, a cast that does not fit), evaluation stops with
`NotOnDriver` and the batch goes to Spark, which gives its own answer or its own error.
`driver_support.unsupported(e)` says, without data, whether an expression is in the subset at all.

Types are read off the data (the Arrow types of the inputs, which are the types Spark reads them as), never
off the plan's inferred types, which Spark's analysis may correct.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mvengine.incremental.driver_support import ARITHMETIC as _ARITHMETIC
from mvengine.incremental.driver_support import COMPARISONS as _COMPARISONS
from mvengine.incremental.driver_support import EVALUATED, strftime_pattern
from mvengine.incremental.functions import function
from mvengine.incremental.java_regex import LINE_TERMINATOR, Translated, translate
from mvengine.incremental.zset import MTIME
from mvengine.plan.nodes import Field
from mvengine.plan.types import adjusted_decimal, decimal_result, integer_literal_digits
from mvengine.sql.types import arrow_type


class NotOnDriver(Exception):
    """This batch cannot be computed on the driver exactly as Spark would compute it: Spark computes it. The
    reason is in SQL's words (Spark's type names), and `_Evaluator.value` names the expression it stopped at."""

    located = False  # whether the message names the expression already


def _shown(e: exp.Expression) -> str:
    """An expression as a batch line names it: Spark SQL, its plain names unquoted."""
    e = e.copy()
    for name in e.find_all(exp.Identifier):
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.name):
            name.set("quoted", False)
    return e.sql("spark")[:120]


def sql_type(t: pa.DataType) -> str:
    """Spark's name of the type of Arrow type `t` (for what a batch line says)."""
    if pa.types.is_decimal(t):
        assert isinstance(t, pa.Decimal128Type)
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        assert isinstance(t, pa.TimestampType)
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    return _SQL_TYPE_NAMES.get(t, str(t))


_SQL_TYPE_NAMES = {
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "binary",
    pa.date32(): "date",
    pa.null(): "void",
}


_UTC_NAMES = {"UTC", "ETC/UTC", "GMT", "ETC/GMT", "Z", "+00:00", "UTC+00:00", "GMT+00:00"}
_session_time_zone = ["UTC"]  # one Spark session per process, so one zone: set_session_time_zone


def set_session_time_zone(zone: str) -> None:
    """Follow the Spark session's time zone (`spark.sql.session.timeZone`, UTC by mvengine's default). Spark
    reads a TIMESTAMP literal and prints DATE_FORMAT in that zone; the driver does both in UTC only, and in any
    other zone leaves them to Spark."""
    _session_time_zone[0] = zone


def _in_utc(what: str) -> None:
    zone = _session_time_zone[0]
    if zone.strip().upper() not in _UTC_NAMES:
        raise NotOnDriver(f"{what} in the session time zone {zone}")


Value: TypeAlias = pa.Array | pa.ChunkedArray | pa.Scalar

_INTEGRAL = (pa.int8(), pa.int16(), pa.int32(), pa.int64())
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?")


def evaluate(e: exp.Expression, table: pa.Table, fields: Sequence[Field]) -> pa.ChunkedArray:
    """The values of bound expression `e` (its columns are `fields`, the columns of `table` in order)."""
    return evaluate_all([e], table, fields)[0]


def evaluate_all(
    expressions: Sequence[exp.Expression], table: pa.Table, fields: Sequence[Field]
) -> list[pa.ChunkedArray]:
    """The values of each expression (as `evaluate`), what they have in common computed once."""
    evaluator = _Evaluator(table, fields)
    found = []
    for value in map(evaluator.value, expressions):
        if isinstance(value, pa.Scalar):
            value = pa.repeat(value, table.num_rows)
        found.append(value if isinstance(value, pa.ChunkedArray) else pa.chunked_array([value], value.type))
    return found


def predicate_mask(e: exp.Expression, table: pa.Table, fields: Sequence[Field]) -> pa.ChunkedArray:
    """Which rows pass a WHERE/HAVING/ON condition: true passes, false and NULL do not."""
    values = evaluate(e, table, fields)
    if values.type == pa.null():
        return pa.chunked_array([pa.repeat(pa.scalar(False), table.num_rows)])
    if values.type != pa.bool_():
        raise NotOnDriver(f"a condition of type {sql_type(values.type)}")
    return pc.fill_null(values, False)


@functools.lru_cache(maxsize=1024)
def _positions(names: tuple[tuple[str, str | None], ...]) -> dict[tuple[str, str | None], int]:
    """Where a reference (name, qualifier) finds its column among fields (name, qualifier): the first of that
    name and qualifier, else (unqualified) the first of that name, as Spark resolves it."""
    positions: dict[tuple[str, str | None], int] = {}
    for i, field in enumerate(names):
        positions.setdefault(field, i)
    for i, (name, _) in enumerate(names):
        positions.setdefault((name, None), i)
    return positions


class _Evaluator:
    def __init__(self, table: pa.Table, fields: Sequence[Field]) -> None:
        self.table = table
        self.positions = _positions(tuple((f.name, f.qualifier) for f in fields))
        # Values of the expressions evaluated so far, by the expression (sqlglot's are equal by structure): one
        # that occurs twice (`lower(channel)` in each branch of a CASE, `split(url, '/')` under three indexes)
        # is computed once.
        self.known: dict[exp.Expression, Value] = {}

    def value(self, e: exp.Expression) -> Value:
        found = self.known.get(e)
        if found is None:
            found = self.known[e] = self._computed(e)
        return found

    def _computed(self, e: exp.Expression) -> Value:
        try:
            if type(e) not in EVALUATED:
                raise NotOnDriver(f"{type(e).__name__} is not evaluated on the driver")
            if type(e) in _COMPARISONS:
                return self._comparison(e, _COMPARISONS[type(e)])
            if type(e) in _ARITHMETIC:
                return self._arithmetic(e, _ARITHMETIC[type(e)])
            return getattr(self, f"_{type(e).__name__.lower()}")(e)
        except NotOnDriver as why:  # named at the innermost expression that stopped the driver
            if not why.located and not isinstance(e, (exp.Column, exp.Literal)):
                why.args = (f"{why} in {_shown(e)}",)
                why.located = True
            raise

    # -- leaves ---------------------------------------------------------------------------------------------

    def _column(self, e: exp.Column) -> Value:
        if e.meta.get("proctime"):
            return self.table.column(MTIME)
        i = self.positions.get((e.name, e.table or None))
        if i is None:
            raise NotOnDriver(f"column {e.sql('spark')} not found")
        return self.table.column(i)

    def _literal(self, e: exp.Literal) -> Value:
        if e.is_string:
            return pa.scalar(e.name, pa.string())
        text = e.name
        if "e" in text.lower():
            return pa.scalar(float(text), pa.float64())
        if "." not in text:
            number = int(text)
            if -(2**31) <= number < 2**31:
                return pa.scalar(number, pa.int32())
            if -(2**63) <= number < 2**63:
                return pa.scalar(number, pa.int64())
        value = Decimal(text)
        digits = value.as_tuple()
        assert isinstance(digits.exponent, int)  # a literal is finite
        scale = max(-digits.exponent, 0)
        precision = max(len(digits.digits), scale, 1)
        if precision > 38:
            raise NotOnDriver(f"the literal {text}")
        return pa.scalar(value, pa.decimal128(precision, scale))

    def _boolean(self, e: exp.Boolean) -> Value:
        return pa.scalar(bool(e.this), pa.bool_())

    def _null(self, e: exp.Null) -> Value:
        return pa.scalar(None, pa.null())

    def _paren(self, e: exp.Paren) -> Value:
        return self.value(e.this)

    def _alias(self, e: exp.Alias) -> Value:
        return self.value(e.this)

    # -- logic ----------------------------------------------------------------------------------------------

    def _and(self, e: exp.And) -> Value:
        return pc.and_kleene(self._bool(e.this), self._bool(e.expression))

    def _or(self, e: exp.Or) -> Value:
        return pc.or_kleene(self._bool(e.this), self._bool(e.expression))

    def _not(self, e: exp.Not) -> Value:
        return pc.invert(self._bool(e.this))

    def _is(self, e: exp.Is) -> Value:
        if not isinstance(e.expression, exp.Null):
            raise NotOnDriver("IS TRUE / IS FALSE")
        return pc.is_null(self.value(e.this))

    def _in(self, e: exp.In) -> Value:
        """`x IN (a, b)` is `x = a OR x = b`, NULLs included (no match and a NULL in the list: NULL)."""
        tests = [self._compare(e.this, item, "equal") for item in e.expressions]
        if not tests:
            raise NotOnDriver("IN ()")
        result = tests[0]
        for test in tests[1:]:
            result = pc.or_kleene(result, test)
        return result

    def _between(self, e: exp.Between) -> Value:
        return pc.and_kleene(
            self._compare(e.this, e.args["low"], "greater_equal"),
            self._compare(e.this, e.args["high"], "less_equal"),
        )

    def _bool(self, e: exp.Expression) -> Value:
        v = self.value(e)
        if v.type == pa.null():
            return pa.scalar(None, pa.bool_())
        if v.type != pa.bool_():
            raise NotOnDriver(f"a {sql_type(v.type)} where a condition is expected")
        return v

    # -- comparisons ----------------------------------------------------------------------------------------

    def _comparison(self, e: exp.Expression, op: str) -> Value:
        return self._compare(e.this, e.expression, op)

    def _nullsafeeq(self, e: exp.NullSafeEQ | exp.NullSafeNEQ) -> Value:
        left, right = self._comparable(e.this, e.expression)
        if left.type == pa.null() or right.type == pa.null():  # NULL <=> x: whether x is NULL
            return pc.is_null(right if left.type == pa.null() else left)
        equal = pc.fill_null(_ordered("equal", left, right), False)
        both_null = pc.and_(pc.is_null(left), pc.is_null(right))
        return pc.or_(equal, both_null)

    def _nullsafeneq(self, e: exp.NullSafeNEQ) -> Value:
        return pc.invert(self._nullsafeeq(e))

    def _compare(self, a: exp.Expression, b: exp.Expression, op: str) -> Value:
        left, right = self._comparable(a, b)
        if left.type == pa.null() or right.type == pa.null():
            return pa.scalar(None, pa.bool_())
        return _ordered(op, left, right)

    def _comparable(self, a: exp.Expression, b: exp.Expression) -> tuple[Value, Value]:
        """Both sides in the type Spark compares them in."""
        left, right = self.value(a), self.value(b)
        left, right = _dates_from_literals(left, right, a, b)
        target = _common_type(left.type, right.type)
        return cast(left, target), cast(right, target)

    # -- arithmetic -----------------------------------------------------------------------------------------

    def _arithmetic(self, e: exp.Expression, op: str) -> Value:
        if isinstance(e.expression, exp.Interval) or (
            isinstance(e.this, exp.Interval) and op == "add_checked"
        ):
            return self._shifted(e, op)
        left, right = self.value(e.this), self.value(e.expression)
        if left.type == pa.null() or right.type == pa.null():
            raise NotOnDriver("arithmetic with NULL")
        if _decimals_alone(left.type, right.type):
            return self._decimal_arithmetic(e, left, right, op)
        target = _common_type(left.type, right.type)
        if not (target in _INTEGRAL or pa.types.is_floating(target)):
            raise NotOnDriver(f"arithmetic on {sql_type(target)}")
        return _checked(getattr(pc, op), cast(left, target), cast(right, target))

    def _shifted(self, e: exp.Expression, op: str) -> Value:
        """A date or timestamp plus or minus `INTERVAL 'n' unit`, as Spark computes it in UTC. Whole days, hours,
        minutes or seconds (an ANSI day-time interval) move a timestamp by their microseconds, and a date by
        its days (a DATE still) or to a TIMESTAMP (by hours, minutes or seconds); months or years (a year-month
        interval) move the calendar month and keep the day, or take the month's last (Jan 31 + 1 month is Feb
        28). In another session time zone Spark counts days on that zone's calendar: Spark decides (a
        TIMESTAMP_NTZ has no zone)."""
        interval, other = (
            (e.expression, e.this) if isinstance(e.expression, exp.Interval) else (e.this, e.expression)
        )
        amount, unit = _interval(interval)
        amount = -amount if op == "subtract_checked" else amount
        v = self.value(other)
        if not (pa.types.is_date32(v.type) or (pa.types.is_timestamp(v.type) and v.type.unit == "us")):
            raise NotOnDriver(f"{sql_type(v.type)} and an interval")
        if pa.types.is_timestamp(v.type) and v.type.tz is not None:
            _in_utc("an interval and a TIMESTAMP")
        if unit in _MONTHS_OF:
            return _rows(lambda d: _plus_months(d, amount * _MONTHS_OF[unit]), [v], v.type)
        if pa.types.is_date32(v.type) and unit == "DAY":
            return _in_calendar(
                _checked(pc.add_checked, pc.cast(v, pa.int32()), pa.scalar(amount, pa.int32()))
            )
        if pa.types.is_date32(v.type):
            v = _day_or_midnight(v, pa.timestamp("us", tz="UTC"))
        micros = pa.scalar(amount * _MICROS_OF[unit], pa.int64())
        moved = _checked(pc.add_checked, pc.cast(v, pa.int64()), micros)
        day = _MICROS_OF["DAY"]
        _within(moved, _FIRST_DAY * day, (_LAST_DAY + 1) * day - 1, "a timestamp beyond the years 1 to 9999")
        return pc.cast(moved, v.type)

    def _decimal_arithmetic(self, e: exp.Expression, left: Value, right: Value, op: str) -> Value:
        """+, - and * of decimals (and integers: an integer literal as DECIMAL(its digits, 0), any other as
        DECIMAL(3|5|10|20, 0)) in the type Spark gives them. Within 38 digits that type holds every result, so
        nothing overflows or is rounded. Beyond, Spark keeps 38 digits: where it keeps the scale too, the exact
        result is cast to its type (an overflow is Spark's error: Spark decides); where it takes scale away,
        Spark decides."""
        name = op.removesuffix("_checked")
        a, b = _decimal_operand(e.this, left.type), _decimal_operand(e.expression, right.type)
        if a is None or b is None:
            raise NotOnDriver(f"{name} of {sql_type(left.type)} and {sql_type(right.type)}")
        exact = decimal_result(_DECIMAL_OP[op], (a.precision, a.scale), (b.precision, b.scale))
        precision, scale = adjusted_decimal(*exact)
        if scale < exact[1]:
            raise NotOnDriver(
                f"{name} of {sql_type(a)} and {sql_type(b)}, which Spark rounds to {scale} places"
            )
        if op == "multiply_checked" and _signs(
            right
        ):  # x times a weight, as Spark's product: ±x or 0, at once
            x = cast(left, pa.decimal128(precision, scale))
            signed = pc.if_else(pc.greater(right, 0), x, pc.negate(x))
            return pc.if_else(pc.equal(right, 0), pa.scalar(0, x.type), signed)
        wide = [pa.decimal256(t.precision, t.scale) for t in (a, b)] if exact[0] > 38 else [a, b]
        operands = (cast(v, t) for v, t in zip((left, right), wide))  # a literal's type: its digits'
        return cast(_checked(getattr(pc, op), *operands), pa.decimal128(precision, scale))

    def _div(self, e: exp.Div) -> Value:
        """Spark's `/` of integers and floats is a double division, of decimals a decimal one (_decimal_div); by
        zero it raises (ANSI) or gives NULL: Spark decides."""
        left, right = self.value(e.this), self.value(e.expression)
        if _decimals_alone(left.type, right.type):
            return self._decimal_div(e, left, right)
        for side in (left, right):
            if not (
                side.type in _INTEGRAL or pa.types.is_floating(side.type) or pa.types.is_decimal(side.type)
            ):
                raise NotOnDriver(f"division of {sql_type(side.type)}")
        left, right = cast(left, pa.float64()), cast(right, pa.float64())
        if pc.any(pc.equal(right, 0.0)).as_py():
            raise NotOnDriver("a division by zero")
        return pc.divide(left, right)

    def _mod(self, e: exp.Mod) -> Value:
        """`a % b` (MOD) of integers, as Java's: the remainder takes the dividend's sign (by zero Spark decides)."""
        left, right = self.value(e.this), self.value(e.expression)
        if left.type not in _INTEGRAL or right.type not in _INTEGRAL:
            raise NotOnDriver(f"% of {sql_type(left.type)} and {sql_type(right.type)}")
        target = _common_type(left.type, right.type)
        left, right = cast(left, target), cast(right, target)
        if pc.any(pc.equal(right, 0)).as_py():
            raise NotOnDriver("a remainder by zero")
        # x % -1 is x % 1, 0, where MIN / -1 would overflow; Arrow's integer divide truncates, as Java's
        divisor = pc.if_else(pc.equal(right, -1), pa.scalar(1, target), right)
        return pc.subtract(left, pc.multiply(pc.divide(left, divisor), divisor))

    def _decimal_div(self, e: exp.Div, left: Value, right: Value) -> Value:
        """x / y of decimals (and integers, as in _decimal_arithmetic) in Spark's result type, its quotient
        rounded half up at the result's scale. Spark first divides to 38 digits, then rounds at the scale:
        where that first rounding could move the quotient onto a tie (a divisor of many digits), or the
        quotient overflows its type, or y is 0, Spark decides."""
        a, b = _decimal_operand(e.this, left.type), _decimal_operand(e.expression, right.type)
        if a is None or b is None:
            raise NotOnDriver(f"division of {sql_type(left.type)} and {sql_type(right.type)}")
        precision, scale = adjusted_decimal(
            *decimal_result("div", (a.precision, a.scale), (b.precision, b.scale))
        )
        quantum, bound = Decimal(1).scaleb(-scale), Decimal(10) ** (precision - scale)

        def quotient(x: Decimal | int | None, y: Decimal | int | None) -> Decimal | None:
            if x is None or y is None:
                return None
            if y == 0:
                raise NotOnDriver("a division by zero")
            exact = Decimal(x) / Decimal(y)
            if not _rounds_once(exact, Decimal(y), b.scale, max(scale, a.scale - b.scale)):
                raise NotOnDriver(f"a quotient of {y}, whose digits Spark rounds twice")
            rounded = exact.quantize(quantum)
            if abs(rounded) >= bound:
                raise NotOnDriver(f"a quotient beyond DECIMAL({precision}, {scale})")
            return rounded

        with localcontext() as context:
            context.prec, context.rounding = 100, ROUND_HALF_UP  # every quotient has far fewer digits
            return _rows(quotient, [left, right], pa.decimal128(precision, scale))

    def _neg(self, e: exp.Neg) -> Value:
        v = self.value(e.this)
        if not (v.type in _INTEGRAL or pa.types.is_floating(v.type) or pa.types.is_decimal(v.type)):
            raise NotOnDriver(f"negation of {sql_type(v.type)}")
        return _checked(pc.negate_checked, v)

    def _abs(self, e: exp.Abs) -> Value:
        v = self.value(e.this)
        if not (v.type in _INTEGRAL or pa.types.is_floating(v.type) or pa.types.is_decimal(v.type)):
            raise NotOnDriver(f"abs of {sql_type(v.type)}")
        return _checked(pc.abs_checked, v)

    # -- conditionals ---------------------------------------------------------------------------------------

    def _case(self, e: exp.Case) -> Value:
        subject = e.this
        conditions, values = [], []
        for branch in e.args.get("ifs") or []:
            test = (
                self._compare(subject, branch.this, "equal")
                if subject is not None
                else self._bool(branch.this)
            )
            conditions.append(test)
            values.append(self.value(branch.args["true"]))
        default = e.args.get("default")
        values.append(self.value(default) if default is not None else pa.scalar(None, pa.null()))
        return self._choose(conditions, values)

    def _if(self, e: exp.If) -> Value:
        false = e.args.get("false")
        return self._choose(
            [self._bool(e.this)],
            [
                self.value(e.args["true"]),
                self.value(false) if false is not None else pa.scalar(None, pa.null()),
            ],
        )

    def _choose(self, conditions: list[Value], values: list[Value]) -> Value:
        """The value of the first true condition (NULL counts as false), else the last value."""
        target = common_type([v.type for v in values])
        values = [cast(v, target) for v in values]
        n = self.table.num_rows
        columns = [_array(pc.fill_null(c, False), n) for c in conditions]
        if not columns:
            return values[-1]
        if len(columns) == 1:  # (Arrow's if_else takes scalars as they are: faster)
            return pc.if_else(columns[0], values[0], values[1])
        return pc.case_when(
            pc.make_struct(*columns, field_names=[f"c{i}" for i in range(len(columns))]),
            *[_array(v, n) for v in values],
        )

    def _extreme(self, e: exp.Greatest | exp.Least) -> Value:
        values = [self.value(v) for v in [e.this, *e.expressions]]
        target, kind = common_type([v.type for v in values]), "max" if isinstance(e, exp.Greatest) else "min"
        return _checked(
            lambda *vs: extreme(kind, vs), *[_array(cast(v, target), self.table.num_rows) for v in values]
        )

    _greatest = _least = _extreme

    def _isnan(self, e: exp.IsNan) -> Value:
        v = self.value(e.this)
        if not pa.types.is_floating(v.type):
            raise NotOnDriver(f"isnan of {sql_type(v.type)}")
        return pc.fill_null(pc.is_nan(v), False)

    def _anonymous(self, e: exp.Anonymous) -> Value:
        """One of the engine's own functions (incremental/functions.py), the same function Spark runs; or
        TIMESTAMP_MICROS of a number, the instant a temporal filter reads NOW() as (plan/time_bounds.at_clock)."""
        if e.name.lower() == "timestamp_micros" and [type(a) for a in e.expressions] == [exp.Literal]:
            return pa.scalar(int(e.expressions[0].name), pa.timestamp("us", tz="UTC"))
        found = function(e.name.lower())
        if found is None:
            raise NotOnDriver(f"the function {e.name}")
        n = self.table.num_rows
        arrays = [_array(self.value(v), n) for v in e.expressions]
        try:
            return found[0](*[a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays])
        except ArithmeticError as why:  # Spark's error, which a batch in Spark gives
            raise NotOnDriver(str(why)) from None

    def _coalesce(self, e: exp.Coalesce) -> Value:
        values = [self.value(v) for v in [e.this, *e.expressions]]
        target = common_type([v.type for v in values])
        return pc.coalesce(*[cast(v, target) for v in values])

    # -- casts and strings ----------------------------------------------------------------------------------

    def _cast(self, e: exp.Cast) -> Value:
        to = _arrow_type(e.args["to"])
        if (
            isinstance(e.this, exp.Literal)
            and e.this.is_string
            and (pa.types.is_date(to) or pa.types.is_timestamp(to))
        ):
            return _date_literal(e.this.name, to)
        v = self.value(e.this)
        if v.type == to:
            return v
        if v.type == pa.null():
            return pa.scalar(None, to)
        if (pa.types.is_timestamp(v.type) and pa.types.is_date(to)) or (
            pa.types.is_date(v.type) and pa.types.is_timestamp(to)
        ):
            return _day_or_midnight(v, to)
        integral_to_integral = (
            to in _INTEGRAL and v.type in _INTEGRAL
        )  # narrowing that does not fit: Spark decides
        widening_to_float = pa.types.is_floating(to) and _WIDTH.get(v.type, 128) <= _WIDTH.get(to, 0)
        if pa.types.is_decimal(v.type) and to == pa.float64():
            return _decimal_as_double(v)
        if pa.types.is_decimal(to) and _as_decimal(v.type) is not None:
            return _to_decimal(v, to)
        if (
            pa.types.is_decimal(v.type) and to in _INTEGRAL
        ):  # the whole part; one that does not fit: Spark decides
            whole = _checked(lambda x: pc.round(x, ndigits=0, round_mode="towards_zero"), v)
            return _checked(lambda x: pc.cast(x, to, safe=True), whole)
        if widening_to_float and v.type in _INTEGRAL:
            return cast(v, to)
        if integral_to_integral or widening_to_float or (to == pa.string() and v.type in _INTEGRAL):
            return _checked(lambda x: pc.cast(x, to, safe=True), v)
        raise NotOnDriver(f"a cast from {sql_type(v.type)} to {sql_type(to)}")

    _trycast = _cast

    # -- dates and times ------------------------------------------------------------------------------------

    def _tsordstodate(self, e: exp.TsOrDsToDate) -> Value:
        """TO_DATE(x) of a timestamp or a date (sqlglot also reads YEAR(x), MONTH(x), DAY(x) over it)."""
        if e.args.get("format") is not None:
            raise NotOnDriver("TO_DATE with a format")
        v = self.value(e.this)
        if pa.types.is_date(v.type):
            return v
        if pa.types.is_timestamp(v.type):
            return _day_or_midnight(v, pa.date32())
        raise NotOnDriver(f"TO_DATE of {sql_type(v.type)}")

    def _tsordsadd(self, e: exp.TsOrDsAdd) -> Value:
        """DATE_ADD(start, days) and DATE_SUB (sqlglot reads it as DATE_ADD of -days) of a date or timestamp
        (its day) and an INT, SMALLINT or TINYINT."""
        unit = e.args.get("unit")
        if unit is not None and unit.name.upper() != "DAY":
            raise NotOnDriver(f"DATE_ADD by {unit.name}")
        start, days = self._date(e.this, "DATE_ADD"), self.value(e.expression)
        if days.type not in (pa.int8(), pa.int16(), pa.int32()):
            raise NotOnDriver(f"DATE_ADD of {sql_type(days.type)} days")
        added = _checked(pc.add_checked, cast(start, pa.int32()), cast(days, pa.int32()))
        return _in_calendar(added)

    def _datediff(self, e: exp.DateDiff) -> Value:
        """DATEDIFF(end, start): the days from start to end, an INT."""
        if e.args.get("unit") is not None:
            raise NotOnDriver("DATEDIFF by a unit")
        end, start = self._date(e.this, "DATEDIFF"), self._date(e.expression, "DATEDIFF")
        return _checked(pc.subtract_checked, cast(end, pa.int32()), cast(start, pa.int32()))

    def _date(self, e: exp.Expression, what: str) -> Value:
        """A date argument: a date, or the day of a timestamp (as Spark casts it)."""
        v = self.value(e)
        if pa.types.is_timestamp(v.type):
            return _day_or_midnight(v, pa.date32())
        if not pa.types.is_date32(v.type):
            raise NotOnDriver(f"{what} of {sql_type(v.type)}")
        return v

    def _date_field(self, e: exp.Expression) -> Value:
        """YEAR, MONTH, DAY (DAYOFMONTH), HOUR and MINUTE of x."""
        field, of_dates = _FIELDS[type(e).__name__.upper().removesuffix("OFMONTH")]
        return self._field(e, field, of_dates=of_dates)

    _year = _month = _day = _dayofmonth = _hour = _minute = _date_field

    def _field(
        self,
        e: exp.Expression,
        field: Callable[[Value], Value],
        *,
        of_dates: bool = True,
        of: exp.Expression | None = None,
    ) -> Value:
        """A field of a date or timestamp (`of`, else e's argument) as Spark's INT (of a TIMESTAMP, in the
        session time zone)."""
        name = e.name if isinstance(e, exp.Anonymous) else type(e).__name__.upper()
        return pc.cast(field(self._moment(of if of is not None else e.this, name, of_dates)), pa.int32())

    def _moment(self, e: exp.Expression, what: str, of_dates: bool) -> Value:
        """The timestamp (or, `of_dates`, date) whose field `what` is taken: in UTC, the session time zone."""
        v = self.value(e)
        if not (pa.types.is_timestamp(v.type) or (of_dates and pa.types.is_date(v.type))):
            raise NotOnDriver(f"{what} of {sql_type(v.type)}")
        if pa.types.is_timestamp(v.type) and v.type.tz is not None:
            _in_utc(f"{what} of a TIMESTAMP")
        return v

    def _extract(self, e: exp.Extract) -> Value:
        """EXTRACT(YEAR | MONTH | DAY | HOUR | MINUTE FROM x), as the functions of those names; SECOND is Spark's
        DECIMAL(8, 6), the seconds with their microseconds."""
        unit = e.this.name.upper() if isinstance(e.this, (exp.Var, exp.Identifier, exp.Column)) else ""
        if unit == "SECOND":
            v = self._moment(e.expression, "EXTRACT SECOND", of_dates=False)
            micros = [  # (Arrow's microsecond is the one within its millisecond)
                pc.multiply(pc.cast(f(v), pa.int64()), scale)
                for f, scale in ((pc.second, 1_000_000), (pc.millisecond, 1_000), (pc.microsecond, 1))
            ]
            return _micros_as_seconds(pc.add(pc.add(micros[0], micros[1]), micros[2]))
        if unit not in _FIELDS:
            raise NotOnDriver(f"EXTRACT of {unit or e.this.sql('spark')}")
        field, of_dates = _FIELDS[unit]
        named = exp.Anonymous(this=f"EXTRACT {unit}")
        return self._field(named, field, of_dates=of_dates, of=e.expression)

    def _timestamptrunc(self, e: exp.TimestampTrunc) -> Value:
        """DATE_TRUNC(unit, x): a TIMESTAMP floored to the unit in the session time zone (a DATE as its midnight;
        weeks start on Monday, as in Spark)."""
        unit = _TRUNC_UNITS.get(e.args["unit"].name.upper()) if e.args.get("unit") is not None else None
        if unit is None:
            raise NotOnDriver(f"DATE_TRUNC to {e.args.get('unit')}")
        v = self.value(e.this)
        if pa.types.is_date(v.type):
            v = _day_or_midnight(v, pa.timestamp("us", tz="UTC"))
        if not (pa.types.is_timestamp(v.type) and v.type.tz is not None):
            raise NotOnDriver(f"DATE_TRUNC of {sql_type(v.type)}")
        _in_utc("DATE_TRUNC of a TIMESTAMP")
        return pc.floor_temporal(v, unit=unit)

    def _datetrunc(self, e: exp.DateTrunc) -> Value:
        """TRUNC(date, unit): the first day of its year, quarter, month or week (Monday), a DATE."""
        unit = (
            _TRUNC_UNITS.get(e.args["unit"].name.upper())
            if isinstance(e.args.get("unit"), exp.Literal)
            else None
        )
        if unit not in ("year", "quarter", "month", "week"):
            raise NotOnDriver(f"TRUNC to {e.args.get('unit')}")
        return pc.floor_temporal(self._date(e.this, "TRUNC"), unit=unit)

    def _case_mapped(self, e: exp.Upper | exp.Lower) -> Value:
        """UPPER and LOWER of ASCII strings only: Java's and Arrow's mappings differ beyond (Java's ß is SS)."""
        v = self._string(e.this)
        ascii_only = (
            (v.as_py() is None or v.as_py().isascii())
            if isinstance(v, pa.Scalar)
            else pc.all(pc.string_is_ascii(v)).as_py() is not False
        )
        if not ascii_only:
            raise NotOnDriver("UPPER/LOWER of a non-ASCII string")
        return (pc.ascii_upper if isinstance(e, exp.Upper) else pc.ascii_lower)(v)

    _upper = _lower = _case_mapped

    def _length(self, e: exp.Length) -> Value:
        return pc.cast(pc.utf8_length(self._string(e.this)), pa.int32())

    def _replace(self, e: exp.Replace) -> Value:
        """REPLACE(s, search[, by]) of string literals: each match left to right (none of an empty search)."""
        search, by = e.expression, e.args.get("replacement") or exp.Literal.string("")
        if not all(isinstance(a, exp.Literal) and a.is_string for a in (search, by)):
            raise NotOnDriver("REPLACE by other than string literals")
        v = self._string(e.this)
        return pc.replace_substring(v, pattern=search.name, replacement=by.name) if search.name else v

    def _timetostr(self, e: exp.TimeToStr) -> Value:
        """DATE_FORMAT(x, pattern) of a timestamp or date, for the patterns of `strftime_pattern` (in UTC, the
        session time zone; whole seconds, as Spark's `ss`; years 1 to 9999, which both print in four digits)."""
        pattern = strftime_pattern(e)
        v = self.value(e.this.this if isinstance(e.this, exp.TimeStrToTime) else e.this)  # (sqlglot's cast)
        if pattern is None or not (pa.types.is_timestamp(v.type) or pa.types.is_date(v.type)):
            raise NotOnDriver(
                f"DATE_FORMAT of {v.type}" if pattern is not None else "this DATE_FORMAT pattern"
            )
        seconds = pa.timestamp("s", tz=v.type.tz if pa.types.is_timestamp(v.type) else None)
        if pa.types.is_timestamp(v.type):
            if v.type.tz is not None:
                _in_utc("DATE_FORMAT of a TIMESTAMP")
            v = pc.floor_temporal(v, unit="second")
        v = pc.cast(v, seconds)
        years = pc.min_max(pc.year(pa.array([v]) if isinstance(v, pa.Scalar) else v))
        low, high = years["min"].as_py(), years["max"].as_py()
        if low is not None and not (1 <= low and high <= 9999):
            raise NotOnDriver("DATE_FORMAT of a year beyond 1 to 9999")
        if isinstance(v, pa.Scalar):  # (of a literal)
            return pc.strftime(v, format=pattern)
        distinct = pc.unique(v)  # (the times of a batch share few seconds: each is formatted once)
        return pc.take(pc.strftime(distinct, format=pattern), pc.index_in(v, distinct))

    def _concat(self, e: exp.Concat) -> Value:
        parts = [self._string(p) for p in e.expressions]
        return pc.binary_join_element_wise(*parts, "", null_handling="emit_null")

    def _dpipe(self, e: exp.DPipe) -> Value:
        return pc.binary_join_element_wise(
            self._string(e.this), self._string(e.expression), "", null_handling="emit_null"
        )

    def _trim(self, e: exp.Trim) -> Value:
        """TRIM, LTRIM and RTRIM of spaces (Spark trims the space character alone, not tabs or newlines)."""
        if e.args.get("expression") is not None or e.args.get("collation") is not None:
            raise NotOnDriver("TRIM of other characters")
        v = self._string(e.this)
        position = (e.args.get("position") or "BOTH").upper()
        trim = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}.get(position, pc.utf8_trim)
        return trim(v, characters=" ")

    def _concatws(self, e: exp.ConcatWs) -> Value:
        """CONCAT_WS(sep, a, b, ...): the strings that are not NULL, joined by sep (NULL when sep is)."""
        separator, *parts = [self._string(p) for p in e.expressions]
        if not parts:
            raise NotOnDriver("CONCAT_WS of no strings")
        return _rows(
            lambda sep, *strings: None if sep is None else sep.join(s for s in strings if s is not None),
            [separator, *parts],
            pa.string(),
        )

    def _substring(self, e: exp.Substring) -> Value:
        """SUBSTRING(s, pos[, len]) by characters, as Spark's substringSQL: pos 1 is the first, 0 too, a negative
        pos counts from the end; len clips the end before a start before the string is clipped."""
        v = self._string(e.this)
        arguments = [e.args.get("start"), e.args.get("length")]
        numbers = [self.value(a) if a is not None else pa.scalar(2**31 - 1, pa.int32()) for a in arguments]
        if any(n.type not in (pa.int8(), pa.int16(), pa.int32()) for n in numbers):
            raise NotOnDriver("SUBSTRING by other than INT positions")
        return _rows(_substring_sql, [v, *numbers], pa.string())

    def _like(self, e: exp.Like) -> Value:
        return self._matches(e, "\\")

    def _ilike(self, e: exp.ILike) -> Value:
        """`s ILIKE pattern`: LIKE of both lower-cased, as Spark rewrites it (ASCII strings only, as LOWER)."""
        pattern = e.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string and pattern.name.isascii()):
            raise NotOnDriver("ILIKE with a pattern that is not an ASCII string literal")
        lowered = exp.Like(
            this=exp.Lower(this=e.this.copy()),
            expression=exp.Literal.string(pattern.name.lower()),
            negate=e.args.get("negate"),
        )
        return self._matches(lowered, "\\")

    def _escape(self, e: exp.Escape) -> Value:
        escape = e.expression
        if not isinstance(e.this, exp.Like) or not (isinstance(escape, exp.Literal) and escape.is_string):
            raise NotOnDriver("ESCAPE of other than LIKE")
        if len(escape.name) != 1:
            raise NotOnDriver("an ESCAPE of other than one character")
        return self._matches(e.this, escape.name)

    def _matches(self, e: exp.Like, escape: str) -> Value:
        """`s LIKE pattern` (a string literal): `_` one character, `%` any run, the escape character before
        either or itself that character; any other escape is Spark's error, so Spark decides."""
        pattern = e.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise NotOnDriver("LIKE with a pattern that is not a string literal")
        regex, text = [], pattern.name
        i = 0
        while i < len(text):
            c = text[i]
            if c == escape:
                if i + 1 == len(text) or text[i + 1] not in ("_", "%", escape):
                    raise NotOnDriver(f"the LIKE pattern {text!r}")
                regex.append(re.escape(text[i + 1]))
                i += 2
                continue
            regex.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
            i += 1
        matched = pc.match_substring_regex(self._string(e.this), pattern="(?s)\\A" + "".join(regex) + "\\z")
        return pc.invert(matched) if e.args.get("negate") else matched  # (NOT LIKE)

    def _regexpextract(self, e: exp.RegexpExtract) -> Value:
        """regexp_extract(s, pattern, group): the group of the first match, "" where nothing matches or the
        group took no part in the match (Spark's), NULL of NULL (driver_support checks the pattern and the
        group)."""
        v, found = self._searched(e)
        group = f"g{e.args['group'].to_py()}"

        def extract(strings: pa.Array | pa.ChunkedArray) -> Value:
            matches = _checked(lambda x: pc.extract_regex(x, pattern=found.pattern), strings)
            extracted = pc.fill_null(pc.struct_field(matches, group), "")
            return pc.if_else(pc.is_null(strings), pa.scalar(None, pa.string()), extracted)

        return _of_strings(extract, v)

    def _regexplike(self, e: exp.RegexpLike) -> Value:
        """`s RLIKE pattern`: whether the pattern matches anywhere in s."""
        v, found = self._searched(e)
        return _of_strings(lambda x: _checked(pc.match_substring_regex, x, found.pattern), v)

    def _searched(self, e: exp.RegexpExtract | exp.RegexpLike) -> tuple[Value, Translated]:
        """The strings a pattern searches, and the pattern in RE2's syntax; strings with a line terminator go
        to Spark (Java's `.` and `$` treat more characters so than RE2's)."""
        found = translate(e.expression.name)
        if found is None:
            raise NotOnDriver("a pattern RE2 does not read as Java does")
        v = self._string(e.this)
        if pc.any(_of_strings(lambda x: pc.match_substring_regex(x, LINE_TERMINATOR), v)).as_py():
            raise NotOnDriver("a string with a line terminator searched by a regular expression")
        return v, found

    def _bracket(self, e: exp.Bracket) -> Value:
        """split(s, delimiter)[i] (from 0) and element_at(split(s, delimiter), i) (from 1) of a fixed
        delimiter: Java's String.split, which keeps the empty strings before, between and after delimiters.
        An index beyond the array is NULL or Spark's error by its ANSI setting: Spark decides."""
        parts = self.known.get(e.this)
        if parts is None:
            parts = self.known[e.this] = self._split(e.this)
        index = self.value(e.expressions[0])
        if not (isinstance(index, pa.Scalar) and index.type in _INTEGRAL):
            raise NotOnDriver("an array index other than an integer constant")
        if not index.is_valid:
            return pa.scalar(None, pa.string())
        at = index.as_py() - (e.args.get("offset") or 0)
        lengths = pc.list_value_length(pa.array([parts]) if isinstance(parts, pa.Scalar) else parts)
        shortest = pc.min(lengths).as_py()
        if at < 0 or (shortest is not None and at >= shortest):
            raise NotOnDriver("an index beyond the array")
        return _of_strings(lambda x: pc.list_element(x, at), parts)

    def _split(self, e: exp.RegexpSplit) -> Value:
        """split(s, delimiter[, limit]) as Arrow lists (only an index of it is evaluated)."""
        found = translate(e.expression.name)
        limit = e.args.get("limit")
        if found is None or not found.literal:
            raise NotOnDriver("split by other than a fixed string")
        most = limit.to_py() if limit is not None else 0
        return _of_strings(
            lambda x: pc.split_pattern(x, found.literal, max_splits=most - 1 if most > 0 else None),
            self._string(e.this),
        )

    def _splitpart(self, e: exp.SplitPart) -> Value:
        """split_part(s, delimiter, n): the n-th part of s split by the delimiter (a plain string), from the end
        for a negative n, "" beyond the parts; s itself when the delimiter is empty; n = 0 is Spark's error."""
        strings, delimiters = self._string(e.this), self._string(e.args["delimiter"])
        index = self.value(e.args["part_index"])
        if index.type not in _INTEGRAL:
            raise NotOnDriver("split_part of other than an integer part")
        return _rows(_split_part, [strings, delimiters, index], pa.string())

    def _string(self, e: exp.Expression) -> Value:
        v = self.value(e)
        if v.type == pa.string():
            return v
        if v.type in _INTEGRAL:
            return pc.cast(v, pa.string())
        if v.type == pa.null():
            return pa.scalar(None, pa.string())
        raise NotOnDriver(f"a {sql_type(v.type)} where a string is expected")


# The date and time fields YEAR(x) and the like, and EXTRACT(field FROM x), take: Arrow's kernel, and whether a
# DATE has the field (else only a TIMESTAMP)
_FIELDS = {"YEAR": (pc.year, True), "MONTH": (pc.month, True), "DAY": (pc.day, True)}
_FIELDS |= {"HOUR": (pc.hour, False), "MINUTE": (pc.minute, False)}

# DATE_TRUNC's and TRUNC's units as Spark spells them, by Arrow's floor_temporal unit
_TRUNC_UNITS = {
    **dict.fromkeys(("YEAR", "YYYY", "YY"), "year"),
    "QUARTER": "quarter",
    **dict.fromkeys(("MONTH", "MM", "MON"), "month"),
    "WEEK": "week",
    **dict.fromkeys(("DAY", "DD"), "day"),
    "HOUR": "hour",
    "MINUTE": "minute",
    "SECOND": "second",
    "MILLISECOND": "millisecond",
    "MICROSECOND": "microsecond",
}


def _rows(function: Callable[..., object], values: list[Value], to: pa.DataType) -> Value:
    """`function` of each row's values (Python's), for what Arrow has no kernel of; scalars stay scalars."""
    if all(isinstance(v, pa.Scalar) for v in values):
        return pa.scalar(function(*(v.as_py() for v in values)), to)
    rows = next(len(v) for v in values if not isinstance(v, pa.Scalar))
    columns = [[v.as_py()] * rows if isinstance(v, pa.Scalar) else v.to_pylist() for v in values]
    return pa.chunked_array([pa.array([function(*row) for row in zip(*columns)], to)])


def _of_strings(function: Callable[[pa.Array | pa.ChunkedArray], Value], v: Value) -> Value:
    """`function` of a column, or of a scalar as a column of one (Arrow's string kernels take columns)."""
    if isinstance(v, pa.Scalar):
        return function(pa.array([v.as_py()], v.type))[0]
    return function(v)


def _split_part(s: str | None, delimiter: str | None, n: int | None) -> str | None:
    if s is None or delimiter is None or n is None:
        return None
    if n == 0:
        raise NotOnDriver("split_part of part 0")
    parts = s.split(delimiter) if delimiter else [s]
    return parts[n - 1 if n > 0 else n] if abs(n) <= len(parts) else ""


def _substring_sql(s: str | None, pos: int | None, length: int | None) -> str | None:
    if s is None or pos is None or length is None:
        return None
    start = pos - 1 if pos > 0 else len(s) + pos if pos < 0 else 0
    end = start + length
    start = max(start, 0)
    return "" if start >= end else s[start:end]


# The days of 0001-01-01 and 9999-12-31 from 1970-01-01: the dates Spark and Python both hold
_FIRST_DAY, _LAST_DAY = -719162, 2932896
_DECIMAL_OF_INTEGRAL = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 20}


_DECIMAL_OP = {"add_checked": "add", "subtract_checked": "sub", "multiply_checked": "mul"}


def _decimal_operand(e: exp.Expression, t: pa.DataType) -> pa.Decimal128Type | None:
    """The decimal type Spark brings an operand of + - * / beside a decimal to: an integer literal to the
    precision of its digits, any other integer to its type's (None for a type that is neither)."""
    digits = integer_literal_digits(e)
    if digits is not None and t in _INTEGRAL:
        return pa.decimal128(digits, 0)
    return _as_decimal(t)


def _rounds_once(quotient: Decimal, divisor: Decimal, divisor_scale: int, scale: int) -> bool:
    """Whether rounding `quotient` first to 38 significant digits (or at 38 or 39 decimals) and then at the
    result's scale rounds it as rounding it once does. A quotient x / y off a tie of the final rounding is off
    it by at least 1 / (2·|Y|·10^scale), Y the divisor's unscaled digits and scale the larger of the result's
    and the operands' scale difference; the first rounding moves it by at most half a unit of its 38th digit,
    10^(e - 37) / 2, e the exponent of the quotient's first digit (at least -1 here, which covers 38 and 39
    decimals). So it is safe when |Y|·10^(scale + e) <= 10^37."""
    if quotient == 0:
        return True
    unscaled = abs(divisor).scaleb(divisor_scale)
    return unscaled.scaleb(scale + max(quotient.adjusted(), -1)) <= Decimal(10) ** 37


def _as_decimal(t: pa.DataType) -> pa.Decimal128Type | None:
    """The decimal type Spark brings an integer or decimal operand to (None for any other type)."""
    if pa.types.is_decimal128(t):
        assert isinstance(t, pa.Decimal128Type)
        return t
    if t in _DECIMAL_OF_INTEGRAL:
        return pa.decimal128(_DECIMAL_OF_INTEGRAL[t], 0)
    return None


_WIDTH = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64, pa.float32(): 32, pa.float64(): 64}


def _common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type Spark's analyzer brings two operands to (TypeCoercion), where Arrow can follow it exactly."""
    if a == b or b == pa.null():
        return a
    if a == pa.null():
        return b
    if a in _INTEGRAL and b in _INTEGRAL:
        return a if a.bit_width >= b.bit_width else b
    if any(pa.types.is_floating(t) for t in (a, b)) and any(pa.types.is_decimal(t) for t in (a, b)):
        return pa.float64()  # a decimal beside a float is a double (cast: _decimal_as_double)
    numeric = [t for t in (a, b) if t in _INTEGRAL or pa.types.is_floating(t)]
    if len(numeric) == 2:  # an integer and a float, or two floats: the wider float (int and float: float)
        floats = [t for t in (a, b) if pa.types.is_floating(t)]
        return max(floats, key=lambda t: t.bit_width)
    decimals = [_as_decimal(t) for t in (a, b)]
    if (pa.types.is_decimal(a) or pa.types.is_decimal(b)) and None not in decimals:
        # Spark's wider decimal of the two (an integer as DECIMAL(3|5|10|20, 0)); beyond 38 digits Spark takes
        # digits away, so Spark decides
        scale = max(t.scale for t in decimals if t is not None)
        whole = max(t.precision - t.scale for t in decimals if t is not None)
        if whole + scale > 38:
            raise NotOnDriver(f"{sql_type(a)} and {sql_type(b)} in one type beyond 38 digits")
        return pa.decimal128(whole + scale, scale)
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.tz == b.tz:
        return a
    raise NotOnDriver(f"{sql_type(a)} and {sql_type(b)} together")


comparison_type = _common_type  # the type Spark compares values of two types in (join keys' equality, say)


def common_type(types: Sequence[pa.DataType]) -> pa.DataType:
    """The type of a CASE / COALESCE / IF or a UNION column over values of these types (NULL literals take
    the others' type)."""
    known = [t for t in types if t != pa.null()]
    return functools.reduce(_common_type, known) if known else pa.null()


def cast(v: Value, to: pa.DataType) -> Value:
    """`v` brought to the type `_common_type` or `common_type` chose (a widening Spark makes too)."""
    if v.type == to:
        return v
    if pa.types.is_decimal(v.type) and to == pa.float64():
        return _decimal_as_double(v)
    if pa.types.is_integer(v.type) and pa.types.is_floating(to):  # the nearest float, as Java converts
        return pc.cast(v, to, safe=False)
    return _checked(lambda x: pc.cast(x, to, safe=True), v)


def _to_decimal(v: Value, to: pa.DataType) -> Value:
    """CAST of a decimal or an integer to DECIMAL(p, s), as Spark casts: rounded half away from zero at scale s
    (Java's HALF_UP; Arrow's "half_up" rounds ties towards +inf). A value beyond p digits is NULL or an error
    by Spark's ANSI setting: Spark decides."""
    assert isinstance(to, pa.Decimal128Type)
    source = _as_decimal(v.type)
    assert source is not None
    v = cast(v, source)
    if source.scale > to.scale:
        v = _checked(lambda x: pc.round(x, ndigits=to.scale, round_mode="half_towards_infinity"), v)
    return _checked(lambda x: pc.cast(x, to, safe=True), v)


def _in_calendar(days: Value) -> Value:
    """Days from 1970-01-01 as DATEs, where all are of the years 1 to 9999 (which Python holds too)."""
    _within(days, _FIRST_DAY, _LAST_DAY, "a date beyond the years 1 to 9999")
    return pc.cast(days, pa.date32())


def _within(values: Value, least: int, most: int, beyond: str) -> None:
    """NotOnDriver(`beyond`) unless every value (NULLs aside) lies in least..most."""
    low, high = pc.min_max(values).values() if not isinstance(values, pa.Scalar) else (values, values)
    if low.as_py() is not None and not (least <= low.as_py() and high.as_py() <= most):
        raise NotOnDriver(beyond)


_MICROS_OF = {"DAY": 86_400_000_000, "HOUR": 3_600_000_000, "MINUTE": 60_000_000, "SECOND": 1_000_000}
_MONTHS_OF = {"YEAR": 12, "MONTH": 1}


def _interval(e: exp.Interval) -> tuple[int, str]:
    """`INTERVAL 'n' unit` as (n, the unit in the singular), for a whole n and one unit of _MICROS_OF or
    _MONTHS_OF."""
    unit = e.args.get("unit")
    name = unit.name.upper().removesuffix("S") if isinstance(unit, exp.Var) else ""
    if not (isinstance(e.this, exp.Literal) and re.fullmatch(r"-?\d{1,9}", e.this.name.strip())):
        raise NotOnDriver(f"the interval {e.sql('spark')}")
    if name not in _MICROS_OF and name not in _MONTHS_OF:
        raise NotOnDriver(f"an interval of {unit.sql('spark') if unit is not None else 'no unit'}")
    return int(e.this.name.strip()), name


def _plus_months(moment: dt.date | None, months: int) -> dt.date | None:
    """A date or datetime `months` calendar months later, on the same day or the month's last (Java's
    plusMonths)."""
    if moment is None:
        return None
    year, month = divmod(moment.year * 12 + moment.month - 1 + months, 12)
    if not 1 <= year <= 9999:
        raise NotOnDriver("a date beyond the years 1 to 9999")
    return moment.replace(
        year=year, month=month + 1, day=min(moment.day, calendar.monthrange(year, month + 1)[1])
    )


def _micros_as_seconds(micros: Value) -> Value:
    """Microseconds (fewer than 10^8) as seconds in a DECIMAL(8, 6), exactly."""
    millionth = pa.scalar(Decimal("0.000001"), pa.decimal128(6, 6))
    return pc.cast(pc.multiply(pc.cast(micros, pa.decimal128(19, 0)), millionth), pa.decimal128(8, 6))


def _decimals_alone(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether arithmetic of these types is decimal arithmetic: a decimal, and no float (a decimal beside a
    float is a double)."""
    return any(pa.types.is_decimal(t) for t in (a, b)) and not any(pa.types.is_floating(t) for t in (a, b))


def _decimal_as_double(v: Value) -> Value:
    """A decimal as Spark makes it a double: the nearest double. Of at most 15 digits, its unscaled digits and
    10^scale are both exact doubles, so their quotient is the nearest double, as Spark's is; a whole number of
    more is rounded once by both (Python's float of a Decimal is the nearest); of more with decimals, Spark's
    conversion may round twice: Spark decides."""
    t = v.type
    assert isinstance(t, pa.Decimal128Type)
    if t.precision > 15 and t.scale == 0:  # (Arrow's int64 to double rounds to the nearest, as Java's)
        try:
            return pc.cast(pc.cast(v, pa.int64()), pa.float64(), safe=False)
        except pa.ArrowInvalid:  # beyond BIGINT
            return _rows(lambda d: None if d is None else float(d), [v], pa.float64())
    if t.precision > 15:
        raise NotOnDriver(f"{sql_type(t)} as a double")
    unscaled = pc.multiply(v, pa.scalar(10**t.scale, pa.decimal128(t.scale + 1, 0)))  # a whole number
    return pc.divide(pc.cast(pc.cast(unscaled, pa.int64()), pa.float64()), pa.scalar(10.0**t.scale))


def _day_or_midnight(v: Value, to: pa.DataType) -> Value:
    """The day a TIMESTAMP falls on, or a day's midnight, as CAST does: in the session time zone for a TIMESTAMP
    (Arrow floors, as Spark does: 1969-12-31 23:59:59.5 is 1969-12-31)."""
    if (v.type if pa.types.is_timestamp(v.type) else to).tz is not None:
        _in_utc(f"a cast from {sql_type(v.type)} to {sql_type(to)}")
    return pc.cast(v, to)


def _checked(function: Callable[..., Value], *args: Value) -> Value:
    try:
        return function(*args)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:  # an overflow, a value that does not fit
        raise NotOnDriver(str(e).splitlines()[0]) from None


def _has_nan(v: Value) -> bool:
    if isinstance(v, pa.Scalar):
        return bool(v.is_valid and v.as_py() != v.as_py())
    return bool(pc.any(pc.is_nan(v)).as_py())


def _signs(v: Value) -> bool:
    """Whether `v` is a column of integers -1, 0 and 1 (and NULL)."""
    return not isinstance(v, pa.Scalar) and v.type in _INTEGRAL and (pc.max(pc.abs(v)).as_py() or 0) <= 1


def _ordered(op: str, left: Value, right: Value) -> Value:
    """Comparison `op` of two values of one type, floats ordered as Spark orders them: NaN equal to NaN and
    above every number (Arrow's NaN equals nothing)."""
    if not pa.types.is_floating(left.type) or not (_has_nan(left) or _has_nan(right)):
        return getattr(pc, op)(left, right)
    nan_left, nan_right = pc.is_nan(left), pc.is_nan(right)
    zero = pa.scalar(0.0, left.type)
    by_value = getattr(pc, op)(pc.if_else(nan_left, zero, left), pc.if_else(nan_right, zero, right))
    by_nan = getattr(pc, op)(pc.cast(nan_left, pa.int8()), pc.cast(nan_right, pa.int8()))
    return pc.if_else(pc.equal(nan_left, nan_right), by_value, by_nan)


def extreme(kind: str, values: Sequence[Value]) -> Value:
    """The least (`kind` "min") or greatest of columns of one type, row by row, skipping NULLs (Spark's least
    and greatest, where NaN is above every number). Arrow's element-wise kernels have none for zoned
    timestamps, so those run on their microseconds, and they skip NaN: a NaN makes the greatest NaN, and the
    least NaN where every other value is NULL or NaN."""
    pick = pc.min_element_wise if kind == "min" else pc.max_element_wise
    if pa.types.is_timestamp(values[0].type) and values[0].type.tz is not None:
        return pick(*[pc.cast(v, pa.int64()) for v in values]).cast(values[0].type)
    picked = pick(*values)
    if pa.types.is_floating(values[0].type):
        nans = [pc.fill_null(pc.is_nan(v), False) for v in values]
        nan = (
            functools.reduce(pc.or_, nans)
            if kind == "max"
            else pc.and_(pc.is_null(picked), functools.reduce(pc.or_, nans))
        )
        picked = pc.if_else(nan, pa.scalar(float("nan"), picked.type), picked)
    return picked


def _array(v: Value, n: int) -> pa.Array | pa.ChunkedArray:
    return pa.repeat(v, n) if isinstance(v, pa.Scalar) else v


def _dates_from_literals(
    left: Value, right: Value, a: exp.Expression, b: exp.Expression
) -> tuple[Value, Value]:
    """A string literal compared with a date or timestamp is that date or time (Spark casts it)."""
    if _is_time(left.type) and isinstance(b, exp.Literal) and b.is_string:
        right = _date_literal(b.name, left.type)
    elif _is_time(right.type) and isinstance(a, exp.Literal) and a.is_string:
        left = _date_literal(a.name, right.type)
    return left, right


def _is_time(t: pa.DataType) -> bool:
    return bool(pa.types.is_date(t) or pa.types.is_timestamp(t))


def _date_literal(text: str, to: pa.DataType) -> pa.Scalar:
    """A DATE or TIMESTAMP literal in the strict ISO forms (anything Spark parses more leniently goes to Spark).
    Timestamps are read in UTC, mvengine's default session time zone (in any other, Spark reads them)."""
    text = text.strip()
    if pa.types.is_date(to):
        if not _DATE.fullmatch(text):
            raise NotOnDriver(f"the date literal {text!r}")
        return pa.scalar(dt.date.fromisoformat(text), pa.date32())
    if not _TIMESTAMP.fullmatch(text):
        raise NotOnDriver(f"the timestamp literal {text!r}")
    value = dt.datetime.fromisoformat(text.replace(" ", "T"))
    if to.tz is not None:
        _in_utc(f"the TIMESTAMP literal {text!r}")
        value = value.replace(tzinfo=dt.UTC)
    return pa.scalar(value, pa.timestamp("us", tz=to.tz))


def _arrow_type(t: exp.DataType) -> pa.DataType:
    """The type of a CAST (CHAR(n): Spark pads it, Arrow does not)."""
    found = arrow_type(t) if t.this != exp.DataType.Type.CHAR else None
    if found is None:
        raise NotOnDriver(f"a cast to {t.sql('spark')}")
    return found
