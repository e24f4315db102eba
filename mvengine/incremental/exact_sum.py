"""Exact sums of doubles that survive retraction: SUM and AVG over floating-point values, and the moments of the
variances, by one implementation for both engines: numpy over Arrow, which Spark calls as Arrow UDFs (taking a
value's digits here; merging two sums and rounding a sum to a double in incremental/functions.py), so that the
two cannot round apart.

A running sum of doubles in a double forgets: add 1e17 to 1.5, take 1e17 away, and 0.0 is left where the rows
say 1.5 (issue 35); a compensated pair (hi, lo) forgets the third of three far-apart magnitudes. So a sum is
kept exactly, as a superaccumulator: every finite double x is, exactly, a sum of at most three digits
d·2^(32·s) (s a slot, d an integer of magnitude below 2^33):

    p = the exponent of x (2^p <= |x| < 2^(p+1)),  s = floor(p / 32),  y = x·2^(-32·s)  (1 <= |y| < 2^32)
    d_s = trunc(y),  d_(s-1) = trunc(frac(y)·2^32),  d_(s-2) = trunc(frac(frac(y)·2^32)·2^32)

(each step exact: scaling by powers of two, and taking the integer part off). A sum is a map slot → BIGINT,
the slot-wise sum of its values' digits times their weights, so inserting and deleting a value add and subtract
the same integers: exact, in any order. After each merge a digit at or beyond 2^32 in magnitude carries its
excess into the slot above (truncating toward zero, so digits keep their sign and the map does not grow), which
keeps digits below 2^33 and the batch sums far from BIGINT's range. The value is rounded to a double from the
top slot down in double-double arithmetic: within a unit in the last place of the exact sum (Spark's own sum
rounds at every row); sums beyond ±1.8e308 are ±inf, as Spark's are.

x² is kept exactly too (`square_digits`): with x = y·2^(32·s), y² = p + e exactly (Dekker's product; y < 2^32,
so nothing overflows), and the digits of p and e are taken at slot offset 2·s, so squares beyond the double
range (x = 1e200) are still exact sums. NaN and ±inf are not digits: the accumulators count them apart.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.zset import WEIGHT, null_safe_equal, quote

SLOT_BITS = 32
BASE = float(2**SLOT_BITS)
DIGITS_TYPE = "array<struct<slot:int,digit:bigint>>"
MAP_TYPE = "map<int,bigint>"
ARROW_MAP = pa.map_(pa.int32(), pa.int64())
TOP_SLOT = 30  # digits above this slot are added shifted down: 2^(32·31) is near the top of the double range
_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitter of a double into two 26-bit halves


# -- a batch's sums per group, in Spark and on the driver --------------------------------------------------------


def with_sums(
    rows: DataFrame, partial: DataFrame, groups: Sequence[str], sums: Sequence[tuple[str, str, bool]]
) -> DataFrame:
    """`partial` (a row per group) with, per group, the batch's exact sum for each (name, column, of squares) of
    `sums`: every row's digits (the driver's function, as an Arrow UDF) times its weight, summed per slot."""
    frame, tagged = rows, []
    for i, (_, column, square) in enumerate(sums):
        of = arrow_udf(digit_lists_of_squares if square else digit_lists, DIGITS_TYPE)
        frame = frame.withColumn(f"_dg{i}", of(F.col(column).cast("double")))
        tagged.append(F.transform(F.col(f"_dg{i}"), _tagged(i)))
    keys = [quote(g) for g in groups]
    digits = frame.select(*keys, F.explode(F.concat(*tagged)).alias("_e")).select(
        *keys, "_e.tag", "_e.slot", "_e.digit"
    )
    summed = (
        digits.groupBy(*keys, "tag", "slot").agg(F.sum("digit").alias("digit")).where(F.col("digit") != 0)
    )
    maps = summed.groupBy(*keys).agg(
        *[
            F.map_from_entries(F.collect_list(F.when(F.col("tag") == i, F.struct("slot", "digit")))).alias(
                name
            )
            for i, (name, _, _) in enumerate(sums)
        ]
    )
    p, m = partial.alias("p"), maps.alias("m")
    on = null_safe_equal(p, m, list(groups)) if groups else F.lit(True)
    return p.join(m, on, "left").select("p.*", *[F.col(f"m.{quote(name)}") for name, _, _ in sums])


@functools.cache
def arrow_udf(function: Callable[..., pa.Array], returns: str) -> Callable[..., Column]:
    """A function over Arrow arrays as a Spark UDF (Arrow-batched), made once."""
    # pyspark's stubs know only the form with an explicit functionType, which warns at run time
    udf: Callable[..., Column] = F.arrow_udf(function, returns)  # type: ignore[call-overload]
    return udf


def _tagged(tag: int) -> Callable[[Column], Column]:
    """A digit (slot, digit) as (tag, slot, digit times the row's weight). A function of one parameter: Spark's
    transform() takes a lambda of two as (element, position)."""
    return lambda e: F.struct(
        F.lit(tag).alias("tag"), e["slot"].alias("slot"), (e["digit"] * F.col(WEIGHT)).alias("digit")
    )


# -- on the driver (numpy over Arrow) ---------------------------------------------------------------------------

Digits = tuple[np.ndarray, np.ndarray, np.ndarray]  # (row or group, slot, digit), one entry per digit


def _exponent_np(a: np.ndarray) -> np.ndarray:
    _, e = np.frexp(a)
    exponent: np.ndarray = (e - 1).astype(np.int64)
    return exponent


def scaled_np(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    half = np.floor_divide(k, 2)
    scaled: np.ndarray = np.ldexp(np.ldexp(x, half.astype(np.int32)), (k - half).astype(np.int32))
    return scaled


def _digits_of_np(y: np.ndarray, slot: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    d0 = np.trunc(y)
    r1 = (y - d0) * BASE
    d1 = np.trunc(r1)
    d2 = np.trunc((r1 - d1) * BASE)
    return [(slot, d0.astype(np.int64)), (slot - 1, d1.astype(np.int64)), (slot - 2, d2.astype(np.int64))]


def _scaled_np(x: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of the finite non-zero doubles (NULL as 0), each one's top slot s, and y = x·2^(-32·s)."""
    values = pc.fill_null(pc.cast(x, pa.float64(), safe=False), 0.0).to_numpy() if len(x) else np.zeros(0)
    values = np.asarray(values, dtype=np.float64)
    rows = np.nonzero(np.isfinite(values) & (values != 0))[0]
    slot = np.floor_divide(_exponent_np(np.abs(values[rows])), SLOT_BITS)
    return rows, slot, scaled_np(values[rows], -slot * SLOT_BITS)


def digits_np(x: pa.ChunkedArray | pa.Array) -> Digits:
    """The digits of doubles as three arrays (row, slot, digit), zeros left out."""
    rows, slot, y = _scaled_np(x)
    return _flatten(rows, _digits_of_np(y, slot))


def square_digits_np(x: pa.ChunkedArray | pa.Array) -> Digits:
    rows, slot, y = _scaled_np(x)
    p = y * y
    c = y * _SPLIT
    high = c - (c - y)
    low = y - high
    e = ((high * high - p) + 2.0 * high * low) + low * low
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for part in (p, e):
        a = np.abs(part)
        own = np.floor_divide(_exponent_np(np.where(a > 0, a, 1.0)), SLOT_BITS)
        for s, d in _digits_of_np(scaled_np(part, -own * SLOT_BITS), own + 2 * slot):
            parts.append((s, np.where(a > 0, d, 0)))
    return _flatten(rows, parts)


def digit_lists(x: pa.Array) -> pa.Array:
    """The digits of doubles, row by row, as lists of (slot, digit) (`with_digits` in Spark)."""
    return _lists(len(x), *digits_np(x))


def digit_lists_of_squares(x: pa.Array) -> pa.Array:
    """The digits of the squares of doubles, row by row, as lists of (slot, digit)."""
    return _lists(len(x), *square_digits_np(x))


def _lists(n: int, row: np.ndarray, slot: np.ndarray, digit: np.ndarray) -> pa.Array:
    order = np.argsort(row, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=n))]).astype(np.int32)
    entries = pa.StructArray.from_arrays(
        [pa.array(slot[order], pa.int32()), pa.array(digit[order], pa.int64())], names=["slot", "digit"]
    )
    return pa.ListArray.from_arrays(pa.array(offsets), entries)


def _flatten(rows: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray]]) -> Digits:
    row = np.concatenate([rows] * len(parts)) if parts else np.zeros(0, np.int64)
    slot = np.concatenate([s for s, _ in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
    digit = np.concatenate([d for _, d in parts]) if parts else np.zeros(0, np.int64)
    keep = digit != 0
    return row[keep], slot[keep], digit[keep]


def maps_np(groups: int, row_group: np.ndarray, slot: np.ndarray, digit: np.ndarray) -> pa.MapArray:
    """Digit maps, one per group 0..groups-1, from (group, slot, digit) triples (summed, normalized)."""
    return _build(groups, *_normalized_np(*_summed(row_group, slot, digit)))


def merged_np(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> pa.MapArray:
    """Row by row, the sum of two columns of digit maps (NULL as empty), normalized."""
    ga, sa, da = _entries(a)
    gb, sb, db = _entries(b)
    return _build(
        len(a),
        *_normalized_np(
            *_summed(np.concatenate([ga, gb]), np.concatenate([sa, sb]), np.concatenate([da, db]))
        ),
    )


def _entries(m: pa.ChunkedArray | pa.Array) -> Digits:
    """The entries of a column of digit maps as (row, slot, digit) arrays (a NULL map has none)."""
    if isinstance(m, pa.ChunkedArray):
        m = m.combine_chunks() if m.num_chunks else pa.array([], ARROW_MAP)
    m = m.cast(ARROW_MAP)
    offsets = m.offsets.to_numpy()
    lengths = (
        np.where(m.is_null().to_numpy(zero_copy_only=False), 0, np.diff(offsets))
        if len(m)
        else np.zeros(0, np.int64)
    )
    group = np.repeat(np.arange(len(m)), lengths)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)  # each entry's place within its map
    index = np.repeat(offsets[:-1], lengths) + (np.arange(len(group)) - first)
    keys = m.keys.to_numpy(zero_copy_only=False).astype(np.int64)[index]
    items = m.items.to_numpy(zero_copy_only=False).astype(np.int64)[index]
    return group, keys, items


def _summed(group: np.ndarray, slot: np.ndarray, digit: np.ndarray) -> Digits:
    if not len(group):
        return group, slot, digit
    order = np.lexsort((slot, group))
    g, s, d = group[order], slot[order], digit[order]
    starts = np.concatenate([[True], (g[1:] != g[:-1]) | (s[1:] != s[:-1])])
    at = np.nonzero(starts)[0]
    return g[at], s[at], np.add.reduceat(d, at)


def _normalized_np(group: np.ndarray, slot: np.ndarray, digit: np.ndarray) -> Digits:
    carry = np.where(digit >= 0, digit >> SLOT_BITS, -((-digit) >> SLOT_BITS))
    kept = digit - (carry << SLOT_BITS)
    moved = carry != 0
    g, s, d = _summed(
        np.concatenate([group, group[moved]]),
        np.concatenate([slot, slot[moved] + 1]),
        np.concatenate([kept, carry[moved]]),
    )
    nonzero = d != 0
    return g[nonzero], s[nonzero], d[nonzero]


def _build(groups: int, group: np.ndarray, slot: np.ndarray, digit: np.ndarray) -> pa.MapArray:
    counts = np.bincount(group, minlength=groups) if len(group) else np.zeros(groups, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.MapArray.from_arrays(pa.array(offsets), pa.array(slot, pa.int32()), pa.array(digit, pa.int64()))


def value_np(m: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Row by row, each map's sum rounded to a double (hi) and the rest (lo)."""
    group, slot, digit = _entries(m)
    n = len(m)
    hi, lo = np.zeros(n), np.zeros(n)
    if not len(group):
        return hi, lo
    order = np.lexsort((-slot, group))  # per group, top slot first
    group, slot, digit = group[order], slot[order], digit[order]
    rank = np.arange(len(group)) - np.searchsorted(group, group)
    shift = np.zeros(n, np.int64)  # as in Spark: digits near the top of the range are added shifted down
    shift[group[rank == 0]] = np.maximum(slot[rank == 0] - TOP_SLOT, 0)
    with np.errstate(over="ignore", invalid="ignore"):  # overflows to ±inf and NaN: dealt with after
        for r in range(int(rank.max()) + 1):
            at = rank == r
            g = group[at]
            term = scaled_np(digit[at].astype(np.float64), (slot[at] - shift[g]) * SLOT_BITS)
            a = hi[g]
            s = a + term
            v = s - a
            e = (a - (s - v)) + (term - v)
            low = lo[g] + e
            high = s + low
            hi[g], lo[g] = high, low - (high - s)
        hi, lo = scaled_np(hi, shift * SLOT_BITS), scaled_np(lo, shift * SLOT_BITS)
    overflow = np.isnan(hi)  # NaN only from an overflow: then ±inf, the top digit's sign
    top = np.zeros(n)
    top[group[rank == 0]] = np.sign(digit[rank == 0])
    hi[overflow], lo[overflow] = top[overflow] * np.inf, 0.0
    return hi, lo


# -- moments, exactly ------------------------------------------------------------------------------------------


def moments_result(
    kind: str,
    count: int | None,
    nonfinite: int | None,
    sums: dict[int, int] | None,
    squares: dict[int, int] | None,
) -> float | None:
    """VAR_POP, VAR_SAMP, STDDEV_POP or STDDEV_SAMP (`kind`) of a group from its count, its count of NaN and
    ±inf, and the exact sums s = Σx and q = Σx² (digit maps): m = (c·q - s²) / c computed in integers, so
    exactly whatever the cancellation (values of 2^53 a unit apart), then divided and rounded once (the square
    root of the exact quotient, for STDDEV). Python's integers: one function for the driver and, as a UDF, for
    Spark, so both give the same double."""
    population = kind.endswith("_pop")
    if not count or count <= (0 if population else 1):
        return None
    if nonfinite:
        return math.nan
    a, a_scale = _integer(sums or {})  # s = a·2^a_scale
    b, b_scale = _integer(squares or {})  # q = b·2^b_scale
    low = min(b_scale, 2 * a_scale)  # c·q - s² = deviations·2^low
    deviations = count * b * 2 ** (b_scale - low) - a * a * 2 ** (2 * a_scale - low)
    if deviations <= 0:
        return 0.0
    variance = Fraction(deviations, count * (count if population else count - 1)) * Fraction(2) ** low
    try:
        if kind.startswith("stddev"):
            return _square_root(variance)
        return float(variance)
    except OverflowError:
        return math.inf


def _integer(digits: dict[int, int]) -> tuple[int, int]:
    """A digit map as an integer and a power of two: Σ d·2^(32·slot) = value·2^scale."""
    if not digits:
        return 0, 0
    lowest = min(digits)
    return sum(d << (SLOT_BITS * (slot - lowest)) for slot, d in digits.items()), SLOT_BITS * lowest


def _square_root(x: Fraction) -> float:
    """The square root of a positive fraction, to more bits than a double holds, then rounded once."""
    shift = max(0, 2 * 64 - (x.numerator.bit_length() - x.denominator.bit_length()))
    shift += shift % 2
    root = math.isqrt((x.numerator << shift) // x.denominator)
    return float(Fraction(root, 1 << (shift // 2)))
