"""The driver's hash join (incremental/driver.match): its pairs come in the inputs' order, never in the order of
the keys' hashes, in which Arrow's grouping of the joined keys slows down by fifty times (an emit's check of a
bootstrap's 270,000 keys took 4.2 s)."""

from __future__ import annotations

import pyarrow as pa

from mvengine.incremental.driver import match


def test_pairs_come_in_the_left_inputs_order_then_the_right_only_rows_in_the_rights():
    left = [pa.chunked_array([[5, 3, None, 9, 3]])]
    right = [pa.chunked_array([[3, 8, 5, None, 7, 3]])]
    li, ri = match(left, right, "full outer")
    assert ri is not None
    assert list(zip(li.to_pylist(), ri.to_pylist())) == [
        (0, 2),
        (1, 0),
        (1, 5),
        (2, None),  # (NULL matches nothing without null_safe)
        (3, None),
        (4, 0),
        (4, 5),
        (None, 1),
        (None, 3),
        (None, 4),
    ]


def test_null_safe_pairs_match_null_with_null_in_the_same_order():
    li, ri = match([pa.chunked_array([[None, 1]])], [pa.chunked_array([[1, None]])], "inner", null_safe=True)
    assert ri is not None
    assert list(zip(li.to_pylist(), ri.to_pylist())) == [(0, 1), (1, 0)]
