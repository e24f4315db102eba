"""Views over tables of Spark's catalog, read by name (`FROM shop.orders`: the table's columns) or declared
with `WITH ('table' = 'shop.customers')` (a key, an expectation, the columns read): Spark-written tables (DECIMAL
money, dates, deletion vectors, a VARIANT column), changed by Spark's INSERT, UPDATE and DELETE, refreshed on
both engines and held to Spark's own answer over the catalog's names. The tests' session keeps its catalog in
memory; tests/system/test_catalog.py runs the embedded Derby metastore and a second, plain PySpark session."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
import sqlglot

from mvengine.api import Project
from mvengine.config import load_config
from mvengine.errors import SqlError
from mvengine.project.catalog_tables import CatalogTables
from mvengine.reading.describe import describe
from mvengine.runtime.refresh import view_tables
from mvengine.storage.api import read_arrow
from tests.conftest import write_project
from tests.spark import test_refresh_differential as differential

SOURCES = """
CREATE TABLE customers (
  id BIGINT NOT NULL,
  country STRING,
  PRIMARY KEY (id) NOT ENFORCED,
  CONSTRAINT known_country EXPECT COLUMN country VALUES IN ('NL', 'FR', 'DE')
) WITH ('table' = '{schema}.customers');
"""
VIEWS = """
CREATE MATERIALIZED VIEW country_days AS
SELECT c.country, CAST(o.placed AS DATE) AS day, SUM(o.amount) AS total, COUNT(*) AS orders
FROM {schema}.orders o JOIN customers c ON o.customer_id = c.id
GROUP BY c.country, CAST(o.placed AS DATE);

CREATE MATERIALIZED VIEW big_orders AS
SELECT * FROM {schema}.orders WHERE amount > 10;
"""


def _catalog_tables(spark, tmp_path: Path) -> str:
    """A schema of the session's catalog with two Delta tables written by Spark (change data feed and deletion
    vectors on); its name (the tests' session outlives each test: a schema of the test's own)."""
    schema = f"shop_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE SCHEMA {schema}")
    properties = "TBLPROPERTIES (delta.enableChangeDataFeed = true, delta.enableDeletionVectors = true)"
    spark.sql(
        f"CREATE TABLE {schema}.customers (id BIGINT, country STRING, tags VARIANT) USING delta "
        f"LOCATION '{tmp_path / 'lake' / 'customers'}' {properties}"
    )
    spark.sql(
        f"CREATE TABLE {schema}.orders (id BIGINT, customer_id BIGINT, amount DECIMAL(20, 2), placed TIMESTAMP) "
        f"USING delta LOCATION '{tmp_path / 'lake' / 'orders'}' {properties}"
    )
    spark.sql(f"INSERT INTO {schema}.customers VALUES (1, 'NL', NULL), (2, 'FR', PARSE_JSON('[1]'))")
    spark.sql(
        f"INSERT INTO {schema}.orders VALUES (10, 1, 5.50, TIMESTAMP '2026-11-30 23:30:00'), "
        "(11, 2, 17.25, TIMESTAMP '2026-12-01 08:00:00'), (12, 1, 9007199254740993.01, TIMESTAMP '2026-12-01 09:00:00')"
    )
    return schema


def _project(spark, tmp_path: Path, schema: str, engine: str) -> Project:
    conf = "[refresh]\ndriver_max_changes = 0\n" if engine == "spark" else None
    root = write_project(
        tmp_path / "project", SOURCES.format(schema=schema), VIEWS.format(schema=schema), conf
    )
    return Project(load_config(root), spark=spark)


def _check(spark, project: Project, schema: str) -> None:
    """Each view equals its SQL over its inputs at the versions it records (the oracle), and its SQL as
    written, by the catalog's names, run by Spark now."""
    catalog = project.catalog
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)
        snapshot = read_arrow(view_tables(catalog.plans[name], {}).snapshot)
        written = sqlglot.parse_one(catalog.views[name].text, read="spark").expression.sql("spark")
        expected = spark.sql(written).toArrow()
        assert _bag(snapshot) == _bag(expected), name


def _bag(table) -> Counter:
    return Counter(zip(*[c.to_pylist() for c in table.columns]))


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_views_over_catalog_tables_by_name_follow_spark_written_changes(spark, tmp_path, engine):
    schema = _catalog_tables(spark, tmp_path)
    project = _project(spark, tmp_path, schema, engine)
    sources = project.catalog.sources
    assert set(sources) == {"customers", f"{schema}_orders"}
    assert sources["customers"].catalog_table == f"{schema}.customers"
    # Declared columns: those the views read (the table's VARIANT column, which mvengine does not read, is not).
    assert sources["customers"].key == ("id",) and sources["customers"].schema.names == ["id", "country"]
    assert str(sources[f"{schema}_orders"].schema.field("amount").type) == "decimal128(20, 2)"
    reports = project.refresh()
    assert {r.view for r in reports} == {"country_days", "big_orders"}
    _check(spark, project, schema)
    # Spark's own writers change the tables: an insert, an update and a delete (deletion vectors).
    spark.sql(f"INSERT INTO {schema}.orders VALUES (13, 2, 100.00, TIMESTAMP '2026-12-01 10:00:00')")
    spark.sql(f"UPDATE {schema}.customers SET country = 'DE' WHERE id = 1")
    spark.sql(f"DELETE FROM {schema}.orders WHERE id = 10")
    reports = Project(project.config, spark=spark).refresh()
    assert {r.kind for r in reports} == {"stream"}, [r.line() for r in reports]
    assert {r.engine for r in reports} == {engine}, [(r.line(), r.note) for r in reports]
    _check(spark, Project(project.config, spark=spark), schema)
    # Located once: the record answers later commands, which ask no Spark (`None` could not).
    record = CatalogTables(project.config, None)
    assert record.located == {
        f"{schema}.customers": str(tmp_path / "lake" / "customers"),
        f"{schema}.orders": str(tmp_path / "lake" / "orders"),
    }
    assert set(Project(project.config).catalog.sources) == set(sources)  # (no Spark: from the record)
    # The tests' catalog is in memory: nothing registered there outlives the process, so nothing is.
    assert record.registered == {}
    versions = Project(project.config).versions()
    assert describe(versions, "country_days")["catalog_tables"] == []
    assert describe(versions, f"{schema}_orders")["table"] == f"{schema}.orders"
    # mv query reads the catalog's name as the source, pinned to a version like any other.
    df, reads = Project(project.config, spark=spark).query_reads(
        f"SELECT count(*) AS n FROM {schema}.orders o"
    )
    assert df.collect()[0]["n"] == 3 and reads[0][0] == f"{schema}_orders"


def test_catalog_names_that_are_no_delta_table_are_located_errors(spark, tmp_path):
    schema = _catalog_tables(spark, tmp_path)
    spark.sql(f"CREATE TABLE {schema}.plain (id BIGINT) USING parquet LOCATION '{tmp_path / 'plain'}'")
    spark.sql(f"CREATE VIEW {schema}.recent AS SELECT * FROM {schema}.orders")
    cases = {
        "missing": (f"SELECT id FROM {schema}.nothing", "there is no such table in Spark's catalog"),
        "parquet": (f"SELECT id FROM {schema}.plain", "it is a parquet table, not a Delta table"),
        "view": (f"SELECT id FROM {schema}.recent", "it is a view of the catalog, not a table"),
        "taken": (f"SELECT id FROM {schema}.orders", f"but {schema}_orders is already a source or view"),
    }
    for case, (select, message) in cases.items():
        extra = f"\nCREATE MATERIALIZED VIEW {schema}_orders AS SELECT 1 AS one;" if case == "taken" else ""
        root = write_project(tmp_path / case, "", f"CREATE MATERIALIZED VIEW v AS\n{select};{extra}\n", None)
        project = Project(load_config(root), spark=spark)
        with pytest.raises(SqlError) as raised:
            project.catalog  # noqa: B018
        error = raised.value
        assert message in str(error), (case, str(error))
        assert (error.file, error.line) == ("views/views.sql", 2), (case, error.file, error.line)
        assert not (root / "warehouse").exists(), case  # bad input writes nothing
