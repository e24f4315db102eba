"""HAVING on aggregates the SELECT does not show, in every shape, differentially (DESIGN.md §1): with and without
GROUP BY, over each aggregate kind, and MIN/MAX under deletes (the keyed source `t` updates and deletes rows,
so the group's extreme leaves and the next one must be found). Each HAVING is built to switch groups in and out
as rows come and go: a group that stops passing it is deleted from the view, one that starts is inserted.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings

import tests.spark.test_refresh_differential as differential
from tests.conftest import examples, phases_of_costly

VIEWS = """
-- MIN and MAX, not selected, under updates and deletes
CREATE MATERIALIZED VIEW h_extremes AS SELECT g FROM t GROUP BY g HAVING MIN(v) >= 0 AND MAX(v) <= 4;
-- COUNT(x), COUNT(DISTINCT x), AVG, SUM(DISTINCT x), COUNT(*): none of them selected
CREATE MATERIALIZED VIEW h_counts AS SELECT g, SUM(v) AS s FROM t GROUP BY g
HAVING (COUNT(v) >= 2 OR COUNT(DISTINCT v) = 1 OR AVG(v) > 3 OR SUM(DISTINCT v) < 0) AND COUNT(*) < 4;
-- without GROUP BY: one row or none, over a bag and over the keyed source
CREATE MATERIALIZED VIEW h_global AS SELECT COUNT(g) AS c FROM b HAVING MAX(v) IS NOT NULL AND MIN(v) < 3;
CREATE MATERIALIZED VIEW h_global_kinds AS SELECT SUM(v) AS s FROM t
HAVING COUNT(*) > 1 AND AVG(v) >= 0 AND COUNT(DISTINCT g) >= 1 AND SUM(DISTINCT v) IS NOT NULL;
"""


# Few examples, no shrinking: see test_refresh_differential.
@settings(
    max_examples=examples(1),
    deadline=None,
    phases=phases_of_costly(),  # generated examples: make test-nightly
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=differential.STEPS)
# Always run: a group's MIN deleted (the next one found from the multiset), its MAX updated past the bound and
# back, groups entering and leaving each HAVING, the global rows appearing and vanishing.
@example(
    steps=[
        [
            ("upsert_t", [(1, "a", 0), (2, "a", 4), (3, "b", 2), (4, "b", 2)]),
            ("insert_b", [("a", 1), (None, 5)]),
        ],
        [("delete_t", [1]), ("upsert_t", [(2, "a", 5), (5, "c", -1)]), ("delete_b", ("a", 1))],
        [("upsert_t", [(2, "a", 3), (6, "c", 7)]), ("delete_t", [5, 3]), ("insert_b", [("b", 2)])],
    ]
)
def test_having_on_unselected_aggregates_equals_its_sql(spark, tmp_path_factory, steps):
    differential.refresh_steps(
        spark,
        differential.make_project(tmp_path_factory.mktemp("having"), VIEWS),
        steps,
        all_incremental=True,
    )
