"""Incremental joins, differentially (DESIGN.md §1): after random inserts, updates and deletes on both sides and
a refresh, every join view's snapshot equals its SQL run from scratch over its inputs at the versions its commit
records, and its changelog replays to its snapshot at every version. And the consistent cut: `mv refresh`
leaves every view of a diamond reflecting one version of the source.

The keyed source `t` and the bag source `b` join on `g`: NULL keys (never matching), duplicate keys on both
sides, updates that move a row of `t` to another key, and deletes on both sides in one batch.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings

import tests.spark.test_refresh_differential as differential
from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.reading.versions import Versions
from mvengine.runtime.refresh import Refresher
from tests.conftest import examples, phases_of_costly

VIEWS = """
-- inner joins: written in WHERE with a condition on both sides above it; a self-join with one in ON
CREATE MATERIALIZED VIEW j_inner AS
SELECT t.k, t.g, t.v, b.v AS bv FROM t, b WHERE t.g = b.g AND (b.v IS NULL OR t.k > b.v);
CREATE MATERIALIZED VIEW j_self AS SELECT x.k, y.k AS k2 FROM t x JOIN t y ON x.g = y.g AND x.k < y.k;
-- a self-join under an outer join keyed by a column of one of its scans (a batch of b reads t whole: a filter by
-- x.k would drop rows of y)
CREATE MATERIALIZED VIEW j_self_outer AS
SELECT x.k, y.k AS k2, b.g AS bg FROM t x JOIN t y ON x.g = y.g LEFT JOIN b ON b.v = x.k;
-- a FROM list whose written neighbours share no equality (x and y meet only through b): joined x, b, y
CREATE MATERIALIZED VIEW j_list AS
SELECT x.k, y.k AS k2, b.v FROM t x, t y, b WHERE x.g = b.g AND b.g = y.g AND x.k <= y.k;
-- the join equality repeated in every branch of an OR: taken out, it is the join's condition
CREATE MATERIALIZED VIEW j_or AS
SELECT t.k, b.v FROM t, b WHERE (t.g = b.g AND t.v > 0) OR (b.g = t.g AND b.v IS NULL) OR (t.g = b.g AND b.v < t.k);
-- outer joins, with ON conditions on one side (a row failing them matches nothing)
CREATE MATERIALIZED VIEW j_left AS SELECT t.k, t.g, b.v AS bv FROM t LEFT JOIN b ON t.g = b.g AND b.v > 0;
CREATE MATERIALIZED VIEW j_right AS SELECT b.g, b.v, t.k FROM t RIGHT JOIN b ON t.g = b.g AND t.v >= 0;
CREATE MATERIALIZED VIEW j_full AS SELECT t.k, b.g AS bg, b.v FROM t FULL JOIN b ON t.g = b.g;
-- semi and anti joins from IN and a correlated [NOT] EXISTS; the EXISTS ones test views of the subquery's distinct
-- keys (j_anti__exists_1, j_exists__exists_1: two keys, one an expression, and a condition of the subquery's own)
CREATE MATERIALIZED VIEW j_semi AS SELECT k, g FROM t WHERE g IN (SELECT g FROM b WHERE v > 0);
CREATE MATERIALIZED VIEW j_anti AS SELECT g, v FROM b WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.g = b.g);
CREATE MATERIALIZED VIEW j_exists AS
SELECT k, g FROM t WHERE EXISTS (SELECT 1 FROM b WHERE b.g = t.g AND b.v + 2 = t.v AND b.v > 0);
-- a correlated [NOT] EXISTS with a condition other than an equality too (TPC-H Q21's shape): a view of the outer
-- columns' values that have a match (the join of both tables on the subquery's conditions, distinct); NULL in t.v
-- or x.g matches nothing
CREATE MATERIALIZED VIEW j_exists_other AS
SELECT k, g FROM t WHERE EXISTS (SELECT 1 FROM b WHERE b.g = t.g AND b.v > t.v - 1 AND b.v < 100);
CREATE MATERIALIZED VIEW j_not_exists_other AS
SELECT x.k, x.g FROM t x WHERE NOT EXISTS (SELECT 1 FROM t y WHERE y.g = x.g AND y.k <> x.k);
-- an aggregate over a join; and a chain three views deep: aggregate -> join with a source -> aggregate
CREATE MATERIALIZED VIEW j_agg AS SELECT t.g, COUNT(*) AS n, SUM(b.v) AS s FROM t JOIN b ON t.g = b.g GROUP BY t.g;
CREATE MATERIALIZED VIEW c1 AS SELECT g, SUM(v) AS s, COUNT(*) AS n FROM b GROUP BY g;
CREATE MATERIALIZED VIEW c2 AS SELECT t.k, c1.g, c1.s FROM t JOIN c1 ON t.g = c1.g;
CREATE MATERIALIZED VIEW c3 AS SELECT g, COUNT(*) AS n, SUM(s) AS total FROM c2 GROUP BY g;
-- a CTE that aggregates, joined: made a view of its own (j_cte__sums), which the join reads
CREATE MATERIALIZED VIEW j_cte AS
WITH sums AS (SELECT g, SUM(v) AS s, COUNT(*) AS n FROM b GROUP BY g)
SELECT t.k, sums.s, sums.n FROM t JOIN sums ON t.g = sums.g;
-- scalar subqueries in expressions: LEFT JOINs of an aggregate by the correlation keys (COUNT over no rows is 0,
-- AVG and MAX NULL), each made a view of its own (j_scalar__scalar_1, ...)
CREATE MATERIALIZED VIEW j_scalar AS
SELECT t.k, (SELECT COUNT(*) FROM b WHERE b.g = t.g) AS n, t.v - (SELECT 2 * MAX(v) FROM b WHERE b.g = t.g) AS d
FROM t WHERE t.v > (SELECT AVG(b.v) FROM b WHERE b.g = t.g) OR t.v IS NULL OR t.k < 3;
-- uncorrelated, in WHERE and in HAVING: a join of a one-row aggregate on a constant key
CREATE MATERIALIZED VIEW j_scalar_global AS
SELECT g, SUM(v) AS s FROM t WHERE k >= (SELECT AVG(v) FROM b) - 1
GROUP BY g HAVING COUNT(*) > (SELECT COUNT(*) FROM b WHERE v > 0) / 4;
-- a table re-tested against a per-key aggregate (TPC-H Q17's shape): t grouped by (g, v) before the join, a view
-- of its own (j_eager__eager_1), whose partial SUM, COUNT and MIN compose to the view's; one against an aggregate
-- of all of b's rows (every row of t tested again when it moves: t grouped by (g, v)); and a total over all rows
-- (no GROUP BY: one row, COUNT 0 over none), where t.k > 2 filters t before it is grouped
CREATE MATERIALIZED VIEW j_eager AS
SELECT b.g, SUM(t.v) AS s, COUNT(*) AS n, COUNT(t.v) AS nv, MIN(t.v) AS lo, MAX(b.v) AS hi
FROM t JOIN b ON t.g = b.g
WHERE t.v < (SELECT AVG(t2.v) FROM t t2 WHERE t2.g = b.g) + 1 OR t.v IS NULL
GROUP BY b.g;
CREATE MATERIALIZED VIEW j_eager_global AS
SELECT t.g, SUM(t.v) AS s, COUNT(*) AS n FROM t WHERE t.v > (SELECT AVG(b.v) FROM b) - 2 GROUP BY t.g;
CREATE MATERIALIZED VIEW j_eager_total AS
SELECT SUM(t.v) AS s, COUNT(*) AS n FROM t, b
WHERE t.g = b.g AND t.k > 2 AND t.v <= (SELECT MAX(b2.v) FROM b b2 WHERE b2.g = t.g);
-- NOT IN (subquery), NULLs on both sides: NOT EXISTS and counts of the subquery's rows and NULLs
CREATE MATERIALIZED VIEW j_not_in AS
SELECT k, g FROM t WHERE g NOT IN (SELECT b.g FROM b WHERE b.v > 0 OR b.v IS NULL) AND k > 0;
"""


# Each example refreshes twenty-four views a few times: few examples, no shrinking (see test_refresh_differential).
@settings(
    max_examples=examples(1),
    deadline=None,
    phases=phases_of_costly(),  # generated examples: make test-nightly
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=differential.STEPS)
# Always run: NULL keys on both sides, duplicate keys on both sides, a row deleted in the batch that inserted
# it, deletes on both sides in one batch, a row of t moving to another key, the last match of a key deleted
# (the padded row comes back) and a key's first match arriving.
@example(
    steps=[
        [
            ("insert_b", [("a", 1), ("a", 1), (None, None), ("b", 2)]),
            ("delete_b", ("a", 1)),
            ("upsert_t", [(1, "a", 3), (2, "a", 3), (3, None, None)]),
            ("delete_t", [2]),
        ],
        [
            ("upsert_t", [(1, "b", -1), (7, "b", 0)]),
            ("insert_b", [("a", 1)]),
            ("delete_b", (None, None)),
            ("delete_t", [3]),
        ],
        [
            ("delete_b", ("b", 2)),
            ("upsert_t", [(4, "c", 2), (5, "a", 1), (6, "c", 1)]),
            ("insert_b", [("c", 2), ("c", -1), ("x", 1)]),
        ],
    ]
)
def test_join_views_equal_their_sql_after_random_changes(spark, tmp_path_factory, steps):
    differential.refresh_steps(
        spark, differential.make_project(tmp_path_factory.mktemp("joins"), VIEWS), steps, all_incremental=True
    )


DIAMOND = """
CREATE MATERIALIZED VIEW counts AS SELECT g, COUNT(*) AS n FROM t GROUP BY g;
CREATE MATERIALIZED VIEW sums AS SELECT g, SUM(v) AS s FROM t GROUP BY g;
CREATE MATERIALIZED VIEW both_sides AS SELECT c.g, c.n, s.s FROM counts c JOIN sums s ON c.g = s.g;
"""


def test_refresh_leaves_a_diamond_at_one_source_version(spark, tmp_path):
    """A source commit lands while the refresh runs, between the two views the third one joins: neither that
    refresh nor any later one may show the third view built from two versions of the source."""
    root = differential.make_project(tmp_path, DIAMOND)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).prepare_sources()
    differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 1), (2, "b", 2)]))
    commits = iter([("upsert_t", [(3, "a", 5)]), ("delete_t", [1]), ("upsert_t", [(2, "a", 7)])])

    def commit_behind_its_back(report) -> None:
        if report.view == "counts":  # counts has just committed; sums has not started
            next_commit = next(commits, None)
            if next_commit is not None:
                differential.apply_commit(spark, catalog, next_commit)

    refresher = Refresher(spark, config, catalog, report=commit_behind_its_back)
    for _ in range(4):
        refresher.refresh()
    versions = Versions(config, catalog)
    built = versions.snapshot_commits("both_sides")
    assert len(built) == 4  # a bootstrap and three batches, one per refresh that found a new source version
    for version in built:
        assert len(versions.source_versions("both_sides", version)["t"]) == 1, (
            f"both_sides@{version} joins views built from different versions of t: "
            f"{json.dumps(versions.source_versions('both_sides', version))}"
        )
    assert versions.source_versions("both_sides", max(built)) == {"t": [versions.latest("t")]}
    differential.check_view(spark, catalog, "both_sides")
