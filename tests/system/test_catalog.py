"""Catalog tables with real parts: the embedded Derby metastore in the project's warehouse, `mv` as a user
runs it, and a second, plain PySpark session (plain_spark.py, which knows nothing of mvengine) that writes the
sources as a Spark shop does and reads the views by name, time travel included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from mvengine.runtime.session import jars_folder
from tests.system.test_cli import run

PLAIN = Path(__file__).with_name("plain_spark.py")
SOURCES = "CREATE TABLE customers (PRIMARY KEY (id) NOT ENFORCED) WITH ('table' = 'sales.customers');\n"
VIEW = """CREATE MATERIALIZED VIEW order_totals AS
SELECT c.country, SUM(o.amount) AS total, COUNT(*) AS orders
FROM sales.orders o JOIN customers c ON o.customer_id = c.id
GROUP BY c.country;
"""
# The view's SQL over the catalog's own tables, run by the plain session: what the view must equal.
ANSWER = (
    "SELECT c.country, SUM(o.amount), COUNT(*) FROM sales.orders o JOIN sales.customers c "
    "ON o.customer_id = c.id GROUP BY c.country"
)
TOTALS = "SELECT country, total, orders FROM mv.order_totals"
DELTA = "USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true, delta.enableDeletionVectors = true)"


def notebook(root: Path, *statements: str) -> list[list[list[str]]]:
    """Run the statements in a plain PySpark session on the project's metastore; each query's sorted rows."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    done = subprocess.run(
        [sys.executable, str(PLAIN), str(root / "warehouse"), jars_folder(), *statements],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


def test_views_are_catalog_tables_that_a_plain_spark_session_reads_by_name(tmp_path):
    root = tmp_path / "shop"
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "order_totals.sql").write_text(VIEW)
    notebook(
        root,
        "CREATE SCHEMA sales",
        f"CREATE TABLE sales.customers (id BIGINT, country STRING) {DELTA}",
        f"CREATE TABLE sales.orders (id BIGINT, customer_id BIGINT, amount DECIMAL(20, 2)) {DELTA}",
        "INSERT INTO sales.customers VALUES (1, 'NL'), (2, 'FR')",
        "INSERT INTO sales.orders VALUES (10, 1, 5.50), (11, 2, 7.25), (12, 1, 9007199254740993.01)",
    )
    first = run("--project", str(root), "refresh")
    assert first.returncode == 0, first.stderr
    assert "order_totals: batch 0 [bootstrap] inputs sales_orders@1, customers@1" in first.stdout
    assert "warning" not in first.stdout + first.stderr
    assert not list(root.glob("derby.log")) and not (root / "metastore_db").exists()  # all in the warehouse
    record = json.loads((root / "warehouse" / "_pipeline" / "catalog.json").read_text())
    assert set(record["tables"]) == {"sales.customers", "sales.orders"}
    assert set(record["registered"]) == {"mv.order_totals", "mv.order_totals_changelog"}

    # Another writer changes the tables where the catalog has them (delta-rs: an insert, a delete, an update).
    orders, customers = (record["tables"][f"sales.{t}"] for t in ("orders", "customers"))
    schema = pa.schema([("id", pa.int64()), ("customer_id", pa.int64()), ("amount", pa.decimal128(20, 2))])
    write_deltalake(
        orders,
        pa.table({"id": [13], "customer_id": [2], "amount": [Decimal("100.00")]}, schema),
        mode="append",
    )
    DeltaTable(orders).delete("id = 10")
    DeltaTable(customers).update({"country": "'DE'"}, predicate="id = 1")
    again = run("--project", str(root), "refresh")
    assert again.returncode == 0, again.stderr
    # Located and registered before: the record answers, and the batch runs on the driver without Spark.
    assert "Spark started" not in again.stdout, again.stdout
    assert "order_totals: batch 1 [stream]" in again.stdout and again.stdout.rstrip().endswith(
        "on the driver"
    )
    described = json.loads(run("--project", str(root), "describe", "order_totals", "--json").stdout)
    assert described["catalog_tables"] == ["mv.order_totals", "mv.order_totals_changelog"]

    totals, answer, before, changelog = notebook(
        root,
        TOTALS,
        ANSWER,
        f"{TOTALS} VERSION AS OF 0",
        "SELECT country, total, _op, _version FROM mv.order_totals_changelog",
    )
    assert totals == answer == [["DE", "9007199254740993.01", "1"], ["FR", "107.25", "2"]]
    assert before == [["FR", "7.25", "1"], ["NL", "9007199254740998.51", "2"]]
    assert changelog == [
        ["DE", "9007199254740993.01", "+I", "1"],
        ["FR", "107.25", "+U", "1"],
        ["FR", "7.25", "+I", "0"],
        ["FR", "7.25", "-U", "1"],
        ["NL", "9007199254740998.51", "+I", "0"],
        ["NL", "9007199254740998.51", "-D", "1"],
    ]
