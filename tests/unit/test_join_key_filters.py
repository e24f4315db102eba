"""Which input rows a join's side is read for on the driver (incremental/key_filters.py `input_columns`): the input
column its key comes from, and the columns the equalities of the joins below tie to it. Reading the side before
a batch by those columns' values finds every row the batch's keys can reach (the differential join tests check
the answers); these check that the fact table of a star join is narrowed at all, not read whole."""

from __future__ import annotations

from pathlib import Path

from sqlglot import exp

from mvengine.incremental.key_filters import input_columns
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
