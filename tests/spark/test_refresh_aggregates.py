"""Differential tests of the aggregates beyond COUNT/SUM/AVG/MIN/MAX (plan/operators/aggregate.py): FILTER
clauses (COUNT DISTINCT included), COUNT_IF, BOOL_AND/BOOL_OR/EVERY/SOME, the variances and standard deviations,
and COLLECT_LIST. After random inserts, updates and deletes, each view equals its SQL run by Spark over its
inputs, both when batches run on the driver and in Spark; variances within floating-point rounding (the view
keeps sums of squares, Spark updates moments row by row)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

from mvengine.config import load_config
from mvengine.incremental.driver_support import not_on_driver
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import view_tables
from mvengine.storage.api import read_table
from mvengine.storage.tables import TableRef, commit_metadata
from tests.conftest import examples, phases_of_costly
from tests.spark.test_refresh_differential import STEPS, check_changelog, make_project, refresh_steps

VIEWS = """
CREATE MATERIALIZED VIEW a_filter AS
SELECT g, COUNT(*) FILTER (WHERE v > 1) AS big, SUM(v) FILTER (WHERE k > 2) AS late_sum,
       AVG(v) FILTER (WHERE v IS NOT NULL AND v < 4) AS small_avg, MIN(v) FILTER (WHERE v > 0) AS lo,
       COUNT(DISTINCT v) FILTER (WHERE v <> 2) AS dv, COUNT_IF(v < 0) AS negatives
FROM t GROUP BY g;
CREATE MATERIALIZED VIEW a_bool AS
SELECT g, BOOL_AND(v > 0) AS all_pos, BOOL_OR(v > 3) AS any_big, EVERY(v IS NOT NULL) AS all_set,
       SOME(v = 1) AS has_one
FROM t GROUP BY g;
CREATE MATERIALIZED VIEW a_moments AS
SELECT g, STDDEV(v) AS sd, STDDEV_POP(v) AS sdp, VARIANCE(v) AS var, VAR_POP(v) AS vp, COUNT(*) AS n
FROM b GROUP BY g;
CREATE MATERIALIZED VIEW a_global AS
SELECT COUNT(*) FILTER (WHERE v IS NULL) AS nulls, BOOL_AND(v > -3) AS above, STDDEV_SAMP(v) AS sd FROM b;
CREATE MATERIALIZED VIEW a_list AS
SELECT g, SORT_ARRAY(COLLECT_LIST(v)) AS vs, SORT_ARRAY(ARRAY_AGG(k), false) AS ks FROM t GROUP BY g;
"""
ON_DRIVER = ["a_filter", "a_bool", "a_moments", "a_global"]


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _rows(df) -> list[tuple]:
    """The rows, sorted by their exact (non-float) columns and then by all."""
    rows = [tuple(r) for r in df.collect()]
    return sorted(
        rows, key=lambda r: tuple((x is None, x if not isinstance(x, float) else 0.0, repr(x)) for x in r)
    )


def check(spark, catalog, name: str) -> None:
    """The view's snapshot equals its SQL over its inputs at the versions its commit records (floats within
    rounding), and its changelog replays to it."""
    check_changelog(spark, catalog, name)
    plan = catalog.plans[name]
    tables = view_tables(plan, {})
    dt = tables.snapshot.open()
    inputs = json.loads(commit_metadata(dt, dt.version())["mvengine.inputs"])
    for input_name, version in inputs.items():
        read_table(
            spark, TableRef(catalog.sources[input_name].path), version=version
        ).createOrReplaceTempView(input_name)
    got, expected = _rows(read_table(spark, tables.snapshot)), _rows(spark.sql(plan.spark_sql))
    assert len(got) == len(expected), f"{name}: {got} != {expected}"
    for g, e in zip(got, expected):
        assert all(_close(x, y) for x, y in zip(g, e)), f"{name}: {g} != {e} (all: {got} != {expected})"


def project(root: Path, conf: str = "") -> Path:
    make_project(root, VIEWS)
    (root / "conf").mkdir()
    (root / "conf" / "mvengine.toml").write_text(f"[refresh]\n{conf}")
    return root


EXAMPLE = [
    [
        ("insert_b", [("a", 1), ("a", 1), (None, None), ("b", 2), ("b", 5)]),
        ("delete_b", ("a", 1)),
        ("upsert_t", [(1, "a", 3), (2, "a", -3), (3, None, None), (4, "a", 2)]),
        ("delete_t", [2]),
    ],
    [],
    [
        ("upsert_t", [(1, "b", -1), (4, "a", 4)]),
        ("insert_b", [("a", 4), ("b", 2)]),
        ("delete_b", (None, None)),
        ("delete_t", [3]),
    ],
]


def test_every_aggregate_is_planned_incremental(tmp_path):
    plans = load_catalog(load_config(project(tmp_path))).plans
    assert {n: p.strategy for n, p in plans.items()} == {n: "incremental" for n in plans}
    assert {c.name: c.nullable for c in plans["a_filter"].columns}["negatives"] is False
    assert [n for n in plans if not_on_driver(plans[n].root) is None] == ON_DRIVER


@settings(
    max_examples=examples(1),
    deadline=None,
    phases=phases_of_costly(),  # generated examples: make test-nightly
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
@example(steps=EXAMPLE)
def test_aggregates_equal_sparks_after_random_changes_on_both_engines(spark, tmp_path_factory, steps):
    engines = refresh_steps(spark, project(tmp_path_factory.mktemp("agg")), steps, check=check)
    # Bootstraps run on the driver where its batches do (the inputs are small), in Spark elsewhere.
    assert all(engines[n] <= {"bootstrap/driver", "stream/driver", "stream/spark"} for n in ON_DRIVER), (
        engines
    )
    if steps == EXAMPLE:  # its first step runs on the driver, its second in Spark
        assert all({"bootstrap/driver", "stream/driver", "stream/spark"} <= engines[n] for n in ON_DRIVER), (
            engines
        )
        assert all(
            engines[n] == {"bootstrap/spark", "stream/spark"} for n in engines if n not in ON_DRIVER
        ), engines


ITEM_6_SOURCES = """
CREATE TABLE c (g STRING, v INT) WITH ('append_only' = 'true');
CREATE TABLE orders (o_orderkey BIGINT NOT NULL, o_priority STRING, PRIMARY KEY (o_orderkey) NOT ENFORCED);
CREATE TABLE lineitem (l_orderkey BIGINT, l_line INT, l_commitdate DATE, l_receiptdate DATE);
"""
ITEM_6_VIEWS = """
CREATE MATERIALIZED VIEW listed AS SELECT g, COLLECT_LIST(v) AS vs FROM c WHERE v > 0 GROUP BY g;
CREATE MATERIALIZED VIEW late_orders AS
SELECT o_priority, COUNT(*) FROM orders
WHERE EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
GROUP BY o_priority;
"""


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_issue_35_item_6_a_batch_whose_rows_all_fail_the_where(spark, tmp_path, engine):
    """A batch of an append-only source whose new rows all fail the WHERE, under COLLECT_LIST; and orders with
    their lines inserted and deleted under a correlated EXISTS: the refresh ends, and the views equal their SQL
    ("cannot construct ChunkedArray from empty vector and omitted type" stopped it)."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from mvengine.runtime.refresh import Refresher
    from tests.spark.test_refresh_differential import check_view

    root = make_project(tmp_path, ITEM_6_VIEWS)
    (root / "views" / "sources.sql").write_text(ITEM_6_SOURCES)
    if engine == "spark":
        (root / "conf").mkdir()
        (root / "conf" / "mvengine.toml").write_text("[refresh]\ndriver_max_changes = 0\n")
    config = load_config(root)
    catalog = load_catalog(config)
    refresher = Refresher(spark, config, catalog)
    refresher.prepare_sources()
    day = dt.date(2026, 11, 25)

    write_deltalake(
        TableRef(catalog.sources["c"].path).uri,
        pa.table({"g": ["a", "b"], "v": pa.array([1, 2], pa.int32())}),
        mode="append",
    )
    write_deltalake(
        TableRef(catalog.sources["orders"].path).uri,
        pa.table({"o_orderkey": pa.array([1, 2], pa.int64()), "o_priority": ["1-URGENT", "2-HIGH"]}),
        mode="append",
    )
    write_deltalake(
        TableRef(catalog.sources["lineitem"].path).uri,
        pa.table(
            {
                "l_orderkey": pa.array([1, 2], pa.int64()),
                "l_line": pa.array([1, 1], pa.int32()),
                "l_commitdate": [day, day],
                "l_receiptdate": [day + dt.timedelta(days=1), day],
            }
        ),
        mode="append",
    )
    refresher.refresh()
    write_deltalake(
        TableRef(catalog.sources["c"].path).uri,
        pa.table({"g": ["a", "c"], "v": pa.array([0, -5], pa.int32())}),
        mode="append",
    )
    DeltaTable(TableRef(catalog.sources["orders"].path).uri).delete("o_orderkey = 1")
    DeltaTable(TableRef(catalog.sources["lineitem"].path).uri).delete("l_orderkey = 1")
    write_deltalake(
        TableRef(catalog.sources["orders"].path).uri,
        pa.table({"o_orderkey": pa.array([3], pa.int64()), "o_priority": ["1-URGENT"]}),
        mode="append",
    )
    write_deltalake(
        TableRef(catalog.sources["lineitem"].path).uri,
        pa.table(
            {
                "l_orderkey": pa.array([3], pa.int64()),
                "l_line": pa.array([1], pa.int32()),
                "l_commitdate": [day],
                "l_receiptdate": [day + dt.timedelta(days=2)],
            }
        ),
        mode="append",
    )
    refresher.refresh()
    for name in catalog.plans:
        check_view(spark, catalog, name)
    assert [c.name for c in catalog.plans["late_orders"].columns] == ["o_priority", "count(1)"]  # item 7
