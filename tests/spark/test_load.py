"""`mv load`: files into sources, converted to the declared types, all or nothing, errors located."""

from __future__ import annotations

import datetime as dt
import subprocess
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from mvengine.config import load_config
from mvengine.errors import MvError
from mvengine.load import load
from mvengine.project.catalog import load_catalog
from tests.conftest import write_project
from tests.system.test_cli import BIN

SOURCES = """
CREATE TABLE orders (
  id      BIGINT NOT NULL,
  amount  DECIMAL(10, 2),
  placed  TIMESTAMP,
  paid    BOOLEAN,
  day     DATE,
  note    STRING,
  PRIMARY KEY (id) NOT ENFORCED
);
CREATE TABLE clicks (url STRING, n INT) WITH ('append_only' = 'true');
"""
VIEWS = "CREATE MATERIALIZED VIEW paid AS SELECT id, amount FROM orders WHERE paid;\n"


@pytest.fixture
def project(tmp_path):
    root = write_project(tmp_path / "p", SOURCES, VIEWS)
    config = load_config(root)
    return root, config, load_catalog(config)


def rows(catalog, name="orders") -> list[dict]:
    return sorted(DeltaTable(catalog.sources[name].path).to_pyarrow_table().to_pylist(), key=lambda r: str(r))


def version(catalog, name="orders") -> int:
    return DeltaTable(catalog.sources[name].path).version()


UTC = dt.UTC


def test_csv_json_and_parquet_are_converted_to_the_declared_types(project, tmp_path):
    _, config, catalog = project
    csv = tmp_path / "a.csv"
    csv.write_text(
        'id,amount,placed,paid,day,note\n1,12.50,2026-11-25 06:00:00,true,2026-11-25,"two\nlines"\n'
        "2,3,2026-11-25T07:00:00+01:00,false,2026-11-24,\n"
    )
    done = load(config, catalog, "orders", str(csv))
    assert (done.appended, done.version) == (2, 1)
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text(
        '{"id": 3, "amount": 0.1, "placed": "2026-11-25T08:00:00Z", "paid": true}\n\n'
        '{"id": 4, "NOTE": "case-insensitive names", "paid": null}\n'
    )
    assert load(config, catalog, "orders", str(jsonl)).appended == 2
    parquet = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": pa.array([5], pa.int32()), "amount": pa.array([7.25])}), parquet)
    assert load(config, catalog, "orders", str(parquet)).appended == 1
    got = {r["id"]: r for r in rows(catalog)}
    assert got[1] == {
        "id": 1,
        "amount": Decimal("12.50"),
        "placed": dt.datetime(2026, 11, 25, 6, tzinfo=UTC),
        "paid": True,
        "day": dt.date(2026, 11, 25),
        "note": "two\nlines",
    }
    assert got[2]["placed"] == dt.datetime(2026, 11, 25, 6, tzinfo=UTC) and got[2]["note"] == ""
    assert got[2]["amount"] == Decimal("3.00") and got[2]["paid"] is False
    assert got[3]["amount"] == Decimal("0.10") and got[3]["placed"] == dt.datetime(
        2026, 11, 25, 8, tzinfo=UTC
    )
    assert got[4]["note"] == "case-insensitive names" and got[4]["paid"] is None and got[4]["amount"] is None
    assert got[5]["amount"] == Decimal("7.25") and got[5]["day"] is None


@pytest.mark.parametrize(
    "text, error",
    [
        ("id,amount\n1,2.5\n2,abc\n", "x.csv:3: column amount: 'abc' is not a valid decimal(10,2)"),
        ("id,amount\n1,2.555\n", "x.csv:2: column amount: '2.555' is not a valid decimal(10,2)"),
        ('id,note\n"1",ok\n"x\ny",ok\n', "x.csv:3: column id: 'x\\ny' is not a valid bigint"),
        ("id,placed\n1,yesterday\n", "x.csv:2: column placed: 'yesterday' is not a valid timestamp"),
        ("id,colour\n1,red\n", "x.csv: column colour is not a column of source orders"),
        ("amount\n1\n", "x.csv: column id is missing, and source orders declares it NOT NULL"),
        ("id,amount\n1,2\n,3\n", "x.csv:3: column id is empty, and source orders declares it NOT NULL"),
        ("id\n1\n1\n", "x.csv: key id = 1 is there twice (lines 2 and 3)"),
    ],
)
def test_a_value_that_does_not_fit_names_line_and_column_and_nothing_is_written(
    project, tmp_path, text, error
):
    _, config, catalog = project
    load(config, catalog, "orders", None, delete_where="id < 0")  # the table exists, empty (version 0)
    bad = tmp_path / "x.csv"
    bad.write_text(text)
    with pytest.raises(MvError) as e:
        load(config, catalog, "orders", str(bad))
    assert error in str(e.value).replace(str(tmp_path) + "/", "")
    assert version(catalog) == 0 and rows(catalog) == []


def test_upsert_merges_by_key_and_delete_where_deletes(project, tmp_path):
    _, config, catalog = project
    first = tmp_path / "a.csv"
    first.write_text("id,amount,paid\n1,1,true\n2,2,false\n")
    load(config, catalog, "orders", str(first))
    with pytest.raises(
        MvError, match="1 rows of the file have a key source orders already holds, e.g. id = 2"
    ):
        load(config, catalog, "orders", str(_write(tmp_path / "b.csv", "id,amount\n2,20\n3,3\n")))
    with pytest.raises(MvError, match="key id = 2 is there twice"):  # a MERGE would not know which row wins
        load(
            config, catalog, "orders", str(_write(tmp_path / "c.csv", "id,amount\n2,20\n2,21\n")), upsert=True
        )
    done = load(config, catalog, "orders", str(tmp_path / "b.csv"), upsert=True)
    assert (done.inserted, done.updated) == (1, 1)
    assert [(r["id"], r["amount"]) for r in rows(catalog)] == [(1, 1), (2, 20), (3, 3)]
    done = load(config, catalog, "orders", None, delete_where="amount >= 3")
    assert done.deleted == 2 and [r["id"] for r in rows(catalog)] == [1]
    with pytest.raises(MvError, match="--delete-where 'nope = 1' on source orders: .*nope"):
        load(config, catalog, "orders", None, delete_where="nope = 1")
    with pytest.raises(MvError, match="declared append-only"):
        load(config, catalog, "clicks", None, delete_where="n = 1")
    with pytest.raises(
        MvError, match="merges by the PRIMARY KEY, and source clicks declares none|append-only"
    ):
        load(config, catalog, "clicks", str(first), upsert=True)
    # The change feed has every write: the view over orders follows them.
    changes = DeltaTable(catalog.sources["orders"].path).load_cdf(starting_version=0).read_all()
    assert set(changes["_change_type"].to_pylist()) >= {
        "insert",
        "update_preimage",
        "update_postimage",
        "delete",
    }


def _write(path, text: str):
    path.write_text(text)
    return path


def test_mv_load_reads_standard_input_and_reports_mistakes_in_one_line(project):
    root, _, catalog = project
    done = subprocess.run(
        [str(BIN / "mv"), "--project", str(root), "load", "clicks", "-", "--format", "json"],
        input='{"url": "/a", "n": 1}\n{"url": "/b"}\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "clicks: 2 rows appended (version 1); mv refresh applies it to the views"
    assert sorted((r["url"], r["n"]) for r in rows(catalog, "clicks")) == [("/a", 1), ("/b", None)]
    for args, error in (
        (["clicks", "-"], "reading standard input needs --format"),
        (["paid", "x.csv"], "paid is a view: mv load writes into sources only"),
        (["clicks"], "give a FILE to load"),
        (["clicks", "missing.csv"], "missing.csv: No such file or directory"),
    ):
        done = subprocess.run(
            [str(BIN / "mv"), "--project", str(root), "load", *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 1 and error in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_issue_35_item_11_a_table_with_deletion_vectors_is_loaded_by_spark(spark, project, tmp_path):
    """A source Spark wrote with deletion vectors (which delta-rs cannot write): mv load appends, upserts and
    deletes through Spark's Delta connector, each a commit, and the rows are as asked (it said "internal
    error" before)."""
    _, config, catalog = project
    path = catalog.sources["orders"].path
    spark.sql(f"""CREATE TABLE delta.`{path}` (id BIGINT NOT NULL, amount DECIMAL(10, 2), placed TIMESTAMP,
                  paid BOOLEAN, day DATE, note STRING) USING delta TBLPROPERTIES (
                  'delta.enableDeletionVectors' = 'true', 'delta.enableChangeDataFeed' = 'true')""")
    assert "deletionVectors" in set(DeltaTable(path).protocol().reader_features or [])
    done = load(
        config, catalog, "orders", str(_write(tmp_path / "a.csv", "id,amount,paid\n1,1.50,true\n2,2,false\n"))
    )
    assert done.appended == 2
    with pytest.raises(MvError, match="key source orders already holds, e.g. id = 2"):
        load(config, catalog, "orders", str(_write(tmp_path / "b.csv", "id,amount\n2,20\n3,3\n")))
    done = load(config, catalog, "orders", str(tmp_path / "b.csv"), upsert=True)
    assert (done.inserted, done.updated) == (1, 1)
    done = load(config, catalog, "orders", None, delete_where="amount >= 3")
    assert done.deleted == 2
    held = spark.read.format("delta").load(path).collect()
    assert [(r.id, r.amount) for r in held] == [(1, Decimal("1.50"))]
    assert DeltaTable(path).version() == 3  # created (0), appended, merged, deleted
