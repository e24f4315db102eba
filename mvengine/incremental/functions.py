"""The engine's own SQL functions, for the accumulators' arithmetic (incremental/accumulators.py) where Spark
SQL has no exact form: one implementation each, over Arrow arrays, which the driver's evaluator calls by name and
Spark runs as an Arrow UDF registered under the same name. So the two engines cannot round apart.

- `mv_exact_merged(a, b)`: the sum of two exact sums (digit maps, incremental/exact_sum.py), normalized.
- `mv_float_sum(s, nan, pinf, ninf)`: a SUM of doubles from its exact finite sum and its counts of NaN, +inf
  and -inf, as Spark sums (a NaN, or both infinities, make NaN; one infinity makes it; a finite sum beyond the
  double range is an infinity of its sign).
- `mv_moments(kind, c, f, s, q)`: VAR_POP, VAR_SAMP, STDDEV_POP or STDDEV_SAMP (exact_sum.moments_result).
- `mv_decimal_add_<s>(a, b)`: a + b (NULL as 0) of DECIMAL(38, s), exact: Spark's own + of two such values needs
  39 digits and keeps only 6 places of them (its precision-loss rule).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvengine.incremental import exact_sum


def _exact_merged(a: pa.Array, b: pa.Array) -> pa.Array:  # (Spark's Arrow UDFs take these type hints only)
    return exact_sum.merged_np(a, b)


def _float_sum(total: pa.Array, nan: pa.Array, pinf: pa.Array, ninf: pa.Array) -> pa.Array:
    value, _ = exact_sum.value_np(total)
    nans, plus, minus = (pc.fill_null(c, 0).to_numpy(zero_copy_only=False) for c in (nan, pinf, ninf))
    plus, minus = plus + (value == np.inf), minus + (value == -np.inf)  # a finite sum past the range
    infinite = np.where(plus > 0, np.inf, np.where(minus > 0, -np.inf, value))
    return pa.array(np.where((nans > 0) | ((plus > 0) & (minus > 0)), np.nan, infinite), pa.float64())


def _moments(
    kind: pa.Array, count: pa.Array, nonfinite: pa.Array, sums: pa.Array, squares: pa.Array
) -> pa.Array:
    columns = zip(*(c.to_pylist() for c in (kind, count, nonfinite, sums, squares)))
    return pa.array(
        [exact_sum.moments_result(k, n, f, dict(s or ()), dict(q or ())) for k, n, f, s, q in columns],
        pa.float64(),
    )


def _decimal_add(a: pa.Array, b: pa.Array) -> pa.Array:
    wide = pa.decimal256(60, a.type.scale)  # (Arrow widens a sum of two decimal(38)s past decimal128)
    zero = pa.scalar(0, wide)
    total = pc.add(pc.fill_null(pc.cast(a, wide), zero), pc.fill_null(pc.cast(b, wide), zero))
    try:
        return pc.cast(total, a.type)
    except pa.ArrowInvalid:
        raise ArithmeticError(f"a sum beyond the range of DECIMAL(38, {a.type.scale})") from None


def function(name: str) -> tuple[Callable[..., pa.Array], str] | None:
    """The function of that name (lower case) and its Spark return type, or None when there is none."""
    if name in _FIXED:
        return _FIXED[name]
    added = re.fullmatch(r"mv_decimal_add_(\d+)", name)
    return (_decimal_add, f"decimal(38,{added.group(1)})") if added else None


_FIXED: dict[str, tuple[Callable[..., pa.Array], str]] = {
    "mv_exact_merged": (_exact_merged, exact_sum.MAP_TYPE),
    "mv_float_sum": (_float_sum, "double"),
    "mv_moments": (_moments, "double"),
}
_REGISTERED: set[tuple[int, str]] = set()


def register(spark: Any, sql: str) -> None:
    """Register with Spark, once a session, the functions that SQL text `sql` calls."""
    for name in set(re.findall(r"\bmv_[a-z_0-9]+(?=\()", sql.lower())):
        found = function(name)
        if found is not None and (id(spark), name) not in _REGISTERED:
            spark.udf.register(name, exact_sum.arrow_udf(*found))
            _REGISTERED.add((id(spark), name))
