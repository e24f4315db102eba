"""Expressions evaluated on the driver (incremental/driver_expressions.py) against Spark, differentially: random
expressions over random rows of every type the subset knows; whenever the driver gives values, Spark must give
the same values (and not an error). Where the driver declines (NotOnDriver), the batch would go to Spark, so
there is nothing to compare; where Spark's analysis refuses the expression, no view holding it reaches a batch."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException

from mvengine.incremental.driver_expressions import NotOnDriver, evaluate, predicate_mask
from mvengine.incremental.driver_support import unsupported
from mvengine.incremental.java_regex import translate
from mvengine.plan.nodes import Field
from mvengine.plan.types import build
from tests.conftest import examples

SCHEMA = pa.schema(
    [
        ("a", pa.int32()),
        ("b", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("f", pa.bool_()),
        ("d", pa.decimal128(5, 2)),
        ("m", pa.decimal128(38, 10)),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
FIELDS = [Field(f.name, build("INT"), True) for f in SCHEMA]  # the evaluator reads types off the data
VALUES = {
    "a": st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([2**31 - 1, -(2**31)])),
    "b": st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([2**63 - 1, 2**40])),
    "x": st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, -2.25, math.nan, math.inf, 3.0])),
    "s": st.one_of(st.none(), st.sampled_from(["", "a", "B", "ab", "straße", "é", " a b\n ", "a%_b"])),
    "f": st.one_of(st.none(), st.booleans()),
    "d": st.one_of(
        st.none(),
        st.sampled_from(
            [
                Decimal("0.00"),
                Decimal("1.50"),
                Decimal("-999.99"),
                Decimal("0.07"),
                Decimal("-2.25"),
                Decimal("0.05"),
            ]
        ),
    ),
    "m": st.one_of(  # DECIMAL(38, 10) at its limits: results past 38 digits, and Spark's scale cut
        st.none(),
        st.sampled_from(
            [
                Decimal("0E-10"),
                Decimal("1.5000000000"),
                Decimal("-0.0000000001"),
                Decimal("9999999999999999999999999999.9999999999"),
                Decimal("-9999999999999999999999999999.9999999999"),
                Decimal("12345678901234567890.0123456789"),
            ]
        ),
    ),
    "day": st.one_of(
        st.none(), st.sampled_from([dt.date(2026, 1, 1), dt.date(2026, 11, 23), dt.date(2024, 2, 29)])
    ),
    "ts": st.one_of(
        st.none(),
        st.sampled_from(
            [
                dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                dt.datetime(2026, 11, 23, 12, 30, tzinfo=dt.UTC),
                dt.datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=dt.UTC),
                dt.datetime(2026, 1, 31, 10, 0, 7, 250_001, tzinfo=dt.UTC),
            ]
        ),
    ),
}
ROWS = st.lists(st.fixed_dictionaries(VALUES), min_size=1, max_size=6)

LEAVES = st.sampled_from(
    [
        "a",
        "b",
        "x",
        "s",
        "f",
        "d",
        "m",
        "day",
        "ts",
        "0",
        "1",
        "-2",
        "3000000000",
        "1.5",
        "2.50",
        "7",
        "1e0",
        "'a'",
        "'B'",
        "NULL",
        "TRUE",
        "FALSE",
        "DATE '2026-01-01'",
        "TIMESTAMP '2026-11-23 12:30:00'",
        "'2026-01-01'",
    ]
)


def _compose(children):
    unary = st.tuples(
        st.sampled_from(
            [
                "-({})",
                "NOT ({})",
                "({}) IS NULL",
                "({}) IS NOT NULL",
                "abs({})",
                "upper({})",
                "lower({})",
                "length({})",
                "replace({}, 'a')",
                "replace({}, 'a', 'xy')",
                "replace({}, '', 'x')",
                "CAST({} AS BIGINT)",
                "CAST({} AS INT)",
                "CAST({} AS DOUBLE)",
                "CAST({} AS STRING)",
                "CAST({} AS TINYINT)",
                "CAST({} AS DECIMAL(5, 1))",
                "CAST({} AS DECIMAL(3, 0))",
                "CAST({} AS DECIMAL(22, 4))",
                "CAST({} AS DATE)",
                "CAST({} AS TIMESTAMP)",
                "CAST({} AS TIMESTAMP_NTZ)",
                "to_date({})",
                "year({})",
                "month({})",
                "day({})",
                "hour({})",
                "date_add({}, 3)",
                "date_sub({}, 40)",
                "date_add(DATE '2026-02-27', {})",
                "datediff({}, DATE '2026-01-01')",
                "datediff(DATE '1969-12-31', {})",
                "date_format({}, 'yyyy-MM-dd HH:mm:ss')",
                "date_format({}, 'HH:mm')",
                "minute({})",
                "extract(YEAR FROM ({}))",
                "extract(HOUR FROM ({}))",
                "extract(SECOND FROM {})",
                "{} + INTERVAL 1 DAY",
                "{} - INTERVAL '5' MINUTE",
                "{} + INTERVAL 2 HOURS",
                "{} - INTERVAL 1 MONTH",
                "{} + INTERVAL 1 YEAR",
                "INTERVAL 3 SECONDS + {}",
                "{} ILIKE 'A%'",
                "{} NOT ILIKE '%B'",
                "date_trunc('MONTH', {})",
                "date_trunc('WEEK', {})",
                "date_trunc('HOUR', {})",
                "trunc({}, 'MM')",
                "trunc({}, 'QUARTER')",
                "substring({}, 2, 3)",
                "substring({}, -2)",
                "trim({})",
                "ltrim({})",
                "rtrim({})",
                "({}) LIKE 'a%'",
                "({}) NOT LIKE '_%b'",
                "({}) LIKE '%!%!_%' ESCAPE '!'",
                "regexp_extract({}, '(&|^)a=([^&]*)', 2)",
                "regexp_extract({}, 'b?', 0)",
                "({}) RLIKE '^a.'",
                "split({}, 'a')[0]",
                "split({}, 'a', 2)[1]",
                "element_at(split({}, '%'), 1)",
                "split_part({}, 'a', 2)",
                "split_part({}, '', -1)",
            ]
        ),
        children,
    ).map(lambda t: t[0].format(f"({t[1]})"))  # in parentheses: trim(a IS NULL) is no SQL to sqlglot
    binary = st.tuples(
        st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "<=>", "+", "-", "*", "/", "%", "AND", "OR", "||"]),
        children,
        children,
    ).map(lambda t: f"({t[1]}) {t[0]} ({t[2]})")
    other = st.one_of(
        st.tuples(children, children, children).map(
            lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"
        ),
        st.tuples(children, children).map(lambda t: f"CASE {t[0]} WHEN 1 THEN {t[1]} END"),
        st.tuples(children, children).map(lambda t: f"coalesce({t[0]}, {t[1]})"),
        st.tuples(children, children, children).map(lambda t: f"IF({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]}) BETWEEN ({t[1]}) AND ({t[2]})"),
        st.tuples(children, children).map(lambda t: f"({t[0]}) IN ({t[1]}, 2, NULL)"),
        st.tuples(children, children).map(lambda t: f"concat({t[0]}, {t[1]})"),
        st.tuples(children, children).map(lambda t: f"concat_ws('-', ({t[0]}), ({t[1]}))"),
        st.tuples(children, children, children).map(lambda t: f"substring(({t[0]}), ({t[1]}), ({t[2]}))"),
    )
    return st.one_of(unary, binary, other)


EXPRESSIONS = st.recursive(LEAVES, _compose, max_leaves=5)


@pytest.fixture(scope="module")
def ansi(spark):
    return spark.conf.get("spark.sql.ansi.enabled")


@settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=ROWS, sql=EXPRESSIONS)
def test_the_driver_computes_what_spark_computes(spark, ansi, rows, sql):  # (ansi: shown on failure)
    assert_as_spark(spark, pa.Table.from_pylist(rows, schema=SCHEMA), sql)


# Month ends, a leap day, before 1970, microseconds, decimals to truncate and NULL: what few random examples reach.
CALENDAR_ROWS = [
    {
        "day": dt.date(2024, 2, 29),
        "ts": dt.datetime(2026, 1, 31, 10, 0, 7, 250_001, tzinfo=dt.UTC),
        "d": Decimal("99.99"),
    },
    {"day": dt.date(2026, 3, 31), "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=dt.UTC)},
    {"day": dt.date(1900, 1, 31), "ts": dt.datetime(2024, 2, 29, 23, 0, tzinfo=dt.UTC), "s": "AbC"},
    {"day": None, "ts": None, "s": "aB%", "d": Decimal("-2.75")},
]


@pytest.mark.parametrize(
    "sql",
    [
        "day + INTERVAL 1 DAY",
        "day - INTERVAL '40' DAYS",
        "day + INTERVAL 3 HOURS",
        "day - INTERVAL 1 MONTH",
        "day + INTERVAL 1 YEAR",
        "INTERVAL 13 MONTHS + day",
        "ts + INTERVAL 1 DAY",
        "ts - INTERVAL '5' MINUTE",
        "ts + INTERVAL 1 MONTH",
        "ts - INTERVAL 1 YEAR",
        "ts + INTERVAL 61 SECONDS > TIMESTAMP '2026-01-31 10:01:00'",
        "EXTRACT(SECOND FROM ts)",
        "s ILIKE 'ab%'",
        "s NOT ILIKE '%\\%'",
        "replace(s, 'B', 'bb')",
        "CAST(d AS INT) % 7",
        "-CAST(d AS BIGINT) % -3",
        "length(s) - length(replace(s, 'a', ''))",
        "CAST(d AS INT)",
        "CAST(d AS TINYINT)",
        "CAST(-d AS BIGINT)",
    ],
)
def test_intervals_seconds_ilike_and_decimal_casts_as_spark(spark, sql):
    assert_as_spark(spark, pa.Table.from_pylist(CALENDAR_ROWS, schema=SCHEMA), sql, required=True)


# Java regular expressions of the subset RE2 reads as Java does (incremental/java_regex.py), over strings of
# the characters they name: regexp_extract of each group and RLIKE, on the driver and in Spark.
REGEX_ATOMS = st.sampled_from(
    ["a", "b", "&", "=", "/", "é", "\\.", ".", "[ab]", "[^&]", "[a-c9]", "[-a]", "[a=-]", "\\d", "\\w"]
    + ["\\s", "\\W", "\\S", "\\-", "\\t", "[\\d&]", "[\\w]"]
)
QUANTIFIERS = ["*", "+", "?", "*?", "+?", "??", "{2}", "{1,}", "{0,2}", "{1,2}?"]


def _regex(children):
    return st.one_of(
        st.tuples(children, children).map("".join),
        st.tuples(children, children).map("|".join),
        children.map("({})".format),
        children.map("(?:{})".format),
        st.tuples(children, st.sampled_from(QUANTIFIERS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
        st.tuples(REGEX_ATOMS, st.sampled_from(QUANTIFIERS)).map("".join),
        children.map("^{}".format),
        children.map("{}$".format),
    )


PATTERNS = st.lists(st.recursive(REGEX_ATOMS, _regex, max_leaves=6), min_size=1, max_size=6)
SEARCHED = st.lists(
    st.one_of(st.none(), st.text(alphabet="ab&=/é.9 \t-c", max_size=8)), min_size=1, max_size=8
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(patterns=PATTERNS, strings=SEARCHED, data=st.data())
def test_regular_expressions_match_as_in_java(spark, patterns, strings, data):
    table = pa.table({"s": pa.array(strings, pa.string())})
    fields = [Field("s", build("STRING"), True)]
    calls = []
    for pattern in patterns:
        translated = translate(pattern)
        assert translated is not None, pattern
        quoted = _quoted(pattern)
        group = data.draw(st.integers(0, translated.groups))
        calls += [f"regexp_extract(s, {quoted}, {group})", f"s RLIKE {quoted}"]
    driver = []
    for call in calls:
        expression = sqlglot.parse_one(call, read="spark")
        assert unsupported(expression) is None, call
        assert expression.expression.name in patterns, call  # (sqlglot reads the literal as Spark does)
        driver.append(evaluate(expression, table, fields).to_pylist())
    in_spark = spark.createDataFrame(table).selectExpr(*calls).collect()
    for i, call in enumerate(calls):
        assert driver[i] == [row[i] for row in in_spark], f"{call} over {strings}"


def _quoted(pattern: str) -> str:
    """A pattern as a Spark SQL string literal (whose backslashes escape)."""
    return "'" + pattern.replace("\\", "\\\\") + "'"


def test_patterns_outside_the_subset_go_to_spark():
    for pattern in ["a**", "a*+", "(?i)a", "(a)\\1", "x\\b", "[a&&b]", "[[a]]", "[]a]", "a{,2}", "\\p{L}"]:
        assert translate(pattern) is None, pattern
        assert unsupported(sqlglot.parse_one(f"s RLIKE {_quoted(pattern)}", read="spark")) is not None, (
            pattern
        )
    for sql in [
        "split(s, '.')[0]",
        "split(s, 'a')",
        "regexp_extract(s, '(a)', 2)",
        "try_element_at(split(s, 'a'), 1)",
    ]:
        assert unsupported(sqlglot.parse_one(sql, read="spark")) is not None, sql
    lines = pa.table({"s": ["a\nb"]})
    with pytest.raises(NotOnDriver, match="line terminator"):
        evaluate(sqlglot.parse_one("s RLIKE 'a.b'", read="spark"), lines, [Field("s", build("STRING"), True)])


def assert_as_spark(spark, table: pa.Table, sql: str, required: bool = False) -> None:
    """Where the driver gives values for `sql` over `table` (always, when `required`), Spark gives the same, in
    the same decimal type."""
    expression = sqlglot.parse_one(sql, read="spark")
    assert unsupported(expression) is None
    try:
        computed = evaluate(expression, table, FIELDS)
    except NotOnDriver:
        assert not required, f"{sql}: the driver declined"
        return
    driver = computed.to_pylist()
    rows = table.to_pylist()
    try:
        selected = spark.createDataFrame(table).selectExpr(sql)
        spark_values = [r[0] for r in selected.collect()]
    except AnalysisException:  # a view with this expression is refused before any batch runs
        assert not required, f"{sql}: Spark refused it"
        return
    except Exception as e:  # Spark fails on these rows (an overflow, a bad cast) where the driver did not
        pytest.fail(f"{sql} over {rows}: the driver gave {driver}, Spark failed: {str(e).splitlines()[0]}")
    assert [_plain(v) for v in driver] == [_plain(v) for v in spark_values], f"{sql} over {rows}"
    if pa.types.is_decimal(computed.type):  # Decimal("1.5") == Decimal("1.500000"): the scales too
        spark_type = selected.schema[0].dataType
        assert (computed.type.precision, computed.type.scale) == (
            spark_type.precision,
            spark_type.scale,
        ), f"{sql}: the driver's {computed.type}, Spark's {spark_type}"


def test_a_condition_keeps_true_rows_only():
    table = pa.Table.from_pylist([{"a": 1}, {"a": None}, {"a": 5}], schema=pa.schema([("a", pa.int32())]))
    fields = [Field("a", build("INT"), True)]
    assert predicate_mask(sqlglot.parse_one("a > 2"), table, fields).to_pylist() == [False, False, True]


def test_what_the_driver_leaves_to_spark_is_named():
    assert unsupported(sqlglot.parse_one("pmod(a, 2)", read="spark")) == "the function pmod"
    assert unsupported(sqlglot.parse_one("regexp_replace(s, 'a', 'b') = 'a'", read="spark")).startswith(
        "regexpreplace"
    )
    assert unsupported(sqlglot.parse_one("a IN (SELECT 1)", read="spark")) is not None
    assert unsupported(sqlglot.parse_one("CASE WHEN a > 1 THEN 'x' END", read="spark")) is None
    assert unsupported(sqlglot.parse_one("date_format(ts, 'EEE, d MMM')", read="spark")).startswith(
        "date_format pattern"
    )  # day and month names: Java's and strftime's differ
    assert unsupported(sqlglot.parse_one("date_format(ts, 'yyyy-MM-dd')", read="spark")) is None


def _plain(value):
    """As Spark and Arrow may both give it: NaN as a marker, -0.0 as 0.0, aware datetimes in UTC."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value + 0.0
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return value
