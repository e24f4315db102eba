"""Types and nullability of view columns, inferred without starting Spark.

sqlglot's type annotator (Spark dialect) types most expressions; the rules here cover what it gets wrong or does not
know for Spark: the result types of SUM and AVG, and nullability, which sqlglot does not track. These are the types
Spark will give for the common cases; Spark's own analysis, at the first refresh, remains the final word.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

DIALECT = "spark"
T = exp.DataType.Type

_INTEGRAL = {T.TINYINT, T.SMALLINT, T.INT, T.BIGINT}
_FRACTIONAL = {T.FLOAT, T.DOUBLE}
_NAMES = {
    T.TEXT: "string",
    T.VARCHAR: "string",
    T.CHAR: "string",
    T.BOOLEAN: "boolean",
    T.TINYINT: "tinyint",
    T.SMALLINT: "smallint",
    T.INT: "int",
    T.BIGINT: "bigint",
    T.FLOAT: "float",
    T.DOUBLE: "double",
    T.DATE: "date",
    T.BINARY: "binary",
    T.TIMESTAMPTZ: "timestamp",
    T.TIMESTAMP: "timestamp_ntz",
    T.TIMESTAMPNTZ: "timestamp_ntz",
    T.NULL: "void",
    T.UNKNOWN: "unknown",
    T.INTERVAL: "interval",
}
# Functions whose sqlglot type differs from Spark's.
_INT_RESULT = (
    exp.Year,
    exp.Month,
    exp.Day,
    exp.DayOfMonth,
    exp.DayOfWeek,
    exp.DayOfYear,
    exp.Quarter,
    exp.WeekOfYear,
)


def build(sql_type: str) -> exp.DataType:
    return exp.DataType.build(sql_type, dialect=DIALECT)


def type_name(dtype: exp.DataType) -> str:
    """Spark's name for a type, as `DataType.simpleString` prints it: int, decimal(20,2), array<string>..."""
    t = dtype.this
    params = dtype.expressions
    if t == T.DECIMAL:
        return "decimal({},{})".format(*_precision_scale(dtype))
    if t == T.ARRAY:
        return f"array<{type_name(params[0])}>" if params else "array<unknown>"
    if t == T.MAP:
        return f"map<{type_name(params[0])},{type_name(params[1])}>" if len(params) == 2 else "map<unknown>"
    if t == T.STRUCT:
        fields = [f"{p.name}:{type_name(p.args['kind'])}" for p in params if isinstance(p, exp.ColumnDef)]
        return f"struct<{','.join(fields)}>"
    return _NAMES.get(t, dtype.sql(DIALECT).lower())


def aggregate_type(func: exp.AggFunc, arg: exp.DataType | None) -> exp.DataType | None:
    """Spark's result type of COUNT/SUM/AVG/MIN/MAX over `arg`; None for other aggregates (sqlglot types them)."""
    if isinstance(func, (exp.Count, exp.CountIf)):
        return build("BIGINT")
    if arg is None or not isinstance(func, (exp.Sum, exp.Avg, exp.Min, exp.Max)):
        return None
    if isinstance(func, (exp.Min, exp.Max)):
        return arg
    if arg.this == T.DECIMAL:
        precision, scale = _precision_scale(arg)
        if isinstance(func, exp.Sum):
            return build(f"DECIMAL({min(38, precision + 10)}, {scale})")
        return build(f"DECIMAL({min(38, precision + 4)}, {min(38, scale + 4)})")
    if isinstance(func, exp.Avg):
        return build("DOUBLE")
    if arg.this in _INTEGRAL:
        return build("BIGINT")
    if arg.this in _FRACTIONAL:
        return build("DOUBLE")
    return arg


def infer_type(expression: exp.Expression) -> exp.DataType:
    """The type of a bound expression (its columns already carry their types)."""
    _spark_types(expression)
    annotated = annotate_types(expression, dialect=DIALECT, overwrite_types=False)
    return annotated.type or build("UNKNOWN")


def _is_timestamp(e: exp.Expression) -> bool:
    t = annotate_types(e, dialect=DIALECT, overwrite_types=False).type
    return t is not None and t.this in (T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPLTZ, T.TIMESTAMPNTZ)


def _spark_types(e: exp.Expression) -> None:
    """Pre-type, bottom-up, the nodes whose Spark type sqlglot gets wrong (sqlglot keeps types set before)."""
    for child in e.iter_expressions():
        _spark_types(child)
    if isinstance(e, exp.Literal) and not e.is_string:
        e.type = _number_literal_type(e.name)
    elif isinstance(e, _INT_RESULT):
        e.type = build("INT")
    elif isinstance(e, exp.TimestampTrunc):
        e.type = build("TIMESTAMP")
    elif isinstance(e, exp.Sub) and all(_is_timestamp(side) for side in (e.this, e.expression)):
        e.type = exp.DataType(this=T.INTERVAL)  # (Spark's difference of two instants: day to second)
    elif isinstance(e, exp.DateTrunc):  # Spark's TRUNC(date, unit): a DATE
        e.type = build("DATE")
    elif isinstance(e, exp.Window) and isinstance(e.this, exp.AggFunc):  # SUM(x) OVER (...): as over GROUP BY
        f = e.this
        argument = f.this if isinstance(f.this, exp.Expression) and not isinstance(f.this, exp.Star) else None
        arg_type = annotate_types(argument, dialect=DIALECT, overwrite_types=False).type if argument else None
        found = aggregate_type(f, arg_type)
        if found is not None:
            e.type = found
    elif isinstance(e, (exp.Round, exp.Floor, exp.Ceil)):
        arg = annotate_types(e.this, dialect=DIALECT, overwrite_types=False).type
        if arg is not None and arg.this == T.DECIMAL:
            # Spark rounds decimal(p, s) to scale d in decimal(p - s + 1 + d, d): one more integral digit.
            p, s = _precision_scale(arg)
            digits = e.args.get("decimals")
            d = int(digits.name) if isinstance(digits, exp.Literal) and not digits.is_string else 0
            d = min(s, max(d, 0))
            e.type = build(f"DECIMAL({min(38, p - s + 1 + d)}, {d})")
        elif arg is not None and arg.this in _FRACTIONAL and isinstance(e, (exp.Floor, exp.Ceil)):
            e.type = build("BIGINT")
    elif isinstance(e, (exp.Coalesce, exp.Case, exp.If)):
        if isinstance(e, exp.Coalesce):
            values = [e.this, *e.expressions]
        elif isinstance(e, exp.Case):
            values = [i.args["true"] for i in e.args.get("ifs") or []] + [e.args.get("default")]
        else:
            values = [e.args.get("true"), e.args.get("false")]
        wider = _wider_numeric(
            [
                annotate_types(v, dialect=DIALECT, overwrite_types=False).type
                for v in values
                if v is not None and not isinstance(v, exp.Null)
            ]
        )
        if wider is not None:
            e.type = wider
    elif isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.this, exp.Interval) != isinstance(
        e.expression, exp.Interval
    ):
        # A date moved by days, months or years stays a DATE; by hours, minutes or seconds it is a TIMESTAMP.
        interval, moved = (
            (e.this, e.expression) if isinstance(e.this, exp.Interval) else (e.expression, e.this)
        )
        moved_type = annotate_types(moved, dialect=DIALECT, overwrite_types=False).type
        unit = interval.args.get("unit")
        by_days = isinstance(unit, exp.Var) and unit.name.upper().removesuffix("S") in (
            "DAY",
            "MONTH",
            "YEAR",
        )
        if moved_type is not None and moved_type.this == T.DATE:
            e.type = build("DATE" if by_days else "TIMESTAMP")
        elif moved_type is not None and moved_type.this in (T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPNTZ):
            e.type = moved_type
    elif isinstance(e, exp.Extract) and e.this.name.upper() == "SECOND":
        e.type = build("DECIMAL(8, 6)")  # the seconds with their microseconds
    elif isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
        # A number written with a decimal point is a DECIMAL literal in Spark, not a DOUBLE.
        sides = [
            None
            if isinstance(side, exp.Literal)
            else annotate_types(side, dialect=DIALECT, overwrite_types=False).type
            for side in (e.this, e.expression)
        ]
        if any(t is not None and t.this in _FRACTIONAL for t in sides):
            e.type = build("DOUBLE")
            return
        left, right = (_decimal_of(side) for side in (e.this, e.expression))
        if left and right and (left[2] or right[2]):
            e.type = _decimal_arithmetic(e, left[:2], right[:2])


_INTEGRAL_DIGITS = {T.TINYINT: 3, T.SMALLINT: 5, T.INT: 10, T.BIGINT: 20}
_INTEGRAL_ORDER = [T.TINYINT, T.SMALLINT, T.INT, T.BIGINT]


def wider_type(types: list[exp.DataType]) -> exp.DataType:
    """The type Spark gives a column whose values have these types (UNION branches): the first when all are
    the same or they are not all numeric."""
    if all(t == types[0] for t in types):
        return types[0]
    return _wider_numeric(list(types)) or types[0]


def _wider_numeric(types: list[exp.DataType | None]) -> exp.DataType | None:
    """The type Spark widens numeric branches to (COALESCE, CASE, IF); None when they are not all numeric."""
    if not types or any(t is None or t.this not in _INTEGRAL | _FRACTIONAL | {T.DECIMAL} for t in types):
        return None
    return _wider_of_numbers([t for t in types if t is not None])


def _wider_of_numbers(types: list[exp.DataType]) -> exp.DataType:
    if any(t.this in _FRACTIONAL for t in types):
        return build("DOUBLE")
    decimals = [_precision_scale(t) for t in types if t.this == T.DECIMAL]
    if not decimals:
        return build(max((t.this for t in types), key=_INTEGRAL_ORDER.index).value)
    decimals += [(_INTEGRAL_DIGITS[t.this], 0) for t in types if t.this in _INTEGRAL]
    scale = max(s for _, s in decimals)
    whole = max(p - s for p, s in decimals)
    return build(f"DECIMAL({min(38, whole + scale)}, {min(scale, 38)})")


def _precision_scale(t: exp.DataType) -> tuple[int, int]:
    params = t.expressions
    return (
        (int(params[0].name), int(params[1].name))
        if len(params) == 2
        else ((int(params[0].name), 0) if params else (10, 0))
    )


def _number_literal_type(text: str) -> exp.DataType:
    """Spark's type of a number written in SQL: INT, BIGINT, DECIMAL(p, s) for 2.5, DOUBLE for 1e3."""
    digits = text.lstrip("-")
    if "e" in digits.lower():
        return build("DOUBLE")
    whole, dot, fraction = digits.partition(".")
    if not dot:
        value = int(digits)
        if value < 2**31:
            return build("INT")
        if value < 2**63:
            return build("BIGINT")
    whole = whole.lstrip("0")
    return build(f"DECIMAL({max(len(whole) + len(fraction), len(fraction), 1)}, {len(fraction)})")


def _decimal_of(e: exp.Expression) -> tuple[int, int, bool] | None:
    """(precision, scale, is a decimal) of an operand of decimal arithmetic, as Spark widens it; None if not."""
    literal = integer_literal_digits(e)
    if literal is not None:
        return literal, 0, False
    t = annotate_types(e, dialect=DIALECT, overwrite_types=False).type
    if t is None:
        return None
    if t.this == T.DECIMAL:
        return (*_precision_scale(t), True)
    return (_INTEGRAL_DIGITS[t.this], 0, False) if t.this in _INTEGRAL_DIGITS else None


def integer_literal_digits(e: exp.Expression) -> int | None:
    """The precision an integer literal widens to beside a decimal in + - * / (its digits, not its INT's 10:
    Spark's literal rule; Spark's parser folds parentheses and a minus sign into the literal); None for any
    other operand."""
    while isinstance(e, (exp.Paren, exp.Neg)):
        e = e.this
    if isinstance(e, exp.Literal) and not e.is_string and "." not in e.name and "e" not in e.name.lower():
        return max(len(e.name.lstrip("-").lstrip("0")), 1)
    return None


def _decimal_arithmetic(e: exp.Expression, left: tuple[int, int], right: tuple[int, int]) -> exp.DataType:
    p, s = adjusted_decimal(*decimal_result(type(e).__name__.lower(), left, right))
    return build(f"DECIMAL({p}, {s})")


def decimal_result(op: str, left: tuple[int, int], right: tuple[int, int]) -> tuple[int, int]:
    """Spark's (precision, scale) of decimal `op` ("add", "sub", "mul" or "div") of operands of these
    (precision, scale) (DecimalPrecision), before adjusted_decimal takes digits beyond 38 away."""
    (p1, s1), (p2, s2) = left, right
    if op in ("add", "sub"):
        s = max(s1, s2)
        return max(p1 - s1, p2 - s2) + s + 1, s
    if op == "mul":
        return p1 + p2 + 1, s1 + s2
    s = max(6, s1 + p2 + 1)
    return p1 - s1 + s2 + s, s


def adjusted_decimal(p: int, s: int) -> tuple[int, int]:
    """A result type of more than 38 digits as Spark caps it (precision loss allowed): 38 digits, the integral
    ones kept, and at least min(s, 6) decimals."""
    if p <= 38:
        return p, s
    return 38, max(38 - (p - s), min(s, 6))


def infer_nullable(expression: exp.Expression) -> bool:
    """Whether a bound expression can be NULL (bound columns carry `meta["nullable"]`), conservatively."""
    e = expression
    if isinstance(e, (exp.Alias, exp.Paren)):
        return infer_nullable(e.this)
    if isinstance(e, exp.Column):
        return bool(e.meta.get("nullable", True))
    if isinstance(e, exp.Null):
        return True
    if isinstance(
        e,
        (
            exp.DataType,
            exp.Var,
            exp.Interval,
            exp.Literal,
            exp.Boolean,
            exp.Count,
            exp.Is,
            exp.RowNumber,
            exp.CurrentTimestamp,
            exp.CurrentDate,
        ),
    ):
        return False
    if isinstance(e, exp.Coalesce):
        return all(infer_nullable(a) for a in [e.this, *e.expressions])
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul)) and e.type is not None and e.type.this == T.DECIMAL:
        return True  # Spark: decimal arithmetic can overflow to NULL
    if isinstance(e, exp.Case):
        branches = [i.args["true"] for i in e.args.get("ifs") or []]
        default = e.args.get("default")
        return default is None or any(infer_nullable(b) for b in [*branches, default])
    if isinstance(e, exp.If):
        false = e.args.get("false")
        return false is None or infer_nullable(e.args["true"]) or infer_nullable(false)
    if isinstance(e, (exp.Cast, exp.Neg, exp.Not, exp.Binary, exp.Func)) and not isinstance(
        e, (exp.AggFunc, exp.Div, exp.Mod, exp.TryCast, exp.Anonymous, exp.Window)
    ):
        return any(infer_nullable(child) for child in e.iter_expressions())
    return True
