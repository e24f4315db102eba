"""The driver's grouped sums (incremental/driver.py `aggregated`) of BIGINTs and DECIMALs: exact where the sum
fits its type, NotOnDriver where it does not (Spark's error, which Spark then gives). Arrow's own grouped sum
wraps around silently: 2^62 + 2^62 is -2^63 there."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, localcontext

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mvengine.incremental.driver import aggregated
from mvengine.incremental.driver_expressions import NotOnDriver
from tests.conftest import examples

BIGINT = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**62, -(2**62), 2**63 - 1, -(2**63), 1])
)
DECIMAL = st.decimals(
    min_value=Decimal("-99999999999999999999.999999999999999999"),
    max_value=Decimal("99999999999999999999.999999999999999999"),
    places=18,
    allow_nan=False,
    allow_infinity=False,
)


def _sums(values: list, t: pa.DataType) -> dict[int, object]:
    table = pa.table({"k": [i % 2 for i in range(len(values))], "v": pa.array(values, t)})
    grouped = aggregated(table, ["k"], {"v": "sum"})
    assert grouped.schema.field("v").type == t
    return dict(zip(grouped.column("k").to_pylist(), grouped.column("v").to_pylist()))


def _check(values: list, t: pa.DataType, fits: Callable[[int | Decimal], bool]) -> None:
    with localcontext() as context:
        context.prec = 80  # (Python's 28 digits would round)
        exact = {k: sum(values[k::2]) for k in range(min(2, len(values)))}
        beyond = not all(fits(s) for s in exact.values())
    if beyond:
        with pytest.raises(NotOnDriver, match="a sum beyond the range"):
            _sums(values, t)
    else:
        assert _sums(values, t) == exact


@settings(max_examples=examples(200))
@given(values=st.lists(BIGINT, min_size=1, max_size=6))
def test_a_bigint_sum_is_exact_or_declined(values):
    _check(values, pa.int64(), lambda s: -(2**63) <= s < 2**63)


@settings(max_examples=examples(200))
@given(values=st.lists(DECIMAL, min_size=1, max_size=6))
def test_a_decimal_sum_keeps_every_place_or_is_declined(values):
    _check(values, pa.decimal128(38, 18), lambda s: abs(s) < Decimal(10) ** 20)
