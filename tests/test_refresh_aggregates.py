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
from hypothesis import HealthCheck, Phase, example, given, settings

from mvengine.incremental.driver_support import not_on_driver
from mvengine.project.catalog import load_catalog
from mvengine.project.config import load_config
from mvengine.runtime.refresh import view_tables
from mvengine.storage.api import read_table
from mvengine.storage.tables import TableRef, commit_metadata
from tests.test_refresh_differential import STEPS, check_changelog, make_project, refresh_steps

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
    return sorted(rows, key=lambda r: tuple((x is None, x if not isinstance(x, float) else 0.0, repr(x))
                                          for x in r))


def check(spark, catalog, name: str) -> None:
    """The view's snapshot equals its SQL over its inputs at the versions its commit records (floats within
    rounding), and its changelog replays to it."""
    check_changelog(spark, catalog, name)
    plan = catalog.plans[name]
    tables = view_tables(plan, {})
    dt = tables.snapshot.open()
    inputs = json.loads(commit_metadata(dt, dt.version())["mvengine.inputs"])
    for input_name, version in inputs.items():
        read_table(spark, TableRef(catalog.sources[input_name].path), version=version) \
            .createOrReplaceTempView(input_name)
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
    [("insert_b", [("a", 1), ("a", 1), (None, None), ("b", 2), ("b", 5)]), ("delete_b", ("a", 1)),
     ("upsert_t", [(1, "a", 3), (2, "a", -3), (3, None, None), (4, "a", 2)]), ("delete_t", [2])],
    [],
    [("upsert_t", [(1, "b", -1), (4, "a", 4)]), ("insert_b", [("a", 4), ("b", 2)]), ("delete_b", (None, None)),
     ("delete_t", [3])],
]


def test_every_aggregate_is_planned_incremental(tmp_path):
    plans = load_catalog(load_config(project(tmp_path))).plans
    assert {n: p.strategy for n, p in plans.items()} == {n: "incremental" for n in plans}
    assert {c.name: c.nullable for c in plans["a_filter"].columns}["negatives"] is False
    assert [n for n in plans if not_on_driver(plans[n].root) is None] == ON_DRIVER


@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
@example(steps=EXAMPLE)
def test_aggregates_equal_sparks_after_random_changes_on_the_driver(spark, tmp_path_factory, steps):
    engines = refresh_steps(spark, project(tmp_path_factory.mktemp("agg")), steps, check=check)
    assert all(engines[n] <= {"bootstrap/spark", "stream/driver"} for n in ON_DRIVER), engines


@pytest.mark.parametrize("steps", [EXAMPLE])
def test_aggregates_equal_sparks_in_spark(spark, tmp_path, steps):
    engines = refresh_steps(spark, project(tmp_path, "driver_max_changes = 0\n"), steps, check=check)
    assert all(engines[n] == {"bootstrap/spark", "stream/spark"} for n in engines), engines
