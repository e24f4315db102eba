"""Filter push-down of the `mvdelta` data source (which reads tables where Spark's own readers cannot): files
are skipped (proved by removing the files a filter excludes), and pushed filters keep Spark's semantics exactly
(differential property test against Spark's own evaluation)."""

from __future__ import annotations

import os

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.errors import PythonException

from mvengine.storage.api import write_table
from mvengine.storage.datasource import FORMAT
from mvengine.storage.snapshot_reader import ScanPlan
from mvengine.storage.tables import TableRef
from tests.conftest import bag, examples, rows


def pushing(spark, ref: TableRef):
    """The table read by `mvdelta`, pushing the DataFrame's filters down to skip files."""
    return spark.read.format(FORMAT).option("pushFilters", "true").load(ref.uri)


def _file_of(ref: TableRef, predicate: str) -> str:
    (path,) = DeltaTable(ref.uri).file_uris(file_pruning_predicate=predicate)
    return path


def test_statistics_skip_files_that_cannot_match(spark, table):
    ref = table()
    for lo in (0, 100, 200):
        write_table(spark.range(lo, lo + 100).selectExpr("id", "concat('k', id) as s").coalesce(1), ref)
    os.remove(_file_of(ref, "id < 100"))  # a read of this file would now fail
    got = pushing(spark, ref).where("id >= 150 AND id < 160")
    assert rows(got.select("id")) == [(i,) for i in range(150, 160)]
    assert rows(pushing(spark, ref).where("id IN (205, 299)").select("id")) == [(205,), (299,)]
    with pytest.raises(PythonException, match="(?i)not found|no such file"):
        pushing(spark, ref).count()  # without the filter the removed file is needed


def test_partition_values_skip_files(spark, table):
    ref = table()
    df = spark.range(30).selectExpr("id", "cast(id % 3 as string) as part")
    write_table(df, ref, partition_by=["part"])
    for path in DeltaTable(ref.uri).file_uris(file_pruning_predicate="part = '0'"):
        os.remove(path)
    assert rows(pushing(spark, ref).where("part = '1'").select("id")) == [(i,) for i in range(1, 30, 3)]


def test_scan_plan_counts_the_files_left_after_pruning(spark, table):
    ref = table()
    for lo in (0, 100, 200, 300):
        write_table(spark.range(lo, lo + 100).coalesce(1), ref)
    plan = ScanPlan(ref, 3, ("id",), (), (("id", ">=", 250),))
    groups = plan.file_groups(target_bytes=1, min_groups=1)
    assert sum(len(g.paths) for g in groups) == 2


VALUES = st.one_of(st.none(), st.integers(-5, 5))
WORDS = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "é", "Z"]))
CONDITIONS = st.one_of(
    st.builds(lambda op, v: f"i {op} {v}", st.sampled_from(["=", "<", "<=", ">", ">="]), st.integers(-6, 6)),
    st.builds(
        lambda vs: f"i IN ({', '.join(map(str, vs))})", st.lists(st.integers(-5, 5), min_size=1, max_size=3)
    ),
    st.builds(
        lambda op, v: f"s {op} '{v}'", st.sampled_from(["=", "<", ">="]), st.sampled_from(["a", "b", ""])
    ),
    st.sampled_from(
        [
            "i IS NULL",
            "s IS NOT NULL",
            "NOT (i = 1)",
            "i IN (1, NULL)",
            "NOT (s IN ('a', 'ab'))",
            "d > date'2020-01-03'",
            "x > 0.5",
            "i = 1 OR s = 'a'",
        ]
    ),
)


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.lists(
        st.tuples(VALUES, WORDS, st.one_of(st.none(), st.floats(allow_nan=True, width=32))), max_size=12
    ),
    conditions=st.lists(CONDITIONS, min_size=1, max_size=3),
)
@example(data=[(None, "", None)], conditions=["s = ''"])  # delta-rs once pruned every file for ''
def test_pushed_filters_select_exactly_what_spark_selects(spark, tmp_path_factory, data, conditions):
    ref = TableRef(str(tmp_path_factory.mktemp("pushdown") / "t"))
    schema = "i int, s string, x float"
    df = spark.createDataFrame(data, schema).selectExpr(
        "*", "date_add(date'2020-01-01', coalesce(i, 0)) as d"
    )
    write_table(df.coalesce(1), ref)
    where = " AND ".join(f"({c})" for c in conditions)
    assert bag(pushing(spark, ref).where(where)) == bag(df.where(where))  # (NaN equal to NaN)


def test_a_dataframe_scanned_twice_with_other_filters_reads_each_scan_whole(spark, table):
    # Spark 4 reuses the reader of one scan's filter pushdown for the DataFrame's other scans; mvdelta
    # therefore pushes no filter unless asked, and a temporary view used twice answers right.
    ref = table()
    write_table(spark.createDataFrame([(None, 5), ("a", None), ("b", 1)], "g string, v int"), ref)
    spark.read.format(FORMAT).load(ref.uri).createOrReplaceTempView("twice")
    both = spark.sql(
        "SELECT COUNT(*) AS n FROM twice UNION ALL SELECT COUNT(*) AS n FROM twice WHERE g = 'a'"
    )
    assert sorted(r.n for r in both.collect()) == [1, 3]
    assert spark.sql("SELECT COUNT(*) AS n FROM twice").collect()[0].n == 3
