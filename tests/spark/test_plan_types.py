"""The planner's column names, types and nullability, checked against Spark's own analysis (property-based).

For random SELECTs over the corpus sources, `mv plan` must give the names and Spark SQL types Spark gives, and
must never call a column NOT NULL that Spark says can be NULL. Spark analyses the query over empty temporary
views with the sources' schemas, so no data is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mvengine.config import Config
from mvengine.plan.types import type_name
from mvengine.plan.view_plan import plan_view
from mvengine.project.catalog import source_relation
from mvengine.sql.files import split_statements
from mvengine.sql.sources import parse_source
from mvengine.sql.views import parse_view
from tests.conftest import examples

SOURCES = (Path(__file__).parent.parent / "plans" / "sources.sql").read_text()
CONFIG = Config(project_dir=Path("/tmp"), warehouse="/tmp/warehouse")
SOURCE_DEFS = {
    s.name: s
    for s in (
        parse_source(st_, CONFIG)
        for st_ in split_statements(SOURCES, "sources.sql")
        if st_.tree.kind == "TABLE"
    )
}

NUMERIC = ["qty", "price", "id", "customer_id"]
TEXT = [
    "status",
    "UPPER(status)",
    "'x'",
    "CONCAT(status, '-', status)",
    "SUBSTR(status, 1, 2)",
    "COALESCE(status, 'none')",
    "CAST(qty AS STRING)",
]
OTHER = [
    "ts",
    "YEAR(ts)",
    "MONTH(ts)",
    "TO_DATE(ts)",
    "DATE_TRUNC('HOUR', ts)",
    "CAST(ts AS DATE)",
    "LENGTH(status)",
    "qty > 1 AND status IS NULL",
    "qty IN (1, 2)",
    "status LIKE 'a%'",
    "IF(qty > 1, 'a', status)",
    "qty % 3",
    "qty DIV 2",
    "ROUND(price, 1)",
    "FLOOR(price)",
    "CEIL(qty / 2)",
    "HOUR(ts)",
]
LITERALS = ["1", "2.5", "100", "0.01", "CAST(3 AS BIGINT)", "CAST(1.5 AS DOUBLE)"]


@st.composite
def numeric(draw, depth=0):
    if depth >= 2 or draw(st.booleans()):
        return draw(st.sampled_from(NUMERIC + LITERALS))
    op = draw(st.sampled_from(["+", "-", "*", "/", "ABS", "COALESCE", "CASE", "CAST_DOUBLE", "CAST_DECIMAL"]))
    a, b = draw(numeric(depth + 1)), draw(numeric(depth + 1))
    if op in "+-*/":
        return f"({a} {op} {b})"
    if op == "ABS":
        return f"ABS({a})"
    if op == "COALESCE":
        return f"COALESCE({a}, {b})"
    if op == "CASE":
        return f"CASE WHEN {a} > 0 THEN {a} ELSE {b} END"
    if op == "CAST_DOUBLE":
        return f"CAST({a} AS DOUBLE)"
    return f"CAST({a} AS DECIMAL(12, 3))"


@st.composite
def select(draw):
    grouped = draw(st.booleans())
    exprs = draw(st.lists(st.one_of(numeric(), st.sampled_from(TEXT + OTHER)), min_size=1, max_size=4))
    if grouped:
        aggs = draw(
            st.lists(
                st.tuples(st.sampled_from(["SUM", "AVG", "MIN", "MAX", "COUNT"]), numeric()),
                min_size=1,
                max_size=3,
            )
        )
        items = ["status AS g0"] + [f"{f}({e}) AS c{i}" for i, (f, e) in enumerate(aggs)]
        if draw(st.booleans()):
            items.append("COUNT(*) AS n")
        return f"SELECT {', '.join(items)} FROM orders GROUP BY status"
    items = [f"{e} AS c{i}" for i, e in enumerate(exprs)]
    return f"SELECT {', '.join(items)} FROM orders WHERE qty > 0"


@pytest.fixture(scope="module")
def empty_sources(spark):
    for source in SOURCE_DEFS.values():
        register_empty(spark, source)
    return spark


def register_empty(spark, source) -> None:
    """An empty temporary view with the source's name and declared schema, for Spark to analyse SQL over."""
    ddl = ", ".join(
        f"`{f.name.replace('`', '``')}` {type_name(t)}{'' if f.nullable else ' NOT NULL'}"
        for f, t in zip(source.schema, source.sql_types)
    )
    spark.createDataFrame([], ddl).createOrReplaceTempView(source.name)


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sql=select())
def test_planned_types_are_sparks(empty_sources, sql):
    (statement,) = split_statements(f"CREATE MATERIALIZED VIEW v AS {sql};", "v.sql")
    relations = {name: source_relation(s) for name, s in SOURCE_DEFS.items()}
    plan = plan_view(parse_view(statement, CONFIG), relations.get, list(relations))
    schema = empty_sources.sql(sql).schema
    assert [c.name for c in plan.columns] == schema.names
    for column, field in zip(plan.columns, schema.fields):
        assert type_name(column.type) == field.dataType.simpleString(), f"{column.name} in {sql}"
        assert column.nullable or not field.nullable, f"{column.name} is said NOT NULL in {sql}"


CORPUS = Path(__file__).parent.parent / "plans" / "cases"
CORPUS_CASES = sorted(p for p in CORPUS.glob("[0-9]*.sql"))


@pytest.mark.parametrize("case", CORPUS_CASES, ids=[c.stem for c in CORPUS_CASES])
def test_corpus_types_are_sparks(spark, case, tmp_path):
    """Every view of the golden corpus, analysed by Spark over empty sources: the same columns and types."""
    from mvengine.config import load_config
    from mvengine.project.catalog import load_catalog

    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "_sources.sql").write_text(SOURCES)
    (tmp_path / "views" / case.name).write_text(case.read_text())
    catalog = load_catalog(load_config(tmp_path))
    for name in catalog.order:
        if name in catalog.sources:
            register_empty(spark, catalog.sources[name])
            continue
        plan = catalog.plans[name]
        columns = ""
        if plan.view.column_names:
            columns = "(" + ", ".join(f"`{c}`" for c in plan.view.column_names) + ")"
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} {columns} AS {plan.spark_sql}")
        schema = spark.table(name).schema
        assert [c.name for c in plan.columns] == schema.names
        for column, field in zip(plan.columns, schema.fields):
            assert type_name(column.type) == field.dataType.simpleString(), f"{name}.{column.name}"
            assert column.nullable or not field.nullable, f"{name}.{column.name} is said NOT NULL"
