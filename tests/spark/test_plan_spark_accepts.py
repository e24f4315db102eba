"""What Spark accepts, mvengine plans: every view of the plan corpus (tests/plans), of the example project and of
the Nexmark example goes through Spark's analyzer (over empty tables of the sources' declared schemas, views
over views in DAG order) and through mvengine's planner, with the same column names and types. Each error case
of the corpus is either refused by Spark too, or listed below with why mvengine refuses what Spark's analyzer
takes (a name or a declaration that a table in Delta cannot have, or mvengine's own syntax and options)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pyspark.errors import PySparkException

from mvengine.config import load_config
from mvengine.errors import MvError
from mvengine.names import quote_identifier as quote
from mvengine.plan.types import type_name
from mvengine.project.catalog import load_catalog
from tests.unit.test_plan_golden import case_project

ROOT = Path(__file__).parent.parent.parent
PLANS = Path(__file__).parent.parent / "plans"
CASES = sorted(p for p in (PLANS / "cases").iterdir() if p.suffix == ".sql" or p.is_dir())
PROJECTS = {
    "example": ROOT,
    "nexmark": ROOT / "examples" / "nexmark",
    "currency": ROOT / "examples" / "currency",
}

# Error cases whose SELECTs Spark's analyzer takes, and why mvengine refuses them all the same.
REFUSED_ON_PURPOSE = {
    "e07_duplicate_name_with_source": "a view named like a source: one name, two tables",
    "e08_duplicate_across_files": "two views of one name",
    "e09_cycle": "views that read each other: no order to refresh them in",
    "e10_self_reference": "a view that reads itself",
    "e11_column_collision": "two columns of one name: a Delta table cannot hold them",
    "e12_column_collision_case": "two columns whose names differ in case only: Delta's names are case-insensitive",
    "e14_unsupported_statement": "not a CREATE TABLE or CREATE MATERIALIZED VIEW",
    "e15_plain_view": "CREATE VIEW (not materialized): nothing to maintain",
    "e16_not_utf8": "the file is not UTF-8",
    "e17_hostile_view_name": "a view name that is not a folder name",
    "e18_unicode_view_name": "a view name that is not a folder name",
    "e19_reserved_column": "a column named like mvengine's own changelog columns",
    "e21_column_list_count": "a column list of another length than the SELECT's (Spark's CREATE VIEW refuses it)",
    "e23_database_prefix": "a database prefix: a project's tables have one namespace",
    "e24_unknown_option": "an unknown WITH option",
    "e26_require_bounded_state": "[plan] require_bounded_state, and the view's state grows",
    "e27_backtick_injection": "a view name that is not a folder name",
    "e32_strict_policy_without_delta_rule": "refresh_policy 'incremental_strict' on a view recomputed in full",
    "e33_unknown_refresh_policy": "an unknown refresh_policy",
    "e42_emit_unreadable": "mvengine's EMIT clause, unreadable",
    "e43_watermark_unreadable": "a WATERMARK declaration, unreadable",
    "e44_watermark_not_timestamp": "a WATERMARK on a column that is not a timestamp",
    "e45_emit_without_window": "mvengine's EMIT clause, on a view without a window",
    "e46_emit_past_not_a_bound": "mvengine's EMIT clause, naming no window bound",
    "e47_emit_over_plain_timestamp": "mvengine's EMIT clause, on a window without a watermark",
    "e51_interval_column": "a column of an interval type: a Delta table cannot hold it",
}


def _register_sources(spark, catalog) -> None:
    for source in catalog.sources.values():
        ddl = ", ".join(f"{quote(n)} {t.sql('spark')}" for n, t in zip(source.schema.names, source.sql_types))
        spark.createDataFrame([], ddl).createOrReplaceTempView(source.name)


def _check_project(spark, root: Path) -> None:
    """Every view of the project: Spark's analyzer types it as mvengine does."""
    catalog = load_catalog(load_config(root))
    _register_sources(spark, catalog)
    for name in catalog.order:
        if name not in catalog.plans:
            continue
        plan = catalog.plans[name]
        df = spark.sql(plan.spark_sql)
        if plan.view.column_names is not None:  # CREATE MATERIALIZED VIEW v (a, b) AS ...
            df = df.toDF(*plan.view.column_names)
        spark_columns = [(f.name.lower(), f.dataType.simpleString()) for f in df.schema.fields]
        ours = [(c.name.lower(), type_name(c.type).lower().replace(" ", "")) for c in plan.columns]
        assert ours == spark_columns, f"{root.name}/{name}: mvengine plans {ours}, Spark {spark_columns}"
        df.createOrReplaceTempView(name)


@pytest.mark.parametrize("case", [c for c in CASES if not c.name.startswith("e")], ids=lambda c: c.stem)
def test_spark_and_mvengine_accept_and_type_every_case(spark, case, tmp_path):
    _check_project(spark, case_project(case, tmp_path / "project"))


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_spark_and_mvengine_accept_and_type_every_example_view(spark, name, tmp_path):
    shutil.copytree(PROJECTS[name] / "views", tmp_path / "views")
    _check_project(spark, tmp_path)


VIEW = re.compile(
    r"CREATE\s+MATERIALIZED\s+VIEW\s+(\S+)\s+(?:WITH\s*\((?:[^()]|\([^()]*\))*\)\s*)?AS\s+(.*?);",
    re.IGNORECASE | re.DOTALL,
)


@pytest.mark.parametrize("case", [c for c in CASES if c.name.startswith("e")], ids=lambda c: c.stem)
def test_every_error_case_is_refused_by_spark_too_or_on_purpose(spark, case, tmp_path):
    root = case_project(case, tmp_path / "project")
    with pytest.raises(MvError):
        load_catalog(load_config(root))
    if case.stem in REFUSED_ON_PURPOSE:
        return
    sources = tmp_path / "sources"
    (sources / "views").mkdir(parents=True)
    shutil.copy(PLANS / "sources.sql", sources / "views" / "sources.sql")
    _register_sources(spark, load_catalog(load_config(sources)))
    text = "\n".join(p.read_text() for p in sorted((root / "views").glob("*.sql")))
    queries = dict(VIEW.findall(text))
    assert queries, f"{case.name}: no view found to give Spark"
    pending, refused = dict(queries), {}
    while pending:  # views over views: analyse those whose inputs are there, until nothing more goes
        progress = False
        for name, query in list(pending.items()):
            try:
                spark.sql(query).createOrReplaceTempView(name)
                progress = True
                del pending[name]
            except PySparkException as e:
                refused[name] = str(e).splitlines()[0]
        if not progress:
            break
    assert pending, (
        f"{case.name}: Spark accepts every view mvengine refuses ({', '.join(queries)}); plan it, "
        "or say in REFUSED_ON_PURPOSE why not"
    )
