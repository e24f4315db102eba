"""Differential tests of window functions: top-N and deduplication (plan/rewrites/top_n.py,
incremental/top_n.py) and windows over partitions (plan/rewrites/over.py, incremental/over.py). After random
inserts, updates and deletes, each view equals its SQL run by Spark over its inputs, and its changelog replays to
its snapshot. The keys are few, so deletes drain the kept prefixes and partitions are read again from the input.
Orders are total (ties broken by the key) or tie only rows that are equal in every column, where any order
Spark picks gives the same rows."""

from __future__ import annotations

import pyarrow as pa
from deltalake import write_deltalake
from hypothesis import HealthCheck, example, given, settings

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_table
from mvengine.storage.sources import ensure_source_table
from mvengine.storage.tables import TableRef
from tests.conftest import examples, phases_of_costly
from tests.spark.test_refresh_claims import check_changelog_kind
from tests.spark.test_refresh_differential import STEPS, make_project, refresh_steps

BAG_VIEWS = """
CREATE MATERIALIZED VIEW bag_rn AS
SELECT g, v, rn FROM (SELECT g, v, ROW_NUMBER() OVER (PARTITION BY g ORDER BY v) AS rn FROM b) AS x WHERE rn < 3;
CREATE MATERIALIZED VIEW bag_rank AS
SELECT * FROM (SELECT g, v, RANK() OVER (PARTITION BY g ORDER BY v DESC) AS r FROM b) AS x WHERE r <= 2 AND v > 0;
CREATE MATERIALIZED VIEW bag_dense AS
SELECT g, v FROM (SELECT g, v, DENSE_RANK() OVER (ORDER BY v) AS d FROM b) AS x WHERE 2 >= d;
CREATE MATERIALIZED VIEW bag_share AS
SELECT g, v, COUNT(*) OVER (PARTITION BY g) AS n, MAX(v) OVER (PARTITION BY g) - v AS below_top FROM b;
"""
VIEWS = (
    """
CREATE MATERIALIZED VIEW top2 AS
SELECT k, g, v, rn FROM (SELECT k, g, v, ROW_NUMBER() OVER (PARTITION BY g ORDER BY v DESC, k) AS rn FROM t) AS r
WHERE rn <= 2;
CREATE MATERIALIZED VIEW newest AS
SELECT k, g, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY g ORDER BY k DESC) AS rn FROM t) AS r WHERE rn = 1;
CREATE MATERIALIZED VIEW lowest AS SELECT k, v FROM t ORDER BY v NULLS LAST, k LIMIT 3;
CREATE MATERIALIZED VIEW top_groups AS
SELECT g, s FROM (SELECT g, s, ROW_NUMBER() OVER (ORDER BY s DESC, g) AS rn
                  FROM (SELECT g, SUM(v) AS s FROM t GROUP BY g) AS sums) AS x WHERE rn <= 2;
CREATE MATERIALIZED VIEW running AS
SELECT k, g, v, AVG(v) OVER (PARTITION BY g ORDER BY k ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS avg3,
       SUM(v) OVER (PARTITION BY g ORDER BY k) + 1 AS cum, LAG(v) OVER (PARTITION BY g ORDER BY k) AS prev
FROM t;
CREATE MATERIALIZED VIEW qualified AS
SELECT k, g, v FROM t QUALIFY ROW_NUMBER() OVER (PARTITION BY g ORDER BY v, k) = 1;
CREATE MATERIALIZED VIEW named AS
SELECT k, g, SUM(v) OVER w AS cum, MIN(v) OVER w2 AS low2
FROM t WINDOW w AS (PARTITION BY g ORDER BY k),
     w2 AS (PARTITION BY g ORDER BY k ROWS BETWEEN 1 PRECEDING AND CURRENT ROW);
"""
    + BAG_VIEWS
)


TOP_N = ("top2", "newest", "lowest", "bag_rn", "bag_rank", "bag_dense", "top_groups", "qualified")
OVER = ("running", "bag_share", "named")


def test_every_form_is_planned_incremental(tmp_path):
    plans = load_catalog(load_config(make_project(tmp_path, VIEWS))).plans
    assert {n: p.strategy for n, p in plans.items()} == {n: "incremental" for n in plans}
    assert {n: p.changelog for n, p in plans.items()} == {
        "top2": "upsert",
        "newest": "upsert",
        "lowest": "upsert",
        "bag_rn": "retract",
        "bag_rank": "retract",
        "bag_dense": "retract",
        "top_groups": "upsert",
        "running": "upsert",
        "bag_share": "retract",
        "qualified": "upsert",
        "named": "upsert",
    }


# Always run: ties in the bag, a partition drained by deletes (read again), rows moving in and out of the top.
EXAMPLE = [
    [
        ("insert_b", [("a", 1), ("a", 1), ("a", 3), (None, None), ("b", 2), ("a", 5)]),
        ("upsert_t", [(1, "a", 3), (2, "a", 4), (3, None, None), (4, "a", 1), (5, "b", 2)]),
    ],
    [("delete_t", [2, 1]), ("delete_b", ("a", 1)), ("upsert_t", [(6, "a", 0)])],
    [("upsert_t", [(4, "b", 9), (6, "a", 7)]), ("delete_b", ("a", 5)), ("insert_b", [("a", 0)])],
]


# A partition of more rows than a prefix keeps (N + 10), whose prefix deletes then drain: read again.
DRAIN = [
    [("insert_b", [("a", v) for v in range(-3, 5) for _ in range(2)])],
    [("delete_b", ("a", v)) for v in range(-3, 3)],
]


@settings(
    max_examples=examples(1),
    deadline=None,
    phases=phases_of_costly(),  # generated examples: make test-nightly
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
@example(steps=EXAMPLE)
def test_window_functions_equal_sparks_after_random_changes(spark, tmp_path_factory, steps):
    root = make_project(tmp_path_factory.mktemp("topn"), VIEWS)
    engines = refresh_steps(spark, root, steps)
    catalog = load_catalog(load_config(root))
    for name in catalog.plans:
        check_changelog_kind(spark, catalog, name)
    if steps == EXAMPLE:  # (a generated step may change nothing: a delete of keys that are not there)
        assert all("stream/driver" in engines[n] for n in TOP_N + OVER), (
            engines
        )  # small batches on the driver


def test_a_partition_drained_by_deletes_is_read_again_on_both_engines(spark, tmp_path):
    """DRAIN over the views of the bag `b` (its steps change nothing else): the second step, in Spark, deletes a
    partition's kept prefix, which is read again from the input."""
    root = make_project(tmp_path, BAG_VIEWS)
    catalog = load_catalog(load_config(root))
    assert sorted(catalog.plans) == ["bag_dense", "bag_rank", "bag_rn", "bag_share"]
    engines = refresh_steps(spark, root, DRAIN)
    for name in catalog.plans:
        check_changelog_kind(spark, catalog, name)
    assert engines["bag_rn"] == {"bootstrap/driver", "stream/driver", "stream/spark"}, engines


def test_a_drained_partition_is_read_again_on_the_driver(spark, tmp_path):
    """DRAIN with every batch on the driver: the top-N rule is one rule for both engines, so the driver reads a
    drained partition again from the (small) input itself, and the batch stays on the driver."""
    root = make_project(tmp_path, BAG_VIEWS)
    engines = refresh_steps(spark, root, DRAIN, engines=("driver",))
    for name in ("bag_rn", "bag_rank", "bag_dense"):
        assert engines[name] == {"bootstrap/driver", "stream/driver"}, engines


def test_keep_first_deduplication_over_an_append_only_source_only_inserts(spark, tmp_path):
    """ROW_NUMBER() OVER (PARTITION BY k ORDER BY PROCTIME()) = 1 keeps each key's first row by arrival: its
    changelog holds +I rows only, and the view holds the row of the first commit that brought each key."""
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "all.sql").write_text("""
CREATE TABLE clicks (user_id INT, url STRING) WITH ('append_only' = 'true');
CREATE MATERIALIZED VIEW first_click AS
SELECT user_id, url FROM (
  SELECT user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY PROCTIME()) AS rn FROM clicks
) AS r WHERE rn = 1;
""")
    config = load_config(tmp_path)
    catalog = load_catalog(config)
    assert catalog.plans["first_click"].changelog == "append-only"
    refresher = Refresher(spark, config, catalog)
    source = catalog.sources["clicks"]
    ensure_source_table(TableRef(source.path), source.schema)
    first: dict[int, str] = {}
    for commit in ([(1, "a"), (2, "b")], [(1, "c"), (3, "d")], [(2, "e"), (3, "f"), (4, "g")]):
        write_deltalake(
            source.path,
            pa.Table.from_pylist([{"user_id": u, "url": x} for u, x in commit], schema=source.schema),
            mode="append",
        )
        for u, x in commit:
            first.setdefault(u, x)
        refresher.refresh()
    rows = read_table(spark, view_tables(catalog.plans["first_click"], {}).snapshot).collect()
    assert {r.user_id: r.url for r in rows} == first
    check_changelog_kind(spark, catalog, "first_click")
