"""The engine's operations (incremental/engine.py) against each other: every delta rule written once runs on
Spark (`SparkEngine`) or on the driver (`ArrowEngine`), so each operation must give the same rows on both.
Random relations of what real tables hold (NULL, NaN, -0.0, ±inf, BIGINT beyond 2^53, DECIMAL, strings),
one operation at a time; the rules' differential tests then check the operations composed. Where the driver
declines (NotOnDriver), the batch goes to Spark: there is nothing to compare."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from mvengine.incremental.driver_expressions import NotOnDriver
from mvengine.incremental.engine import ArrowEngine, SparkEngine
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Field
from mvengine.plan.types import build
from tests.conftest import examples

SCHEMA = pa.schema(
    [
        ("c0", pa.int64()),
        ("c1", pa.float64()),
        ("c2", pa.decimal128(12, 2)),
        ("c3", pa.string()),
        (WEIGHT, pa.int64()),
        (MTIME, pa.timestamp("us", tz="UTC")),
    ]
)
SPARK_SCHEMA = "c0 BIGINT, c1 DOUBLE, c2 DECIMAL(12,2), c3 STRING, _w BIGINT, _mtime TIMESTAMP"
VALUES = {
    "c0": st.one_of(st.none(), st.integers(-2, 2), st.sampled_from([2**53, 2**53 + 1, -(2**63)])),
    "c1": st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, math.nan, math.inf, -math.inf])),
    "c2": st.one_of(
        st.none(), st.sampled_from([Decimal("0.00"), Decimal("-1.25"), Decimal("9999999999.99")])
    ),
    "c3": st.one_of(st.none(), st.sampled_from(["", "a", "B", "straße", "é"])),
    WEIGHT: st.sampled_from([1, -1, 2]),
    MTIME: st.sampled_from(
        [dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.UTC), dt.datetime(2026, 11, 27, 10, 0, 1, tzinfo=dt.UTC)]
    ),
}
RELATIONS = st.lists(st.fixed_dictionaries(VALUES), min_size=0, max_size=8)
# To rank: the driver declines NaN (test_the_driver_declines_to_order_by_nan), and ranks everything else.
ORDERABLE = st.lists(
    st.fixed_dictionaries(
        {**VALUES, "c1": st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, math.inf, -math.inf]))}
    ),
    min_size=1,
    max_size=10,
)
KEYS = st.sampled_from(["c0", "c1", "c3"])


def _engines(spark, *relations):
    """Both engines, and each relation in each engine's form: (Spark DataFrame, Arrow table)."""
    spark_engine, arrow_engine = SparkEngine(None, None), ArrowEngine(None, None)  # (no batch: no state read)
    forms = []
    for rows in relations:
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        forms.append((spark.createDataFrame(table.to_pylist(), SPARK_SCHEMA), table))
    return spark_engine, arrow_engine, forms


def _value(v):
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else v + 0.0  # -0.0 as 0.0
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None) if v.tzinfo is None else v.astimezone(dt.UTC).replace(tzinfo=None)
    return v


def _rows(rel) -> Counter:
    """A relation's rows by position, as a multiset of canonical values."""
    table = rel.toArrow() if not isinstance(rel, pa.Table) else rel
    return Counter(tuple(_value(v) for v in row.values()) for row in table.to_pylist())


def _same(spark_rel, arrow_rel, *, names=None):
    if names is not None:
        spark_rel, arrow_rel = spark_rel.select(*names), arrow_rel.select(names)
    assert _rows(arrow_rel) == _rows(spark_rel)


SETTINGS = settings(
    max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(left=RELATIONS, right=RELATIONS, key=KEYS)
def test_pairs_and_padded_rows_are_the_same_on_both_engines(spark, left, right, key):
    s, a, ((sl, al), (sr, ar)) = _engines(spark, left, right)
    # The sides keyed as the join rule keys them (its own names), the right's columns named apart in Spark.
    sl = sl.withColumn("_lk0", sl[key])
    al = al.append_column("_lk0", al.column(key))
    sr = sr.toDF("c4", "c5", "c6", "c7", WEIGHT, MTIME)
    sr = sr.withColumn("_rk0", sr[f"c{int(key[1]) + 4}"])
    ar = ar.append_column("_rk0", ar.column(key))
    fields = [Field(f"c{i}", build("INT"), True) for i in range(8)]
    both = sqlglot.parse_one("c2 IS NULL OR c6 IS NULL OR c2 <= c6", read="spark")
    for condition in (None, both):
        _same(
            s.pairs(sl, sr, [("_lk0", "_rk0")], condition, fields),
            a.pairs(al, ar, [("_lk0", "_rk0")], condition, fields),
        )
    plain_l, plain_r = s.drop(sl, ["_lk0"]), s.drop(sr, ["_rk0"])
    _same(s.padded(plain_l, plain_r, True), a.padded(a.drop(al, ["_lk0"]), a.drop(ar, ["_rk0"]), True))
    _same(s.padded(plain_r, plain_l, False), a.padded(a.drop(ar, ["_rk0"]), a.drop(al, ["_lk0"]), False))


@SETTINGS
@given(rows=RELATIONS, other=RELATIONS, key=KEYS, null_safe=st.booleans())
def test_lookups_are_the_same_on_both_engines(spark, rows, other, key, null_safe):
    s, a, ((sl, al), (so, ao)) = _engines(spark, rows, other)
    sk = s.select(
        s.aggregate(so, {"_k": key}, {"_n": ("sum", WEIGHT), "_t": ("max", MTIME)}), ["_k", "_n", "_t"]
    )
    ak = a.select(
        a.aggregate(ao, {"_k": key}, {"_n": ("sum", WEIGHT), "_t": ("max", MTIME)}), ["_k", "_n", "_t"]
    )
    _same(sk, ak)
    for how in ("semi", "anti", "inner", "left"):
        _same(
            s.lookup(sl, [(key, "_k")], sk, how, null_safe=null_safe),
            a.lookup(al, [(key, "_k")], ak, how, null_safe=null_safe),
        )


@SETTINGS
@given(rows=RELATIONS, other=RELATIONS, key=KEYS)
def test_aggregates_computations_and_unions_are_the_same_on_both_engines(spark, rows, other, key):
    s, a, ((sr, ar), (so, ao)) = _engines(spark, rows, other)
    sums = {"_n": ("sum", WEIGHT), "_t": ("max", MTIME), "_c": ("count", "c2"), "_m": ("max", "c2")}
    _same(s.aggregate(sr, {"_g": key, "_h": "c3"}, sums), a.aggregate(ar, {"_g": key, "_h": "c3"}, sums))
    _same(s.aggregate(sr, {}, sums), a.aggregate(ar, {}, sums))  # one row, also over none
    extremes = {"_lo": ("min", "c1"), "_hi": ("max", "c1"), "_lo0": ("min", "c0"), "_hi3": ("max", "c3")}
    _same(s.aggregate(sr, {"_g": key}, extremes), a.aggregate(ar, {"_g": key}, extremes))  # NaN above all
    flags = {"_out": "c0 > 0", "_in": "c3 IS NOT NULL"}
    _same(
        s.updates(s.compute(sr, flags), ["c0", "c3"], ["c0", "c3"], ["x", "y"], "_out", "_in"),
        a.updates(a.compute(ar, flags), ["c0", "c3"], ["c0", "c3"], ["x", "y"], "_out", "_in"),
    )
    columns = {"_was": "0", WEIGHT: f"-{WEIGHT} * 2", "_hit": "COALESCE(c0, 0) > 1 AND c3 IS NOT NULL"}
    _same(s.compute(sr, columns), a.compute(ar, columns))
    _same(s.where(sr, "c1 IS NOT NULL AND c2 <= 0"), a.where(ar, "c1 IS NOT NULL AND c2 <= 0"))
    _same(s.concat([sr, so]), a.concat([ar, ao]))
    positive = "_w > 0"
    _same(s.copies(s.where(sr, positive), WEIGHT), a.copies(a.where(ar, positive), WEIGHT))


@SETTINGS
@given(rows=RELATIONS, other=RELATIONS, key=KEYS, keyed=st.booleans())
def test_outer_pairs_sameness_and_one_row_are_the_same_on_both_engines(spark, rows, other, key, keyed):
    """A view's changelog pairs a key's old and new rows (`outer`, NULL matching NULL; a view of one row pairs
    every row) and drops the pairs whose values are the same (`same`: NaN as NaN, -0.0 as 0.0)."""
    s, a, ((sl, al), (so, ao)) = _engines(spark, rows, other)
    apart = {c: f"r{c}" for c in SCHEMA.names}
    sr, ar = s.rename(so, apart), a.rename(ao, apart)
    keys = [(key, f"r{key}")] if keyed else []
    spark_pairs, arrow_pairs = s.outer(sl, sr, keys), a.outer(al, ar, keys)
    _same(spark_pairs, arrow_pairs)
    left, right = ["c0", "c1", "c2", "c3"], ["rc0", "rc1", "rc2", "rc3"]
    _same(s.same(spark_pairs, left, right, "_same"), a.same(arrow_pairs, left, right, "_same"))
    totals = {"_n": ("sum", WEIGHT), "_hi": ("max", "c1"), "_c": ("count", "c3")}
    spark_row, arrow_row = s.one_row(s.aggregate(sl, {}, totals)), a.one_row(a.aggregate(al, {}, totals))
    assert {k: _value(v) for k, v in arrow_row.items()} == {k: _value(v) for k, v in spark_row.items()}


ORDERS = st.sampled_from(
    ["c2 DESC", "c2 ASC NULLS LAST", "c3 DESC NULLS FIRST, c2", "c1", "c0 DESC NULLS LAST, c3"]
)


@settings(
    max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=ORDERABLE, order=ORDERS, partitioned=st.booleans())
@example(  # NULLs first and last, ties in the order and in whole rows, two partitions (one NULL)
    rows=[
        {"c0": c0, "c1": None, "c2": c2, "c3": c3, WEIGHT: 1, MTIME: None}
        for c0, c2, c3 in [
            (1, None, "a"),
            (2, Decimal("1.00"), "a"),
            (2, Decimal("1.00"), "a"),
            (None, Decimal("-1.25"), "a"),
            (3, None, None),
            (1, Decimal("1.00"), None),
        ]
    ],
    order="c2 DESC",
    partitioned=True,
)
def test_ranks_are_the_same_on_both_engines(spark, rows, order, partitioned):
    s, a, ((sr, ar),) = _engines(spark, rows)
    ordered = sqlglot.parse_one(f"SELECT 1 ORDER BY {order}", read="spark").args["order"].expressions
    assert all(isinstance(o, exp.Ordered) for o in ordered)
    partition = ["c3"] if partitioned else []
    outputs = {"_rn": "row_number", "_rank": "rank", "_dense": "dense_rank"}
    ties = ["c0", "c1", "c2", "c3"]
    _same(s.rank(sr, partition, ordered, ties, outputs), a.rank(ar, partition, ordered, ties, outputs))

    def greatest(engine, rel):  # each row with its partition's greatest c2 (as top_n.py bounds a prefix)
        most = engine.aggregate(rel, {"_p": "c3"}, {"_most": ("max", "c2")})
        return engine.lookup(rel, [("c3", "_p")], most, "left", null_safe=True)

    _same(greatest(s, sr), greatest(a, ar))


def test_the_driver_declines_to_order_by_nan(spark):
    s, a, ((_, ar),) = _engines(
        spark, [{**{c: None for c in VALUES}, "c1": math.nan, WEIGHT: 1, MTIME: None}]
    )
    ordered = sqlglot.parse_one("SELECT 1 ORDER BY c1", read="spark").args["order"].expressions
    with pytest.raises(NotOnDriver, match="NaN"):
        a.rank(ar, [], ordered, ["c0"], {"_rn": "row_number"})
