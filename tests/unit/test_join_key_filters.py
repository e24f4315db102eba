"""Which input rows a join's side is read for on the driver (incremental/key_filters.py `input_columns`): the input
column its key comes from, and the columns the equalities of the joins below tie to it. Reading the side before
a batch by those columns' values finds every row the batch's keys can reach (the differential join tests check
the answers); these check that the fact table of a star join is narrowed at all, not read whole."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from sqlglot import exp

from mvengine.incremental.key_filters import input_columns, range_filters
from mvengine.plan.nodes import Join
from tests.unit.test_plan import plan


def _joins(tmp_path: Path, select: str) -> list[Join]:
    return [n for n in plan(tmp_path, select).root.walk() if isinstance(n, Join)]


def test_a_dimension_key_narrows_the_facts_joined_to_it(tmp_path):
    outer, inner = _joins(
        tmp_path,
        "SELECT o.id, p.name, c.name AS customer FROM orders o JOIN products p ON o.product_id = p.id "
        "LEFT JOIN customers c ON c.id = p.id",
    )
    assert (outer.kind, inner.kind) == ("left", "inner")
    key = outer.equi[0][0]  # p.id, of the left side (orders joined to products)
    assert isinstance(key, exp.Column)
    assert input_columns(outer.left, key) == [("products", "id"), ("orders", "product_id")]


def test_a_key_computed_by_an_expression_narrows_nothing(tmp_path):
    (join,) = _joins(
        tmp_path,
        "SELECT o.id, c.name FROM (SELECT id, customer_id + 1 AS k FROM orders) o JOIN customers c ON o.k = c.id",
    )
    assert input_columns(join.left, join.equi[0][0]) == []
    assert input_columns(join.right, join.equi[0][1]) == [("customers", "id")]


def test_a_window_bound_narrows_the_time_of_the_rows_in_its_windows(tmp_path):
    """A window join reads the other side's rows by the times its windows hold: a tumbling window starting at s
    holds s ≤ ts < s + size, a hopping window ending at e holds e − size ≤ ts < e."""
    minute = 60_000_000
    tumbling = "FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
    hopping = "FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE))"
    (join,) = _joins(
        tmp_path,
        f"SELECT a.user_id, a.window_start, b.window_end FROM (SELECT user_id, window_start {tumbling}) a "
        f"JOIN (SELECT user_id, window_end {hopping}) b "
        "ON a.user_id = b.user_id AND a.window_start = b.window_end",
    )
    start, end = join.equi[1]
    assert range_filters(join.left, start, 10 * minute, 20 * minute)["clicks"][1:] == (
        pa.scalar(10 * minute, pa.timestamp("us", tz="UTC")),
        pa.scalar(21 * minute - 1, pa.timestamp("us", tz="UTC")),
    )
    assert range_filters(join.right, end, 10 * minute, 20 * minute)["clicks"] == (
        "ts",
        pa.scalar(5 * minute, pa.timestamp("us", tz="UTC")),
        pa.scalar(20 * minute - 1, pa.timestamp("us", tz="UTC")),
    )
    # A column computed from the window's bound is not narrowed by it.
    (computed,) = _joins(
        tmp_path,
        f"SELECT a.user_id FROM (SELECT user_id, window_start + INTERVAL '1' SECOND AS s {tumbling}) a "
        "JOIN clicks c ON a.user_id = c.user_id AND a.s = c.ts",
    )
    assert range_filters(computed.left, computed.equi[1][0], 0, minute) == {}
