"""The exact sums under SUM/AVG of doubles and the variances (incremental/exact_sum.py), on the driver's side:
digits that add up to each double exactly, sums that survive any order of inserts and deletes, their value rounded
to within a unit in the last place, and the variance computed from them in integers. Spark's side is checked
against Spark itself in tests/spark/test_aggregate_numbers.py (both engines, on one state)."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from mvengine.incremental import exact_sum
from tests.conftest import examples

FINITE = st.floats(allow_nan=False, allow_infinity=False)
CORNERS = st.sampled_from([0.0, -0.0, 1.5, 1e17, -1e17, 1e308, -1e308, 5e-324, 2.0**53 + 2, 1e-300, 1e9 + 1])
VALUES = st.one_of(FINITE, CORNERS)


def _total(slots, digits) -> Fraction:
    return sum(
        (Fraction(int(d)) * Fraction(2) ** (exact_sum.SLOT_BITS * int(s)) for s, d in zip(slots, digits)),
        Fraction(0),
    )


def _maps(values: list[float], sign: int = 1) -> pa.MapArray:
    rows, slots, digits = exact_sum.digits_np(pa.array(values, pa.float64()))
    return exact_sum.maps_np(1, np.zeros(len(rows), np.int64), slots, sign * digits)


@settings(max_examples=examples(300))
@given(x=VALUES)
def test_the_digits_of_a_double_and_of_its_square_add_up_to_them_exactly(x):
    _, slots, digits = exact_sum.digits_np(pa.array([x], pa.float64()))
    assert _total(slots, digits) == Fraction(x)
    assert all(abs(int(d)) < 2**33 for d in digits)
    _, slots, digits = exact_sum.square_digits_np(pa.array([x], pa.float64()))
    assert _total(slots, digits) == Fraction(x) ** 2


@settings(max_examples=examples(100))
@given(xs=st.lists(st.one_of(VALUES, st.none(), st.just(math.nan), st.just(-math.inf)), max_size=8))
def test_the_digit_lists_spark_computes_hold_each_rows_digits_and_none_for_null_nan_and_inf(xs):
    for lists, of in ((exact_sum.digit_lists, 1), (exact_sum.digit_lists_of_squares, 2)):
        rows = lists(pa.array(xs, pa.float64())).to_pylist()
        assert len(rows) == len(xs)
        for x, entries in zip(xs, rows):
            if x is None or not math.isfinite(x):
                assert entries == []
            else:
                assert (
                    _total([e["slot"] for e in entries], [e["digit"] for e in entries]) == Fraction(x) ** of
                )
                assert all(e["digit"] != 0 for e in entries)


@settings(max_examples=examples(200))
@given(inserted=st.lists(VALUES, max_size=12), data=st.data())
def test_deleting_values_takes_away_exactly_what_inserting_them_added(inserted, data):
    deleted = data.draw(
        st.lists(st.sampled_from(inserted), max_size=len(inserted)) if inserted else st.just([])
    )
    merged = exact_sum.merged_np(_maps(inserted), _maps(deleted, -1))
    entries = merged[0].as_py()
    exact = sum(map(Fraction, inserted), Fraction(0)) - sum(map(Fraction, deleted), Fraction(0))
    assert _total([k for k, _ in entries], [v for _, v in entries]) == exact
    assert all(abs(v) < 2**33 for _, v in entries)  # normalized: far from BIGINT's range
    high, _ = exact_sum.value_np(merged)
    try:
        rounded = float(exact)
    except OverflowError:  # rounds past the largest double
        assert math.isinf(high[0]) and (high[0] > 0) == (exact > 0)
        return
    assert abs(Fraction(high[0]) - exact) <= abs(Fraction(rounded)) * Fraction(1, 2**52)  # within an ulp


def test_a_sum_beyond_the_double_range_is_infinite_and_comes_back_when_a_value_goes():
    two = _maps([1e308, 1e308])
    assert exact_sum.value_np(two)[0][0] == math.inf
    assert exact_sum.value_np(exact_sum.merged_np(two, _maps([1e308], -1)))[0][0] == 1e308


@settings(max_examples=examples(200))
@given(
    xs=st.lists(
        st.one_of(st.floats(-1e6, 1e6), st.sampled_from([1e9 + 1, 1e9 + 2, 2.0**53, 2.0**53 + 2])),
        min_size=1,
        max_size=10,
    ),
    kind=st.sampled_from(["var_pop", "var_samp", "stddev_pop", "stddev_samp"]),
)
def test_variances_from_the_exact_sums_are_the_exact_variance_rounded_once(xs, kind):
    sums = dict(_maps(xs)[0].as_py())
    rows, slots, digits = exact_sum.square_digits_np(pa.array(xs, pa.float64()))
    squares = dict(exact_sum.maps_np(1, np.zeros(len(rows), np.int64), slots, digits)[0].as_py())
    got = exact_sum.moments_result(kind, len(xs), 0, sums, squares)
    population = kind.endswith("_pop")
    if len(xs) < (1 if population else 2):
        assert got is None
        return
    mean = sum(map(Fraction, xs)) / len(xs)
    variance = sum((Fraction(x) - mean) ** 2 for x in xs) / (len(xs) if population else len(xs) - 1)
    if kind.startswith("stddev"):
        with localcontext() as context:  # the square root of the exact variance, to far more digits
            context.prec = 60
            expected = float((Decimal(variance.numerator) / Decimal(variance.denominator)).sqrt())
    else:
        expected = float(variance)
    assert got == expected or abs(got - expected) <= 1e-15 * abs(expected)
    assert exact_sum.moments_result(kind, len(xs), 1, sums, squares) != exact_sum.moments_result(
        kind, len(xs), 1, sums, squares
    )  # a NaN or an infinity among the values: NaN


def test_the_issues_variances():
    """Issue 35, item 2: 1e9+1, 1e9+2 have VAR_SAMP 0.5 and STDDEV_POP 0.5; with 1e9+3, 1.0 and 0.8165."""

    def of(kind, xs):
        rows, slots, digits = exact_sum.square_digits_np(pa.array(xs, pa.float64()))
        squares = dict(exact_sum.maps_np(1, np.zeros(len(rows), np.int64), slots, digits)[0].as_py())
        return exact_sum.moments_result(kind, len(xs), 0, dict(_maps(xs)[0].as_py()), squares)

    assert (of("var_samp", [1e9 + 1, 1e9 + 2]), of("stddev_pop", [1e9 + 1, 1e9 + 2])) == (0.5, 0.5)
    assert of("var_samp", [1e9 + 1, 1e9 + 2, 1e9 + 3]) == 1.0
    assert math.isclose(of("stddev_pop", [1e9 + 1, 1e9 + 2, 1e9 + 3]), math.sqrt(2 / 3), rel_tol=1e-15)
