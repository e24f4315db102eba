"""Differential tests of FIRST and LAST (FIRST_VALUE, ANY_VALUE, LAST_VALUE; with and without IGNORE NULLS) over
an append-only source: after random batches of inserts, each view equals the same aggregates by arrival, written
as Spark's MIN_BY/MAX_BY over a column `seq` that numbers the rows in the order they were committed. Spark's own
FIRST takes whichever row it reads first, so the view's SQL run again is no oracle; commits here hold at most one
row per group (the aggregate without GROUP BY reads one group), so that the order of arrival is the order of
`seq`. Run on the driver and in Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import example, given
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_table
from mvengine.storage.tables import TableRef
from tests.conftest import bag, refresh_settings, write_project
from tests.spark.test_refresh_differential import check_changelog

SOURCES = """
CREATE TABLE e (g STRING, x INT, seq BIGINT NOT NULL) WITH ('append_only' = 'true');
"""
VIEWS = """
CREATE MATERIALIZED VIEW arrived AS
SELECT g, FIRST(x) AS f, FIRST(x, true) AS fi, LAST(x) AS l, LAST(x) IGNORE NULLS AS li, ANY_VALUE(x) AS av,
       FIRST_VALUE(x) AS fv, LAST_VALUE(x, true) AS lvi, FIRST(x, true) FILTER (WHERE x > 0) AS fp, COUNT(*) AS n
FROM e GROUP BY g;
CREATE MATERIALIZED VIEW arrived_all AS
SELECT FIRST(x) AS f, LAST(x, true) AS li, COUNT(*) AS n FROM e WHERE g = 'a';
"""
# The same, by `seq`: Spark's MIN_BY/MAX_BY skip rows whose ordering is NULL, which IGNORE NULLS is.
ORACLE = {
    "arrived": """
SELECT g, MIN_BY(x, seq) AS f, MIN_BY(x, IF(x IS NULL, NULL, seq)) AS fi, MAX_BY(x, seq) AS l,
       MAX_BY(x, IF(x IS NULL, NULL, seq)) AS li, MIN_BY(x, seq) AS av, MIN_BY(x, seq) AS fv,
       MAX_BY(x, IF(x IS NULL, NULL, seq)) AS lvi, MIN_BY(x, IF(x > 0, seq, NULL)) AS fp, COUNT(*) AS n
FROM e GROUP BY g""",
    "arrived_all": "SELECT MIN_BY(x, seq) AS f, MAX_BY(x, IF(x IS NULL, NULL, seq)) AS li, COUNT(*) AS n FROM e "
    "WHERE g = 'a'",
}

# A commit: values for some groups, at most one row per group. A batch: a few commits.
COMMIT = st.dictionaries(
    st.sampled_from(["a", "b", "c", None]), st.one_of(st.none(), st.integers(-2, 4)), min_size=1
)
STEPS = st.lists(st.lists(COMMIT, min_size=1, max_size=3), min_size=2, max_size=3)
# Always run: NULLs first and last, a group seen again after a batch without it, several commits per batch.
EXAMPLE = [
    [{"a": None, "b": 1}, {"a": 2, None: 3}, {"a": 3}],
    [{"b": None}],
    [{"a": None, "c": -1}, {"c": 0, "b": 4}],
]


def project(root: Path, conf: str = "") -> Path:
    return write_project(root, SOURCES, VIEWS, f"[refresh]\n{conf}")


def run(spark, root: Path, steps) -> dict[str, set[str]]:
    """Refresh, then per step commit its batches, refresh and check each view; per view, the kinds and engines
    of its batches ("recomputed by cost" for a batch that recomputed the view instead)."""
    config = load_config(root)
    catalog = load_catalog(config)
    assert {n: p.strategy for n, p in catalog.plans.items()} == {n: "incremental" for n in catalog.plans}
    source = catalog.sources["e"].path
    engines: dict[str, set[str]] = {}
    refresher = Refresher(
        spark,
        config,
        catalog,
        report=lambda r: engines.setdefault(r.view, set()).add(
            "recomputed by cost" if r.note.startswith("recomputed by cost") else f"{r.kind}/{r.engine}"
        ),
    )
    refresher.refresh()
    seq = 0
    for commits in steps:
        for rows in commits:
            groups = list(rows)
            write_deltalake(
                source,
                pa.table(
                    {
                        "g": pa.array(groups, pa.string()),
                        "x": pa.array([rows[g] for g in groups], pa.int32()),
                        "seq": pa.array(range(seq, seq + len(groups)), pa.int64()),
                    }
                ),
                mode="append",
            )
            seq += len(groups)
        refresher.refresh()
        read_table(spark, TableRef(source)).createOrReplaceTempView("e")
        for name, oracle in ORACLE.items():
            assert bag(read_table(spark, view_tables(catalog.plans[name], {}).snapshot)) == bag(
                spark.sql(oracle)
            ), f"{name} differs from its aggregates by arrival"
            check_changelog(spark, catalog, name)
    return engines


@refresh_settings(1)
@given(steps=STEPS)
@example(steps=EXAMPLE)
def test_first_and_last_follow_arrival_on_the_driver(spark, tmp_path_factory, steps):
    engines = run(spark, project(tmp_path_factory.mktemp("arrival")), steps)
    assert all(kinds <= {"bootstrap/driver", "stream/driver"} for kinds in engines.values()), engines


def test_first_and_last_are_never_recomputed_by_cost(spark, tmp_path):
    # Every batch here changes more of the inputs than recompute_above: a view of other aggregates is recomputed.
    root = project(tmp_path, "recompute_min_changes = 1\nrecompute_above = 0.01\n")
    (root / "views" / "views.sql").write_text(
        VIEWS + "CREATE MATERIALIZED VIEW counted AS SELECT g, COUNT(*) AS n FROM e GROUP BY g;\n"
    )
    plans = load_catalog(load_config(root)).plans
    assert [n for n, p in plans.items() if p.by_arrival] == ["arrived", "arrived_all"]
    assert any("never recomputed by cost" in note for note in plans["arrived"].notes)
    engines = run(spark, root, EXAMPLE)
    assert all(engines[n] <= {"bootstrap/driver", "stream/driver"} for n in ORACLE), engines
    assert "recomputed by cost" in engines["counted"], engines


@pytest.mark.parametrize("steps", [EXAMPLE])
def test_first_and_last_follow_arrival_in_spark(spark, tmp_path, steps):
    engines = run(spark, project(tmp_path, "driver_max_changes = 0\n"), steps)
    assert all(kinds == {"bootstrap/spark", "stream/spark"} for kinds in engines.values()), engines


def test_first_over_a_source_that_deletes_is_full_with_the_reason(tmp_path):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "v.sql").write_text(
        "CREATE TABLE u (k INT, g STRING, x INT, PRIMARY KEY (k) NOT ENFORCED);\n"
        "CREATE MATERIALIZED VIEW firsts AS SELECT g, FIRST(x) AS f FROM u GROUP BY g;\n"
        "CREATE MATERIALIZED VIEW filtered AS SELECT g, LAST(x) FILTER (WHERE x > 0) AS l FROM e GROUP BY g;\n"
        "CREATE TABLE e (g STRING, x INT) WITH ('append_only' = 'true');\n"
    )
    plans = load_catalog(load_config(tmp_path)).plans
    reasons = {name: (p.strategy, p.reason) for name, p in plans.items()}
    assert reasons == {
        "firsts": (
            "full",
            "FIRST() over an input that updates or deletes is not maintained incrementally (which "
            "row came first is not kept)",
        ),
        "filtered": (
            "full",
            "LAST(...) FILTER (WHERE ...) without IGNORE NULLS is not maintained incrementally",
        ),
    }
